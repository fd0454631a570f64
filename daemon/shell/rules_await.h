// The rules API's applies awaited by the faces' coroutines (the socket
// session, the HTTP server): RulesService::apply finishes once the state file
// is written off the event loop (state_file_writer.h), and meanwhile the
// loop answers everything else. Event loop only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>

#include "shell/rules_service.h"

namespace rlimit::shell {

// Applies `text` (named `name` in errors) and resumes when it has finished.
boost::asio::awaitable<RulesService::Outcome> await_rules_apply(RulesService& rules,
                                                                std::string text, std::string name);

// answer_rules_http with an apply that finishes later.
boost::asio::awaitable<HttpAnswer> await_rules_http(RulesService& rules, RulesCounters& counters,
                                                    const HttpRequestView& request,
                                                    std::string_view token);

}  // namespace rlimit::shell
