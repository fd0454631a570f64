#include "shell/rules_await.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <optional>
#include <utility>

namespace rlimit::shell {

namespace asio = boost::asio;

namespace {

// Shared with the apply's completion, which may outlive the coroutine (a
// daemon stopping destroys the coroutine, not the apply).
struct Wait {
  explicit Wait(const asio::any_io_executor& executor)
      : timer(executor, asio::steady_timer::time_point::max()) {}
  asio::steady_timer timer;
  std::optional<RulesService::Outcome> outcome;
};

}  // namespace

// Temporaries are kept out of co_await expressions: with a conditional's
// temporary string in one (the session's first version of its call), every
// apply freed memory twice under GCC 12 (known coroutine bugs of that
// compiler with temporaries in co_await operands).
boost::asio::awaitable<RulesService::Outcome> await_rules_apply(RulesService& rules,
                                                                std::string text,
                                                                std::string name) {
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  const std::shared_ptr<Wait> wait = std::make_shared<Wait>(executor);
  rules.apply(text, name, [wait](RulesService::Outcome outcome) {
    wait->outcome = std::move(outcome);
    wait->timer.cancel();
  });
  // The timer never expires: only the completion's cancel ends the wait.
  if (!wait->outcome) {
    auto [error] = co_await wait->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)error;
  }
  RulesService::Outcome result;
  if (wait->outcome) {
    result = std::move(*wait->outcome);
  } else {
    result.status = RulesService::Status::kFailed;
    result.message = "the apply was interrupted";
  }
  co_return result;
}

boost::asio::awaitable<HttpAnswer> await_rules_http(RulesService& rules, RulesCounters& counters,
                                                    const HttpRequestView& request,
                                                    std::string_view token) {
  std::optional<HttpAnswer> before =
      answer_rules_http_before_apply(rules, counters, request, token);
  if (before) co_return std::move(*before);
  std::string body(request.body);
  std::string name = "<http body>";
  const RulesService::Outcome outcome =
      co_await await_rules_apply(rules, std::move(body), std::move(name));
  HttpAnswer answer = answer_rules_http_applied(rules, outcome);
  co_return answer;
}

}  // namespace rlimit::shell
