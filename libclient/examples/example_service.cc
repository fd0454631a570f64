// A small "service" that asks rlimitd before doing work. It shows the three
// things every integration needs:
//   1. a check per request, with the request's descriptors;
//   2. what to do when denied: reject interactive work at once (telling the
//      caller when to retry), retry background work with Backoff;
//   3. fail-open handling: if the daemon is down the check says allowed with
//      status kUnavailable; serve the request and note it.
//
// Usage: rlimit-example-service [SOCKET_PATH] [REQUESTS]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "rlimit/client.h"
#include "rlimit/retry.h"

namespace {

struct IncomingRequest {
  std::string user;
  std::string method;
  std::string path;
  bool background;  // a job that can wait, instead of a user who is waiting
};

// What the real service would do.
void handle(const IncomingRequest& request) { (void)request; }

}  // namespace

int main(int argc, char** argv) {
  rlimit::ClientOptions options;
  if (argc > 1) options.socket_path = argv[1];
  const int total = argc > 2 ? std::atoi(argv[2]) : 60;
  options.timeout_ms = 5;                       // the daemon is local: answers take microseconds
  options.fail_mode = rlimit::FailMode::kOpen;  // never let the limiter take the service down
  // One Client per thread; this service has one thread.
  rlimit::Client client(options);

  // Retries for background work: jittered exponential backoff, never sooner
  // than the daemon's retry_after, giving up after 3 retries or above 200 ms.
  const rlimit::RetryPolicy retry_policy{std::chrono::microseconds(2000),
                                         std::chrono::microseconds(200'000), 3};

  int served = 0, rejected = 0, unguarded = 0;
  for (int i = 0; i < total; ++i) {
    const IncomingRequest request{i % 3 == 0 ? "bob" : "alice", "GET", "/api/items", i % 10 == 9};
    rlimit::CheckRequest check;
    check.descriptors = {
        {"user", request.user}, {"method", request.method}, {"path", request.path}};

    rlimit::Decision decision;
    if (request.background) {
      rlimit::Backoff backoff(retry_policy);
      decision = rlimit::check_with_retry(client, check, backoff);
      if (backoff.retries() > 0) {
        std::printf("#%d %s: background job retried %u time(s)\n", i, request.user.c_str(),
                    backoff.retries());
      }
    } else {
      decision = client.check(check);
    }

    if (decision.status == rlimit::DecisionStatus::kUnavailable ||
        decision.status == rlimit::DecisionStatus::kProtocolError) {
      // Fail open: the limiter could not decide, so we serve. Count it, so an
      // outage of the limiter is visible in metrics, and keep going; the
      // client reconnects by itself.
      ++unguarded;
      if (unguarded == 1) {
        std::printf("rate limiter unavailable (%s); serving without limits\n",
                    decision.error.c_str());
      }
    }
    if (decision.allowed) {
      handle(request);
      ++served;
      continue;
    }
    ++rejected;
    // An HTTP service would answer 429 with Retry-After.
    const std::int64_t retry_after_us = decision.retry_after_us();
    if (retry_after_us < 0) {
      std::printf("#%d %s: rejected, this request can never fit the limit\n", i,
                  request.user.c_str());
    } else {
      std::printf("#%d %s: rejected (429), retry after %.1f ms\n", i, request.user.c_str(),
                  static_cast<double>(retry_after_us) / 1000.0);
    }
  }
  std::printf("served %d, rejected %d, served without a decision %d\n", served, rejected,
              unguarded);
  return 0;
}
