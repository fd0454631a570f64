// Cluster membership in the SWIM family, pure: messages and `now` in,
// messages out. A node joins through any live seed and learns the rest by
// gossip piggybacked on every message; failure detection is a direct probe,
// then indirect probes through k peers, then suspicion with a timeout after
// which the member is declared dead. A member refutes a suspicion about
// itself by raising its seq. Graceful leave is announced.
//
// Versions: (incarnation, seq), compared lexicographically. `incarnation`
// changes only when a process restarts (the shell passes a fresh, larger value
// at start); `seq` rises when the member refutes. Update precedence, for a
// member at version v:
//   ALIVE(w)   applies if w > v
//   SUSPECT(w) applies if w > v, or w == v and the member is ALIVE
//   DEAD(w) / LEFT(w) apply if w >= v and the member is not DEAD/LEFT already
// About itself, a node ignores DEAD/SUSPECT news by raising seq above it and
// announcing ALIVE (unless it is leaving). Older bad news about itself (below
// its version) is not refuted again, but its current ALIVE record is announced
// again: whoever passes such news on never got that record.
//
// Healing a partition: every join_retry_interval a node pings one member it
// thinks DEAD; a message to a DEAD member carries that member's record and
// ours, so both sides learn each other's newer versions in one round trip.
// Every rejoin_interval a node also sends Join to one seed that is not a live
// member, which brings back members forgotten after dead_retention.
//
// Table sync: news piggybacked a few records per message spreads a mass join
// slowly (1,000 nodes started at once: some still knew under 300 members after
// 10 s). So every Ping and direct Ack carries a digest of the sender's live
// members; a receiver whose digest differs and who knows at least as many
// live members sends its whole table, at most once per table_sync_interval.
// A stable cluster pays about 12 bytes per Ping and Ack; views that differ
// meet within a probe or two.
//
// Not thread-safe; deterministic given the seed and the inputs.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/time.h"
#include "rlimit/v1/peer.pb.h"

namespace rlimit::core {

enum class MemberState { kAlive, kSuspect, kDead, kLeft };
const char* member_state_name(MemberState state);
// ALIVE or SUSPECT: may receive traffic.
inline bool is_live(MemberState state) {
  return state == MemberState::kAlive || state == MemberState::kSuspect;
}

struct Member {
  std::string id;
  std::string address;  // host:port of its peer socket
  MemberState state = MemberState::kAlive;
  std::uint64_t incarnation = 0;
  std::uint64_t seq = 0;
  TimeUs state_since_us = 0;  // when this node learned the current state
  TimeUs last_heard_us = 0;   // last message received from it directly; 0 never
};

struct MembershipOptions {
  std::string node_id;
  std::string address;                 // our own host:port as peers should reach it
  std::uint64_t incarnation = 0;       // larger on every restart (the shell uses start time)
  std::vector<std::string> seeds;      // host:port; our own address is skipped
  TimeUs probe_interval_us = 500'000;  // one probe per interval (round-robin)
  TimeUs probe_timeout_us = 200'000;   // direct ack deadline, then indirect probes
  std::uint32_t indirect_probes = 3;   // k
  TimeUs suspicion_timeout_us = 2'000'000;
  TimeUs join_retry_interval_us = 1'000'000;  // re-send Join to seeds until joined
  TimeUs dead_retention_us = 60'000'000;      // forget DEAD/LEFT members after this
  // Join again through one seed that is not a live member, one seed per
  // interval: after a partition longer than dead_retention_us each side has
  // forgotten the other and has live peers, so nothing else reconnects them.
  // 0: never.
  TimeUs rejoin_interval_us = 10'000'000;
  // At most one whole table sent per interval to a member whose live set
  // differs (table sync, above); 0: never. Tables not sent for it are counted.
  TimeUs table_sync_interval_us = 1'000'000;
  std::uint32_t max_members = 4096;   // bound; extra members are dropped and counted
  std::uint32_t max_piggyback = 8;    // member updates added per message
  std::uint32_t retransmit_mult = 3;  // each update is piggybacked mult*ceil(log2(n+1)) times
};

struct MembershipStats {
  std::uint64_t probes_sent = 0;
  std::uint64_t indirect_probes_sent = 0;
  std::uint64_t acks_received = 0;
  std::uint64_t suspicions = 0;       // members this node marked SUSPECT
  std::uint64_t deaths = 0;           // members this node marked DEAD (timeout or news)
  std::uint64_t refutations = 0;      // times this node refuted news about itself
  std::uint64_t reannouncements = 0;  // older bad news about itself answered with its record
  std::uint64_t joins_sent = 0;
  std::uint64_t rejoins_sent = 0;        // Joins to a seed that was not a live member
  std::uint64_t members_over_bound = 0;  // updates dropped because of max_members
  std::uint64_t stale_updates = 0;       // updates older than what we know
  std::uint64_t tables_sent = 0;         // whole tables sent to a member whose live set differed
  std::uint64_t tables_not_sent = 0;     // ... not sent: one was sent within table_sync_interval
};

// A message to send: `message` has its body and piggybacked members set; the
// caller (ClusterNode) fills the cluster/from fields and serializes it.
struct OutMessage {
  std::string address;
  peer::v1::PeerMessage message;
  // The receiver's node id when known (the message's to_id); empty for a
  // message to an address only (a Join to a seed).
  std::string to_id = {};
};
using Outbox = std::vector<OutMessage>;

class Membership {
 public:
  // `seed` drives every random choice (probe order, indirect helpers).
  Membership(MembershipOptions options, std::uint64_t seed);
  // Out of line (membership.cc must say `Membership::~Membership() = default;`)
  // because the private record types below are complete only there.
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Sends Join to every seed (except ourselves). Call once.
  void start(TimeUs now, Outbox& out);

  // Handles one received message: its piggybacked members, and its body when
  // the body is membership's (Ping, PingReq, Ack, Join, JoinReply, Leave).
  // Any message from a member counts as hearing from it. Counters bodies are
  // left to the caller.
  void on_message(const peer::v1::PeerMessage& message, TimeUs now, Outbox& out);

  // Runs timers: probes, probe and suspicion timeouts, join retries, and
  // forgetting long-dead members. Call at least every probe_timeout_us / 4.
  void tick(TimeUs now, Outbox& out);

  // Announces LEFT to every live member; afterwards the node refutes nothing.
  void leave(TimeUs now, Outbox& out);

  // Adds up to max_piggyback pending updates to `message`.
  void add_piggyback(peer::v1::PeerMessage& message);

  // Members other than us that may receive traffic: ALIVE or SUSPECT. Kept
  // between calls and rebuilt after any member changes state, joins or is
  // forgotten; the reference is valid until the next non-const call.
  const std::vector<const Member*>& live_peers() const;
  // Changes whenever live_peers() was rebuilt (read it after live_peers()):
  // what was computed from the live members is stale when it differs.
  std::uint64_t live_version() const { return live_version_; }
  // A digest of the live members' ids and incarnations, ourselves included
  // (table sync, above): equal digests, same live set.
  std::uint64_t live_digest() const;
  // Everyone we know, ourselves first.
  const std::vector<Member>& members() const { return members_; }
  const Member& self() const { return members_.front(); }
  // The member with this id (ourselves included), nullptr if unknown or
  // forgotten. O(1): an index by id kept in step with members().
  const Member* member(std::string_view id) const { return find(id); }
  // True once any other member has been heard from (or there are no seeds).
  bool joined() const { return joined_; }
  const MembershipStats& stats() const { return stats_; }

 private:
  // Implementation-defined; see membership.cc.
  struct Probe;
  struct PendingUpdate;
  struct IndirectRequest;

  Member* find(std::string_view id);
  const Member* find(std::string_view id) const;
  // nullptr (and counted) when the table is at max_members.
  Member* add_member(const std::string& id, const std::string& address, MemberState state,
                     std::uint64_t incarnation, std::uint64_t seq, TimeUs now);
  void remove_member(std::size_t index);
  void heard_from(const peer::v1::PeerMessage& message, TimeUs now);
  // `spread`: queue what changed for piggybacking.
  void apply(const peer::v1::MemberUpdate& update, TimeUs now, bool spread);
  void apply_about_self(MemberState state, std::uint64_t incarnation, std::uint64_t seq);
  void enqueue(const std::string& id);
  // Adds queued updates up to max_piggyback (records already present count
  // and are not repeated). `to_id` is the receiver: if we suspect it or think
  // it dead, its own record goes first so it can refute at once.
  void piggyback(peer::v1::PeerMessage& message, std::string_view to_id);
  void send(Outbox& out, const std::string& address, std::string_view to_id,
            peer::v1::PeerMessage message);
  bool has_seeds() const;
  void send_joins(Outbox& out);
  // A Join carrying our own record and pending updates.
  peer::v1::PeerMessage join_message();
  void rejoin(Outbox& out);
  // Our whole table in JoinReply messages (answers a Join; a table sync).
  void send_table(const std::string& address, Outbox& out) const;
  // A Ping with our live digest.
  peer::v1::PeerMessage ping_message(std::uint64_t probe_id) const;
  // Live members, ourselves included.
  std::uint32_t live_members() const { return static_cast<std::uint32_t>(live_peers().size() + 1); }
  // Sets a Ping's or an Ack's live_digest and live_members (table sync).
  template <typename Body>
  void stamp_live(Body& body) const {
    body.set_live_digest(live_digest());
    body.set_live_members(live_members());
  }
  // Table sync: the sender of a Ping or direct Ack told its live digest.
  void sync_table(const peer::v1::PeerMessage& message, std::uint64_t their_digest,
                  std::uint32_t their_live_members, TimeUs now, Outbox& out);
  void on_ping_req(const peer::v1::PeerMessage& message, TimeUs now, Outbox& out);
  void on_ack(const peer::v1::PeerMessage& message, Outbox& out);
  void start_probe(TimeUs now, Outbox& out);
  void check_probes(TimeUs now, Outbox& out);
  void reconnect(Outbox& out);
  void expire(TimeUs now);
  // Lowers next_expiry_us_ to when `m` (just given its state_since_us) can
  // expire, if it can.
  void note_state_since(const Member& m);
  // Gives `m` a new state as of `now` (every other member's state change
  // goes through here; our own record changes only in start() and leave()).
  void set_state(Member& m, MemberState state, TimeUs now);

  // Transparent hashing, so find(string_view) allocates nothing.
  struct IdHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  MembershipOptions options_;
  std::mt19937_64 rng_;
  std::vector<Member> members_;  // [0] is self
  // Member id -> its index in members_, kept in step by add_member and
  // remove_member (the only places members_ grows or shrinks; ids never
  // change). Only looked up, never iterated: order stays members_'s.
  std::unordered_map<std::string, std::size_t, IdHash, std::equal_to<>> index_;
  bool joined_ = false;
  bool leaving_ = false;
  MembershipStats stats_;
  std::vector<Probe> probes_;
  std::vector<PendingUpdate> pending_updates_;
  std::vector<IndirectRequest> indirect_requests_;
  std::vector<std::size_t> probe_order_;
  std::size_t probe_cursor_ = 0;
  TimeUs next_probe_us_ = 0;
  static constexpr TimeUs kNever = INT64_MAX;
  // No suspect or gone member expires before this (a lower bound).
  TimeUs next_expiry_us_ = kNever;
  mutable std::vector<const Member*> live_peers_;  // live_peers(), while valid
  mutable bool live_peers_valid_ = false;
  mutable std::uint64_t live_version_ = 0;
  mutable std::uint64_t live_digest_ = 0;  // live_digest(), computed with live_peers_
  TimeUs next_table_us_ = 0;               // table sync: no table sent before this
  TimeUs next_join_us_ = 0;
  TimeUs next_rejoin_us_ = 0;
  std::size_t rejoin_cursor_ = 0;
  std::uint64_t next_probe_id_ = 1;
};

}  // namespace rlimit::core
