// rlimitd's HTTP check face: GET /v1/check?user=bench-<key> over HTTP/1.1
// keep-alive connections, as nginx auth_request or Traefik ForwardAuth ask
// it (one connection per client, reused). 200 is an allowed check, 429 (or
// 403) a denied one, anything else a failure. A minimal client over a
// blocking TCP socket (TCP_NODELAY): the request is a fixed string with the
// key in it, the answer is read by Content-Length and its body skipped.
//
// The face answers one check per request, so a batch of B checks is B
// requests, and pipelined runs send requests ahead on the connection
// (HTTP/1.1 pipelining, answered in order); proxies keep one request in
// flight per connection and use more connections instead, which is
// `--mode sync --clients N`.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "load/target.h"

namespace rlimit::bench {

// Where the first HTTP response in a buffer stands.
struct HttpResponseParse {
  enum class State { kIncomplete, kComplete, kBad };
  State state = State::kIncomplete;
  unsigned status = 0;     // when complete
  std::size_t length = 0;  // when complete: bytes of head and body
  bool close = false;      // when complete: the server closes after it
  std::string_view error;  // when bad
};

// Reads the status line and headers of the response at the start of
// `data`, and its body by Content-Length (a 1xx, 204 or 304 has none).
// Needs Content-Length on anything else; chunked bodies are refused (kBad):
// rlimitd's face never sends them.
HttpResponseParse parse_http_response(std::string_view data);

// host:port of the face; each client opens its own connection.
std::unique_ptr<Target> make_http_target(const std::string& host, int port);

}  // namespace rlimit::bench
