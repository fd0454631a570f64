#include "network.h"

namespace rlimit::sim {

Network::Network(const NetworkParams& params, std::vector<Partition> partitions,
                 std::uint32_t nodes, std::uint64_t seed)
    : params_(params), rng_(seed) {
  for (const Partition& p : partitions) {
    Cut cut{p.start_us, p.end_us, p.one_way,
            std::vector<std::uint32_t>(nodes, static_cast<std::uint32_t>(p.groups.size()))};
    for (std::uint32_t g = 0; g < p.groups.size(); ++g) {
      for (std::uint32_t node : p.groups[g]) cut.group_of[node] = g;
    }
    cuts_.push_back(std::move(cut));
  }
}

bool Network::blocked(std::uint32_t from, std::uint32_t to, TimeUs now) const {
  for (const Cut& cut : cuts_) {
    if (now < cut.start_us || now >= cut.end_us) continue;
    const std::uint32_t a = cut.group_of[from];
    const std::uint32_t b = cut.group_of[to];
    if (a != b && (!cut.one_way || a < b)) return true;
  }
  return false;
}

TimeUs Network::delay() {
  TimeUs d = params_.delay_us;
  if (params_.jitter_us > 0) d += std::uniform_int_distribution<TimeUs>(0, params_.jitter_us)(rng_);
  if (params_.reorder > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < params_.reorder) {
    d += params_.reorder_delay_us;
    ++stats_.reordered;
  }
  return d;
}

int Network::route(std::uint32_t from, std::uint32_t to, std::size_t payload_bytes, TimeUs now,
                   TimeUs arrivals[2]) {
  ++stats_.sent;
  if (payload_bytes + kEnvelopeBytes > params_.mtu_bytes) {
    ++stats_.mtu_dropped;
    return 0;
  }
  if (blocked(from, to, now)) {
    ++stats_.partitioned;
    return 0;
  }
  // Draw every random choice whatever the outcome, so one parameter's value
  // does not shift the random stream of the others.
  const double u_loss = std::uniform_real_distribution<double>(0, 1)(rng_);
  const double u_dup = std::uniform_real_distribution<double>(0, 1)(rng_);
  if (u_loss < params_.loss) {
    ++stats_.lost;
    return 0;
  }
  int n = 0;
  arrivals[n++] = now + delay();
  if (u_dup < params_.duplicate) {
    arrivals[n++] = now + delay();
    ++stats_.duplicated;
  }
  return n;
}

}  // namespace rlimit::sim
