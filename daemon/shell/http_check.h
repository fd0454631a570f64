// The HTTP check face's mapping, apart from any socket: an HTTP request for
// /v1/check becomes the rlimit.v1.Request the Unix socket would carry (so the
// Dispatcher answers it exactly as a socket client's), and the answer becomes
// an HTTP status, headers and a JSON body. Pure; no I/O; not thread-safe
// only in that the caller owns the messages it passes.
//
//   GET  /v1/check?user=alice&path=%2Fapi&_cost=2&_mode=peek
//   POST /v1/check   {"descriptors": {"user": "alice"}, "cost": 2, "mode": "peek"}
//
// Query parameters are descriptors, in order, percent-decoded (`+` is a
// space); names starting with `_` are the check's own: `_cost` (default 1),
// `_mode` (check, peek, reserve), `_max_wait_ms`, `_deny_status` (429 or
// 403), and `_header.KEY=Header-Name`: descriptor KEY takes the value of
// the request's header Header-Name (for proxies that put what they know of
// the original request in headers: nginx proxy_set_header, Traefik's
// X-Forwarded-*); a header that is absent is a 400, never a silently
// unmatched rule. `_optional_header.KEY=Header-Name` is the same, but an
// absent header leaves the descriptor out (so rules that need KEY do not
// match: no user, no per-user limit). A POST body is a JSON object: `descriptors` (an object of key to
// string value, or an array of {"key", "value"} objects to keep order or
// repeat a key), and optional `cost`, `mode`, `max_wait_ms`, `deny_status`.
// 200 allowed, the deny status (429 by default, 403 for nginx auth_request)
// when denied, 400 for a check that does not map or that the daemon finds
// invalid, 503 while shutting down. docs/integrations.md has the whole story.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rlimit::v1 {
class Request;
class Response;
}  // namespace rlimit::v1

namespace rlimit::shell {

// One HTTP answer, as the server writes it.
struct HttpAnswer {
  unsigned status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type/Length
  std::string content_type = "application/json";
  std::string body;
};

// One request as read: its method ("GET"), target ("/v1/check?user=a"),
// body, and a lookup of its headers by name (case-insensitive; the first of
// repeated ones). Views into the server's buffers, valid for one call.
struct HttpRequestView {
  std::string_view method;
  std::string_view target;
  std::string_view body;
  std::function<std::optional<std::string_view>(std::string_view name)> header;
};

struct HttpCheckMapping {
  bool ok = false;
  HttpAnswer error;          // when !ok: the 400 to send, saying what is wrong
  unsigned deny_status = 0;  // when ok: the status of a denial
};

// Fills `request` (cleared first) with the one check `http` asks.
// `default_deny_status` is [http] deny_status; `max_descriptors` bounds the
// descriptors one check may carry (more: 400).
HttpCheckMapping map_http_check(const HttpRequestView& http, unsigned default_deny_status,
                                std::size_t max_descriptors, v1::Request& request);

// The answer to a mapped check: 200 / deny status / 400 / 503, the IETF
// fields and Retry-After (when `ietf_headers`), and the JSON body.
HttpAnswer answer_http_check(const v1::Response& response, unsigned deny_status, bool ietf_headers);

// A JSON error answer: {"error": message}.
HttpAnswer http_error(unsigned status, std::string_view message);

// "%2Fapi+x" -> "/api x"; false on a bad escape ("%4", "%zz").
bool percent_decode(std::string_view text, std::string& out);

}  // namespace rlimit::shell
