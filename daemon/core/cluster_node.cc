#include "core/cluster_node.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <optional>
#include <unordered_map>

#include "core/stable_hash.h"
#include "google/protobuf/io/coded_stream.h"

namespace rlimit::core {
namespace {

using peer::v1::Counters;
using peer::v1::PeerMessage;

// Room kept free for the message header when filling a payload with counters.
constexpr std::size_t kCounterSlackBytes = 16;
// Room kept for piggybacked membership news (up to max_piggyback records of
// an id, an address and two numbers each); send() trims what still does not fit.
std::size_t piggyback_reserve_bytes(std::size_t max_payload_bytes) {
  return std::min<std::size_t>(max_payload_bytes / 4, 400);
}

// Rounds each change is pushed for, by every node that learns it. If each of
// n nodes pushes a change to `sends` random peers in all, a given node
// receives Poisson(sends) copies and misses it with probability e^-sends; so
// sends = ln(n) + ln(100) leaves every node covered with probability about
// 99%. A node that misses one change loses nothing for good: counters are
// cumulative, so that entry's next change or anti-entropy brings it. (This was
// ceil(log2(n+1)) + 1 rounds to `fanout` peers each: 33 pushes per node per
// change at 1,000 nodes instead of 12, which saturated the packet budget.)
std::uint16_t default_rounds(std::size_t live_peers, std::uint32_t fanout) {
  if (live_peers == 0) return 2;  // what changes while alone still goes out twice
  const std::size_t per_round =
      fanout == 0 ? live_peers : std::min<std::size_t>(fanout, live_peers);
  const double sends = std::log(static_cast<double>(live_peers + 1)) + std::log(100.0);
  const auto rounds = static_cast<std::uint16_t>(std::ceil(sends / static_cast<double>(per_round)));
  return std::max<std::uint16_t>(2, rounds);
}

// Entries of `message` that carry a balance.
std::uint64_t count_balances(const PeerMessage& message) {
  std::uint64_t n = 0;
  for (const peer::v1::CounterEntry& e : message.counters().entries()) n += e.has_balance() ? 1 : 0;
  return n;
}

// What rides with a key's entries (Limiter::key_news): the age of the news,
// and the balance to offer when `whole` (every entry is packed, no floor).
using NewsOf =
    std::function<Limiter::KeyNews(std::string_view key, const Ledger::KeyState&, bool whole)>;

// Builds Counters payloads of at most `max_bytes`, interning origins per message.
class CounterPacker {
 public:
  CounterPacker(const Ledger& ledger, PeerMessage base, std::size_t max_bytes,
                NewsOf news_of = nullptr)
      : ledger_(ledger),
        base_(std::move(base)),
        max_bytes_(max_bytes),
        news_of_(std::move(news_of)) {
    start();
  }

  // Which entries of a key add() packs: all, those with gossip rounds left,
  // or only our own (origin 0) if it has rounds left; the last two leave
  // out asks (entries of 0, Ledger::add_ask), which only routing carries:
  // a gossiped key's news reaches every node anyway, and gossiping every
  // asker of 100 keys asked at 200 nodes took 3.5 x the entries.
  enum class Entries { kAll, kChanged, kOwnChanged, kSpent, kSpentChanged };

  // How many items (entries and floors) of `state` add() packs for `which`.
  static std::size_t count(const Ledger::KeyState& state, Entries which) {
    std::size_t n = 0;
    for_each_item(state, [&](const Ledger::Entry& e, const Ledger::Reset* reset) {
      n += wanted(e, reset, which) ? 1 : 0;
    });
    return n;
  }

  // Adds the entries of `key` (every one, or only those with gossip rounds
  // left). Returns false (adding nothing) if the current payload is full and
  // `may_open` is false; otherwise opens a new payload as needed. A key whose
  // entries do not fit in one payload (one that many origins consumed from)
  // is spread over several: each entry merges on its own, so any subset is a
  // valid message. That key alone may take a round past max_packets_per_round.
  // The key's balance is offered only with all of its entries together.
  bool add(std::string_view key, const Ledger::KeyState& state, bool may_open,
           Entries which = Entries::kAll) {
    const auto wanted = [which](const Ledger::Entry& e, const Ledger::Reset* reset) {
      return CounterPacker::wanted(e, reset, which);
    };
    const std::size_t before = size();
    const std::size_t mark = entries();
    const std::size_t origins_mark = static_cast<std::size_t>(counters()->origins_size());
    // Nothing to pack, or all of the key: every entry and no floor (a key
    // with floors offers no balance anyway: Limiter::offered_balance).
    std::size_t items = 0;
    bool whole = true;
    for_each_item(state, [&](const Ledger::Entry& e, const Ledger::Reset* reset) {
      const bool w = wanted(e, reset);
      items += w ? 1 : 0;
      if (w == (reset != nullptr)) whole = false;
    });
    if (items == 0) return true;
    const Limiter::KeyNews news = news_of_ ? news_of_(key, state, whole) : Limiter::KeyNews{};
    crowd_key_ = news.crowd ? key : std::string_view{};
    crowd_told_ = false;
    for_each_item(state, [&](const Ledger::Entry& e, const Ledger::Reset* reset) {
      if (wanted(e, reset)) append(key, e, reset, Limiter::entry_age_ms(news, state, e));
    });
    if (fits()) {
      // The balance rides on the last entry.
      if (news.balance) offer_balance(*news.balance);
      return true;
    }
    // Undo and retry in a fresh payload.
    undo(mark, origins_mark);
    if (before <= base_bytes_) {
      split(key, state, wanted, news);
      return true;
    }
    if (!may_open) return false;
    finish();
    return add(key, state, false, which) || true;
  }

  std::size_t entries() const { return static_cast<std::size_t>(counters()->entries_size()); }
  std::vector<PeerMessage> take() {
    if (entries() > 0) finish();
    return std::move(done_);
  }
  std::size_t finished() const { return done_.size(); }

 private:
  Counters* counters() { return current_.mutable_counters(); }
  const Counters* counters() const { return &current_.counters(); }

  // `reset`: e is that reset's floor (a floor of 0 is no ask: every one
  // is packed).
  static bool wanted(const Ledger::Entry& e, const Ledger::Reset* reset, Entries which) {
    const bool ask = e.consumed == 0 && reset == nullptr;
    switch (which) {
      case Entries::kAll:
        return true;
      case Entries::kChanged:
        return e.sends_left > 0;
      case Entries::kOwnChanged:
        return e.origin == 0 && e.sends_left > 0;
      case Entries::kSpent:
        return !ask;
      case Entries::kSpentChanged:
        return !ask && e.sends_left > 0;
    }
    return false;
  }

  // The payload's size, kept as entries and origins come and go: measuring
  // the whole message after every key made packing quadratic in its entries.
  // Every field involved has a number below 16, so a one-byte tag.
  static std::size_t field_bytes(std::size_t content_bytes) {
    return 1 + google::protobuf::io::CodedOutputStream::VarintSize64(content_bytes) + content_bytes;
  }
  std::size_t size() const { return outer_bytes_ + field_bytes(counters_bytes_); }
  bool fits() const { return size() + kCounterSlackBytes <= max_bytes_; }

  // Calls f(entry, nullptr) for each entry of `state`, then f(floor, reset)
  // for each floor of its applied and its pending reset.
  template <typename F>
  static void for_each_item(const Ledger::KeyState& state, F&& f) {
    for (const Ledger::Entry& e : state.entries) f(e, nullptr);
    for (const Ledger::Reset* reset : {state.reset.get(), state.pending.get()}) {
      if (reset == nullptr) continue;
      for (const Ledger::Entry& floor : reset->floors) f(floor, reset);
    }
  }

  // Appends an entry of `key` (with its news age, Limiter::entry_age_ms), or
  // with `reset` one of that reset's floors.
  void append(std::string_view key, const Ledger::Entry& e, const Ledger::Reset* reset,
              std::uint32_t age_ms) {
    auto* entry = counters()->add_entries();
    entry->set_key(key.data(), key.size());
    entry->set_origin(local_origin(e.origin));
    entry->set_incarnation(e.incarnation);
    entry->set_consumed(e.consumed);
    if (!crowd_told_ && !crowd_key_.empty() && key == crowd_key_) {
      entry->set_crowd(true);
      crowd_told_ = true;
    }
    if (reset != nullptr) {
      entry->set_reset_epoch(reset->epoch);
      entry->set_reset_floors(reset->floor_count);
    } else if (age_ms > 0) {
      entry->set_age_ms(age_ms);
    }
    counters_bytes_ += field_bytes(entry->ByteSizeLong());
  }

  // All of `key`'s entries were just appended, contiguous and last: the
  // balance rides on the last one (peer.proto), if it still fits.
  void offer_balance(std::int64_t balance) {
    auto* last = counters()->mutable_entries(counters()->entries_size() - 1);
    const std::size_t without = field_bytes(last->ByteSizeLong());
    last->set_balance(balance);
    const std::size_t with = field_bytes(last->ByteSizeLong());
    counters_bytes_ += with - without;
    if (fits()) return;
    last->clear_balance();
    counters_bytes_ -= with - without;
  }

  // Removes the entries and origins added after the marks.
  void undo(std::size_t mark, std::size_t origins_mark) {
    crowd_told_ = false;  // at worst told twice in a payload
    for (int i = static_cast<int>(mark); i < counters()->entries_size(); ++i) {
      counters_bytes_ -= field_bytes(counters()->entries(i).ByteSizeLong());
    }
    counters()->mutable_entries()->DeleteSubrange(static_cast<int>(mark),
                                                 counters()->entries_size() - static_cast<int>(mark));
    while (static_cast<std::size_t>(counters()->origins_size()) > origins_mark) {
      const std::string& name = counters()->origins(counters()->origins_size() - 1);
      counters_bytes_ -= field_bytes(name.size());
      origin_slots_.erase(name);
      counters()->mutable_origins()->RemoveLast();
    }
  }

  // Adds the entries of `key` one by one, opening payloads as they fill. An
  // entry too large for an empty payload is left out.
  template <typename Wanted>
  void split(std::string_view key, const Ledger::KeyState& state, const Wanted& wanted,
             const Limiter::KeyNews& news) {
    for_each_item(state, [&](const Ledger::Entry& e, const Ledger::Reset* reset) {
      if (!wanted(e, reset)) return;
      const std::uint32_t age_ms = Limiter::entry_age_ms(news, state, e);
      const std::size_t mark = entries();
      const std::size_t origins_mark = static_cast<std::size_t>(counters()->origins_size());
      append(key, e, reset, age_ms);
      if (fits()) return;
      undo(mark, origins_mark);
      if (mark == 0) return;
      finish();
      append(key, e, reset, age_ms);
      if (!fits()) undo(0, 0);
    });
  }

  std::uint32_t local_origin(std::uint32_t origin) {
    const std::string& name = ledger_.origin_name(origin);
    auto it = origin_slots_.find(name);
    if (it != origin_slots_.end()) return it->second;
    const auto slot = static_cast<std::uint32_t>(counters()->origins_size());
    counters()->add_origins(name);
    counters_bytes_ += field_bytes(name.size());
    origin_slots_.emplace(name, slot);
    return slot;
  }
  void start() {
    current_ = base_;
    counters_bytes_ = current_.mutable_counters()->ByteSizeLong();
    outer_bytes_ = current_.ByteSizeLong() - field_bytes(counters_bytes_);
    base_bytes_ = size();
    origin_slots_.clear();
    crowd_told_ = false;
  }
  void finish() {
    assert(size() == current_.ByteSizeLong());
    done_.push_back(std::move(current_));
    start();
  }

  const Ledger& ledger_;
  PeerMessage base_;
  std::size_t max_bytes_;
  PeerMessage current_;
  std::size_t base_bytes_ = 0;
  std::size_t outer_bytes_ = 0;     // current_ without its counters field
  std::size_t counters_bytes_ = 0;  // content of current_'s counters field
  std::unordered_map<std::string, std::uint32_t> origin_slots_;
  std::vector<PeerMessage> done_;
  NewsOf news_of_;
  // The key being added, if its news tells of a crowd (KeyNews::crowd), and
  // whether this payload told it already: once per payload.
  std::string_view crowd_key_;
  bool crowd_told_ = false;
};

}  // namespace

ClusterNode::ClusterNode(ClusterOptions options, Limiter& limiter, std::uint64_t seed)
    : options_(std::move(options)),
      share_draw_seed_(splitmix64(fnv1a(options_.cluster_name) ^ options_.share_draw_seed)),
      limiter_(limiter),
      rng_(seed),
      membership_(options_.membership, seed ^ 0x9e3779b97f4a7c15ull),
      rules_sync_([this] {
        RulesSyncOptions o = options_.rules_sync;
        o.max_payload_bytes = options_.max_payload_bytes;
        return o;
      }()),
      replay_(options_.replay),
      arena_block_(new char[kArenaBlockBytes]),
      arena_([this] {
        google::protobuf::ArenaOptions arena_options;
        arena_options.initial_block = arena_block_.get();
        arena_options.initial_block_size = kArenaBlockBytes;
        return arena_options;
      }()) {}

NewsOf ClusterNode::news_of(TimeUs now) const {
  return [this, now](std::string_view key, const Ledger::KeyState& state, bool whole) {
    return limiter_.key_news(key, state, now, whole);
  };
}

std::size_t ClusterNode::counter_budget() const {
  // The rules advertisement rides on every message (about 40 bytes plus the
  // origin's node id).
  const RulesVersion& rules = rules_sync_.local();
  const std::size_t advert_bytes = 2 + 1 + 10 + 2 + rules.origin.size() + 2 + rules.digest.size();
  // Replay protection's fields, each a two-byte tag and its value: seq (as
  // now, plus a byte for the round's packets to come), sent_at_us (as now;
  // ten bytes if negative) and to_id (the longest id a payload may go to).
  std::size_t longest_id = membership_.self().id.size();
  for (const Member* peer : membership_.live_peers()) {
    longest_id = std::max(longest_id, peer->id.size());
  }
  using google::protobuf::io::CodedOutputStream;
  const TimeUs sent_at_us = now_us_ + system_clock_offset_us_;
  const std::size_t replay_bytes =
      2 + CodedOutputStream::VarintSize64(next_seq_) + 1 + 2 +
      CodedOutputStream::VarintSize64(static_cast<std::uint64_t>(sent_at_us)) + 2 +
      CodedOutputStream::VarintSize64(longest_id) + longest_id;
  const std::size_t reserved =
      piggyback_reserve_bytes(options_.max_payload_bytes) + advert_bytes + replay_bytes;
  return options_.max_payload_bytes > reserved ? options_.max_payload_bytes - reserved : 0;
}

void ClusterNode::start(TimeUs now) {
  now_us_ = now;
  rules_sync_.set_cluster_name(options_.cluster_name);
  limiter_.enable_replication(options_.membership.node_id, options_.membership.incarnation, now);
  limiter_.ledger().set_bounds(options_.ledger_bounds);
  membership_.start(now, membership_out_);
  next_gossip_us_ = now + options_.gossip_interval_us;
  next_anti_entropy_us_ = now + options_.anti_entropy_interval_us;
  for (OutMessage& m : membership_out_) send(std::move(m));
  membership_out_.clear();
}

void ClusterNode::prepare(PeerMessage& m, std::size_t body_bytes, const std::string& to_id) {
  m.set_cluster(options_.cluster_name);
  const Member& self = membership_.self();
  m.set_from_id(self.id);
  m.set_from_address(self.address);
  m.set_from_incarnation(self.incarnation);
  m.set_seq(next_seq_++);
  m.set_sent_at_us(now_us_ + system_clock_offset_us_);
  m.set_to_id(to_id);
  const RulesVersion& rules = rules_sync_.local();
  peer::v1::RulesVersion* advert = m.mutable_rules();
  advert->set_version(rules.version);
  advert->set_origin(rules.origin);
  advert->set_digest(rules.digest);
  if (m.members_size() == 0) membership_.add_piggyback(m);
  // Membership news rides along only where it fits; the updates are sent
  // again later (each several times), so trimming loses nothing for good.
  while (m.members_size() > 0 && m.ByteSizeLong() + body_bytes > options_.max_payload_bytes) {
    m.mutable_members()->RemoveLast();
    ++stats_.piggyback_trimmed;
  }
}

void ClusterNode::emit(std::string address, std::string payload) {
  ++stats_.packets_out;
  stats_.bytes_out += payload.size();
  outbox_.push_back(OutPacket{std::move(address), std::move(payload)});
}

void ClusterNode::send(OutMessage message) {
  prepare(message.message, 0, message.to_id);
  std::string payload;
  message.message.SerializeToString(&payload);
  emit(std::move(message.address), std::move(payload));
}

void ClusterNode::send_body(const Member& to, const std::string& body) {
  // Header bytes followed by body bytes parse as the whole message: a
  // message's fields may come in any order (the header's rules field, number
  // 13, lands before the body's fields here).
  header_.Clear();
  prepare(header_, body.size(), to.id);
  std::string payload;
  payload.reserve(header_.ByteSizeLong() + body.size());
  header_.AppendToString(&payload);
  payload.append(body);
  emit(to.address, std::move(payload));
}

bool ClusterNode::take(const PeerMessage& message, TimeUs now) {
  // Meant for another node: a copy of a message to a peer, sent here.
  if (!message.to_id().empty() && message.to_id() != membership_.self().id) {
    ++stats_.misdirected;
    return false;
  }
  const ReplayVerdict verdict =
      replay_.check(message.from_id(), message.from_incarnation(), message.seq(),
                    message.sent_at_us(), now + system_clock_offset_us_);
  const ReplayStats& r = replay_.stats();
  stats_.replay_duplicates = r.duplicates;
  stats_.replay_below_window = r.below_window;
  stats_.replay_old_incarnation = r.old_incarnation;
  stats_.replay_stale = r.stale;
  stats_.replay_future = r.future;
  stats_.replay_unsequenced_refused = r.unsequenced_refused;
  stats_.replay_unsequenced_accepted = r.unsequenced_accepted;
  stats_.replay_senders_evicted = r.senders_evicted;
  return replay_taken(verdict);
}

void ClusterNode::on_payload(std::string_view payload, TimeUs now) {
  now_us_ = now;
  ++stats_.packets_in;
  stats_.bytes_in += payload.size();
  arena_.Reset();
  PeerMessage& message = *google::protobuf::Arena::CreateMessage<PeerMessage>(&arena_);
  if (!message.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    ++stats_.malformed_payloads;
    return;
  }
  if (message.cluster() != options_.cluster_name) {
    ++stats_.foreign_cluster;
    return;
  }
  if (message.from_id().empty() || message.from_id() == membership_.self().id) {
    ++stats_.malformed_payloads;  // nameless, or our own echo: nothing to learn
    return;
  }
  // Nothing of a message is used (not even as a sign of life) before the
  // replay window takes it.
  if (!take(message, now)) return;
  membership_.on_message(message, now, membership_out_);
  if (message.has_counters()) on_counters(message, now);
  if (message.has_rules()) {
    rules_sync_.on_advert(message.from_id(), message.from_address(), message.rules(), now);
  }
  if (message.has_rules_request()) {
    rules_sync_.on_request(message.from_address(), message.rules_request());
  } else if (message.has_rules_chunk()) {
    rules_sync_.on_chunk(message.rules_chunk(), now);
  }
  for (OutMessage& m : membership_out_) send(std::move(m));
  membership_out_.clear();
  send_rules_out();
}

void ClusterNode::send_rules_out() {
  for (RulesOut& r : rules_sync_.out()) send({std::move(r.address), std::move(r.message), {}});
  rules_sync_.out().clear();
}

void ClusterNode::on_counters(const PeerMessage& message, TimeUs now) {
  const Counters& counters = message.counters();
  const int origin_count = counters.origins_size();
  // A balance stands for the run of its key's entries just before it
  // (peer.proto); it is used only if every entry of the run was merged.
  std::string_view run_key;
  std::uint64_t run_consumed = 0;
  bool run_merged = true;
  const Ledger& bounded = limiter_.ledger();
  const auto over_bounds = [&bounded] {
    return bounded.origins_over_bound() + bounded.keys_over_bound() + bounded.entries_over_bound();
  };
  const std::uint64_t over_bounds_before = over_bounds();
  // Each origin of the payload interned once, on first use (not per entry).
  constexpr std::uint32_t kNotYet = Ledger::kNoOrigin - 1;
  origin_slots_.assign(static_cast<std::size_t>(origin_count), kNotYet);
  for (const peer::v1::CounterEntry& entry : counters.entries()) {
    ++stats_.entries_received;
    if (entry.key() != run_key) {
      run_key = entry.key();
      run_consumed = 0;
      run_merged = true;
    }
    if (entry.origin() >= static_cast<std::uint32_t>(origin_count) || entry.key().empty()) {
      ++stats_.malformed_payloads;
      run_merged = false;
      continue;
    }
    std::uint32_t& origin = origin_slots_[entry.origin()];
    // Over the bound (kNoOrigin) is asked again, so it is counted per entry.
    if (origin == kNotYet || origin == Ledger::kNoOrigin) {
      origin = limiter_.ledger().intern_origin(counters.origins(static_cast<int>(entry.origin())));
      if (origin == Ledger::kNoOrigin) {
        run_merged = false;  // not merged: its key's balance must not be used
        continue;
      }
    }
    if (entry.has_reset_epoch()) {
      // A floor of a reset, not consumption.
      ++stats_.reset_floors_received;
      if (limiter_.merge_reset_floor(entry.key(), origin, entry.incarnation(), entry.consumed(),
                                     entry.reset_epoch(), entry.reset_floors(),
                                     now) == Ledger::FloorMerge::kMalformed) {
        ++stats_.malformed_payloads;
      }
      continue;
    }
    if (entry.crowd()) limiter_.note_crowd(entry.key(), now);
    const std::uint64_t increase = limiter_.merge_remote(
        entry.key(), origin, entry.incarnation(), entry.consumed(), now,
        static_cast<TimeUs>(entry.age_ms()) * 1000);
    if (increase > 0) {
      ++stats_.entries_applied;
      stats_.tokens_charged_remote += increase;
    }
    run_consumed = entry.consumed() > UINT64_MAX - run_consumed ? UINT64_MAX
                                                                 : run_consumed + entry.consumed();
    if (!entry.has_balance()) continue;
    ++stats_.balances_received;
    // An entry refused at one of the ledger's bounds was not merged.
    if (!run_merged || over_bounds() != over_bounds_before) continue;
    if (limiter_.raise_balance(entry.key(), entry.balance(), run_consumed, now) > 0) {
      ++stats_.balances_raised;
    }
  }
  if (!counters.anti_entropy()) return;

  // Push-pull: answer with every key of the push where we know something the
  // sender did not say (an entry it lacks or holds lower). A key's entries
  // come as one run (CounterPacker adds them together); a key split over
  // runs is judged per run, which at worst answers with entries the sender
  // had in another run: redundant, never wrong.
  const Ledger& ledger = limiter_.ledger();
  OutMessage base;
  base.message.set_cluster(options_.cluster_name);
  CounterPacker packer(ledger, base.message, counter_budget(), news_of(now));
  const auto& entries = counters.entries();
  for (int run = 0; run < entries.size();) {
    const std::string_view key = entries[run].key();
    int end = run + 1;
    while (end < entries.size() && entries[end].key() == key) ++end;
    const Ledger::KeyState* state = ledger.find(key);
    // A newer reset than any the sender sent floors of is news too, and so
    // is our applied reset when the sender sent fewer of its floors (its copy
    // may be pending for want of them).
    std::uint64_t their_epoch = 0;
    std::size_t their_floors = 0;
    for (int t = run; t < end; ++t) their_epoch = std::max(their_epoch, entries[t].reset_epoch());
    for (int t = run; t < end; ++t) their_floors += entries[t].reset_epoch() == their_epoch ? 1 : 0;
    bool ahead =
        state != nullptr && state->reset &&
        (state->reset->epoch > their_epoch ||
         (state->reset->epoch == their_epoch && their_floors < state->reset->floors.size()));
    for (std::size_t i = 0; state != nullptr && !ahead && i < state->entries.size(); ++i) {
      const Ledger::Entry& mine = state->entries[i];
      if (mine.consumed == 0) continue;  // an ask: not repaired (CounterPacker::Entries)
      const std::string& origin = ledger.origin_name(mine.origin);
      bool covered = false;
      for (int t = run; t < end && !covered; ++t) {
        const peer::v1::CounterEntry& theirs = entries[t];
        covered = !theirs.has_reset_epoch() && theirs.incarnation() == mine.incarnation &&
                  theirs.consumed() >= mine.consumed &&
                  theirs.origin() < static_cast<std::uint32_t>(origin_count) &&
                  counters.origins(static_cast<int>(theirs.origin())) == origin;
      }
      ahead = !covered;
    }
    if (ahead) packer.add(key, *state, true, CounterPacker::Entries::kSpent);
    run = end;
  }
  for (PeerMessage& m : packer.take()) {
    count_sent(m, 1);
    m.mutable_counters()->set_reply(true);
    send({message.from_address(), std::move(m), message.from_id()});
  }
}

void ClusterNode::tick(TimeUs now) {
  now_us_ = now;
  membership_.tick(now, membership_out_);
  for (OutMessage& m : membership_out_) send(std::move(m));
  membership_out_.clear();
  rules_sync_.tick(now);
  send_rules_out();
  if (now >= next_gossip_us_) {
    next_gossip_us_ = now + options_.gossip_interval_us;
    gossip_round(now);
  }
  if (now >= next_anti_entropy_us_) {
    next_anti_entropy_us_ = now + options_.anti_entropy_interval_us;
    anti_entropy(now);
  }
}

void ClusterNode::refresh_owners() {
  const std::vector<const Member*>& peers = membership_.live_peers();
  routing_ = routing_with(peers.size() + 1);
  if (!routing_ || membership_.live_version() == key_owners_version_) return;
  key_owners_version_ = membership_.live_version();
  std::vector<std::string> ids;
  ids.reserve(peers.size() + 1);
  ids.push_back(membership_.self().id);
  for (const Member* peer : peers) ids.push_back(peer->id);
  key_owners_.assign(std::move(ids));
}

void ClusterNode::count_sent(const PeerMessage& packet, std::uint64_t copies) {
  stats_.entries_sent += static_cast<std::uint64_t>(packet.counters().entries_size()) * copies;
  stats_.balances_sent += count_balances(packet) * copies;
}

namespace {

// The payloads of one round of routed sends: a packer per destination.
class RoutedPackers {
 public:
  // `base` as CounterPacker's (the cluster name set, for the size).
  RoutedPackers(const Ledger& ledger, PeerMessage base, std::size_t budget, NewsOf news_of,
                std::uint32_t max_packets)
      : ledger_(ledger),
        base_(std::move(base)),
        budget_(budget),
        news_of_(std::move(news_of)),
        max_packets_(max_packets) {}
  // Adds `which` entries of `key` for `to`; false if its payloads are full.
  bool add(const Member* to, std::string_view key, const Ledger::KeyState& state,
           CounterPacker::Entries which) {
    auto it = packers_.find(to);
    if (it == packers_.end()) {
      it = packers_.try_emplace(to, ledger_, base_, budget_, news_of_).first;
      order_.push_back(to);
    }
    CounterPacker& packer = it->second;
    return packer.add(key, state, packer.finished() + 1 < max_packets_, which);
  }
  // Calls send(member, packet) for every payload, in the order the
  // destinations were first added to (deterministic).
  template <typename Send>
  void flush(Send&& send) {
    for (const Member* to : order_) {
      for (PeerMessage& packet : packers_.find(to)->second.take()) send(*to, packet);
    }
  }

 private:
  const Ledger& ledger_;
  PeerMessage base_;
  std::size_t budget_;
  NewsOf news_of_;
  std::uint32_t max_packets_;
  std::unordered_map<const Member*, CounterPacker> packers_;
  std::vector<const Member*> order_;
};

}  // namespace

void ClusterNode::gossip_round(TimeUs now) {
  Ledger& ledger = limiter_.ledger();
  std::vector<const Member*> peers = membership_.live_peers();
  const std::uint16_t rounds = options_.retransmit_rounds > 0
                                   ? static_cast<std::uint16_t>(options_.retransmit_rounds)
                                   : default_rounds(peers.size(), options_.fanout);
  ledger.set_retransmit_rounds(rounds);
  // This node's place among the live nodes by id, and the cluster's seed:
  // fair shares' draws spread over the nodes (ShareView::rank).
  const auto rank = std::count_if(peers.begin(), peers.end(), [&](const Member* peer) {
    return peer->id < options_.membership.node_id;
  });
  // News of a change reaches every node within about its rounds of gossip.
  limiter_.set_share_view(
      {.live_nodes = static_cast<std::uint32_t>(peers.size() + 1),
       .horizon_us = options_.gossip_interval_us * (rounds + 1),
       .routed = routing_with(peers.size() + 1),
       .rank = static_cast<std::uint32_t>(rank),
       .draw_seed = share_draw_seed_});
  if (ledger.changed().empty() || peers.empty()) return;
  ++stats_.gossip_rounds;
  refresh_owners();
  if (options_.fanout > 0 && peers.size() > options_.fanout) {
    // A partial Fisher-Yates picks `fanout` distinct peers.
    for (std::size_t i = 0; i < options_.fanout; ++i) {
      std::uniform_int_distribution<std::size_t> pick(i, peers.size() - 1);
      std::swap(peers[i], peers[pick(rng_)]);
    }
    peers.resize(options_.fanout);
  }

  // Newest changes first; what does not fit in this round's packets waits.
  PeerMessage base;
  base.set_cluster(options_.cluster_name);
  CounterPacker packer(ledger, base, counter_budget(), news_of(now));
  RoutedPackers routed_out(ledger, base, counter_budget(), news_of(now),
                           options_.max_packets_per_round);
  // Sends a routed key's changes: ours to its owners; as an owner, the
  // changes to its other origins and owners, and the whole key to an origin
  // new to it. False if some destination's payloads are full.
  const auto route = [&](const std::string& key, const Ledger::KeyState& state) {
    key_owners_.owners(key, options_.owners_per_key, owners_scratch_);
    const bool owner = std::find(owners_scratch_.begin(), owners_scratch_.end(), kSelfOwner) !=
                       owners_scratch_.end();
    using Entries = CounterPacker::Entries;
    if (!owner) {
      const std::size_t items = CounterPacker::count(state, Entries::kOwnChanged);
      if (items == 0) return true;  // only news we learned: the owners sent it
      for (const std::uint32_t i : owners_scratch_) {
        const Member* to = owner_member(i);
        if (to == nullptr) continue;
        if (!routed_out.add(to, key, state, Entries::kOwnChanged)) return false;
        stats_.routed_entries_to_owners += items;
      }
      return true;
    }
    std::vector<const Member*>& sent_to = route_destinations_;
    sent_to.clear();
    const auto forward = [&](const Member* to, Entries which) {
      if (to == nullptr || std::find(sent_to.begin(), sent_to.end(), to) != sent_to.end()) {
        return true;
      }
      sent_to.push_back(to);
      const std::size_t items = CounterPacker::count(state, which);
      if (items == 0) return true;
      if (!routed_out.add(to, key, state, which)) return false;
      stats_.routed_entries_forwarded += items;
      if (which == Entries::kAll) ++stats_.routed_newcomer_keys;
      return true;
    };
    for (const Ledger::Entry& e : state.entries) {
      if (e.origin == 0) continue;  // ours
      const Member* to = membership_.member(ledger.origin_name(e.origin));
      if (to == nullptr || !is_live(to->state)) continue;
      if (!forward(to, e.newcomer ? Entries::kAll : Entries::kChanged)) return false;
    }
    for (const std::uint32_t i : owners_scratch_) {
      if (i != kSelfOwner && !forward(owner_member(i), Entries::kChanged)) return false;
    }
    return true;
  };
  const std::vector<std::string>& changed = ledger.changed();
  std::vector<std::size_t> sent_keys;    // indices into changed
  std::vector<std::size_t> routed_keys;  // the same, sent by routing
  bool deferred = false;
  for (std::size_t i = changed.size(); i-- > 0;) {
    const Ledger::KeyState& state = ledger.changed_state(i);
    if (state.sends_left == 0) continue;
    if (routed(state, now)) {
      if (route(changed[i], state)) {
        routed_keys.push_back(i);
      } else {
        deferred = true;  // some destination's payloads are full: next round
      }
      continue;
    }
    const bool may_open = packer.finished() + 1 < options_.max_packets_per_round;
    if (!packer.add(changed[i], state, may_open, CounterPacker::Entries::kSpentChanged)) {
      deferred = true;
      break;
    }
    sent_keys.push_back(i);
  }
  if (deferred) ++stats_.gossip_backlog_deferred;
  std::vector<PeerMessage> packets = packer.take();
  for (const std::size_t i : sent_keys) ledger.sent_changed(i);
  for (const std::size_t i : routed_keys) ledger.routed_sent_changed(i);
  ledger.compact_changed();
  std::string body;
  for (PeerMessage& packet : packets) {
    count_sent(packet, peers.size());
    stats_.entries_gossiped +=
        static_cast<std::uint64_t>(packet.counters().entries_size()) * peers.size();
    // The counters are the same for every peer; only the piggybacked news
    // differs. Serialize them once.
    packet.clear_cluster();
    body.clear();
    packet.SerializeToString(&body);
    for (const Member* peer : peers) send_body(*peer, body);
  }
  routed_out.flush([&](const Member& to, PeerMessage& packet) {
    count_sent(packet, 1);
    packet.clear_cluster();
    body.clear();
    packet.SerializeToString(&body);
    send_body(to, body);
  });
}

void ClusterNode::anti_entropy(TimeUs now) {
  const std::vector<const Member*> peers = membership_.live_peers();
  if (peers.empty()) return;
  std::uniform_int_distribution<std::size_t> pick(0, peers.size() - 1);
  const Member* peer = peers[pick(rng_)];
  refresh_owners();
  Ledger& ledger = limiter_.ledger();
  PeerMessage base;
  base.set_cluster(options_.cluster_name);
  CounterPacker packer(ledger, base, counter_budget(), news_of(now));
  // Routed keys go to their first owner other than us (a payload each may
  // hold many keys of that owner's).
  RoutedPackers routed_out(ledger, base, counter_budget(), news_of(now), UINT32_MAX);
  // Only entries that changed within half their retention: older ones are
  // converged, and a peer may already have forgotten them (see ledger.h).
  ledger.visit_slice(options_.anti_entropy_entries, [&](const std::string& key,
                                                        const Ledger::KeyState& state) {
    if (!limiter_.within_retention(key, now - state.changed_us, 2)) return;
    if (routed(state, now)) {
      key_owners_.owners(key, options_.owners_per_key, owners_scratch_);
      for (const std::uint32_t owner : owners_scratch_) {
        if (owner == kSelfOwner) continue;
        if (const Member* to = owner_member(owner); to != nullptr) {
          routed_out.add(to, key, state, CounterPacker::Entries::kAll);
          return;
        }
      }
      return;  // we alone own it: nobody to compare with
    }
    packer.add(key, state, true, CounterPacker::Entries::kSpent);
  });
  std::vector<PeerMessage> packets = packer.take();
  bool pushed = false;
  for (PeerMessage& packet : packets) {
    pushed = true;
    packet.mutable_counters()->set_anti_entropy(true);
    count_sent(packet, 1);
    send({peer->address, std::move(packet), peer->id});
  }
  routed_out.flush([&](const Member& to, PeerMessage& packet) {
    pushed = true;
    packet.set_cluster(options_.cluster_name);
    packet.mutable_counters()->set_anti_entropy(true);
    count_sent(packet, 1);
    send({to.address, std::move(packet), to.id});
  });
  if (pushed) ++stats_.anti_entropy_pushes;
}

void ClusterNode::leave(TimeUs now) {
  now_us_ = now;
  membership_.leave(now, membership_out_);
  for (OutMessage& m : membership_out_) send(std::move(m));
  membership_out_.clear();
}

}  // namespace rlimit::core
