// Replay protection for peer messages, pure: decides whether an authenticated
// message is new or a copy of one already taken (docs/cluster.md, "Replay
// protection"). The envelope proves a message was made by a holder of the
// cluster secret; this decides that it is not an old one sent again.
//
// Every message names its sender (from_id), the sender's incarnation (larger
// on every restart), a sequence number (1, 2, 3... over everything the sender
// sent during that incarnation, whatever the destination) and the sender's
// system clock when it sent it (sent_at_us). A message is taken when:
//   - its seq is above 0 (0: a sender without replay protection, taken only
//     with accept_unsequenced, for a rolling upgrade);
//   - its sent_at_us is within max_age_us of the receiver's clock, either way
//     (0: no clock check). This bounds what a receiver with no state about
//     the sender (it restarted, or forgot the sender) can be made to take;
//   - its incarnation is not below the newest seen from that sender (a higher
//     one starts a new window: the sender restarted);
//   - its seq is above the highest seen in that incarnation, or within
//     kWindowSeqs below it and not seen yet (a sliding bitmap, as IPsec's and
//     DTLS's anti-replay windows: reordering of up to kWindowSeqs messages is
//     tolerated, duplicates are not).
// A sender's entry is kept until the table holds max_senders and a new sender
// appears; then the least recently heard is dropped (counted): messages from
// it within max_age_us could be taken once more.
//
// The receiver's clock is an argument: nothing here reads a clock. Not
// thread-safe; owned by the ClusterNode that consults it.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/time.h"

namespace rlimit::core {

struct ReplayWindowOptions {
  // Off only where a harness feeds the same payload on purpose (benchmarks).
  bool enabled = true;
  // How far a message's sent_at_us may be from the receiver's clock; 0 turns
  // the clock check off (the window alone then protects a receiver that
  // remembers the sender).
  TimeUs max_age_us = 60 * kUsPerSecond;
  // Take messages with seq 0 (from nodes that predate replay protection).
  bool accept_unsequenced = false;
  // Senders remembered; past this the least recently heard is forgotten.
  std::uint32_t max_senders = 8192 + 64;
};

enum class ReplayVerdict {
  kFresh,               // taken
  kUnsequenced,         // seq 0, taken (accept_unsequenced)
  kRefusedUnsequenced,  // seq 0, refused
  kDuplicate,           // this (sender, incarnation, seq) was taken before
  kBelowWindow,         // seq more than kWindowSeqs below the highest taken
  kOldIncarnation,      // an incarnation below the newest seen from the sender
  kStale,               // sent_at_us more than max_age_us before the receiver's clock
  kFuture,              // sent_at_us more than max_age_us after the receiver's clock
};
const char* replay_verdict_name(ReplayVerdict verdict);
inline bool replay_taken(ReplayVerdict verdict) {
  return verdict == ReplayVerdict::kFresh || verdict == ReplayVerdict::kUnsequenced;
}

struct ReplayStats {
  std::uint64_t fresh = 0;
  std::uint64_t unsequenced_accepted = 0;
  std::uint64_t unsequenced_refused = 0;
  std::uint64_t duplicates = 0;
  std::uint64_t below_window = 0;
  std::uint64_t old_incarnation = 0;
  std::uint64_t stale = 0;
  std::uint64_t future = 0;
  std::uint64_t senders_evicted = 0;  // forgotten because of max_senders
  // Every message refused (the sum of the refusals above).
  std::uint64_t refused() const {
    return unsequenced_refused + duplicates + below_window + old_incarnation + stale + future;
  }
};

class ReplayWindow {
 public:
  // Sequence numbers a sender's window spans below its highest.
  static constexpr std::uint64_t kWindowSeqs = 1024;

  explicit ReplayWindow(ReplayWindowOptions options = {}) : options_(options) {}

  // Decides on one message and, if it is taken, records it. `now_us` is the
  // receiver's system clock (microseconds since the Unix epoch).
  ReplayVerdict check(std::string_view sender, std::uint64_t incarnation, std::uint64_t seq,
                      TimeUs sent_at_us, TimeUs now_us);

  const ReplayStats& stats() const { return stats_; }
  std::size_t senders() const { return senders_.size(); }
  const ReplayWindowOptions& options() const { return options_; }

 private:
  struct Sender {
    std::uint64_t incarnation = 0;
    std::uint64_t highest = 0;      // highest seq taken in this incarnation
    std::bitset<kWindowSeqs> seen;  // bit i: seq highest - i was taken
    TimeUs last_taken_us = 0;       // receiver's clock
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  ReplayVerdict count(ReplayVerdict verdict);
  void evict_one();

  ReplayWindowOptions options_;
  ReplayStats stats_;
  std::unordered_map<std::string, Sender, Hash, std::equal_to<>> senders_;
};

}  // namespace rlimit::core
