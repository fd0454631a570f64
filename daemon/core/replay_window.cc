#include "core/replay_window.h"

namespace rlimit::core {

const char* replay_verdict_name(ReplayVerdict verdict) {
  switch (verdict) {
    case ReplayVerdict::kFresh:
      return "fresh";
    case ReplayVerdict::kUnsequenced:
      return "unsequenced";
    case ReplayVerdict::kRefusedUnsequenced:
      return "unsequenced (refused)";
    case ReplayVerdict::kDuplicate:
      return "duplicate";
    case ReplayVerdict::kBelowWindow:
      return "below the window";
    case ReplayVerdict::kOldIncarnation:
      return "old incarnation";
    case ReplayVerdict::kStale:
      return "stale";
    case ReplayVerdict::kFuture:
      return "from the future";
  }
  return "unknown";
}

ReplayVerdict ReplayWindow::count(ReplayVerdict verdict) {
  switch (verdict) {
    case ReplayVerdict::kFresh:
      ++stats_.fresh;
      break;
    case ReplayVerdict::kUnsequenced:
      ++stats_.unsequenced_accepted;
      break;
    case ReplayVerdict::kRefusedUnsequenced:
      ++stats_.unsequenced_refused;
      break;
    case ReplayVerdict::kDuplicate:
      ++stats_.duplicates;
      break;
    case ReplayVerdict::kBelowWindow:
      ++stats_.below_window;
      break;
    case ReplayVerdict::kOldIncarnation:
      ++stats_.old_incarnation;
      break;
    case ReplayVerdict::kStale:
      ++stats_.stale;
      break;
    case ReplayVerdict::kFuture:
      ++stats_.future;
      break;
  }
  return verdict;
}

void ReplayWindow::evict_one() {
  // Linear, but only when the table is full and an unknown sender holding
  // the cluster secret speaks: rare by construction.
  auto oldest = senders_.begin();
  for (auto it = senders_.begin(); it != senders_.end(); ++it) {
    if (it->second.last_taken_us < oldest->second.last_taken_us) oldest = it;
  }
  if (oldest == senders_.end()) return;
  senders_.erase(oldest);
  ++stats_.senders_evicted;
}

ReplayVerdict ReplayWindow::check(std::string_view sender, std::uint64_t incarnation,
                                  std::uint64_t seq, TimeUs sent_at_us, TimeUs now_us) {
  if (!options_.enabled) return count(ReplayVerdict::kFresh);
  if (seq == 0) {
    return count(options_.accept_unsequenced ? ReplayVerdict::kUnsequenced
                                             : ReplayVerdict::kRefusedUnsequenced);
  }
  if (options_.max_age_us > 0) {
    // Differences of two int64 clocks may overflow on garbage; compare in a
    // way that cannot.
    if (sent_at_us < now_us && now_us - options_.max_age_us > sent_at_us) {
      return count(ReplayVerdict::kStale);
    }
    if (sent_at_us > now_us && sent_at_us - options_.max_age_us > now_us) {
      return count(ReplayVerdict::kFuture);
    }
  }
  auto it = senders_.find(sender);
  if (it == senders_.end()) {
    if (senders_.size() >= options_.max_senders) evict_one();
    Sender& fresh = senders_[std::string(sender)];
    fresh.incarnation = incarnation;
    fresh.highest = seq;
    fresh.seen.set(0);
    fresh.last_taken_us = now_us;
    return count(ReplayVerdict::kFresh);
  }
  Sender& s = it->second;
  if (incarnation < s.incarnation) return count(ReplayVerdict::kOldIncarnation);
  if (incarnation > s.incarnation) {
    // The sender restarted: its sequence starts again.
    s.incarnation = incarnation;
    s.highest = seq;
    s.seen.reset();
    s.seen.set(0);
    s.last_taken_us = now_us;
    return count(ReplayVerdict::kFresh);
  }
  if (seq > s.highest) {
    const std::uint64_t shift = seq - s.highest;
    if (shift >= kWindowSeqs) {
      s.seen.reset();
    } else {
      s.seen <<= static_cast<std::size_t>(shift);
    }
    s.seen.set(0);
    s.highest = seq;
    s.last_taken_us = now_us;
    return count(ReplayVerdict::kFresh);
  }
  const std::uint64_t behind = s.highest - seq;
  if (behind >= kWindowSeqs) return count(ReplayVerdict::kBelowWindow);
  if (s.seen.test(static_cast<std::size_t>(behind))) return count(ReplayVerdict::kDuplicate);
  s.seen.set(static_cast<std::size_t>(behind));
  s.last_taken_us = now_us;
  return count(ReplayVerdict::kFresh);
}

}  // namespace rlimit::core
