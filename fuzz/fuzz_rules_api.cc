// The rules API's documents: what a client PUTs to /v1/rules
// (answer_rules_http, with its bearer token), what a peer hands over
// (RulesService::apply_received, its digest made to match so the document
// is read), and the state file read back at start (parse_state_file).
// Records (fuzz_records.h): a selector, then the Authorization header, the
// document, and a peer's origin id. Properties: every HTTP answer is JSON;
// a document in force has a digest of its text (and, applied here, the
// canonical text); the state file written for it reads back to the same
// document, and so does one written for any state file that parses.
#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/config.h"
#include "fuzz_check.h"
#include "fuzz_daemon.h"
#include "fuzz_records.h"
#include "shell/http_check.h"
#include "shell/rules_service.h"

namespace {

using rlimit::shell::RulesDocument;

void state_file_round_trip(const RulesDocument& document) {
  std::string error;
  const std::optional<RulesDocument> back =
      rlimit::shell::parse_state_file(rlimit::shell::format_state_file(document), error);
  if (!back) std::fprintf(stderr, "state file refused: %s\n", error.c_str());
  FUZZ_CHECK(back.has_value());
  FUZZ_CHECK(back->version.version == document.version.version);
  FUZZ_CHECK(back->version.origin == document.version.origin);
  FUZZ_CHECK(back->version.digest == document.version.digest);
  FUZZ_CHECK(back->text == document.text);
}

void in_force_is_consistent(const rlimit::shell::RulesService& rules, bool canonical) {
  const RulesDocument& current = rules.current();
  if (canonical) FUZZ_CHECK(rlimit::config::canonical_rules_text(current.text) == current.text);
  FUZZ_CHECK(rlimit::shell::sha256(current.text) == current.version.digest);
  state_file_round_trip(current);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  rlimit::fuzz::quiet_protobuf();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  rlimit::fuzz::Records records(std::string_view(reinterpret_cast<const char*>(data), size));
  std::string_view selector, authorization, document, origin;
  if (!records.next(selector) || selector.empty()) return 0;
  records.next(authorization);
  records.next(document);
  records.next(origin);

  const unsigned which = static_cast<unsigned char>(selector[0]) % 3;
  if (which == 2) {
    std::string error;
    const std::optional<RulesDocument> parsed = rlimit::shell::parse_state_file(document, error);
    if (parsed) {
      state_file_round_trip(*parsed);  // not byte for byte: an old file's origin is not escaped
    } else {
      FUZZ_CHECK(!error.empty());
    }
    return 0;
  }

  rlimit::fuzz::Daemon daemon;
  if (which == 0) {
    rlimit::shell::HttpRequestView http;
    http.method = selector.size() > 1 && (selector[1] & 1) ? "GET" : "PUT";
    http.target = "/v1/rules";
    http.body = document;
    http.header = [authorization](std::string_view name) -> std::optional<std::string_view> {
      if (name == "Authorization") return authorization;
      return std::nullopt;
    };
    const rlimit::shell::HttpAnswer answer = rlimit::shell::answer_rules_http(
        daemon.rules_service, daemon.rules_counters, http, "fuzz-token");
    FUZZ_CHECK(answer.status == 200 || answer.status == 400 || answer.status == 401);
    boost::system::error_code code;
    const boost::json::value body = boost::json::parse(answer.body, code);
    FUZZ_CHECK(!code && body.is_object());
  } else {
    rlimit::core::RulesVersion version;
    version.version = 1 + (selector.size() > 1 ? static_cast<unsigned char>(selector[1]) : 0);
    version.origin = std::string(origin);
    version.digest = rlimit::shell::sha256(document);  // what a peer's advert carries
    const rlimit::shell::RulesService::Outcome outcome =
        daemon.rules_service.apply_received(version, document, "10.0.0.2:7946");
    if (outcome.status == rlimit::shell::RulesService::Status::kOk) {
      FUZZ_CHECK(daemon.rules_service.current().version.same(version));
    }
  }
  // A peer's text is kept as it came (its digest is over those bytes).
  in_force_is_consistent(daemon.rules_service, /*canonical=*/which == 0);
  return 0;
}
