// SWIM membership: probes, indirect probes, suspicion, refutation, joins and
// gossip of member records piggybacked on every message. See membership.h for
// the protocol and the update precedence.
#include "core/membership.h"

#include <algorithm>
#include <cassert>
#include <compare>
#include <optional>
#include <utility>

#include "core/stable_hash.h"

namespace rlimit::core {

using peer::v1::MemberUpdate;
using peer::v1::PeerMessage;

struct Membership::Probe {
  std::uint64_t probe_id = 0;
  std::string target_id;
  TimeUs indirect_at_us = 0;  // no direct ack by then: ask helpers
  TimeUs deadline_us = 0;     // no ack at all by then: suspect the target
  bool indirect_sent = false;
};

// One per member: the record sent is the member's state at send time, so a
// newer change replaces an older one instead of racing it.
struct Membership::PendingUpdate {
  std::string node_id;
  std::uint32_t transmissions = 0;
  std::uint64_t queued = 0;  // larger is newer: among equals, the newest goes first
};

// A PingReq we serve as a helper: our own Ping to the target, and whom to
// forward its Ack to.
struct Membership::IndirectRequest {
  std::uint64_t probe_id = 0;           // ours, in the Ping to the target
  std::uint64_t original_probe_id = 0;  // the requester's
  std::string requester_id;
  std::string requester_address;
  std::string target_id;
  TimeUs expires_us = 0;
};

namespace {

// Member records per JoinReply: with the message's own fields and the
// envelope the datagram stays under a 1400-byte MTU.
constexpr std::size_t kJoinReplyMemberBytes = 1300;
// PingReqs a helper serves at once. A burst beyond this ages out the oldest
// (whose requester is about to give up anyway) instead of growing memory.
constexpr std::size_t kMaxIndirectRequests = 1024;
// A helper forgets a PingReq after this many probe timeouts: by then the
// requester's probe has ended.
constexpr TimeUs kIndirectRequestLifetimeTimeouts = 3;

struct Version {
  std::uint64_t incarnation = 0;
  std::uint64_t seq = 0;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  auto operator<=>(const Version&) const = default;
};

Version version_of(const Member& m) { return {m.incarnation, m.seq}; }

bool is_gone(MemberState state) {
  return state == MemberState::kDead || state == MemberState::kLeft;
}

MemberUpdate::State to_wire(MemberState state) {
  switch (state) {
    case MemberState::kAlive:
      return MemberUpdate::ALIVE;
    case MemberState::kSuspect:
      return MemberUpdate::SUSPECT;
    case MemberState::kDead:
      return MemberUpdate::DEAD;
    case MemberState::kLeft:
      return MemberUpdate::LEFT;
  }
  return MemberUpdate::ALIVE;
}

// Empty for a value this build does not know: proto3 enums are open, and a
// newer peer may send one.
std::optional<MemberState> from_wire(int state) {
  switch (state) {
    case MemberUpdate::ALIVE:
      return MemberState::kAlive;
    case MemberUpdate::SUSPECT:
      return MemberState::kSuspect;
    case MemberUpdate::DEAD:
      return MemberState::kDead;
    case MemberUpdate::LEFT:
      return MemberState::kLeft;
    default:
      return std::nullopt;
  }
}

void fill_update(const Member& m, MemberUpdate& update) {
  update.set_node_id(m.id);
  update.set_address(m.address);
  update.set_state(to_wire(m.state));
  update.set_incarnation(m.incarnation);
  update.set_seq(m.seq);
}

// Written out rather than std::uniform_int_distribution / std::shuffle, whose
// algorithms differ between standard libraries: one seed, one run, anywhere.
std::size_t random_below(std::mt19937_64& rng, std::size_t n) {
  assert(n > 0);
  return static_cast<std::size_t>(rng() % n);
}

template <typename T>
void shuffle(std::vector<T>& items, std::mt19937_64& rng) {
  for (std::size_t i = items.size(); i > 1; --i) {
    std::swap(items[i - 1], items[random_below(rng, i)]);
  }
}

std::uint32_t ceil_log2(std::uint64_t n) {
  std::uint32_t bits = 0;
  while (bits < 63 && (std::uint64_t{1} << bits) < n) ++bits;
  return bits;
}

std::size_t varint_size(std::size_t value) {
  std::size_t bytes = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++bytes;
  }
  return bytes;
}

}  // namespace

const char* member_state_name(MemberState state) {
  switch (state) {
    case MemberState::kAlive:
      return "alive";
    case MemberState::kSuspect:
      return "suspect";
    case MemberState::kDead:
      return "dead";
    case MemberState::kLeft:
      return "left";
  }
  return "unknown";
}

Membership::Membership(MembershipOptions options, std::uint64_t seed)
    : options_(std::move(options)), rng_(seed) {
  assert(!options_.node_id.empty());
  Member self;
  self.id = options_.node_id;
  self.address = options_.address;
  self.state = MemberState::kAlive;
  self.incarnation = options_.incarnation;
  self.seq = 0;
  index_.emplace(self.id, 0);
  members_.push_back(std::move(self));
}

Membership::~Membership() = default;

void Membership::start(TimeUs now, Outbox& out) {
  members_.front().state_since_us = now;
  // A random phase, so nodes started together do not probe in lockstep.
  next_probe_us_ = now + static_cast<TimeUs>(
                             random_below(rng_, std::max<TimeUs>(options_.probe_interval_us, 1)));
  next_join_us_ = now + options_.join_retry_interval_us;
  next_rejoin_us_ = now + options_.rejoin_interval_us;
  if (!has_seeds()) {
    joined_ = true;  // nobody to join: a cluster of one until someone joins us
    return;
  }
  send_joins(out);
}

void Membership::on_message(const PeerMessage& message, TimeUs now, Outbox& out) {
  // Our own id: the seed list names us under another address, or another
  // process runs with our id. Its news may still be useful; its body is not.
  const bool from_self = message.from_id() == self().id;
  if (!from_self && !message.from_id().empty()) heard_from(message, now);
  // A JoinReply is the seed's table, not news: the seed spreads its own news,
  // and re-spreading thousands of known records would delay what is new.
  const bool spread = !message.has_join_reply();
  for (const MemberUpdate& update : message.members()) apply(update, now, spread);
  if (from_self || message.from_id().empty()) return;

  switch (message.body_case()) {
    case PeerMessage::kPing: {
      PeerMessage reply;
      peer::v1::Ack& ack = *reply.mutable_ack();
      ack.set_probe_id(message.ping().probe_id());
      stamp_live(ack);
      send(out, message.from_address(), message.from_id(), std::move(reply));
      sync_table(message, message.ping().live_digest(), message.ping().live_members(), now, out);
      break;
    }
    case PeerMessage::kPingReq:
      on_ping_req(message, now, out);
      break;
    case PeerMessage::kAck:
      on_ack(message, out);
      // A relayed Ack tells the target's answer, not the relay's digest.
      if (message.ack().target_id().empty()) {
        sync_table(message, message.ack().live_digest(), message.ack().live_members(), now, out);
      }
      break;
    case PeerMessage::kJoin:
      send_table(message.from_address(), out);
      break;
    case PeerMessage::kLeave: {
      Member* m = find(message.from_id());
      // A Leave from an earlier life of the node must not retire the
      // restarted one.
      if (m != nullptr && m->incarnation == message.from_incarnation() && !is_gone(m->state)) {
        set_state(*m, MemberState::kLeft, now);
        enqueue(m->id);
      }
      break;
    }
    default:
      break;  // JoinReply: its members were applied above; Counters: the caller's
  }
}

void Membership::tick(TimeUs now, Outbox& out) {
  if (!leaving_) {
    if (now >= next_join_us_) {
      next_join_us_ = now + options_.join_retry_interval_us;
      // Join until joined, and again whenever every peer is gone: a node cut
      // off from all its peers for longer than the suspicion timeout would
      // otherwise stay alone for good.
      if (has_seeds() && (!joined_ || live_peers().empty())) {
        send_joins(out);
      } else {
        reconnect(out);
      }
    }
    if (options_.rejoin_interval_us > 0 && now >= next_rejoin_us_) {
      next_rejoin_us_ = now + options_.rejoin_interval_us;
      if (joined_ && !live_peers().empty()) rejoin(out);
    }
    check_probes(now, out);
    if (now >= next_probe_us_) {
      start_probe(now, out);
      next_probe_us_ += std::max<TimeUs>(options_.probe_interval_us, 1);
      if (next_probe_us_ <= now) next_probe_us_ = now + options_.probe_interval_us;
    }
  }
  expire(now);
}

void Membership::leave(TimeUs now, Outbox& out) {
  if (leaving_) return;
  leaving_ = true;
  Member& self = members_.front();
  self.state = MemberState::kLeft;
  self.state_since_us = now;
  enqueue(self.id);
  for (const Member* peer : live_peers()) {
    PeerMessage message;
    message.mutable_leave();
    // In every Leave, not only while the queued update lasts.
    fill_update(self, *message.add_members());
    send(out, peer->address, peer->id, std::move(message));
  }
  probes_.clear();
}

void Membership::add_piggyback(PeerMessage& message) { piggyback(message, {}); }

const std::vector<const Member*>& Membership::live_peers() const {
  if (!live_peers_valid_) {
    live_peers_.clear();
    for (std::size_t i = 1; i < members_.size(); ++i) {
      if (is_live(members_[i].state)) live_peers_.push_back(&members_[i]);
    }
    live_peers_valid_ = true;
    ++live_version_;
    auto mix = [](const Member& m) { return splitmix64(fnv1a(m.id) ^ splitmix64(m.incarnation)); };
    live_digest_ = mix(self());
    for (const Member* peer : live_peers_) live_digest_ ^= mix(*peer);
  }
  return live_peers_;
}

std::uint64_t Membership::live_digest() const {
  live_peers();
  return live_digest_;
}

void Membership::sync_table(const PeerMessage& message, std::uint64_t their_digest,
                            std::uint32_t their_live_members, TimeUs now, Outbox& out) {
  if (their_digest == 0 || options_.table_sync_interval_us <= 0 || leaving_) return;
  if (their_digest == live_digest()) return;
  // Fewer live members than theirs: they surely know some we do not, and
  // their table comes our way when they hear our digest; ours then follows
  // if we still know some they do not.
  if (live_members() < their_live_members) return;
  if (now < next_table_us_) {
    ++stats_.tables_not_sent;
    return;
  }
  next_table_us_ = now + options_.table_sync_interval_us;
  ++stats_.tables_sent;
  send_table(message.from_address(), out);
}

PeerMessage Membership::ping_message(std::uint64_t probe_id) const {
  PeerMessage message;
  peer::v1::Ping& ping = *message.mutable_ping();
  ping.set_probe_id(probe_id);
  stamp_live(ping);
  return message;
}

Member* Membership::find(std::string_view id) {
  const auto it = index_.find(id);
  return it == index_.end() ? nullptr : &members_[it->second];
}

const Member* Membership::find(std::string_view id) const {
  const auto it = index_.find(id);
  return it == index_.end() ? nullptr : &members_[it->second];
}

Member* Membership::add_member(const std::string& id, const std::string& address, MemberState state,
                               std::uint64_t incarnation, std::uint64_t seq, TimeUs now) {
  if (members_.size() >= options_.max_members) {
    ++stats_.members_over_bound;
    return nullptr;
  }
  Member m;
  m.id = id;
  m.address = address;
  m.incarnation = incarnation;
  m.seq = seq;
  set_state(m, state, now);
  index_.emplace(m.id, members_.size());
  members_.push_back(std::move(m));
  // Somewhere in what is left of this round, as SWIM does, so a newcomer is
  // probed within one round rather than after the next reshuffle.
  const std::size_t remaining = probe_order_.size() - probe_cursor_;
  const std::size_t at = probe_cursor_ + random_below(rng_, remaining + 1);
  probe_order_.insert(probe_order_.begin() + static_cast<std::ptrdiff_t>(at), members_.size() - 1);
  return &members_.back();
}

void Membership::remove_member(std::size_t index) {
  assert(index > 0 && index < members_.size());
  const std::string id = members_[index].id;
  index_.erase(id);
  members_.erase(members_.begin() + static_cast<std::ptrdiff_t>(index));
  live_peers_valid_ = false;
  // Members after it moved down one place.
  for (std::size_t k = index; k < members_.size(); ++k) index_.find(members_[k].id)->second = k;
  std::erase_if(pending_updates_, [&](const PendingUpdate& p) { return p.node_id == id; });
  for (std::size_t k = 0; k < probe_order_.size();) {
    if (probe_order_[k] == index) {
      probe_order_.erase(probe_order_.begin() + static_cast<std::ptrdiff_t>(k));
      if (k < probe_cursor_) --probe_cursor_;
      continue;
    }
    if (probe_order_[k] > index) --probe_order_[k];
    ++k;
  }
}

void Membership::heard_from(const PeerMessage& message, TimeUs now) {
  joined_ = true;
  Member* m = find(message.from_id());
  if (m == nullptr) {
    // It talks to us, so it is alive; its seq we learn from its gossip.
    m = add_member(message.from_id(), message.from_address(), MemberState::kAlive,
                   message.from_incarnation(), 0, now);
    if (m == nullptr) return;
    m->last_heard_us = now;
    enqueue(m->id);
    return;
  }
  // A late message from an earlier life of that node says nothing about the
  // current one.
  if (message.from_incarnation() < m->incarnation) return;
  m->last_heard_us = now;
  if (message.from_incarnation() > m->incarnation) {
    // It restarted: whatever we believed (even DEAD or LEFT) was about its
    // previous life.
    m->incarnation = message.from_incarnation();
    m->seq = 0;
    if (!message.from_address().empty()) m->address = message.from_address();
    set_state(*m, MemberState::kAlive, now);
    enqueue(m->id);
  }
  // Same incarnation: a SUSPECT or DEAD record stays until the member refutes
  // with a higher seq, which it does once it hears the news (see piggyback).
}

void Membership::apply(const MemberUpdate& update, TimeUs now, bool spread) {
  const std::optional<MemberState> state = from_wire(update.state());
  if (update.node_id().empty() || !state) return;
  if (update.node_id() == self().id) {
    apply_about_self(*state, update.incarnation(), update.seq());
    return;
  }
  const Version w{update.incarnation(), update.seq()};
  Member* m = find(update.node_id());
  if (m == nullptr) {
    m = add_member(update.node_id(), update.address(), *state, w.incarnation, w.seq, now);
    if (m != nullptr && spread) enqueue(m->id);
    return;
  }
  const Version v = version_of(*m);
  bool applies = false;
  switch (*state) {
    case MemberState::kAlive:
      applies = w > v;
      break;
    case MemberState::kSuspect:
      applies = w > v || (w == v && m->state == MemberState::kAlive);
      break;
    case MemberState::kDead:
    case MemberState::kLeft:
      applies = w >= v && !is_gone(m->state);
      break;
  }
  if (!applies) {
    // The same record again is gossip doing its job; anything else is older
    // than what we know.
    if (!(w == v && *state == m->state)) ++stats_.stale_updates;
    return;
  }
  const MemberState before = m->state;
  if (w.incarnation > v.incarnation && !update.address().empty()) m->address = update.address();
  m->incarnation = w.incarnation;
  m->seq = w.seq;
  set_state(*m, *state, now);
  if (*state == MemberState::kDead && before != MemberState::kDead) ++stats_.deaths;
  if (spread) enqueue(m->id);
}

void Membership::apply_about_self(MemberState state, std::uint64_t incarnation, std::uint64_t seq) {
  Member& self = members_.front();
  const Version v = version_of(self);
  const Version w{incarnation, seq};
  if (state == MemberState::kAlive) {
    // The cluster knows a later seq of this incarnation (an earlier process
    // with the same incarnation refuted): continue above it so a future
    // refutation is not taken for stale.
    if (w.incarnation == v.incarnation && w.seq > v.seq) {
      self.seq = w.seq;
    } else if (w < v) {
      ++stats_.stale_updates;
    }
    return;
  }
  if (leaving_) return;
  if (w < v) {
    ++stats_.stale_updates;
    // Whoever still passes this on never got our newer record: it spread
    // while they were cut off from us (a partition during which we refuted a
    // suspicion on our side), and that record's retransmissions are spent.
    // Dropping the news would leave them believing it for good; announce our
    // record again instead. The news often comes straight from a holder (a
    // reconnect Ping carries its DEAD record of us), so our reply carries it.
    ++stats_.reannouncements;
    enqueue(self.id);
    return;
  }
  // News about a later incarnation than ours (our incarnation went backwards
  // across a restart) cannot be outranked by seq alone; the incarnation is the
  // shell's to choose, so this waits for that record to be forgotten.
  if (w.incarnation > v.incarnation) return;
  self.seq = std::max(self.seq, w.seq) + 1;
  ++stats_.refutations;
  enqueue(self.id);
}

void Membership::enqueue(const std::string& id) {
  std::uint64_t newest = 0;
  PendingUpdate* existing = nullptr;
  for (PendingUpdate& p : pending_updates_) {
    newest = std::max(newest, p.queued);
    if (p.node_id == id) existing = &p;
  }
  if (existing != nullptr) {
    // A new record of that member: spread it afresh.
    existing->transmissions = 0;
    existing->queued = newest + 1;
    return;
  }
  pending_updates_.push_back(PendingUpdate{id, 0, newest + 1});
}

void Membership::piggyback(PeerMessage& message, std::string_view to_id) {
  auto present = [&](std::string_view id) {
    return std::any_of(message.members().begin(), message.members().end(),
                       [&](const MemberUpdate& u) { return u.node_id() == id; });
  };
  auto room = [&]() -> std::size_t {
    const auto used = static_cast<std::size_t>(message.members_size());
    return used < options_.max_piggyback ? options_.max_piggyback - used : 0;
  };
  // The receiver is the one member sure to see this message: if we suspect
  // it or think it dead, tell it, so it refutes now instead of whenever the
  // gossip happens to reach it (or never, once our update is exhausted).
  //
  // And our own record: a member we think dead was most likely cut off from
  // us (a partition), so it likely holds as old a view of us, and our newer
  // record (a refutation made meanwhile) never reached it.
  if (const Member* to = to_id.empty() ? nullptr : find(to_id);
      to != nullptr && room() > 0 &&
      (to->state == MemberState::kSuspect || to->state == MemberState::kDead) && !present(to->id)) {
    fill_update(*to, *message.add_members());
    if (to->state == MemberState::kDead && room() > 0 && !present(self().id)) {
      fill_update(self(), *message.add_members());
    }
  }
  if (pending_updates_.empty() || room() == 0) return;

  const std::uint32_t limit = std::max<std::uint32_t>(
      1, options_.retransmit_mult * ceil_log2(static_cast<std::uint64_t>(members_.size()) + 1));
  // Fewest transmissions first, newest first among those; our own record
  // ahead of all, since a suspicion about us is running out.
  const std::string& self_id = self().id;
  std::sort(pending_updates_.begin(), pending_updates_.end(),
            [&](const PendingUpdate& a, const PendingUpdate& b) {
              const bool a_self = a.node_id == self_id;
              const bool b_self = b.node_id == self_id;
              if (a_self != b_self) return a_self;
              if (a.transmissions != b.transmissions) return a.transmissions < b.transmissions;
              return a.queued > b.queued;
            });
  for (PendingUpdate& p : pending_updates_) {
    if (room() == 0) break;
    if (present(p.node_id)) continue;
    const Member* m = find(p.node_id);
    if (m == nullptr) {
      p.transmissions = limit;  // forgotten since: nothing left to say
      continue;
    }
    fill_update(*m, *message.add_members());
    ++p.transmissions;
  }
  std::erase_if(pending_updates_, [&](const PendingUpdate& p) { return p.transmissions >= limit; });
}

void Membership::send(Outbox& out, const std::string& address, std::string_view to_id,
                      PeerMessage message) {
  if (address.empty()) return;
  piggyback(message, to_id);
  out.push_back(OutMessage{address, std::move(message), std::string(to_id)});
}

bool Membership::has_seeds() const {
  return std::any_of(options_.seeds.begin(), options_.seeds.end(), [&](const std::string& seed) {
    return !seed.empty() && seed != options_.address;
  });
}

void Membership::send_joins(Outbox& out) {
  const auto& seeds = options_.seeds;
  for (auto it = seeds.begin(); it != seeds.end(); ++it) {
    if (it->empty() || *it == options_.address) continue;
    if (std::find(seeds.begin(), it, *it) != it) continue;  // listed twice
    out.push_back(OutMessage{*it, join_message()});
    ++stats_.joins_sent;
  }
}

PeerMessage Membership::join_message() {
  PeerMessage message;
  message.mutable_join();
  // Our own record first: a seed that holds an older one of us (it thought
  // us dead) learns the newer one from the Join itself. A seed's id is
  // unknown until it answers, so no receiver-specific record.
  fill_update(self(), *message.add_members());
  piggyback(message, {});
  return message;
}

void Membership::rejoin(Outbox& out) {
  // One seed per call, round-robin over those that are not a live member
  // (by address): a seed on the far side of a healed partition answers with
  // its whole table, which brings back members this node has forgotten, and
  // the seed spreads our record on its side.
  const auto& seeds = options_.seeds;
  std::vector<const std::string*> candidates;
  for (auto it = seeds.begin(); it != seeds.end(); ++it) {
    if (it->empty() || *it == options_.address) continue;
    if (std::find(seeds.begin(), it, *it) != it) continue;  // listed twice
    const bool live = std::any_of(members_.begin() + 1, members_.end(), [&](const Member& m) {
      return is_live(m.state) && m.address == *it;
    });
    if (!live) candidates.push_back(&*it);
  }
  if (candidates.empty()) return;
  const std::string& seed = *candidates[rejoin_cursor_++ % candidates.size()];
  out.push_back(OutMessage{seed, join_message()});
  ++stats_.rejoins_sent;
}

void Membership::send_table(const std::string& address, Outbox& out) const {
  if (address.empty()) return;
  // Every member, not max_piggyback of them: the newcomer needs the whole
  // table. Split so each datagram stays under the MTU.
  PeerMessage reply;
  reply.mutable_join_reply();
  std::size_t bytes = 0;
  for (const Member& m : members_) {
    MemberUpdate update;
    fill_update(m, update);
    const std::size_t size = update.ByteSizeLong();
    const std::size_t framed = 1 + varint_size(size) + size;  // field tag, length, record
    if (bytes > 0 && bytes + framed > kJoinReplyMemberBytes) {
      out.push_back(OutMessage{address, std::move(reply)});
      reply = PeerMessage();
      reply.mutable_join_reply();
      bytes = 0;
    }
    *reply.add_members() = std::move(update);
    bytes += framed;
  }
  out.push_back(OutMessage{address, std::move(reply)});
}

void Membership::on_ping_req(const PeerMessage& message, TimeUs now, Outbox& out) {
  const peer::v1::PingReq& request = message.ping_req();
  if (request.target_id() == self().id) {
    // We are the target (the requester's view of our address is off): answer
    // as the relay would.
    PeerMessage ack;
    ack.mutable_ack()->set_probe_id(request.probe_id());
    ack.mutable_ack()->set_target_id(self().id);
    send(out, message.from_address(), message.from_id(), std::move(ack));
    return;
  }
  if (request.target_address().empty() || message.from_address().empty()) return;
  if (indirect_requests_.size() >= kMaxIndirectRequests) {
    indirect_requests_.erase(indirect_requests_.begin());
  }
  IndirectRequest served;
  served.probe_id = next_probe_id_++;
  served.original_probe_id = request.probe_id();
  served.requester_id = message.from_id();
  served.requester_address = message.from_address();
  served.target_id = request.target_id();
  served.expires_us = now + kIndirectRequestLifetimeTimeouts * options_.probe_timeout_us;
  send(out, request.target_address(), request.target_id(), ping_message(served.probe_id));
  indirect_requests_.push_back(std::move(served));
}

void Membership::on_ack(const PeerMessage& message, Outbox& out) {
  const peer::v1::Ack& ack = message.ack();
  // Direct: the target itself answers. Relayed: a helper names the target.
  const std::string& answered_by = ack.target_id().empty() ? message.from_id() : ack.target_id();
  const auto probe = std::find_if(probes_.begin(), probes_.end(), [&](const Probe& p) {
    return p.probe_id == ack.probe_id() && p.target_id == answered_by;
  });
  if (probe != probes_.end()) {
    ++stats_.acks_received;
    probes_.erase(probe);
    return;
  }
  const auto served = std::find_if(
      indirect_requests_.begin(), indirect_requests_.end(), [&](const IndirectRequest& r) {
        return r.probe_id == ack.probe_id() && r.target_id == message.from_id();
      });
  if (served == indirect_requests_.end()) return;  // late, or a reconnect ping's answer
  PeerMessage relay;
  relay.mutable_ack()->set_probe_id(served->original_probe_id);
  relay.mutable_ack()->set_target_id(served->target_id);
  const IndirectRequest request = std::move(*served);
  indirect_requests_.erase(served);
  send(out, request.requester_address, request.requester_id, std::move(relay));
}

void Membership::start_probe(TimeUs now, Outbox& out) {
  bool reshuffled = false;
  for (;;) {
    if (probe_cursor_ >= probe_order_.size()) {
      // A new round: every member once, in a fresh random order. Bounded
      // detection time, unlike picking at random each time.
      if (reshuffled) return;  // a whole fresh round without a live peer
      reshuffled = true;
      probe_order_.clear();
      for (std::size_t i = 1; i < members_.size(); ++i) probe_order_.push_back(i);
      shuffle(probe_order_, rng_);
      probe_cursor_ = 0;
      if (probe_order_.empty()) return;
    }
    const Member& target = members_[probe_order_[probe_cursor_++]];
    if (!is_live(target.state)) continue;
    const bool probing = std::any_of(probes_.begin(), probes_.end(),
                                     [&](const Probe& p) { return p.target_id == target.id; });
    if (probing) continue;

    Probe probe;
    probe.probe_id = next_probe_id_++;
    probe.target_id = target.id;
    probe.indirect_at_us = now + options_.probe_timeout_us;
    probe.deadline_us = now + std::max(options_.probe_interval_us, 2 * options_.probe_timeout_us);
    send(out, target.address, target.id, ping_message(probe.probe_id));
    probes_.push_back(std::move(probe));
    ++stats_.probes_sent;
    return;
  }
}

void Membership::check_probes(TimeUs now, Outbox& out) {
  for (auto it = probes_.begin(); it != probes_.end();) {
    Probe& probe = *it;
    if (now >= probe.deadline_us) {
      Member* target = find(probe.target_id);
      // Only an ALIVE target: a SUSPECT one already has its timer running,
      // and a DEAD or LEFT one was settled by news meanwhile.
      if (target != nullptr && target->state == MemberState::kAlive) {
        set_state(*target, MemberState::kSuspect, now);
        ++stats_.suspicions;
        enqueue(target->id);
      }
      it = probes_.erase(it);
      continue;
    }
    if (!probe.indirect_sent && now >= probe.indirect_at_us) {
      probe.indirect_sent = true;
      const Member* target = find(probe.target_id);
      if (target != nullptr) {
        std::vector<const Member*> helpers;
        for (const Member* peer : live_peers()) {
          if (peer->id != probe.target_id) helpers.push_back(peer);
        }
        shuffle(helpers, rng_);
        if (helpers.size() > options_.indirect_probes) helpers.resize(options_.indirect_probes);
        for (const Member* helper : helpers) {
          PeerMessage request;
          peer::v1::PingReq& ping_req = *request.mutable_ping_req();
          ping_req.set_probe_id(probe.probe_id);
          ping_req.set_target_id(target->id);
          ping_req.set_target_address(target->address);
          send(out, helper->address, helper->id, std::move(request));
          ++stats_.indirect_probes_sent;
        }
      }
    }
    ++it;
  }
}

void Membership::reconnect(Outbox& out) {
  // One DEAD member per join interval gets a Ping carrying its DEAD record.
  // If it is in fact alive (a healed partition) it refutes in its Ack and
  // both sides come back; if not, it costs one datagram. LEFT members left on
  // purpose and come back, if ever, with a new incarnation through a seed.
  std::vector<const Member*> dead;
  for (std::size_t i = 1; i < members_.size(); ++i) {
    if (members_[i].state == MemberState::kDead) dead.push_back(&members_[i]);
  }
  if (dead.empty()) return;
  const Member& target = *dead[random_below(rng_, dead.size())];
  // Untracked: its Ack is ignored (but for its digest).
  send(out, target.address, target.id, ping_message(next_probe_id_++));
}

void Membership::set_state(Member& m, MemberState state, TimeUs now) {
  m.state = state;
  m.state_since_us = now;
  note_state_since(m);
  live_peers_valid_ = false;
}

void Membership::note_state_since(const Member& m) {
  TimeUs timeout_us;
  if (m.state == MemberState::kSuspect) {
    timeout_us = options_.suspicion_timeout_us;
  } else if (is_gone(m.state)) {
    timeout_us = options_.dead_retention_us;
  } else {
    return;
  }
  TimeUs deadline;
  if (__builtin_add_overflow(m.state_since_us, timeout_us, &deadline)) deadline = kNever;
  next_expiry_us_ = std::min(next_expiry_us_, deadline);
}

void Membership::expire(TimeUs now) {
  std::erase_if(indirect_requests_, [&](const IndirectRequest& r) { return now >= r.expires_us; });
  // Nothing can expire before the earliest deadline: no walk over every
  // member per tick (at 1,000 members that walk was a fifth of a simulation).
  if (now < next_expiry_us_) return;
  for (std::size_t i = 1; i < members_.size(); ++i) {
    Member& m = members_[i];
    if (m.state == MemberState::kSuspect &&
        now - m.state_since_us >= options_.suspicion_timeout_us) {
      set_state(m, MemberState::kDead, now);
      ++stats_.deaths;
      enqueue(m.id);
    }
  }
  for (std::size_t i = members_.size(); i-- > 1;) {
    const Member& m = members_[i];
    if (is_gone(m.state) && now - m.state_since_us >= options_.dead_retention_us) {
      remove_member(i);
    }
  }
  next_expiry_us_ = kNever;
  for (std::size_t i = 1; i < members_.size(); ++i) note_state_since(members_[i]);
}

}  // namespace rlimit::core
