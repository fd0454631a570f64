#include "load/rlimit_target.h"

#include <deque>
#include <vector>

#include "load/key_picker.h"
#include "rlimit/client.h"

namespace rlimit::bench {
namespace {

Tally tally(const rlimit::Decision& d) {
  Tally t;
  if (d.status == rlimit::DecisionStatus::kUnavailable ||
      d.status == rlimit::DecisionStatus::kProtocolError) {
    ++t.failed;
  } else if (d.allowed) {
    ++t.allowed;
  } else {
    ++t.denied;
  }
  return t;
}

class RlimitTarget final : public Target {
 public:
  explicit RlimitTarget(const std::string& socket_path) {
    rlimit::ClientOptions options;
    options.socket_path = socket_path;
    // Long enough that a loaded 2-core machine does not turn into failures.
    options.timeout_ms = 2000;
    client_ = std::make_unique<rlimit::Client>(options);
  }

  std::string open() override {
    const rlimit::Decision d = client_->check({{"user", "bench-warmup"}});
    if (d.status == rlimit::DecisionStatus::kUnavailable ||
        d.status == rlimit::DecisionStatus::kProtocolError) {
      return "rlimitd: " + d.error;
    }
    return {};
  }

  Tally call(std::span<const std::uint64_t> keys) override {
    if (keys.size() == 1) return tally(client_->check(request_for(keys[0])));
    batch_.resize(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) fill(batch_[i], keys[i]);
    Tally t;
    for (const rlimit::Decision& d : client_->check_batch(batch_)) t += tally(d);
    return t;
  }

  void send(std::span<const std::uint64_t> keys) override {
    // libclient pipelines single checks; a batch is sent as that many frames.
    for (const std::uint64_t key : keys) client_->submit(request_for(key));
    sizes_.push_back(keys.size());
  }

  Tally receive() override {
    Tally t;
    const std::size_t n = sizes_.front();
    sizes_.pop_front();
    for (std::size_t i = 0; i < n; ++i) t += tally(client_->receive().second);
    return t;
  }

 private:
  static void fill(rlimit::CheckRequest& request, std::uint64_t key) {
    if (request.descriptors.size() != 1) request.descriptors = {{"user", ""}};
    key_name(key, request.descriptors[0].value);
  }
  const rlimit::CheckRequest& request_for(std::uint64_t key) {
    fill(one_, key);
    return one_;
  }

  std::unique_ptr<rlimit::Client> client_;
  rlimit::CheckRequest one_;
  std::vector<rlimit::CheckRequest> batch_;
  std::deque<std::size_t> sizes_;
};

}  // namespace

std::unique_ptr<Target> make_rlimit_target(const std::string& socket_path) {
  return std::make_unique<RlimitTarget>(socket_path);
}

}  // namespace rlimit::bench
