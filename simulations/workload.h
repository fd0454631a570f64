// The requests of a scenario: for every traffic stream and node, an arrival
// process (constant, Poisson, or on/off bursts) at that node's share of the
// stream's rate, a key drawn per request (uniform or Zipf, optionally from
// only the nodes that serve the key), and the check the request makes.
// Deterministic given its seed; each (stream, node) has its own generator so
// one stream's draws never shift another's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/limiter.h"
#include "rng.h"
#include "scenario.h"

namespace rlimit::sim {

struct StreamInfo {
  double rate_per_s = 0;     // requests per second, all nodes
  double limit_per_s = 0;    // the tightest matched limit, over every key the stream uses
  std::string limit_source;  // the rule (or inline key) that sets it
  bool per_key = false;      // that limit applies per key
  // The tightest rule's limit, period and burst, and what its remaining
  // counts against (burst, window limit...): one key's ceiling per window.
  core::BucketParams key_params;
  std::int64_t key_capacity = 0;
};

class Workload {
 public:
  // Derives each stream's rate from its demand and the rules. On a problem
  // (a stream that matches no rule and has no rate) sets `error`.
  Workload(const Scenario& scenario, std::uint64_t seed, std::string& error);

  // The time of the first request of (stream, node), or -1 if none.
  TimeUs first(std::uint32_t stream, std::uint32_t node);
  // The time of the request after one at `now`, or -1 when the stream ends.
  TimeUs next(std::uint32_t stream, std::uint32_t node, TimeUs now);
  // The key of a request of (stream, node).
  std::uint32_t pick_key(std::uint32_t stream, std::uint32_t node);
  // The check a request for `key` makes; valid until the next call.
  const core::CheckInput& input(std::uint32_t stream, std::uint32_t key);

  const StreamInfo& info(std::uint32_t stream) const { return info_[stream]; }
  std::size_t streams() const { return streams_.size(); }
  // The limit line of the plots: report.limit, else the sum of the streams'
  // limits, each distinct limit counted once.
  double limit_per_s() const { return limit_per_s_; }

 private:
  struct Template {
    std::string prefix;  // text before "{key}" (all of it when absent)
    std::string suffix;
    bool has_key = false;
    void render(std::uint32_t key, std::string& out) const;
  };
  struct KeyTable {
    std::vector<std::uint32_t> keys;  // empty: every key, identity
    std::vector<double> cumulative;   // cumulative weights, parallel to keys (or key index)
  };
  struct Stream {
    const Traffic* traffic = nullptr;
    std::vector<Template> descriptor_keys;  // key names are plain, values may use {key}
    std::vector<Template> descriptor_values;
    std::optional<Template> inline_key;
    std::vector<double> node_rate_per_s;
    std::vector<Rng> rngs;            // per node
    std::vector<TimeUs> phase_us;     // bursts: per node
    KeyTable shared_keys;             // when key_spread is 0
    std::vector<KeyTable> node_keys;  // when key_spread > 0
  };

  TimeUs gap(Stream& s, std::uint32_t node, TimeUs now);
  void fill(Stream& s, std::uint32_t key);

  std::vector<Stream> streams_;
  std::vector<StreamInfo> info_;
  double limit_per_s_ = 0;
  // Scratch for input().
  std::vector<std::string> strings_;
  std::vector<core::Descriptor> descriptors_;
  std::string inline_key_;
  core::InlineLimit inline_;
  core::CheckInput input_;
};

}  // namespace rlimit::sim
