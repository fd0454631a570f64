#include "sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cluster_node.h"
#include "core/limiter.h"
#include "core/memory_store.h"
#include "core/store_sync.h"
#include "digest.h"
#include "ideal.h"
#include "key_windows.h"
#include "network.h"
#include "rng.h"
#include "workload.h"

namespace rlimit::sim {
namespace {

enum class Kind : std::uint8_t {
  kDeliver,
  kTick,
  kArrival,
  kCrash,
  kRestart,
  kHeal,
  kProbe,
  kRelease,
  kReset,
  kStoreReply,
};

struct Event {
  TimeUs at = 0;
  std::uint64_t seq = 0;  // creation order: ties at one instant run in it
  Kind kind = Kind::kTick;
  std::uint32_t node = 0;
  std::uint32_t aux = 0;   // tick, release: generation; arrival: stream; crash/heal/reset: index
  std::uint32_t from = 0;  // deliver: sender
  std::string payload;     // deliver: the datagram; release: the lease (key + 8-byte id)
};

// A release event's node for a lease the ideal handed out.
constexpr std::uint32_t kIdealNode = UINT32_MAX;

// A min-heap on (at, seq).
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }
};

struct Tracker {
  std::size_t index = 0;  // into Results::convergence
  bool first = true;
  std::vector<std::pair<std::string, std::uint64_t>> targets;  // bucket key, consumption to know
};

struct Node {
  std::unique_ptr<core::Limiter> limiter;
  std::unique_ptr<core::ClusterNode> cluster;  // gossip and mesh
  std::unique_ptr<core::StoreSync> store;      // Redis mode
  bool up = false;
  std::uint32_t generation = 0;  // stale ticks of a crashed incarnation are dropped
  TimeUs offset_us = 0;
  double drift = 0;
  TimeUs next_sweep_us = 0;  // local clock
};

class Simulation {
 public:
  Simulation(const Scenario& scenario, std::uint64_t seed, const RunOptions& options,
             Results& results)
      : s_(scenario),
        seed_(seed),
        options_(options),
        r_(results),
        network_(scenario.network, scenario.partitions, scenario.cluster.nodes,
                 derive_seed(seed, 1)),
        ideal_(scenario.rules),
        store_rng_(derive_seed(seed, 5)) {}

  bool run(std::string& error) {
    const auto wall_start = std::chrono::steady_clock::now();
    workload_ = std::make_unique<Workload>(s_, seed_, error);
    if (!error.empty()) return false;
    setup();
    if (options_.requests != nullptr) *options_.requests << kRequestsHeader << '\n';
    while (!heap_.empty() && heap_.front().at <= s_.duration_us) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      Event e = std::move(heap_.back());
      heap_.pop_back();
      now_ = e.at;
      handle(e);
    }
    finish();
    r_.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    return true;
  }

 private:
  void push(TimeUs at, Kind kind, std::uint32_t node, std::uint32_t aux = 0, std::uint32_t from = 0,
            std::string payload = {}) {
    heap_.push_back(Event{at, next_seq_++, kind, node, aux, from, std::move(payload)});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }

  // What node i's clock reads at virtual time t.
  TimeUs local(std::uint32_t i, TimeUs t) const {
    const Node& n = nodes_[i];
    return Ideal::kEpochUs + n.offset_us + t + std::llround(n.drift * static_cast<double>(t));
  }

  static std::string address_of(std::uint32_t i) {
    return "10." + std::to_string(i >> 16) + "." + std::to_string((i >> 8) & 255) + "." +
           std::to_string(i & 255) + ":7946";
  }

  void setup() {
    const std::uint32_t n = s_.cluster.nodes;
    r_.scenario = s_.name;
    r_.description = s_.description;
    r_.seed = seed_;
    r_.nodes = n;
    r_.duration_us = s_.duration_us;
    r_.window_us = s_.report.window_us;
    r_.limit_per_s = workload_->limit_per_s();
    r_.partitions = s_.partitions;
    r_.crashes = s_.crashes;
    r_.per_node.assign(n, {});
    redis_ = s_.cluster.mode == SyncMode::kRedis;
    r_.store_mode = redis_;
    const TimeUs interval_us =
        redis_ ? s_.redis.options.sync_interval_us : s_.cluster.options.gossip_interval_us;
    tick_us_ =
        s_.cluster.tick_us > 0 ? s_.cluster.tick_us : std::clamp<TimeUs>(interval_us, 1000, 5000);

    const std::size_t samples = static_cast<std::size_t>(s_.duration_us / s_.report.sample_us) + 1;
    Series& series = r_.series;
    series.sample_us = s_.report.sample_us;
    series.admitted.assign(samples, 0);
    series.ideal.assign(samples, 0);
    series.arrivals.assign(samples, 0);
    if (options_.keep_series) series.per_node.assign(static_cast<std::size_t>(n) * samples, 0);

    for (const Traffic& t : s_.traffic) {
      key_admitted_.emplace_back(t.keys, 0);
      key_ideal_.emplace_back(t.keys, 0);
    }
    setup_key_windows();
    r_.traffic_start_us = s_.duration_us;
    for (const Traffic& t : s_.traffic) {
      r_.traffic_start_us = std::min(r_.traffic_start_us, t.start_us);
      r_.traffic_end_us = std::max(r_.traffic_end_us, t.end_us);
    }

    Rng clock_rng(derive_seed(seed_, 2));
    nodes_.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      address_index_.emplace(address_of(i), i);
      Node& node = nodes_[i];
      // Drawn for every node whatever is listed, so listing one node's clock
      // leaves the others' draws unchanged.
      const double u_offset = clock_rng.uniform();
      const double u_drift = clock_rng.uniform();
      node.offset_us =
          std::llround((2 * u_offset - 1) * static_cast<double>(s_.clock.offset_max_us));
      node.drift = (2 * u_drift - 1) * s_.clock.drift_max;
      if (i < s_.clock.offsets_us.size()) node.offset_us = s_.clock.offsets_us[i];
      if (i < s_.clock.drifts.size()) node.drift = s_.clock.drifts[i];
    }
    for (std::uint32_t i = 0; i < s_.cluster.seeds; ++i) seed_addresses_.push_back(address_of(i));

    Rng phase_rng(derive_seed(seed_, 3));
    for (std::uint32_t i = 0; i < n; ++i) {
      start_node(i, 0);
      push(1 + static_cast<TimeUs>(phase_rng() % static_cast<std::uint64_t>(tick_us_)), Kind::kTick,
           i, nodes_[i].generation);
    }
    for (std::uint32_t si = 0; si < s_.traffic.size(); ++si) {
      for (std::uint32_t i = 0; i < n; ++i) {
        const TimeUs at = workload_->first(si, i);
        if (at >= 0) push(at, Kind::kArrival, i, si);
      }
    }
    for (std::uint32_t c = 0; c < s_.crashes.size(); ++c) {
      const Crash& crash = s_.crashes[c];
      push(crash.at_us, Kind::kCrash, crash.node, c);
      if (crash.restart_us) push(*crash.restart_us, Kind::kRestart, crash.node, c);
    }
    for (std::uint32_t p = 0; p < s_.partitions.size(); ++p) {
      push(s_.partitions[p].end_us, Kind::kHeal, 0, p);
    }
    for (std::uint32_t r = 0; r < s_.resets.size(); ++r) {
      push(s_.resets[r].at_us, Kind::kReset, s_.resets[r].node, r);
    }
  }

  void start_node(std::uint32_t i, TimeUs t) {
    Node& node = nodes_[i];
    NodeResult& result = r_.per_node[i];
    core::LimiterOptions limiter_options;
    limiter_options.replicated = true;
    limiter_options.fair_share = s_.cluster.fair_share;
    node.limiter = std::make_unique<core::Limiter>(limiter_options, s_.rules);
    if (redis_) {
      // As rlimitd in Redis mode: the same ids and incarnations, no peers.
      node.limiter->enable_replication("n" + std::to_string(i),
                                       static_cast<std::uint64_t>(local(i, t)), local(i, t));
      node.store = std::make_unique<core::StoreSync>(s_.redis.options, *node.limiter);
      node.up = true;
      ++node.generation;
      node.next_sweep_us = local(i, t) + s_.cluster.sweep_interval_us;
      return;
    }
    core::ClusterOptions options = s_.cluster.options;
    options.cluster_name = "sim";
    options.share_draw_seed = seed_;
    options.membership.node_id = "n" + std::to_string(i);
    options.membership.address = address_of(i);
    // As rlimitd: the wall clock at start, so a restart has a larger one.
    options.membership.incarnation = static_cast<std::uint64_t>(local(i, t));
    options.membership.seeds = seed_addresses_;
    node.cluster = std::make_unique<core::ClusterNode>(options, *node.limiter,
                                                       derive_seed(seed_, 4 + result.restarts, i));
    node.up = true;
    ++node.generation;
    node.next_sweep_us = local(i, t) + s_.cluster.sweep_interval_us;
    node.cluster->start(local(i, t));
    flush(i, t);
  }

  // Adds what an incarnation counted to the run's totals.
  void harvest(std::uint32_t i) {
    Node& node = nodes_[i];
    NodeResult& result = r_.per_node[i];
    harvest_limiter(node);
    if (node.store) return harvest_store(i);
    const core::ClusterStats& c = node.cluster->stats();
    result.packets_out += c.packets_out;
    result.bytes_out += c.bytes_out + c.packets_out * kEnvelopeBytes;
    result.packets_in += c.packets_in;
    result.bytes_in += c.bytes_in + c.packets_in * kEnvelopeBytes;
    CoreTotals& t = r_.core;
    t.gossip_rounds += c.gossip_rounds;
    t.gossip_backlog_deferred += c.gossip_backlog_deferred;
    t.anti_entropy_pushes += c.anti_entropy_pushes;
    t.entries_gossiped += c.entries_gossiped;
    t.routed_entries_to_owners += c.routed_entries_to_owners;
    t.routed_entries_forwarded += c.routed_entries_forwarded;
    t.routed_newcomer_keys += c.routed_newcomer_keys;
    t.piggyback_trimmed += c.piggyback_trimmed;
    t.malformed_payloads += c.malformed_payloads;
    const core::MembershipStats& m = node.cluster->membership().stats();
    t.suspicions += m.suspicions;
    t.deaths += m.deaths;
    t.refutations += m.refutations;
    t.tables_sent += m.tables_sent;
  }

  void harvest_limiter(Node& node) {
    CoreTotals& t = r_.core;
    const core::LimiterStats& l = node.limiter->stats();
    t.remote_tokens_charged += l.remote_tokens_charged;
    t.history_forgiven += node.limiter->ledger().history_forgiven();
    t.share_refused += l.share_refused;
    t.share_probes += l.share_probes;
    t.share_wake_epochs += l.share_wake_epochs;
    t.share_log_epochs_cut += l.share_log_epochs_cut;
    t.share_single_crowd_epochs += l.share_single_crowd_epochs;
    t.share_crowded_epochs += l.share_crowded_epochs;
    t.share_crowded_bursts += node.limiter->ledger().crowded_bursts();
    t.share_straggler_wakes += node.limiter->ledger().straggler_wakes();
    t.share_crowds_disproved += node.limiter->ledger().crowds_disproved();
    t.share_crowded_starts += l.share_crowded_starts;
    t.share_keys_crowded += l.share_keys_crowded;
    t.share_asks += l.share_asks;
    t.share_crowds_told += l.share_crowds_told;
    t.share_asks_merged += node.limiter->ledger().asks_merged();
    t.share_idle_raise_capped += l.share_idle_raise_capped;
    t.share_sparse_raised += l.share_sparse_raised;
    t.share_sparse_raise_capped += l.share_sparse_raise_capped;
    t.share_contended_balance += l.share_contended_balance;
    t.share_askers_floored += l.share_askers_floored;
    t.share_debts_carried += l.share_debts_carried;
    t.share_debt_carried_units += l.share_debt_carried_units;
    t.share_debts_capped += l.share_debts_capped;
    t.share_credits_carried += l.share_credits_carried;
    t.share_credit_carried_units += l.share_credit_carried_units;
    t.share_passes_thinned += l.share_passes_thinned;
    t.remote_unknown_keys += l.remote_unknown_keys;
    t.key_table_full += l.key_table_full;
    t.clock_went_back += l.clock_went_back;
    t.invalid_checks += l.invalid;
  }

  // Redis mode: one round trip per batch stands for the node's packets; the
  // bytes are the RESP bytes of its commands and of the replies.
  void harvest_store(std::uint32_t i) {
    const core::StoreSyncStats& st = nodes_[i].store->stats();
    NodeResult& result = r_.per_node[i];
    result.packets_out += st.round_trips;
    result.bytes_out += st.bytes_out;
    result.packets_in += st.round_trips;
    result.bytes_in += st.bytes_in;
    CoreTotals& t = r_.core;
    t.store_batches += st.batches;
    t.store_batches_failed += st.batches_failed;
    t.store_batches_timed_out += st.batches_timed_out;
    t.store_batches_full += st.batches_full;
    t.store_keys_written += st.keys_written;
    t.store_keys_read += st.keys_read;
    t.store_commands += st.commands;
    t.store_down += st.store_down;
    t.store_tokens_charged_standin += st.tokens_charged_standin;
  }

  bool store_out(TimeUs t) const {
    for (const StoreOutage& o : s_.redis.outages) {
      if (t >= o.start_us && t < o.end_us) return true;
    }
    return false;
  }

  // Carries node i's batch to the modelled store; the answer comes back as a
  // kStoreReply event.
  void send_batch(std::uint32_t i, core::StoreBatch batch) {
    std::uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = static_cast<std::uint32_t>(pending_.size());
      pending_.emplace_back();
    }
    PendingBatch& p = pending_[slot];
    p.batch = std::move(batch);
    p.fate = BatchFate::kAnswered;
    TimeUs delay = s_.redis.latency_us;
    if (s_.redis.jitter_us > 0) {
      delay += static_cast<TimeUs>(store_rng_.uniform() * static_cast<double>(s_.redis.jitter_us));
    }
    if (store_out(now_)) {
      p.fate = BatchFate::kRefused;  // connection refused: fails after a round trip
    } else if (s_.redis.loss > 0 && store_rng_.uniform() < s_.redis.loss) {
      // No answer: the command timeout fires; the write landed or not.
      p.fate = BatchFate::kTimedOut;
      if (store_rng_.uniform() < 0.5) store_.apply(p.batch, now_);
      delay = s_.redis.timeout_us;
    }
    push(now_ + delay, Kind::kStoreReply, i, nodes_[i].generation, slot);
  }

  void store_reply(const Event& e) {
    PendingBatch& p = pending_[e.from];
    Node& node = nodes_[e.node];
    if (node.up && node.generation == e.aux) {
      core::StoreResult result;
      if (p.fate == BatchFate::kAnswered) {
        result = store_.apply(p.batch, now_);
      } else {
        result.id = p.batch.id;
        result.ok = false;
        result.error = p.fate == BatchFate::kRefused ? "connection refused" : "timed out";
        for (const core::StoreWrite& w : p.batch.writes) result.failed_writes.push_back(w.key);
      }
      digest_.mix(static_cast<std::uint64_t>(now_));
      digest_.mix(static_cast<std::uint64_t>(e.node));
      digest_.mix(static_cast<std::uint64_t>(result.keys.size()));
      node.store->on_result(result, local(e.node, now_));
    }
    p.batch = {};
    free_slots_.push_back(e.from);
  }

  void flush(std::uint32_t i, TimeUs t) {
    if (!nodes_[i].cluster) return;  // Redis mode: no peers
    std::vector<core::OutPacket>& out = nodes_[i].cluster->outbox();
    for (core::OutPacket& packet : out) {
      auto it = address_index_.find(packet.address);
      if (it == address_index_.end()) {
        ++network_.stats().unknown_address;
        continue;
      }
      TimeUs arrivals[2];
      const int copies = network_.route(i, it->second, packet.payload.size(), t, arrivals);
      for (int c = 0; c < copies; ++c) {
        push(arrivals[c], Kind::kDeliver, it->second, 0, i,
             c + 1 == copies ? std::move(packet.payload) : packet.payload);
      }
    }
    out.clear();
  }

  void handle(Event& e) {
    switch (e.kind) {
      case Kind::kDeliver:
        return deliver(e);
      case Kind::kTick:
        return tick(e.node, e.aux);
      case Kind::kArrival:
        return arrival(e.aux, e.node);
      case Kind::kCrash:
        return crash(e.node);
      case Kind::kRestart:
        return restart(e.node);
      case Kind::kHeal:
        return track("partition " + std::to_string(e.aux) + " healed");
      case Kind::kProbe:
        return probe();
      case Kind::kRelease:
        return release(e);
      case Kind::kReset:
        return reset(e.node, s_.resets[e.aux]);
      case Kind::kStoreReply:
        return store_reply(e);
    }
  }

  // rlimitctl reset on node i: the ideal forgets the key at the same moment
  // (a reset sent to a daemon that is down fails: nothing happens).
  void reset(std::uint32_t i, const KeyReset& reset) {
    Node& node = nodes_[i];
    if (!node.up) return;
    const core::CheckInput& input = workload_->input(reset.stream, reset.key);
    ideal_.reset(input, now_);
    ++r_.resets;
    node.limiter->reset(input, local(i, now_), out_);
    flush(i, now_);
    track("node " + std::to_string(i) + " reset a key");
  }

  void deliver(Event& e) {
    // A partition that began while the datagram was in flight cuts it too.
    if (network_.blocked(e.from, e.node, now_)) {
      ++network_.stats().partitioned;
      return;
    }
    Node& node = nodes_[e.node];
    if (!node.up) {
      ++network_.stats().to_down_node;
      return;
    }
    ++network_.stats().delivered;
    digest_.mix(static_cast<std::uint64_t>(now_));
    digest_.mix(static_cast<std::uint64_t>(e.node));
    digest_.mix(e.payload);
    node.cluster->on_payload(e.payload, local(e.node, now_));
    flush(e.node, now_);
  }

  void tick(std::uint32_t i, std::uint32_t generation) {
    Node& node = nodes_[i];
    if (!node.up || generation != node.generation) return;
    const TimeUs now = local(i, now_);
    if (node.store) {
      if (std::optional<core::StoreBatch> batch = node.store->tick(now)) {
        send_batch(i, std::move(*batch));
      }
    } else {
      node.cluster->tick(now);
      std::int64_t& complete_us = r_.per_node[i].view_complete_us;
      if (complete_us < 0 && node.cluster->membership().live_peers().size() + 1 >= nodes_.size()) {
        complete_us = now_;
      }
    }
    if (now >= node.next_sweep_us) {
      node.limiter->sweep(now, s_.cluster.sweep_batch);
      node.next_sweep_us = now + s_.cluster.sweep_interval_us;
    }
    flush(i, now_);
    push(now_ + tick_us_, Kind::kTick, i, generation);
  }

  void arrival(std::uint32_t stream, std::uint32_t i) {
    const TimeUs next = workload_->next(stream, i, now_);
    if (next >= 0) push(next, Kind::kArrival, i, stream);
    Node& node = nodes_[i];
    if (!node.up && s_.down_arrivals == DownArrivals::kLost) return;

    const std::uint32_t key = workload_->pick_key(stream, i);
    const core::CheckInput& input = workload_->input(stream, key);
    const bool ideal = ideal_.check(input, now_);
    bool allowed = false;
    if (node.up) {
      node.limiter->check(input, local(i, now_), out_);
      allowed = out_.allowed;
    } else {
      allowed = s_.down_arrivals == DownArrivals::kFailOpen;
      if (allowed) r_.fail_open += static_cast<std::uint64_t>(input.cost);
    }

    const auto cost = static_cast<std::uint64_t>(input.cost);
    const std::size_t bin = static_cast<std::size_t>(now_ / r_.series.sample_us);
    Series& series = r_.series;
    series.arrivals[bin] += cost;
    ++r_.requests;
    r_.arrivals += cost;
    NodeResult& nr = r_.per_node[i];
    ++nr.requests;
    if (allowed) {
      series.admitted[bin] += cost;
      if (!series.per_node.empty()) {
        series.per_node[static_cast<std::size_t>(i) * series.samples() + bin] +=
            static_cast<std::uint32_t>(cost);
      }
      r_.admitted += cost;
      nr.admitted += cost;
      key_admitted_[stream][key] += static_cast<std::int64_t>(cost);
    }
    if (ideal) {
      series.ideal[bin] += cost;
      r_.ideal += cost;
      key_ideal_[stream][key] += static_cast<std::int64_t>(cost);
    }
    if (s_.traffic[stream].hold_us > 0) {
      const TimeUs at = now_ + s_.traffic[stream].hold_us;
      if (ideal) hold_leases(ideal_.last(), at, kIdealNode, 0);
      if (allowed && node.up) hold_leases(out_, at, i, node.generation);
    }
    if (allowed && !ideal) ++r_.allowed_ideal_denied;
    if (!allowed && ideal) ++r_.denied_ideal_allowed;
    if ((allowed || ideal) && cost > 0) {
      const auto tokens = static_cast<std::uint32_t>(cost);
      key_windows_->add(unit_first_[stream] + (workload_->info(stream).per_key ? key : 0),
                        static_cast<std::int64_t>(bin), allowed ? tokens : 0, ideal ? tokens : 0);
    }
    if (options_.requests != nullptr) {
      *options_.requests << now_ << ',' << i << ',' << stream << ',' << key << ',' << cost << ','
                         << (allowed ? 1 : 0) << ',' << (ideal ? 1 : 0) << '\n';
    }
    digest_.mix(static_cast<std::uint64_t>(now_));
    digest_.mix((static_cast<std::uint64_t>(i) << 32) | stream);
    digest_.mix((static_cast<std::uint64_t>(key) << 2) | (allowed ? 1 : 0) | (ideal ? 2 : 0));
  }

  // Schedules the release of every lease `out` handed out.
  void hold_leases(const core::CheckOutput& out, TimeUs at, std::uint32_t node,
                   std::uint32_t generation) {
    for (const core::RuleVerdict& v : out.rules) {
      if (v.lease == 0) continue;
      std::string lease(v.key);
      lease.append(reinterpret_cast<const char*>(&v.lease), sizeof v.lease);
      push(at, Kind::kRelease, node, generation, 0, std::move(lease));
    }
  }

  void release(const Event& e) {
    std::uint64_t id = 0;
    std::memcpy(&id, e.payload.data() + e.payload.size() - sizeof id, sizeof id);
    const std::string_view key(e.payload.data(), e.payload.size() - sizeof id);
    if (e.node == kIdealNode) return ideal_.release(key, id, now_);
    Node& node = nodes_[e.node];
    // A crash took the lease with the node's memory.
    if (!node.up || node.generation != e.aux) return;
    node.limiter->release_lease(key, id, /*extend=*/false, local(e.node, now_));
  }

  void crash(std::uint32_t i) {
    Node& node = nodes_[i];
    if (!node.up) return;
    harvest(i);
    // Memory lost: the Limiter (buckets, counters) and the membership go.
    node.cluster.reset();
    node.store.reset();
    node.limiter.reset();
    node.up = false;
  }

  void restart(std::uint32_t i) {
    Node& node = nodes_[i];
    if (node.up) return;
    ++r_.per_node[i].restarts;
    start_node(i, now_);
    push(now_ + tick_us_, Kind::kTick, i, node.generation);
    track("node " + std::to_string(i) + " restarted");
  }

  // Starts measuring convergence from now: takes the union of every node's
  // counters as the consumption each node must come to know.
  void track(std::string event) {
    if (s_.report.probe_keys == 0) return;
    Tracker tracker;
    tracker.index = r_.convergence.size();
    Convergence c;
    c.event = std::move(event);
    c.at_us = now_;
    r_.convergence.push_back(std::move(c));
    std::unordered_map<std::string, std::map<std::pair<std::string, std::uint64_t>, std::uint64_t>>
        known;
    for (Node& node : nodes_) {
      if (!node.up) continue;
      const core::Ledger& ledger = node.limiter->ledger();
      ledger.for_each_key([&](const std::string& key, const core::Ledger::KeyState& state) {
        auto& entries = known[key];
        for (const core::Ledger::Entry& e : state.entries) {
          std::uint64_t& v = entries[{ledger.origin_name(e.origin), e.incarnation}];
          v = std::max(v, e.consumed);
        }
      });
    }
    for (const auto& [key, entries] : known) {
      std::uint64_t total = 0;
      for (const auto& [origin, consumed] : entries) total += consumed;
      tracker.targets.emplace_back(key, total);
    }
    std::sort(tracker.targets.begin(), tracker.targets.end());
    trackers_.push_back(std::move(tracker));
    if (!probe_scheduled_) {
      probe_scheduled_ = true;
      push(now_, Kind::kProbe, 0);
    }
  }

  // True if every live node knows at least what `tracker` requires.
  bool counters_known(const Tracker& tracker) const {
    for (const Node& node : nodes_) {
      if (!node.up) continue;
      const core::Ledger& ledger = node.limiter->ledger();
      for (const auto& [key, total] : tracker.targets) {
        const core::Ledger::KeyState* state = ledger.find(key);
        std::uint64_t sum = 0;
        if (state != nullptr) {
          for (const core::Ledger::Entry& e : state->entries) sum += e.consumed;
        }
        if (static_cast<double>(sum) + s_.report.converge_tokens < static_cast<double>(total))
          return false;
      }
    }
    return true;
  }

  // The largest disagreement between live nodes about a probed key's
  // balance, in tokens. A probe is a check of cost 0: it charges nothing and
  // its refill is exact, so it does not change what the node decides later.
  double spread() {
    double worst = 0;
    for (std::uint32_t si = 0; si < s_.traffic.size(); ++si) {
      const std::uint32_t keys = std::min(s_.report.probe_keys, s_.traffic[si].keys);
      for (std::uint32_t k = 0; k < keys; ++k) {
        low_.clear();
        high_.clear();
        for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
          Node& node = nodes_[i];
          if (!node.up) continue;
          core::CheckInput input = workload_->input(si, k);
          input.cost = 0;
          input.mode = core::CheckMode::kPeek;
          node.limiter->check(input, local(i, now_), out_);
          for (std::size_t v = 0; v < out_.rules.size(); ++v) {
            const core::RuleVerdict& verdict = out_.rules[v];
            if (verdict.params.limit <= 0 || verdict.reset_after_us < 0) continue;
            const double balance = static_cast<double>(verdict.params.burst) -
                                   static_cast<double>(verdict.reset_after_us) *
                                       static_cast<double>(verdict.params.limit) /
                                       static_cast<double>(verdict.params.period_us);
            if (low_.size() <= v) {
              low_.resize(v + 1, balance);
              high_.resize(v + 1, balance);
            }
            low_[v] = std::min(low_[v], balance);
            high_[v] = std::max(high_[v], balance);
          }
        }
        for (std::size_t v = 0; v < low_.size(); ++v) worst = std::max(worst, high_[v] - low_[v]);
      }
    }
    return worst;
  }

  void probe() {
    const double now_spread = spread();
    std::vector<Tracker> still;
    for (Tracker& t : trackers_) {
      Convergence& c = r_.convergence[t.index];
      if (t.first) c.spread_at_event = now_spread;
      t.first = false;
      c.spread_last = now_spread;
      if (c.counters_after_us < 0 && counters_known(t)) c.counters_after_us = now_ - c.at_us;
      if (c.counters_after_us >= 0 && now_spread <= s_.report.converge_tokens) {
        c.balances_after_us = now_ - c.at_us;
        continue;
      }
      if (now_ - c.at_us >= s_.report.converge_max_us) continue;  // gave up
      still.push_back(std::move(t));
    }
    trackers_ = std::move(still);
    probe_scheduled_ = !trackers_.empty();
    if (probe_scheduled_) push(now_ + s_.report.probe_interval_us, Kind::kProbe, 0);
  }

  void finish() {
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      Node& node = nodes_[i];
      if (!node.up) continue;
      harvest(i);
      r_.per_node[i].live_peers_end =
          node.cluster ? static_cast<std::int64_t>(node.cluster->membership().live_peers().size())
                       : static_cast<std::int64_t>(nodes_.size() - 1);
    }
    r_.network = network_.stats();
    r_.digest = digest_.value();

    for (std::size_t si = 0; si < key_admitted_.size(); ++si) {
      for (std::size_t k = 0; k < key_admitted_[si].size(); ++k) {
        const std::int64_t d = key_admitted_[si][k] - key_ideal_[si][k];
        (d > 0 ? r_.over_run : r_.under_run) += static_cast<std::uint64_t>(std::abs(d));
      }
    }

    report_key_windows();

    // Windows and cumulative excess over the traffic's time span.
    const Series& series = r_.series;
    const TimeUs sample = series.sample_us;
    const std::size_t first = static_cast<std::size_t>(r_.traffic_start_us / sample);
    const std::size_t last = std::min(
        series.samples(), static_cast<std::size_t>((r_.traffic_end_us + sample - 1) / sample));
    const std::size_t w = std::max<std::size_t>(1, static_cast<std::size_t>(r_.window_us / sample));
    std::int64_t cumulative = 0;
    std::vector<std::int64_t> prefix(
        1, 0);  // prefix[j]: sum of (admitted - ideal) of bins [first, first + j)
    // The same of admitted and of arrivals alone, for the absolute figures.
    std::vector<std::int64_t> admitted_prefix(1, 0);
    std::vector<std::int64_t> arrivals_prefix(1, 0);
    std::vector<std::int64_t> ideal_prefix(1, 0);
    for (std::size_t b = first; b < last; ++b) {
      ideal_prefix.push_back(ideal_prefix.back() + static_cast<std::int64_t>(series.ideal[b]));
      admitted_prefix.push_back(admitted_prefix.back() +
                                static_cast<std::int64_t>(series.admitted[b]));
      arrivals_prefix.push_back(arrivals_prefix.back() +
                                static_cast<std::int64_t>(series.arrivals[b]));
      const std::int64_t d = static_cast<std::int64_t>(series.admitted[b]) -
                             static_cast<std::int64_t>(series.ideal[b]);
      cumulative += d;
      prefix.push_back(cumulative);
      if (cumulative > r_.peak_excess) {
        r_.peak_excess = cumulative;
        r_.peak_excess_at_us = static_cast<TimeUs>(b + 1) * sample;
      }
    }
    r_.final_excess = cumulative;
    const std::size_t bins = prefix.size() - 1;
    const std::size_t windows = bins > w ? bins - w + 1 : (bins > 0 ? 1 : 0);
    for (std::size_t j = 0; j < windows; ++j) {
      const std::int64_t d = prefix[std::min(bins, j + w)] - prefix[j];
      const TimeUs at = static_cast<TimeUs>(first + j) * sample;
      if (d > r_.worst_over_window) {
        r_.worst_over_window = d;
        r_.worst_over_at_us = at;
      }
      if (-d > r_.worst_under_window) {
        r_.worst_under_window = -d;
        r_.worst_under_at_us = at;
      }
      const std::size_t end = std::min(bins, j + w);
      const std::int64_t admitted = admitted_prefix[end] - admitted_prefix[j];
      if (j < w) {
        r_.first_window_admitted = std::max(r_.first_window_admitted, admitted);
        continue;
      }
      if (admitted > r_.worst_window_admitted) {
        r_.worst_window_admitted = admitted;
        r_.worst_window_at_us = at;
      }
      const double arrivals = static_cast<double>(arrivals_prefix[end] - arrivals_prefix[j]);
      if (arrivals < r_.limit_per_window()) continue;
      const std::int64_t ideal_admitted = ideal_prefix[end] - ideal_prefix[j];
      if (r_.ideal_least_window < 0 || ideal_admitted < r_.ideal_least_window) {
        r_.ideal_least_window = ideal_admitted;
        r_.ideal_least_window_at_us = at;
      }
      if (static_cast<double>(ideal_admitted) < 0.5 * r_.limit_per_window()) continue;
      if (r_.least_window_admitted < 0 || admitted < r_.least_window_admitted) {
        r_.least_window_admitted = admitted;
        r_.least_window_at_us = at;
      }
      // admitted / ideal_admitted below the least so far, in integers.
      if (ideal_admitted > 0 &&
          (r_.least_window_vs_ideal_ideal == 0 ||
           admitted * r_.least_window_vs_ideal_ideal <
               r_.least_window_vs_ideal_admitted * ideal_admitted)) {
        r_.least_window_vs_ideal_at_us = at;
        r_.least_window_vs_ideal_admitted = admitted;
        r_.least_window_vs_ideal_ideal = ideal_admitted;
      }
      // The same against the lower of the ideal's window and its rate around
      // it (per window, over the window and half a window either side: two
      // windows, none at the run's end), where demand reached the limit in
      // each of those two windows: with demand there, a low window of the
      // ideal is the algorithm's own echo; without, the timing of demand
      // (a job every few seconds), and the window is read against its own.
      const std::size_t around_from = j - w / 2;  // j >= w
      const std::size_t around_to = around_from + 2 * w;
      if (around_to > bins) continue;
      const auto demand_reached = [&](std::size_t from) {
        return static_cast<double>(arrivals_prefix[from + w] - arrivals_prefix[from]) >=
               r_.limit_per_window();
      };
      const double ideal_lower =
          demand_reached(around_from) && demand_reached(around_from + w)
              ? std::min(
                    static_cast<double>(ideal_admitted),
                    static_cast<double>(ideal_prefix[around_to] - ideal_prefix[around_from]) / 2)
              : static_cast<double>(ideal_admitted);
      if (ideal_lower > 0 &&
          (r_.least_window_vs_ideal_rate_ideal <= 0 ||
           static_cast<double>(admitted) / ideal_lower < r_.least_window_vs_ideal_rate())) {
        r_.least_window_vs_ideal_rate_admitted = admitted;
        r_.least_window_vs_ideal_rate_ideal = ideal_lower;
        r_.least_window_vs_ideal_rate_at_us = at;
      }
    }
  }

  // One unit per key of a stream whose limit is per key, else one per
  // stream, each with its tightest rule's ceiling per report window.
  void setup_key_windows() {
    std::size_t units = 0;
    for (std::uint32_t si = 0; si < s_.traffic.size(); ++si) {
      unit_first_.push_back(units);
      units += workload_->info(si).per_key ? s_.traffic[si].keys : 1;
    }
    const auto bins = static_cast<std::uint32_t>(
        std::max<TimeUs>(1, s_.report.window_us / s_.report.sample_us));
    key_windows_ = std::make_unique<KeyWindows>(units, bins);
    for (std::uint32_t si = 0; si < s_.traffic.size(); ++si) {
      const StreamInfo& info = workload_->info(si);
      if (info.key_params.period_us <= 0) continue;  // matches no rule
      const double ceiling = static_cast<double>(info.key_capacity) +
                             static_cast<double>(info.key_params.limit) *
                                 static_cast<double>(bins * s_.report.sample_us) /
                                 static_cast<double>(info.key_params.period_us);
      const std::size_t end = si + 1 < unit_first_.size() ? unit_first_[si + 1] : units;
      for (std::size_t u = unit_first_[si]; u < end; ++u) key_windows_->set_ceiling(u, ceiling);
    }
  }

  std::string unit_name(std::size_t unit) const {
    const auto it = std::upper_bound(unit_first_.begin(), unit_first_.end(), unit);
    const auto si = static_cast<std::size_t>(it - unit_first_.begin()) - 1;
    std::string name = s_.traffic[si].name;
    if (workload_->info(static_cast<std::uint32_t>(si)).per_key) {
      name += "/" + std::to_string(unit - unit_first_[si]);
    }
    return name;
  }

  void report_key_windows() {
    key_windows_->finish();
    const auto figure = [&](const KeyWindows::Worst& w) {
      KeyWindowFigure f;
      if (w.first_bin < 0) return f;
      f = {w.value, w.admitted, w.ideal, w.ceiling, unit_name(w.unit),
           std::max<std::int64_t>(0, w.first_bin) * r_.series.sample_us};
      return f;
    };
    r_.key_window_cold = figure(key_windows_->worst_ratio(true));
    r_.key_window_later = figure(key_windows_->worst_ratio(false));
    r_.key_over_cold = figure(key_windows_->worst_over(true));
    r_.key_over_later = figure(key_windows_->worst_over(false));
  }

  const Scenario& s_;
  std::uint64_t seed_;
  RunOptions options_;
  Results& r_;
  Network network_;
  Ideal ideal_;
  // Redis mode: the modelled store and the batches on their way.
  enum class BatchFate : std::uint8_t { kAnswered, kRefused, kTimedOut };
  struct PendingBatch {
    core::StoreBatch batch;
    BatchFate fate = BatchFate::kAnswered;
  };
  bool redis_ = false;
  core::MemoryStore store_;
  Rng store_rng_;
  std::vector<PendingBatch> pending_;
  std::vector<std::uint32_t> free_slots_;
  std::unique_ptr<Workload> workload_;
  std::vector<Node> nodes_;
  std::unordered_map<std::string, std::uint32_t> address_index_;
  std::vector<std::string> seed_addresses_;
  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
  TimeUs now_ = 0;
  TimeUs tick_us_ = 5000;
  Digest digest_;
  core::CheckOutput out_;
  std::vector<std::vector<std::int64_t>> key_admitted_;  // [stream][key], tokens
  std::vector<std::vector<std::int64_t>> key_ideal_;
  std::unique_ptr<KeyWindows> key_windows_;
  std::vector<std::size_t> unit_first_;  // [stream]: its first unit in key_windows_
  std::vector<Tracker> trackers_;  // convergence still being measured
  bool probe_scheduled_ = false;
  std::vector<double> low_, high_;
};

}  // namespace

bool run_simulation(const Scenario& scenario, std::uint64_t seed, const RunOptions& options,
                    Results& results, std::string& error) {
  results = Results{};
  Simulation simulation(scenario, seed, options, results);
  return simulation.run(error);
}

}  // namespace rlimit::sim
