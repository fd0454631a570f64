// One node of a cluster, pure: ties the Limiter's per-origin consumption
// counters to membership and gossip. The shell (or the simulator) feeds it
// received payloads and clock ticks and sends what it puts in the outbox;
// nothing here touches a socket, a clock or a thread.
//
// Gossip: every gossip_interval_us the counters that changed (locally or by
// news from a peer) are sent to `fanout` random live peers (every live peer
// when fanout is 0: the mesh mode), packed into payloads of at most
// max_payload_bytes, most recently changed first; what does not fit waits for
// the next round. Every node that learns of a change pushes it for a few
// rounds (enough that each node receives about ln(n) + ln(100) copies), so it
// spreads epidemically; only a key's changed entries are pushed. Every
// anti_entropy_interval_us, one random live peer gets a slice of all retained
// counters and answers with what it knows better, which repairs anything lost.
//
// Owner routing (options.owners_per_key > 0, while this node sees at least
// routed_min_members members; docs/cluster.md, "Owner routing"): a key with
// at most routed_max_origins entries is not gossiped. A node
// sends its own changed entry of such a key to the key's owners (rendezvous
// hashing over the live members, key_owners.h); an owner sends the key's
// changed entries to the key's other origins that are live members and to
// the other owners, and every entry of the key to an origin new to it. Each
// is sent once; anti-entropy pushes routed keys to their first owner, whose
// answer repairs what was lost. Keys with more origins are gossiped as
// above: every path carries the same max-merged counters.
//
// Not thread-safe: the same event loop that drives the Limiter drives this.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/key_owners.h"
#include "core/limiter.h"
#include "core/membership.h"
#include "core/replay_window.h"
#include "core/rules_sync.h"
#include "core/time.h"
#include "google/protobuf/arena.h"

namespace rlimit::core {

struct ClusterOptions {
  std::string cluster_name = "rlimit";
  // Mixed with the cluster's name into the seed of fair shares' draws
  // (ShareView::draw_seed), the same at every node; the simulator sets its
  // run's seed, so that its seeds draw apart.
  std::uint64_t share_draw_seed = 0;
  MembershipOptions membership;  // node_id, address, incarnation, seeds, SWIM timers
  TimeUs gossip_interval_us = 20'000;
  std::uint32_t fanout = 3;                     // 0: every live peer (mesh)
  std::uint32_t max_payload_bytes = 1400 - 37;  // MTU minus the envelope
  std::uint32_t max_packets_per_round = 16;     // per peer per gossip round; rest waits (counted)
  // Rounds each change is pushed for; 0: ceil((ln(live + 1) + ln(100)) /
  // peers per round), at least 2.
  std::uint32_t retransmit_rounds = 0;
  TimeUs anti_entropy_interval_us = 1'000'000;
  std::uint32_t anti_entropy_entries = 2048;  // counters per anti-entropy push
  // The exchange of rule sets (rules_sync.h); its max_payload_bytes is
  // replaced by the one above.
  RulesSyncOptions rules_sync;
  // Which received messages are taken (replay_window.h).
  ReplayWindowOptions replay;
  // What peers may make the limiter's ledger hold (set at start).
  Ledger::Bounds ledger_bounds;
  // Owner routing (above): owners per key, 0 to gossip every key; at most
  // KeyOwners::kMaxOwners.
  std::uint32_t owners_per_key = 2;
  // Routing engages only while this node sees at least this many live
  // members (itself included): in a smaller cluster gossip costs little and
  // is one hop faster (100 nodes, one global key: routing its first origins
  // under-admitted 0.03-0.07% more over four seeds). 1: always.
  std::uint32_t routed_min_members = 128;
  // A key with more entries (origins) than this is gossiped.
  std::uint32_t routed_max_origins = 16;
};

struct ClusterStats {
  std::uint64_t packets_out = 0;
  std::uint64_t bytes_out = 0;
  std::uint64_t packets_in = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t malformed_payloads = 0;  // did not decode
  std::uint64_t foreign_cluster = 0;     // another cluster's name
  std::uint64_t entries_sent = 0;
  std::uint64_t entries_received = 0;
  std::uint64_t entries_applied = 0;  // raised a counter
  std::uint64_t tokens_charged_remote = 0;
  std::uint64_t gossip_rounds = 0;
  std::uint64_t gossip_backlog_deferred = 0;  // rounds that left changes for later
  std::uint64_t anti_entropy_pushes = 0;
  std::uint64_t piggyback_trimmed = 0;  // membership records left off a full payload
  // Balances (docs/cluster.md, "Balances after a partition").
  std::uint64_t balances_sent = 0;  // keys sent with a balance (per peer)
  std::uint64_t balances_received = 0;
  std::uint64_t balances_raised = 0;        // received balances that raised our bucket
  std::uint64_t reset_floors_received = 0;  // floors of resets (docs/cluster.md, "Reset")
  // Replay protection (replay_window.h): messages refused, by cause, before
  // anything in them was used; and the unsequenced ones taken.
  std::uint64_t replay_duplicates = 0;
  std::uint64_t replay_below_window = 0;
  std::uint64_t replay_old_incarnation = 0;
  std::uint64_t replay_stale = 0;
  std::uint64_t replay_future = 0;
  std::uint64_t replay_unsequenced_refused = 0;
  std::uint64_t replay_unsequenced_accepted = 0;
  std::uint64_t replay_senders_evicted = 0;  // forgotten: the window held max_senders
  std::uint64_t misdirected = 0;             // to_id named another node
  // Owner routing: entries sent by gossip (to random peers), entries of
  // routed keys sent to their owners, and entries an owner sent on to a
  // key's origins and co-owners (of which whole keys sent to an origin new
  // to them); each counted once per destination.
  std::uint64_t entries_gossiped = 0;
  std::uint64_t routed_entries_to_owners = 0;
  std::uint64_t routed_entries_forwarded = 0;
  std::uint64_t routed_newcomer_keys = 0;
};

// A payload to deliver to `address` (a serialized peer::v1::PeerMessage; the
// shell wraps it in the authenticated envelope).
struct OutPacket {
  std::string address;
  std::string payload;
};

class ClusterNode {
 public:
  // `limiter` must outlive the node and must have been built with
  // LimiterOptions::replicated = true. `seed` drives every random choice.
  ClusterNode(ClusterOptions options, Limiter& limiter, std::uint64_t seed);

  void start(TimeUs now);
  // One received payload (already authenticated by the shell). It is used
  // only if the replay window takes it (replay_window.h).
  void on_payload(std::string_view payload, TimeUs now);
  // The system clock (microseconds since the Unix epoch) minus the `now`
  // this node is given: what stamps sent messages (sent_at_us) and judges
  // received ones. The shell sets it before every event; 0 (the default)
  // makes `now` itself the system clock (the simulator).
  void set_system_clock_offset_us(TimeUs offset_us) { system_clock_offset_us_ = offset_us; }
  // Timers: gossip rounds, anti-entropy, membership. Call every few ms.
  void tick(TimeUs now);
  // Announces that this node leaves; send the outbox before exiting.
  void leave(TimeUs now);

  // What to send; the caller takes it and leaves it empty.
  std::vector<OutPacket>& outbox() { return outbox_; }

  const Membership& membership() const { return membership_; }

  // Rules across the cluster (rules_sync.h): the rule set in force here,
  // advertised on every message from now on, and served to peers that ask.
  void set_rules(RulesVersion version, std::string text) {
    rules_sync_.set_local(std::move(version), std::move(text));
  }
  // A newer rule set received whole from a peer, for the shell to check and
  // apply (then set_rules) or refuse (refuse_rules).
  std::optional<RulesSync::Received> take_received_rules() { return rules_sync_.take_received(); }
  void refuse_rules(const RulesVersion& version) { rules_sync_.refuse(version); }
  void retry_rules_later(const RulesVersion& version, TimeUs now) {
    rules_sync_.retry_later(version, now);
  }
  const RulesSync& rules_sync() const { return rules_sync_; }
  const ClusterStats& stats() const { return stats_; }
  const ClusterOptions& options() const { return options_; }
  const ReplayWindow& replay_window() const { return replay_; }

 private:
  void send(OutMessage message);
  // Sends `body` (a serialized PeerMessage holding only its body field) to
  // the member `to` behind this node's header and piggybacked news: the body
  // is serialized once for all the peers of a gossip round.
  void send_body(const Member& to, const std::string& body);
  // Sets the header fields of `m` (with the next seq, the clock and `to_id`),
  // adds piggybacked news if it has none and trims the news until `m` and
  // `body_bytes` more fit in a payload.
  void prepare(peer::v1::PeerMessage& m, std::size_t body_bytes, const std::string& to_id);
  // Asks the replay window about `message` and counts a refusal.
  bool take(const peer::v1::PeerMessage& message, TimeUs now);
  void emit(std::string address, std::string payload);
  // Bytes of a payload that counters may fill.
  std::size_t counter_budget() const;
  // What rides with each packed key's entries as of `now` (Limiter::key_news:
  // its balance, the age of its news).
  std::function<Limiter::KeyNews(std::string_view, const Ledger::KeyState&, bool)> news_of(
      TimeUs now) const;
  void gossip_round(TimeUs now);
  void anti_entropy(TimeUs now);
  // Owner routing: whether a key is routed, and the owners of live members
  // brought up to date with the membership. A key this node's fair share
  // made crowded (FairShare::crowded) is not: many nodes ask for it, most of
  // them perhaps without an entry yet (their strict shares refused), and
  // routing would send its news to none of them (docs/cluster.md, "Keys new
  // at once").
  bool routed(const Ledger::KeyState& state, TimeUs now) const {
    return routing_ && state.entries.size() <= options_.routed_max_origins &&
           (state.share == nullptr || !state.share->crowded(now));
  }
  // Whether owner routing is on with `members` live members (this node
  // included): owners_per_key > 0 and routed_min_members met.
  bool routing_with(std::size_t members) const {
    return options_.owners_per_key > 0 && members >= options_.routed_min_members;
  }
  // Decides whether routing is on for this round (routing_with) and, if so,
  // brings key_owners_ up to date with
  // the live members; we are index kSelfOwner.
  void refresh_owners();
  static constexpr std::uint32_t kSelfOwner = 0;
  // The peer the owners index `i` (not kSelfOwner) names; nullptr if it is gone.
  const Member* owner_member(std::uint32_t i) const {
    return membership_.member(key_owners_.id(i));
  }
  // Counts the entries and balances of `packet`, sent `copies` times.
  void count_sent(const peer::v1::PeerMessage& packet, std::uint64_t copies);
  void on_counters(const peer::v1::PeerMessage& message, TimeUs now);
  // Sends what rules_sync_ put in its outbox.
  void send_rules_out();

  ClusterOptions options_;
  // The cluster's seed of fair shares' draws (ShareView::draw_seed), from
  // options_.cluster_name and share_draw_seed.
  std::uint64_t share_draw_seed_;
  Limiter& limiter_;
  std::mt19937_64 rng_;
  Membership membership_;
  Outbox membership_out_;
  RulesSync rules_sync_;
  std::vector<OutPacket> outbox_;
  ClusterStats stats_;
  TimeUs next_gossip_us_ = 0;
  TimeUs next_anti_entropy_us_ = 0;
  ReplayWindow replay_;
  std::uint64_t next_seq_ = 1;         // of the next message sent
  TimeUs now_us_ = 0;                  // the latest `now` given (stamps sends)
  TimeUs system_clock_offset_us_ = 0;  // see set_system_clock_offset_us
  // Received payloads are parsed on this arena, reset before each parse:
  // no per-entry frees (a reused heap message would delete its Counters body
  // and every key string before each parse), and no allocation at all while
  // a payload fits in the initial block.
  static constexpr std::size_t kArenaBlockBytes = 16 * 1024;
  std::unique_ptr<char[]> arena_block_;
  google::protobuf::Arena arena_;
  peer::v1::PeerMessage header_;                   // reused by send_body
  std::vector<std::uint32_t> origin_slots_;        // on_counters: payload origin -> ledger index
  bool routing_ = false;                           // owner routing on this round (refresh_owners)
  KeyOwners key_owners_;                           // over the live members and us
  std::uint64_t key_owners_version_ = UINT64_MAX;  // membership's live_version() at refresh
  std::vector<std::uint32_t> owners_scratch_;
  std::vector<const Member*> route_destinations_;
};

}  // namespace rlimit::core
