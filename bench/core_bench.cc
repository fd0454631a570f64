// Google Benchmark for the pure core: decisions per second on one hot key and
// spread over 1M keys (uniform and Zipf), and the cost of merging gossip: one
// counter entry through Limiter::merge_remote, and a full Counters payload
// through ClusterNode::on_payload, and the owner lookup of a routed key
// (KeyOwners::owners, done per routed key sent, never on the request path).
// Run: build/bin/rlimit-core-bench
#include <benchmark/benchmark.h>

#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "core/cluster_node.h"
#include "core/fair_share.h"
#include "core/key_owners.h"
#include "core/limiter.h"
#include "core/time.h"

namespace rlimit::core {
namespace {

RuleSet per_user_rules() {
  Rule rule;
  rule.name = "per-user";
  ValueMatcher each;
  each.each = true;
  rule.match.push_back({"user", each});
  // Large enough that every check is allowed and charged: the full path.
  rule.params = {1'000'000'000, kUsPerSecond, 1'000'000'000};
  RuleSet rules;
  rules.rules.push_back(std::move(rule));
  return rules;
}

// "user-<i>" into `buf`, as a service would build it per request.
std::string_view user_name(std::uint64_t i, char (&buf)[32]) {
  std::memcpy(buf, "user-", 5);
  const auto end = std::to_chars(buf + 5, buf + sizeof(buf), i).ptr;
  return {buf, static_cast<std::size_t>(end - buf)};
}

std::uint64_t xorshift(std::uint64_t& x) {
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}

// Makes every one of `key_count` per-user buckets exist, so a measuring loop
// measures lookups, not inserts.
void fill_users(Limiter& limiter, std::uint64_t key_count) {
  CheckOutput out;
  char buf[32];
  for (std::uint64_t i = 0; i < key_count; ++i) {
    const Descriptor d[] = {{"user", user_name(i, buf)}};
    limiter.check({d, 1, nullptr}, 0, out);
  }
}

// Checks one user's key again and again, a microsecond apart.
void check_hot_key(benchmark::State& state, Limiter& limiter) {
  const Descriptor descriptors[] = {{"user", "alice"}};
  CheckOutput out;
  TimeUs now = 0;
  for (auto _ : state) {
    limiter.check({descriptors, 1, nullptr}, ++now, out);
    benchmark::DoNotOptimize(out.allowed);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_TokenBucketHotKey(benchmark::State& state) {
  Limiter limiter({}, per_user_rules());
  check_hot_key(state, limiter);
}
BENCHMARK(BM_TokenBucketHotKey);

// A replicated limiter made a node of a 5-node cluster.
void join_five_nodes(Limiter& limiter) {
  limiter.enable_replication("self", 1, 0);
  limiter.set_share_view({.live_nodes = 5, .horizon_us = 80'000});
}

// The hot key on a cluster node (counters kept for peers), without and with
// fair shares (arg 0/1): the key is this node's alone, so the share never
// refuses; what is measured is the gate itself on the request path.
void BM_TokenBucketHotKeyReplicated(benchmark::State& state) {
  Limiter limiter({.replicated = true, .fair_share = state.range(0) != 0}, per_user_rules());
  join_five_nodes(limiter);
  check_hot_key(state, limiter);
}
BENCHMARK(BM_TokenBucketHotKeyReplicated)->Arg(0)->Arg(1);

// A replicated hot key its algorithm refuses (1000/s offered a check every
// microsecond: all but one in a thousand refused), fair shares off and on
// (arg 1), token bucket and GCRA (arg 0 = Algorithm). With shares on, a
// refusal is demand that marks a burst's end for a forgiven debt
// (Limiter::note_refused_demand): a ledger lookup once a 1.024 ms slot per
// key, whatever the algorithm.
void BM_ReplicatedHotKeyRefused(benchmark::State& state) {
  const auto algorithm = static_cast<Algorithm>(state.range(0));
  RuleSet rules = per_user_rules();
  rules.rules[0].algorithm = algorithm;
  rules.rules[0].params = {1000, kUsPerSecond, 1000};
  Limiter limiter({.replicated = true, .fair_share = state.range(1) != 0}, std::move(rules));
  join_five_nodes(limiter);
  check_hot_key(state, limiter);
  state.SetLabel(algorithm_name(algorithm));
  state.counters["refused"] =
      static_cast<double>(limiter.stats().denied) / static_cast<double>(limiter.stats().checks);
}
BENCHMARK(BM_ReplicatedHotKeyRefused)
    ->Args({static_cast<int>(Algorithm::kTokenBucket), 0})
    ->Args({static_cast<int>(Algorithm::kTokenBucket), 1})
    ->Args({static_cast<int>(Algorithm::kGcra), 0})
    ->Args({static_cast<int>(Algorithm::kGcra), 1});

// FairShare::ask at the margin of a share, where the credit left is short
// and what has accrued of the epoch's refill decides (arg 1: the refill
// accrues, as the bucket-like algorithms' and the sliding window's do,
// docs/cluster.md "A refill accrues"; arg 0: spendable at once, as a log's
// or a fixed window's): the request-path cost of the accrual, side by side.
// Nine other origins spend on the key; a check every 10 us of an epoch of
// 80 ms, the credit spent as far as it goes.
void BM_FairShareAskAtTheMargin(benchmark::State& state) {
  const ShareView view{.live_nodes = 10, .horizon_us = 80'000};
  const ShareInputs in{.headroom = 0,
                       .refill = 100,
                       .refill_accrues = state.range(0) != 0,
                       .others = 9,
                       .has_own = true,
                       .own_consumed = 100,
                       .all_consumed = 1000};
  FairShare share;
  TimeUs now = 1000 * kUsPerSecond;
  share.start_epoch(view, in, now);
  std::uint64_t admitted = 0;
  for (auto _ : state) {
    now += 10;
    if (share.due(now)) share.start_epoch(view, in, now);
    const FairShare::Answer answer = share.ask(1, now);
    if (answer == FairShare::Answer::kCredit) {
      share.spend(1);
      ++admitted;
    }
    benchmark::DoNotOptimize(answer);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["admitted"] =
      static_cast<double>(admitted) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_FairShareAskAtTheMargin)->Arg(0)->Arg(1);

// FairShare::start_epoch, a node's share of a key at an epoch's start (once
// a news horizon per key, in the check that starts it): 200 live nodes, 150
// other origins, a share below a request; its draws spread over the nodes
// (arg 1) or independent (arg 0, the sliding log's): the cost of the
// spread (docs/cluster.md, "Draws spread over the nodes"), side by side.
void BM_FairShareStartEpoch(benchmark::State& state) {
  const ShareView view{.live_nodes = 200, .horizon_us = 100'000, .rank = 57, .draw_seed = 1};
  const ShareInputs in{.headroom = 100,
                       .refill = 10,
                       .others = 150,
                       .has_own = true,
                       .own_consumed = 10,
                       .all_consumed = 1500,
                       .key_seed = 12345,
                       .spread_draws = state.range(0) != 0,
                       .dither_seed = 6789};
  FairShare share;
  TimeUs now = 1000 * kUsPerSecond;
  for (auto _ : state) {
    now += 100'000;
    benchmark::DoNotOptimize(share.start_epoch(view, in, now));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FairShareStartEpoch)->Arg(0)->Arg(1);

// One hot key through the Limiter for every algorithm a rule can select (arg
// = Algorithm): 1000 per second offered one check every 500 us, so about
// half are admitted and committed (as rlimit-algorithms-bench offers them),
// the full path with dispatch and the StateTable. Concurrency (1000 in
// flight) releases each lease right away: acquire + release per item.
void BM_LimiterHotKeyByAlgorithm(benchmark::State& state) {
  const auto algorithm = static_cast<Algorithm>(state.range(0));
  RuleSet rules = per_user_rules();
  Rule& rule = rules.rules[0];
  rule.algorithm = algorithm;
  rule.params = {1000, kUsPerSecond, 1000};
  rule.options.lease_ttl_us = kUsPerSecond;  // concurrency
  rule.options.max_delay_us = 0;             // smooth: decide, do not wait
  Limiter limiter({}, std::move(rules));
  const Descriptor descriptors[] = {{"user", "alice"}};
  CheckOutput out;
  TimeUs now = 1000 * kUsPerSecond;
  std::uint64_t denied = 0;
  for (auto _ : state) {
    now += 500;
    limiter.check({descriptors, 1, nullptr}, now, out);
    denied += out.allowed ? 0 : 1;
    if (out.rules[0].lease != 0) limiter.release_lease(out.rules[0].key, out.rules[0].lease, false, now);
    benchmark::DoNotOptimize(out.allowed);
  }
  state.SetLabel(algorithm_name(algorithm));
  state.SetItemsProcessed(state.iterations());
  state.counters["admitted"] = 1.0 - static_cast<double>(denied) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_LimiterHotKeyByAlgorithm)->DenseRange(0, static_cast<int>(kAlgorithmCount) - 1);

// Keys drawn uniformly (arg 1 = 0) or by Zipf s=1 (arg 1 = 1, from a table
// of precomputed ranks) over range(0) keys that all exist already.
void BM_TokenBucketManyKeys(benchmark::State& state) {
  const auto key_count = static_cast<std::uint64_t>(state.range(0));
  const bool zipf = state.range(1) != 0;
  Limiter limiter({.max_keys = key_count}, per_user_rules());
  fill_users(limiter, key_count);
  CheckOutput out;
  TimeUs now = 0;
  char buf[32];
  std::vector<std::uint32_t> ranks;
  if (zipf) {
    // Inverse-CDF table of 64K draws from Zipf(1) over key_count keys.
    double total = 0;
    for (std::uint64_t k = 1; k <= key_count; ++k) total += 1.0 / static_cast<double>(k);
    std::uint64_t x = 0x9e3779b97f4a7c15ull;
    ranks.resize(1 << 16);
    for (auto& r : ranks) {
      double u = static_cast<double>(xorshift(x) >> 11) * 0x1.0p-53 * total;
      // H(k) ~ ln k + gamma, inverted.
      std::uint64_t k =
          std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::exp(u - 0.5772156649)));
      k = std::min(k, key_count);
      r = static_cast<std::uint32_t>(k - 1);
    }
  }
  std::uint64_t x = 88172645463325252ull;
  std::size_t z = 0;
  for (auto _ : state) {
    const std::uint64_t i = zipf ? ranks[z++ & (ranks.size() - 1)] : xorshift(x) % key_count;
    const Descriptor d[] = {{"user", user_name(i, buf)}};
    limiter.check({d, 1, nullptr}, ++now, out);
    benchmark::DoNotOptimize(out.allowed);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TokenBucketManyKeys)->Args({1'000'000, 0})->Args({1'000'000, 1});

// The same uniform draws over range(0) keys, decided as a batch would be:
// Limiter::prefetch for the check range(1) places ahead, then check. Arg 1
// = 0 is the plain loop with the same bookkeeping, for a side-by-side ratio.
void BM_TokenBucketManyKeysPrefetched(benchmark::State& state) {
  const auto key_count = static_cast<std::uint64_t>(state.range(0));
  const auto ahead = static_cast<std::size_t>(state.range(1));
  Limiter limiter({.max_keys = key_count}, per_user_rules());
  fill_users(limiter, key_count);
  CheckOutput out;
  TimeUs now = 0;
  // A ring of upcoming requests, as a batch frame would hold them.
  constexpr std::size_t kRing = 64;
  char names[kRing][32];
  Descriptor ring[kRing];
  std::uint64_t x = 88172645463325252ull;
  const auto draw = [&](std::size_t slot) {
    ring[slot] = {"user", user_name(xorshift(x) % key_count, names[slot])};
  };
  for (std::size_t i = 0; i < kRing; ++i) draw(i);
  std::size_t next = 0;
  for (auto _ : state) {
    const std::size_t slot = next % kRing;
    if (ahead > 0) limiter.prefetch({std::span<const Descriptor>(&ring[(next + ahead) % kRing], 1), 1, nullptr});
    limiter.check({std::span<const Descriptor>(&ring[slot], 1), 1, nullptr}, ++now, out);
    benchmark::DoNotOptimize(out.allowed);
    draw(slot);
    ++next;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TokenBucketManyKeysPrefetched)
    ->Args({1'000'000, 0})
    ->Args({1'000'000, 4})
    ->Args({1'000'000, 8})
    ->Args({1'000'000, 16});

// Real bucket keys: what a replicated limiter records for `count` users.
std::vector<std::string> bucket_keys(std::uint64_t count) {
  Limiter limiter({.max_keys = count, .replicated = true}, per_user_rules());
  limiter.enable_replication("a", 1, 0);
  CheckOutput out;
  char buf[32];
  for (std::uint64_t i = 0; i < count; ++i) {
    const Descriptor d[] = {{"user", user_name(i, buf)}};
    limiter.check({d, 1, nullptr}, 0, out);
  }
  return limiter.ledger().changed();
}

// One peer's counter entry that raises what we knew: ledger max-merge plus
// charging the bucket, over range(0) keys.
void BM_MergeRemote(benchmark::State& state) {
  const auto key_count = static_cast<std::uint64_t>(state.range(0));
  const std::vector<std::string> keys = bucket_keys(key_count);
  Limiter limiter({.max_keys = key_count, .replicated = true}, per_user_rules());
  limiter.enable_replication("b", 1, 0);
  std::uint64_t i = 0, round = 1;
  TimeUs now = 0;
  for (auto _ : state) {
    const std::uint64_t increase = limiter.merge_remote(keys[i], "a", 7, round, ++now);
    benchmark::DoNotOptimize(increase);
    if (++i == keys.size()) {
      i = 0;
      ++round;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MergeRemote)->Arg(1000)->Arg(1'000'000);

// A full Counters payload (as a real node packs it, up to the MTU) through
// ClusterNode::on_payload: decode, membership, and every entry merged. Items
// are counter entries; each payload carries news. A round's last payload may
// be part-full: entries_per_payload says how full they were on average.
void BM_OnPayloadFullCounters(benchmark::State& state) {
  constexpr std::uint64_t kKeys = 10'000;
  const RuleSet rules = per_user_rules();
  const auto make = [&](const std::string& id, const std::string& address) {
    ClusterOptions options;
    options.cluster_name = "bench";
    options.membership.node_id = id;
    options.membership.address = address;
    options.membership.incarnation = 1;
    options.membership.seeds = {"10.0.0.1:7946"};
    // The same captured payloads are fed again and again on purpose: with
    // replay protection on, every copy after the first would be refused
    // before the merge this measures (core/replay_window.h).
    options.replay.enabled = false;
    return options;
  };
  Limiter limiter_a({.max_keys = kKeys, .replicated = true}, rules);
  Limiter limiter_b({.max_keys = kKeys, .replicated = true}, rules);
  ClusterNode a(make("a", "10.0.0.2:7946"), limiter_a, 1);
  ClusterNode b(make("b", "10.0.0.1:7946"), limiter_b, 2);
  TimeUs now = 0;
  a.start(now);
  b.start(now);
  // Let them meet.
  for (int i = 0; i < 50; ++i) {
    now += 5000;
    a.tick(now);
    b.tick(now);
    for (OutPacket& p : a.outbox()) b.on_payload(p.payload, now);
    for (OutPacket& p : b.outbox()) a.on_payload(p.payload, now);
    a.outbox().clear();
    b.outbox().clear();
  }
  // Payloads a sends after consuming from every key once more.
  std::uint64_t next_user = 0;
  const auto produce = [&] {
    std::vector<std::string> payloads;
    CheckOutput out;
    char buf[32];
    for (int n = 0; n < 400; ++n) {
      const Descriptor d[] = {{"user", user_name(next_user++ % kKeys, buf)}};
      limiter_a.check({d, 1, nullptr}, now, out);
    }
    now += 20'000;
    a.tick(now);
    b.tick(now);
    // Counters are kept for the timed loop; membership traffic is delivered
    // here, so both stay alive to each other.
    for (OutPacket& p : a.outbox()) {
      peer::v1::PeerMessage m;
      if (m.ParseFromString(p.payload) && m.has_counters() && m.counters().entries_size() > 0) {
        payloads.push_back(std::move(p.payload));
      } else {
        b.on_payload(p.payload, now);
      }
    }
    for (OutPacket& p : b.outbox()) a.on_payload(p.payload, now);
    a.outbox().clear();
    b.outbox().clear();
    return payloads;
  };
  std::vector<std::string> payloads = produce();
  std::size_t at = 0;
  std::uint64_t entries = 0, bytes = 0;
  for (auto _ : state) {
    if (at == payloads.size()) {
      state.PauseTiming();
      payloads = produce();
      at = 0;
      state.ResumeTiming();
      if (payloads.empty()) break;
    }
    const std::uint64_t before = b.stats().entries_received;
    b.on_payload(payloads[at], now);
    entries += b.stats().entries_received - before;
    bytes += payloads[at].size();
    ++at;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(entries));
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["entries_per_payload"] =
      benchmark::Counter(static_cast<double>(entries) / static_cast<double>(state.iterations()));
}
BENCHMARK(BM_OnPayloadFullCounters);

// Two owners of one key among `members` (rendezvous hashing: a hash per
// member), as a gossip round does for each routed key it sends.
void BM_KeyOwnersLookup(benchmark::State& state) {
  const auto members = static_cast<std::size_t>(state.range(0));
  std::vector<std::string> ids;
  for (std::size_t i = 0; i < members; ++i) ids.push_back("node-" + std::to_string(i) + ":7946");
  KeyOwners owners;
  owners.assign(std::move(ids));
  std::vector<std::string> keys;
  for (int i = 0; i < 1024; ++i) keys.push_back("per-user|user=u" + std::to_string(i));
  std::vector<std::uint32_t> out;
  std::size_t at = 0;
  for (auto _ : state) {
    owners.owners(keys[at++ & 1023], 2, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_KeyOwnersLookup)->Arg(10)->Arg(300)->Arg(1000);

}  // namespace
}  // namespace rlimit::core

BENCHMARK_MAIN();
