#include "shell/http_check.h"

#include <boost/json.hpp>
#include <charconv>
#include <limits>

#include "rlimit/v1/client.pb.h"
#include "shell/face_answer.h"

namespace rlimit::shell {
namespace {

namespace json = boost::json;

// Query options naming a descriptor whose value is a request header's.
constexpr std::string_view kHeaderPrefix = "_header.";
constexpr std::string_view kOptionalHeaderPrefix = "_optional_header.";

// JSON bodies are small objects; deeper nesting is an attack, not a check.
constexpr std::size_t kMaxJsonDepth = 8;
constexpr std::uint64_t kUsPerMs = 1000;

HttpCheckMapping bad_request(std::string message) {
  HttpCheckMapping mapping;
  mapping.error = http_error(400, message);
  return mapping;
}

bool parse_uint(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// "check", "peek", "reserve" -> the mode; false otherwise.
bool parse_mode(std::string_view text, v1::Check::Mode& mode) {
  if (text == "check") {
    mode = v1::Check::CHECK;
  } else if (text == "peek") {
    mode = v1::Check::PEEK;
  } else if (text == "reserve") {
    mode = v1::Check::RESERVE;
  } else {
    return false;
  }
  return true;
}

// The check's own settings, however they arrived.
struct CheckOptions {
  std::uint64_t cost = 1;
  v1::Check::Mode mode = v1::Check::CHECK;
  bool has_max_wait = false;
  std::uint64_t max_wait_ms = 0;
  unsigned deny_status = 0;
};

// Applies one named option given as text (query) -> "" or why not.
std::string set_option(std::string_view name, std::string_view value, CheckOptions& options) {
  std::uint64_t number = 0;
  if (name == "cost") {
    if (!parse_uint(value, number))
      return "cost \"" + std::string(value) + "\" is not a whole number";
    options.cost = number;
  } else if (name == "mode") {
    if (!parse_mode(value, options.mode)) {
      return "mode \"" + std::string(value) + "\" is not check, peek or reserve";
    }
  } else if (name == "max_wait_ms") {
    if (!parse_uint(value, number) ||
        number > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / kUsPerMs) {
      return "max_wait_ms \"" + std::string(value) + "\" is not a whole number of milliseconds";
    }
    options.has_max_wait = true;
    options.max_wait_ms = number;
  } else if (name == "deny_status") {
    if (value != "429" && value != "403") {
      return "deny_status \"" + std::string(value) + "\" is not 429 or 403";
    }
    options.deny_status = value == "429" ? 429 : 403;
  } else {
    return "unknown option \"_" + std::string(name) +
           "\" (options are _cost, _mode, _max_wait_ms, _deny_status)";
  }
  return "";
}

v1::Check& start_request(v1::Request& request) {
  request.Clear();
  request.set_version(v1::VERSION_1);
  return *request.mutable_check()->add_checks();
}

void finish_check(const CheckOptions& options, v1::Check& check) {
  check.set_cost(options.cost);
  check.set_mode(options.mode);
  if (options.has_max_wait) {
    check.set_max_wait_us(static_cast<std::int64_t>(options.max_wait_ms * kUsPerMs));
  }
}

HttpCheckMapping map_query(std::string_view query, const HttpRequestView& http,
                           unsigned default_deny_status, std::size_t max_descriptors,
                           v1::Request& request) {
  v1::Check& check = start_request(request);
  CheckOptions options;
  std::string name;
  std::string value;
  std::size_t position = 0;
  while (position <= query.size() && !query.empty()) {
    std::size_t end = query.find('&', position);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view pair = query.substr(position, end - position);
    position = end + 1;
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    const std::string_view raw_name = pair.substr(0, eq);
    const std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    if (!percent_decode(raw_name, name) || !percent_decode(raw_value, value)) {
      return bad_request("query parameter \"" + std::string(pair) + "\": bad percent-escape");
    }
    if (name.empty()) return bad_request("query parameter \"" + std::string(pair) + "\": no name");
    const bool optional_header = name.starts_with(kOptionalHeaderPrefix);
    if (optional_header || name.starts_with(kHeaderPrefix)) {
      // A descriptor whose value is a header's.
      name.erase(0, (optional_header ? kOptionalHeaderPrefix : kHeaderPrefix).size());
      if (name.empty() || value.empty()) {
        return bad_request("query parameter \"" + std::string(pair) +
                           "\": expected _header.KEY=Header-Name");
      }
      const std::optional<std::string_view> header =
          http.header ? http.header(value) : std::nullopt;
      if (!header && optional_header) continue;
      if (!header) {
        return bad_request("descriptor \"" + name + "\" comes from header \"" + value +
                           "\", which the request does not carry");
      }
      value.assign(*header);
    } else if (name.front() == '_') {
      if (std::string why = set_option(std::string_view(name).substr(1), value, options);
          !why.empty()) {
        return bad_request(std::move(why));
      }
      continue;
    }
    if (static_cast<std::size_t>(check.descriptors_size()) >= max_descriptors) {
      return bad_request("more than " + std::to_string(max_descriptors) +
                         " descriptors (max_descriptors_per_check)");
    }
    v1::Descriptor* descriptor = check.add_descriptors();
    descriptor->set_key(name);
    descriptor->set_value(value);
  }
  finish_check(options, check);
  HttpCheckMapping mapping;
  mapping.ok = true;
  mapping.deny_status = options.deny_status != 0 ? options.deny_status : default_deny_status;
  return mapping;
}

// A JSON number that is a whole number >= 0 -> true and `out`.
bool json_uint(const json::value& value, std::uint64_t& out) {
  if (value.is_uint64()) {
    out = value.get_uint64();
    return true;
  }
  if (value.is_int64() && value.get_int64() >= 0) {
    out = static_cast<std::uint64_t>(value.get_int64());
    return true;
  }
  return false;
}

HttpCheckMapping map_body(std::string_view body, unsigned default_deny_status,
                          std::size_t max_descriptors, v1::Request& request) {
  json::parse_options parse_options;
  parse_options.max_depth = kMaxJsonDepth;
  boost::system::error_code ec;
  const json::value document = json::parse(body, ec, {}, parse_options);
  if (ec) return bad_request("the body is not JSON: " + ec.message());
  if (!document.is_object()) return bad_request("the body must be a JSON object");
  const json::object& object = document.get_object();

  v1::Check& check = start_request(request);
  CheckOptions options;
  const auto add = [&](std::string_view key, const json::value& value) -> std::string {
    if (!value.is_string()) {
      return "descriptor \"" + std::string(key) + "\": the value must be a string";
    }
    if (static_cast<std::size_t>(check.descriptors_size()) >= max_descriptors) {
      return "more than " + std::to_string(max_descriptors) +
             " descriptors (max_descriptors_per_check)";
    }
    v1::Descriptor* descriptor = check.add_descriptors();
    descriptor->set_key(std::string(key));
    descriptor->set_value(std::string(value.get_string()));
    return "";
  };
  for (const auto& [key, value] : object) {
    std::string why;
    if (key == "descriptors") {
      if (value.is_object()) {
        for (const auto& [name, text] : value.get_object()) {
          if (why = add(name, text); !why.empty()) break;
        }
      } else if (value.is_array()) {
        for (const json::value& entry : value.get_array()) {
          const json::object* pair = entry.if_object();
          const json::value* name = pair != nullptr ? pair->if_contains("key") : nullptr;
          const json::value* text = pair != nullptr ? pair->if_contains("value") : nullptr;
          if (name == nullptr || text == nullptr || !name->is_string() || pair->size() != 2) {
            why = "descriptors: each entry must be {\"key\": \"...\", \"value\": \"...\"}";
            break;
          }
          if (why = add(name->get_string(), *text); !why.empty()) break;
        }
      } else {
        why = "descriptors must be an object or an array";
      }
    } else if (key == "cost") {
      if (!json_uint(value, options.cost)) why = "cost must be a whole number";
    } else if (key == "mode") {
      if (!value.is_string() || !parse_mode(value.get_string(), options.mode)) {
        why = "mode must be \"check\", \"peek\" or \"reserve\"";
      }
    } else if (key == "max_wait_ms") {
      if (!json_uint(value, options.max_wait_ms) ||
          options.max_wait_ms >
              static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / kUsPerMs) {
        why = "max_wait_ms must be a whole number of milliseconds";
      }
      options.has_max_wait = true;
    } else if (key == "deny_status") {
      std::uint64_t status = 0;
      if (!json_uint(value, status) || (status != 429 && status != 403)) {
        why = "deny_status must be 429 or 403";
      }
      options.deny_status = static_cast<unsigned>(status);
    } else {
      why = "unknown field \"" + std::string(key) +
            "\" (fields are descriptors, cost, mode, max_wait_ms, deny_status)";
    }
    if (!why.empty()) return bad_request(std::move(why));
  }
  finish_check(options, check);
  HttpCheckMapping mapping;
  mapping.ok = true;
  mapping.deny_status = options.deny_status != 0 ? options.deny_status : default_deny_status;
  return mapping;
}

void add_ietf_headers(const v1::CheckResult& result, HttpAnswer& answer) {
  RateLimitHeaders headers = ietf_headers(result);
  if (!headers.policy.empty()) answer.headers.emplace_back("RateLimit-Policy", headers.policy);
  if (!headers.ratelimit.empty()) answer.headers.emplace_back("RateLimit", headers.ratelimit);
  if (!headers.retry_after.empty()) answer.headers.emplace_back("Retry-After", headers.retry_after);
}

json::object rule_json(const v1::RuleResult& rule) {
  json::object out;
  out["name"] = rule.name();
  out["algorithm"] = rule.algorithm();
  out["allowed"] = rule.allowed();
  out["limit"] = rule.limit();
  out["period_ms"] = rule.period_ms();
  out["burst"] = rule.burst();
  out["remaining"] = rule.remaining();
  out["retry_after_us"] = rule.retry_after_us();
  out["reset_after_us"] = rule.reset_after_us();
  out["delay_us"] = rule.delay_us();
  out["over_limit"] = rule.over_limit();
  return out;
}

}  // namespace

bool percent_decode(std::string_view text, std::string& out) {
  out.clear();
  out.reserve(text.size());
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%') {
      if (i + 2 >= text.size()) return false;
      const int high = hex(text[i + 1]);
      const int low = hex(text[i + 2]);
      if (high < 0 || low < 0) return false;
      out += static_cast<char>(high * 16 + low);
      i += 2;
    } else {
      out += c;
    }
  }
  return true;
}

HttpCheckMapping map_http_check(const HttpRequestView& http, unsigned default_deny_status,
                                std::size_t max_descriptors, v1::Request& request) {
  const std::string_view method = http.method;
  const std::string_view target = http.target;
  const std::size_t question = target.find('?');
  const std::string_view query =
      question == std::string_view::npos ? std::string_view() : target.substr(question + 1);
  if (method == "GET") {
    return map_query(query, http, default_deny_status, max_descriptors, request);
  }
  if (method == "POST") {
    if (!query.empty()) {
      return bad_request("a POST check takes its descriptors from the JSON body, not the query");
    }
    return map_body(http.body, default_deny_status, max_descriptors, request);
  }
  HttpCheckMapping mapping;
  mapping.error = http_error(405, "/v1/check takes GET or POST, not " + std::string(method));
  mapping.error.headers.emplace_back("Allow", "GET, POST");
  return mapping;
}

HttpAnswer answer_http_check(const v1::Response& response, unsigned deny_status,
                             bool ietf_headers) {
  if (response.has_error()) {
    const bool shutting_down = response.error().code() == v1::Error::SHUTTING_DOWN;
    return http_error(shutting_down ? 503 : 400, response.error().message());
  }
  if (!response.has_check() || response.check().results_size() != 1) {
    return http_error(500, "the daemon answered a check with no result");
  }
  const v1::CheckResult& result = response.check().results(0);
  if (result.status() == v1::CheckResult::INVALID) return http_error(400, result.error());

  HttpAnswer answer;
  answer.status = result.allowed() ? 200 : deny_status;
  if (ietf_headers) add_ietf_headers(result, answer);
  json::object body;
  body["allowed"] = result.allowed();
  body["status"] = status_name(result);
  body["over_limit"] = over_limit(result);
  body["delay_us"] = result.delay_us();
  body["retry_after_us"] = retry_after_us(result);
  json::array rules;
  for (const v1::RuleResult& rule : result.rules()) rules.push_back(rule_json(rule));
  body["rules"] = std::move(rules);
  answer.body = json::serialize(body);
  answer.body += '\n';
  return answer;
}

HttpAnswer http_error(unsigned status, std::string_view message) {
  HttpAnswer answer;
  answer.status = status;
  json::object body;
  body["error"] = message;
  answer.body = json::serialize(body);
  answer.body += '\n';
  return answer;
}

}  // namespace rlimit::shell
