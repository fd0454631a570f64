// The HTTP check face without its socket: records (fuzz_records.h) give the
// method, the target, the body, then header name/value pairs; the request is
// mapped (map_http_check), answered by the Dispatcher as a socket client's
// check is, and the answer turned into HTTP (answer_http_check), with and
// without the IETF fields. Properties: a mapped request is a check request
// the Dispatcher answers with one result; every answer's status is one the
// face documents; a 400 from the mapping has a JSON body.
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_daemon.h"
#include "fuzz_records.h"
#include "rlimit/v1/client.pb.h"
#include "shell/http_check.h"

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool documented_status(unsigned status) {
  return status == 200 || status == 400 || status == 403 || status == 429 || status == 503;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  rlimit::fuzz::quiet_protobuf();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  rlimit::fuzz::Records records(std::string_view(reinterpret_cast<const char*>(data), size));
  rlimit::shell::HttpRequestView http;
  records.next(http.method);
  records.next(http.target);
  records.next(http.body);
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  std::string_view name, value;
  while (headers.size() < 32 && records.next(name) && records.next(value)) {
    headers.emplace_back(name, value);
  }
  http.header = [&headers](std::string_view wanted) -> std::optional<std::string_view> {
    for (const auto& [n, v] : headers) {
      if (iequals(n, wanted)) return v;
    }
    return std::nullopt;
  };

  // The mapping first: a request it refuses needs no Daemon.
  static const std::size_t max_descriptors =
      rlimit::fuzz::Daemon::make_settings().limiter.max_descriptors_per_check;
  rlimit::v1::Request request;
  const rlimit::shell::HttpCheckMapping mapping =
      rlimit::shell::map_http_check(http, 429, max_descriptors, request);
  if (!mapping.ok) {
    FUZZ_CHECK(mapping.error.status == 400 || mapping.error.status == 405 ||
               mapping.error.status == 404 || mapping.error.status == 413);
    FUZZ_CHECK(!mapping.error.body.empty() && mapping.error.body.front() == '{');
    return 0;
  }
  FUZZ_CHECK(request.has_check() && request.check().checks_size() == 1);
  FUZZ_CHECK(mapping.deny_status == 429 || mapping.deny_status == 403);
  rlimit::fuzz::Daemon daemon;
  FUZZ_CHECK(daemon.settings.limiter.max_descriptors_per_check == max_descriptors);
  rlimit::v1::Response response;
  daemon.dispatcher.handle(request, 1'000'000'000, response);
  for (const bool ietf : {false, true}) {
    const rlimit::shell::HttpAnswer answer =
        rlimit::shell::answer_http_check(response, mapping.deny_status, ietf);
    FUZZ_CHECK(documented_status(answer.status));
    for (const auto& [header, text] : answer.headers) {
      // Header lines the server writes verbatim: no line breaks inside.
      FUZZ_CHECK(header.find_first_of("\r\n") == std::string::npos);
      FUZZ_CHECK(text.find_first_of("\r\n") == std::string::npos);
    }
  }
  return 0;
}
