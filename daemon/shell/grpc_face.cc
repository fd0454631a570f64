#include "shell/grpc_face.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "rlimit/v1/client.pb.h"
#include "shell/clock.h"
#include "shell/dispatch.h"

namespace rlimit::shell {

namespace asio = boost::asio;
namespace rls = envoy::service::ratelimit::v3;

namespace {

// One call handed to the loop. Finished exactly once: by the loop, or by the
// destructor of a face whose loop no longer runs, whichever claims it.
struct Call {
  grpc::ServerUnaryReactor* reactor = nullptr;
  rls::RateLimitResponse* response = nullptr;  // gRPC's, until Finish
  v1::Request request;
  std::size_t descriptors = 0;
  std::atomic<bool> claimed{false};

  bool claim() { return !claimed.exchange(true, std::memory_order_acq_rel); }
};

grpc::StatusCode to_grpc(EnvoyStatus status) {
  switch (status) {
    case EnvoyStatus::kOk:
      return grpc::StatusCode::OK;
    case EnvoyStatus::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case EnvoyStatus::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case EnvoyStatus::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case EnvoyStatus::kInternal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

}  // namespace

struct GrpcFace::Impl final : rls::RateLimitService::CallbackService {
  Impl(asio::io_context& io_context, Dispatcher& d, Options o)
      : io(io_context), dispatcher(d), options(std::move(o)) {}

  // gRPC's threads.
  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const rls::RateLimitRequest* request,
                                            rls::RateLimitResponse* response) override {
    counters.calls.fetch_add(1, std::memory_order_relaxed);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    auto call = std::make_shared<Call>();
    call->reactor = reactor;
    call->response = response;
    call->descriptors = static_cast<std::size_t>(request->descriptors_size());
    const EnvoyOutcome mapped = envoy_to_request(*request, options.limits, call->request);
    if (mapped.status != EnvoyStatus::kOk) {
      counters.invalid_argument.fetch_add(1, std::memory_order_relaxed);
      reactor->Finish(grpc::Status(to_grpc(mapped.status), mapped.message));
      return reactor;
    }
    if (counters.pending.fetch_add(1, std::memory_order_acq_rel) >= options.settings.max_pending) {
      counters.pending.fetch_sub(1, std::memory_order_acq_rel);
      counters.pending_full.fetch_add(1, std::memory_order_relaxed);
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                   "rlimitd is busy: max_pending calls are waiting"));
      return reactor;
    }
    {
      // Registered and posted under the lock the destructor drains under,
      // so no call can slip in after the drain.
      std::lock_guard lock(mutex);
      if (stopping) {
        counters.pending.fetch_sub(1, std::memory_order_acq_rel);
        counters.shutting_down.fetch_add(1, std::memory_order_relaxed);
        reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "rlimitd is shutting down"));
        return reactor;
      }
      waiting.insert(call);
      asio::post(io, [this, call] { answer(call); });
    }
    return reactor;
  }

  // The loop thread.
  void answer(const std::shared_ptr<Call>& call) {
    if (!call->claim()) return;
    {
      std::lock_guard lock(mutex);
      waiting.erase(call);
    }
    counters.pending.fetch_sub(1, std::memory_order_acq_rel);
    const auto started = std::chrono::steady_clock::now();
    dispatcher.handle(call->request, steady_now_us(started), scratch);
    EnvoyAnswerSummary summary;
    const EnvoyOutcome outcome = envoy_from_response(
        scratch, call->descriptors, options.settings.ietf_headers, *call->response, &summary);
    dispatcher.decision_times().grpc.observe(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                 std::chrono::steady_clock::now() - started)
                                                 .count());
    switch (outcome.status) {
      case EnvoyStatus::kOk:
        counters.descriptors.fetch_add(summary.descriptors, std::memory_order_relaxed);
        (summary.over_limit ? counters.over_limit : counters.ok)
            .fetch_add(1, std::memory_order_relaxed);
        call->reactor->Finish(grpc::Status::OK);
        return;
      case EnvoyStatus::kInvalidArgument:
        counters.invalid_argument.fetch_add(1, std::memory_order_relaxed);
        break;
      case EnvoyStatus::kResourceExhausted:
        counters.resource_exhausted.fetch_add(1, std::memory_order_relaxed);
        break;
      case EnvoyStatus::kUnavailable:
        counters.shutting_down.fetch_add(1, std::memory_order_relaxed);
        break;
      case EnvoyStatus::kInternal:
        counters.internal_errors.fetch_add(1, std::memory_order_relaxed);
        break;
    }
    call->response->Clear();
    call->reactor->Finish(grpc::Status(to_grpc(outcome.status), outcome.message));
  }

  // Marks the face stopping; returns the calls still waiting for the loop.
  std::vector<std::shared_ptr<Call>> stop_accepting() {
    std::lock_guard lock(mutex);
    stopping = true;
    return {waiting.begin(), waiting.end()};
  }

  asio::io_context& io;
  Dispatcher& dispatcher;
  const Options options;
  GrpcCounters counters;
  std::string addresses;
  std::unique_ptr<grpc::Server> server;

  std::mutex mutex;
  bool stopping = false;                              // under mutex
  std::unordered_set<std::shared_ptr<Call>> waiting;  // under mutex

  // The loop's.
  v1::Response scratch;
  bool shutdown_started = false;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::thread shutdown_thread;
};

std::unique_ptr<GrpcFace> GrpcFace::start(asio::io_context& io, Dispatcher& dispatcher,
                                          Options options, std::string& error) {
  auto impl = std::make_unique<Impl>(io, dispatcher, std::move(options));
  const config::GrpcSettings& settings = impl->options.settings;
  grpc::ServerBuilder builder;
  // Without this gRPC sets SO_REUSEPORT and a second daemon on the same port
  // would share it silently instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(static_cast<int>(settings.max_message_bytes));
  struct Port {
    std::string address;
    int selected = 0;
  };
  std::vector<Port> ports;
  if (!settings.listen.empty()) ports.push_back({settings.listen});
  if (!settings.unix_socket.empty()) ports.push_back({"unix:" + settings.unix_socket});
  if (ports.empty()) {
    error = "[grpc] has neither listen nor unix_socket";
    return nullptr;
  }
  for (Port& port : ports) {
    // The API is unauthenticated, like the Unix socket: keep it on loopback
    // or a private network.
    builder.AddListeningPort(port.address, grpc::InsecureServerCredentials(), &port.selected);
  }
  builder.RegisterService(impl.get());
  impl->server = builder.BuildAndStart();
  for (const Port& port : ports) {
    if (impl->server == nullptr || port.selected == 0) {
      error = "cannot listen on " + port.address;
      if (impl->server != nullptr) impl->server->Shutdown();
      return nullptr;
    }
    if (!impl->addresses.empty()) impl->addresses += " and ";
    impl->addresses += port.address;
  }
  return std::unique_ptr<GrpcFace>(new GrpcFace(std::move(impl)));
}

GrpcFace::GrpcFace(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

void GrpcFace::shutdown(std::chrono::microseconds grace) {
  Impl& impl = *impl_;
  if (impl.shutdown_started) return;
  impl.shutdown_started = true;
  impl.stop_accepting();
  impl.work.emplace(impl.io.get_executor());
  const auto deadline = std::chrono::system_clock::now() + grace;
  impl.shutdown_thread = std::thread([&impl, deadline] {
    impl.server->Shutdown(deadline);
    asio::post(impl.io, [&impl] {
      impl.shutdown_thread.join();
      impl.work.reset();
      spdlog::info("grpc: stopped");
    });
  });
}

GrpcFace::~GrpcFace() {
  Impl& impl = *impl_;
  // Nothing runs the loop any more: whatever waits for it is finished here.
  for (const std::shared_ptr<Call>& call : impl.stop_accepting()) {
    if (!call->claim()) continue;
    impl.counters.pending.fetch_sub(1, std::memory_order_acq_rel);
    impl.counters.shutting_down.fetch_add(1, std::memory_order_relaxed);
    call->reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "rlimitd is stopping"));
  }
  if (impl.shutdown_thread.joinable()) {
    impl.shutdown_thread.join();
  } else if (!impl.shutdown_started) {
    impl.server->Shutdown(std::chrono::system_clock::now());
  }
  impl.server.reset();
}

const GrpcCounters& GrpcFace::counters() const { return impl_->counters; }

const std::string& GrpcFace::addresses() const { return impl_->addresses; }

}  // namespace rlimit::shell
