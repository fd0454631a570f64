#include "load/grpc_target.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <deque>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "load/key_picker.h"

namespace rlimit::bench {
namespace {

namespace rls = envoy::service::ratelimit::v3;
using Clock = std::chrono::system_clock;

// Long enough that a loaded 2-core machine does not turn into failures.
constexpr auto kDeadline = std::chrono::seconds(2);

// One call in flight: what the async API needs to stay put until it ends.
struct Call {
  grpc::ClientContext context;
  rls::RateLimitResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<rls::RateLimitResponse>> reader;
  std::size_t checks = 0;
  bool done = false;
};

Tally tally(const grpc::Status& status, const rls::RateLimitResponse& response,
            std::size_t checks) {
  Tally t;
  if (!status.ok() || static_cast<std::size_t>(response.statuses_size()) != checks) {
    t.failed += checks;
    return t;
  }
  for (const auto& s : response.statuses()) {
    if (s.code() == rls::RateLimitResponse::OK) {
      ++t.allowed;
    } else if (s.code() == rls::RateLimitResponse::OVER_LIMIT) {
      ++t.denied;
    } else {
      ++t.failed;
    }
  }
  return t;
}

class GrpcTarget final : public Target {
 public:
  GrpcTarget(std::string address, std::string domain)
      : address_(std::move(address)), domain_(std::move(domain)) {}

  ~GrpcTarget() override {
    // Calls still in flight (a failed run) must end before the queue goes.
    for (auto& call : calls_) call->context.TryCancel();
    while (!calls_.empty()) {
      void* tag = nullptr;
      bool ok = false;
      if (!cq_.Next(&tag, &ok)) break;
      static_cast<Call*>(tag)->done = true;
      while (!calls_.empty() && calls_.front()->done) calls_.pop_front();
    }
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  std::string open() override {
    grpc::ChannelArguments args;
    // A connection of this client's own, not one shared by every channel.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_ = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
    if (!channel_->WaitForConnected(Clock::now() + kDeadline)) {
      return "grpc " + address_ + ": cannot connect";
    }
    stub_ = rls::RateLimitService::NewStub(channel_);
    const std::uint64_t warmup = 0;
    grpc::ClientContext context;
    context.set_deadline(Clock::now() + kDeadline);
    rls::RateLimitResponse response;
    const grpc::Status status =
        stub_->ShouldRateLimit(&context, request_for({&warmup, 1}), &response);
    if (!status.ok()) return "grpc " + address_ + ": " + status.error_message();
    if (response.statuses_size() != 1) return "grpc " + address_ + ": no descriptor status";
    return {};
  }

  Tally call(std::span<const std::uint64_t> keys) override {
    grpc::ClientContext context;
    context.set_deadline(Clock::now() + kDeadline);
    rls::RateLimitResponse response;
    const grpc::Status status = stub_->ShouldRateLimit(&context, request_for(keys), &response);
    return tally(status, response, keys.size());
  }

  void send(std::span<const std::uint64_t> keys) override {
    auto call = std::make_unique<Call>();
    call->checks = keys.size();
    call->context.set_deadline(Clock::now() + kDeadline);
    call->reader = stub_->AsyncShouldRateLimit(&call->context, request_for(keys), &cq_);
    call->reader->Finish(&call->response, &call->status, call.get());
    calls_.push_back(std::move(call));
  }

  Tally receive() override {
    Call& oldest = *calls_.front();
    while (!oldest.done) {
      void* tag = nullptr;
      bool ok = false;
      if (!cq_.Next(&tag, &ok)) break;
      static_cast<Call*>(tag)->done = true;
    }
    const Tally t = tally(oldest.status, oldest.response, oldest.checks);
    calls_.pop_front();
    return t;
  }

 private:
  // The request for `keys`, built in one reused message (gRPC serializes it
  // before the call returns).
  const rls::RateLimitRequest& request_for(std::span<const std::uint64_t> keys) {
    request_.set_domain(domain_);
    while (static_cast<std::size_t>(request_.descriptors_size()) < keys.size()) {
      auto* entry = request_.add_descriptors()->add_entries();
      entry->set_key("user");
    }
    while (static_cast<std::size_t>(request_.descriptors_size()) > keys.size()) {
      request_.mutable_descriptors()->RemoveLast();
    }
    for (std::size_t i = 0; i < keys.size(); ++i) {
      key_name(keys[i], scratch_);
      request_.mutable_descriptors(static_cast<int>(i))->mutable_entries(0)->set_value(scratch_);
    }
    return request_;
  }

  std::string address_;
  std::string domain_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rls::RateLimitService::Stub> stub_;
  grpc::CompletionQueue cq_;
  std::deque<std::unique_ptr<Call>> calls_;
  rls::RateLimitRequest request_;
  std::string scratch_;
};

}  // namespace

std::unique_ptr<Target> make_grpc_target(const std::string& address, const std::string& domain) {
  return std::make_unique<GrpcTarget>(address, domain);
}

}  // namespace rlimit::bench
