// The simulated network between nodes: each datagram may be lost,
// duplicated, delayed with jitter, held back so later ones overtake it, dropped
// for exceeding the path MTU, or cut by a partition of the timetable. Pure and
// deterministic given its seed; the simulation asks it for the fate of each
// datagram and schedules the deliveries.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "scenario.h"

namespace rlimit::sim {

struct NetworkStats {
  std::uint64_t sent = 0;
  std::uint64_t delivered = 0;
  std::uint64_t lost = 0;          // random loss
  std::uint64_t partitioned = 0;   // cut by a partition, at send or delivery
  std::uint64_t mtu_dropped = 0;   // payload + envelope above the path MTU
  std::uint64_t duplicated = 0;    // extra copies made
  std::uint64_t reordered = 0;     // held back by reorder_delay
  std::uint64_t to_down_node = 0;  // arrived at a crashed node
  std::uint64_t unknown_address = 0;
};

class Network {
 public:
  Network(const NetworkParams& params, std::vector<Partition> partitions, std::uint32_t nodes,
          std::uint64_t seed);

  // The arrival times of a datagram of `payload_bytes` sent now from `from`
  // to `to`: none (lost), one, or two (duplicated). Returns how many were
  // written to `arrivals`.
  int route(std::uint32_t from, std::uint32_t to, std::size_t payload_bytes, TimeUs now,
            TimeUs arrivals[2]);

  // True if a partition in force at `now` cuts datagrams from `from` to `to`.
  bool blocked(std::uint32_t from, std::uint32_t to, TimeUs now) const;

  NetworkStats& stats() { return stats_; }
  const NetworkStats& stats() const { return stats_; }
  const NetworkParams& params() const { return params_; }

 private:
  TimeUs delay();

  struct Cut {
    TimeUs start_us;
    TimeUs end_us;
    bool one_way;
    std::vector<std::uint32_t> group_of;  // per node; unlisted nodes share the last group
  };

  NetworkParams params_;
  std::vector<Cut> cuts_;
  std::mt19937_64 rng_;
  NetworkStats stats_;
};

}  // namespace rlimit::sim
