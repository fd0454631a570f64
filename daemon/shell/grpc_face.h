// The gRPC face: serves Envoy's rate-limit API
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) on the
// [grpc] section's `listen` (host:port) and/or `unix_socket`. What a request
// means and what the answer says is envoy_mapping.h; this file is the
// server and how work crosses threads.
//
// Threading. gRPC runs its own threads; the core and the Dispatcher run only
// on the daemon's event loop (one thread, the io_context). A call is handled
// by gRPC's callback API (CallbackService + the context's default unary
// reactor: no completion queue for us to poll, no thread of ours, and a call
// can be finished from any thread, which is what handing it to the loop
// needs). On a gRPC thread the request is validated and translated into an
// rlimit.v1.Request (pure: envoy_mapping.h); a request that does not map is
// finished there with INVALID_ARGUMENT and never reaches the loop. Otherwise
// the call is handed over with boost::asio::post(io_context, ...); on the
// loop, Dispatcher::handle(request, steady_now_us(), response) answers it,
// the answer is mapped to a RateLimitResponse and the call is finished from
// the loop thread. At most max_pending calls wait for the loop at once (an
// atomic count); one more is finished at once with UNAVAILABLE and counted
// as grpc_pending_full. Counters are atomics, bumped on either side and read
// by status on the loop.
//
// Shutdown. shutdown() runs on the loop. It must not block the loop: the
// calls already handed over finish only when the loop runs them, and
// grpc::Server::Shutdown waits for calls in flight, so calling it on the loop
// would deadlock until its deadline. So shutdown() marks the face stopping
// (a call arriving after that is finished at once with UNAVAILABLE, never
// posted), holds the io_context's work (so the loop keeps running the posted
// calls even when everything else has stopped), and calls
// grpc::Server::Shutdown(now + grace) on a thread of its own. That stops new
// calls at once and waits for those in flight; the loop finishes them
// meanwhile. After the deadline gRPC cancels what is left (the loop's
// Finish on a cancelled call is harmless). When Shutdown returns the thread
// posts back to the loop, which joins it and releases the work; then the
// loop may run dry and the daemon exits. If the face is destroyed without
// shutdown() having finished (the loop failed: nothing will run the posted
// calls any more), the destructor finishes every call still waiting for the
// loop with UNAVAILABLE first (calls are registered under a mutex, and each
// is finished exactly once, by whoever claims it first), then shuts gRPC down
// and waits; so neither path can wait on a call nobody will finish.
//
// Not counted: a request above max_message_bytes is refused by gRPC itself
// (RESOURCE_EXHAUSTED) before it reaches this code.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "config/config.h"
#include "shell/envoy_mapping.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace rlimit::shell {

class Dispatcher;

// The face's counters, status names prefixed grpc_. Atomic: bumped on gRPC's
// threads and on the loop.
struct GrpcCounters {
  std::atomic<std::uint64_t> calls{0};               // ShouldRateLimit calls received
  std::atomic<std::uint64_t> descriptors{0};         // descriptors checked (answered calls)
  std::atomic<std::uint64_t> ok{0};                  // answers with overall_code OK
  std::atomic<std::uint64_t> over_limit{0};          // answers with overall_code OVER_LIMIT
  std::atomic<std::uint64_t> invalid_argument{0};    // INVALID_ARGUMENT (message says why)
  std::atomic<std::uint64_t> resource_exhausted{0};  // the Dispatcher refused the batch's size
  std::atomic<std::uint64_t> pending_full{0};        // UNAVAILABLE: max_pending calls waiting
  std::atomic<std::uint64_t> shutting_down{0};       // UNAVAILABLE: arrived while stopping
  std::atomic<std::uint64_t> internal_errors{0};     // INTERNAL: an answer that did not map
  std::atomic<std::uint64_t> pending{0};             // a gauge: calls waiting for the loop
};

// Calls f(name, value) for every counter, in declaration order.
template <typename F>
void for_each_grpc_counter(const GrpcCounters& c, F&& f) {
  static_assert(sizeof(GrpcCounters) == 10 * sizeof(std::atomic<std::uint64_t>),
                "list every GrpcCounters field in for_each_grpc_counter");
  f(std::string_view("grpc_calls"), c.calls.load(std::memory_order_relaxed));
  f(std::string_view("grpc_descriptors"), c.descriptors.load(std::memory_order_relaxed));
  f(std::string_view("grpc_ok"), c.ok.load(std::memory_order_relaxed));
  f(std::string_view("grpc_over_limit"), c.over_limit.load(std::memory_order_relaxed));
  f(std::string_view("grpc_invalid_argument"), c.invalid_argument.load(std::memory_order_relaxed));
  f(std::string_view("grpc_resource_exhausted"),
    c.resource_exhausted.load(std::memory_order_relaxed));
  f(std::string_view("grpc_pending_full"), c.pending_full.load(std::memory_order_relaxed));
  f(std::string_view("grpc_shutting_down"), c.shutting_down.load(std::memory_order_relaxed));
  f(std::string_view("grpc_internal_errors"), c.internal_errors.load(std::memory_order_relaxed));
  f(std::string_view("grpc_pending"), c.pending.load(std::memory_order_relaxed));
}

class GrpcFace {
 public:
  struct Options {
    config::GrpcSettings settings;
    EnvoyRequestLimits limits;
  };

  // Starts serving; nullptr with `error` set when a configured address cannot
  // be listened on. `io` and `dispatcher` must outlive the face; the
  // dispatcher is used only on the thread running `io`. Call on that thread.
  static std::unique_ptr<GrpcFace> start(boost::asio::io_context& io, Dispatcher& dispatcher,
                                         Options options, std::string& error);

  // Finishes what shutdown() has not (see the header comment) and waits for
  // gRPC to stop.
  ~GrpcFace();
  GrpcFace(const GrpcFace&) = delete;
  GrpcFace& operator=(const GrpcFace&) = delete;

  // Stops accepting calls and finishes those in flight, waiting at most
  // `grace` for them (see the header comment). Call on the loop thread; does
  // not block it; a second call does nothing.
  void shutdown(std::chrono::microseconds grace);

  const GrpcCounters& counters() const;
  // "127.0.0.1:8081 and unix:/run/rlimitd/grpc.sock", for the log.
  const std::string& addresses() const;

  struct Impl;

 private:
  explicit GrpcFace(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlimit::shell
