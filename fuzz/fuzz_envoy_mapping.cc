// The gRPC face's mapping without gRPC: the input is a serialized
// envoy.service.ratelimit.v3.RateLimitRequest (what gRPC hands the face);
// it is mapped to one rlimit.v1.Request (envoy_to_request, with inline
// limits on and off), answered by the Dispatcher and mapped back
// (envoy_from_response, with and without the IETF headers). Properties: a
// mapped request has one check per descriptor; the answer is OK with one
// status per descriptor, or a refusal the mapping documents (never
// kInternal: the Dispatcher's answer always fits the request).
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "fuzz_check.h"
#include "fuzz_daemon.h"
#include "rlimit/v1/client.pb.h"
#include "shell/envoy_mapping.h"

namespace {

using rlimit::shell::EnvoyStatus;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  rlimit::fuzz::quiet_protobuf();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  envoy::service::ratelimit::v3::RateLimitRequest in;
  if (!in.ParseFromArray(data, static_cast<int>(size))) return 0;
  rlimit::fuzz::Daemon daemon;
  for (const bool inline_limits : {true, false}) {
    rlimit::shell::EnvoyRequestLimits limits;
    limits.allow_inline_limits = inline_limits;
    limits.max_descriptors_per_check = daemon.settings.limiter.max_descriptors_per_check;
    rlimit::v1::Request request;
    const rlimit::shell::EnvoyOutcome mapped = rlimit::shell::envoy_to_request(in, limits, request);
    if (mapped.status != EnvoyStatus::kOk) {
      FUZZ_CHECK(mapped.status == EnvoyStatus::kInvalidArgument);
      FUZZ_CHECK(!mapped.message.empty());
      continue;
    }
    FUZZ_CHECK(request.has_check());
    FUZZ_CHECK(request.check().checks_size() == in.descriptors_size());
    rlimit::v1::Response response;
    daemon.dispatcher.handle(request, 1'000'000'000, response);
    for (const bool ietf : {false, true}) {
      envoy::service::ratelimit::v3::RateLimitResponse out;
      rlimit::shell::EnvoyAnswerSummary summary;
      const rlimit::shell::EnvoyOutcome answered = rlimit::shell::envoy_from_response(
          response, static_cast<std::size_t>(in.descriptors_size()), ietf, out, &summary);
      FUZZ_CHECK(answered.status != EnvoyStatus::kInternal);
      FUZZ_CHECK(answered.status != EnvoyStatus::kUnavailable);  // not shutting down
      if (answered.status == EnvoyStatus::kOk) {
        FUZZ_CHECK(out.statuses_size() == in.descriptors_size());
        FUZZ_CHECK(summary.descriptors == static_cast<std::size_t>(in.descriptors_size()));
      }
    }
  }
  return 0;
}
