// RulesSync: versions ordered by (version, origin), a newer rule set fetched
// in chunks within the payload budget, despite loss, duplicates and
// reordering; retries bounded; the size bound; concurrent versions.
#include "core/rules_sync.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "core/cluster_node.h"

namespace rlimit::core {
namespace {

RulesVersion version(std::uint64_t v, std::string origin, std::string text) {
  // Any 32 bytes stand for the digest here: the shell computes the real one.
  std::string digest(32, '\0');
  for (std::size_t i = 0; i < text.size(); ++i) digest[i % 32] ^= text[i];
  digest[0] = static_cast<char>(v);
  return RulesVersion{v, std::move(origin), std::move(digest)};
}

peer::v1::RulesVersion advert(const RulesVersion& v) {
  peer::v1::RulesVersion out;
  out.set_version(v.version);
  out.set_origin(v.origin);
  out.set_digest(v.digest);
  return out;
}

std::string text_of(std::size_t bytes, char seed) {
  std::string text;
  for (std::size_t i = 0; i < bytes; ++i) text.push_back(static_cast<char>('a' + (seed + i) % 26));
  return text;
}

RulesSyncOptions options(std::uint32_t payload = 400) {
  RulesSyncOptions o;
  o.max_payload_bytes = payload;
  o.request_timeout_us = 1000;
  o.max_retries = 3;
  o.retry_backoff_us = 50'000;
  return o;
}

// Two nodes' RulesSync wired by hand: `a` holds a rule set, `b` fetches it.
// `deliver` decides the fate of each message from a to b (chunks).
struct Pair {
  RulesSync a{options()};
  RulesSync b;
  TimeUs now = 0;

  explicit Pair(RulesSyncOptions b_options = options()) : b(b_options) {
    a.set_cluster_name("c");
    b.set_cluster_name("c");
  }

  // Delivers b's requests to a, and a's chunks to b through `filter`, which
  // may drop, duplicate or reorder the batch. Returns the chunks delivered.
  template <typename Filter>
  std::size_t exchange(Filter&& filter) {
    std::size_t delivered = 0;
    std::vector<RulesOut> requests = std::move(b.out());
    b.out().clear();
    for (const RulesOut& r : requests) {
      EXPECT_EQ(r.address, "a:1");
      EXPECT_TRUE(r.message.has_rules_request());
      a.on_request("b:1", r.message.rules_request());
    }
    std::vector<RulesOut> chunks = std::move(a.out());
    a.out().clear();
    filter(chunks);
    for (const RulesOut& c : chunks) {
      b.on_chunk(c.message.rules_chunk(), now);
      ++delivered;
    }
    return delivered;
  }
};

TEST(RulesVersionTest, OrderIsVersionThenOriginThenDigest) {
  EXPECT_TRUE(version(2, "a", "").newer_than(version(1, "z", "")));
  EXPECT_TRUE(version(1, "b", "").newer_than(version(1, "a", "")));
  // Two texts under one (version, origin): the higher digest wins.
  // (The test digest's first byte is the version: the texts differ after it.)
  EXPECT_TRUE(version(1, "a", "-y").newer_than(version(1, "a", "-x")) !=
              version(1, "a", "-x").newer_than(version(1, "a", "-y")));
  EXPECT_FALSE(version(1, "a", "-x").newer_than(version(1, "a", "-x")));
}

TEST(RulesSyncTest, TwoTextsUnderOneVersionConvergeOnTheHigherDigest) {
  // Node a applied version 1, lost its state and applied version 1 again
  // with another text before it heard of the first: both sides must end on
  // one text.
  Pair p;
  const std::string first = text_of(300, 1);
  const std::string second = text_of(300, 2);
  const RulesVersion v1 = version(1, "a", first);
  const RulesVersion v2 = version(1, "a", second);
  p.a.set_local(v1, first);
  p.b.set_local(v2, second);
  p.a.on_advert("b", "b:1", advert(v2), p.now);
  p.b.on_advert("a", "a:1", advert(v1), p.now);
  // Exactly one side wants the other's.
  EXPECT_NE(p.a.fetching(), p.b.fetching());
  EXPECT_EQ(p.a.fetching(), v2.newer_than(v1));
}

TEST(RulesSyncTest, FetchesANewerVersionInChunksThatFitThePayload) {
  Pair p;
  const std::string text = text_of(5000, 1);
  const RulesVersion v = version(3, "a", text);
  p.a.set_local(v, text);
  p.b.set_local(version(0, "b", "old"), "old");
  p.b.on_advert("a", "a:1", advert(v), p.now);
  EXPECT_EQ(p.b.max_version_seen(), 3u);
  ASSERT_TRUE(p.b.fetching());
  for (int round = 0; round < 100 && p.b.fetching(); ++round) {
    for (const RulesOut& r : p.b.out()) {
      EXPECT_LE(r.message.ByteSizeLong(), 400u);
    }
    p.exchange([](std::vector<RulesOut>& chunks) {
      for (const RulesOut& c : chunks) {
        // Each chunk with the sender's whole header fits the budget.
        peer::v1::PeerMessage m = c.message;
        m.set_cluster("c");
        m.set_from_id("a");
        m.set_from_address("a:1");
        m.set_from_incarnation(~std::uint64_t{0});
        *m.mutable_rules() = m.rules_chunk().rules();
        EXPECT_LE(m.ByteSizeLong(), 400u);
      }
    });
  }
  const auto received = p.b.take_received();
  ASSERT_TRUE(received.has_value());
  EXPECT_EQ(received->text, text);
  EXPECT_TRUE(received->version.same(v));
  EXPECT_GT(p.b.stats().chunks_received, 10u);
  EXPECT_EQ(p.b.stats().transfers_completed, 1u);
  EXPECT_FALSE(p.b.take_received().has_value());  // handed over once
}

TEST(RulesSyncTest, SurvivesLossDuplicatesAndReordering) {
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    RulesSyncOptions patient = options();
    patient.max_retries = 10;  // timeouts in a row without a new chunk
    Pair p(patient);
    std::mt19937_64 rng(seed);
    const std::string text = text_of(3000 + seed * 37, static_cast<char>(seed));
    const RulesVersion v = version(5, "a", text);
    p.a.set_local(v, text);
    p.b.on_advert("a", "a:1", advert(v), p.now);
    for (int round = 0; round < 400 && p.b.fetching(); ++round) {
      p.exchange([&](std::vector<RulesOut>& chunks) {
        std::vector<RulesOut> out;
        for (RulesOut& c : chunks) {
          const auto fate = rng() % 10;
          if (fate < 3) continue;           // lost
          if (fate == 3) out.push_back(c);  // duplicated
          out.push_back(std::move(c));
        }
        std::shuffle(out.begin(), out.end(), rng);  // reordered
        chunks = std::move(out);
      });
      p.now += 1500;  // past the request timeout: lost windows are asked again
      p.b.tick(p.now);
    }
    const auto received = p.b.take_received();
    ASSERT_TRUE(received.has_value()) << "seed " << seed;
    EXPECT_EQ(received->text, text) << "seed " << seed;
    EXPECT_GT(p.b.stats().retries, 0u) << "seed " << seed;
  }
}

TEST(RulesSyncTest, DuplicateAndStaleChunksAreCountedNotApplied) {
  Pair p;
  const std::string text = text_of(1000, 2);
  const RulesVersion v = version(1, "a", text);
  p.a.set_local(v, text);
  p.b.on_advert("a", "a:1", advert(v), p.now);
  std::vector<RulesOut> first;
  p.exchange([&](std::vector<RulesOut>& chunks) {
    first = chunks;
    chunks.resize(1);
  });
  ASSERT_FALSE(first.empty());
  p.b.on_chunk(first[0].message.rules_chunk(), p.now);  // again
  EXPECT_EQ(p.b.stats().chunks_duplicate, 1u);
  peer::v1::RulesChunk other = first[0].message.rules_chunk();
  other.mutable_rules()->set_version(7);
  p.b.on_chunk(other, p.now);
  EXPECT_EQ(p.b.stats().chunks_stale, 1u);
  peer::v1::RulesChunk lying = first[1].message.rules_chunk();
  lying.set_total_bytes(999);
  p.b.on_chunk(lying, p.now);
  EXPECT_EQ(p.b.stats().chunks_malformed, 1u);
  EXPECT_TRUE(p.b.fetching());
}

TEST(RulesSyncTest, RetriesAreBoundedThenBackOff) {
  Pair p;
  const std::string text = text_of(1000, 3);
  const RulesVersion v = version(1, "a", text);
  p.a.set_local(v, text);
  p.b.on_advert("a", "a:1", advert(v), p.now);
  for (int i = 0; i < 10; ++i) {
    p.b.out().clear();  // every request lost
    p.now += 1001;
    p.b.tick(p.now);
  }
  EXPECT_FALSE(p.b.fetching());
  EXPECT_EQ(p.b.stats().retries, 3u);
  EXPECT_EQ(p.b.stats().transfers_abandoned, 1u);
  EXPECT_EQ(p.b.stats().requests_sent, 4u);
  // Advertised again within the backoff: not asked; after it: asked again.
  p.b.on_advert("a", "a:1", advert(v), p.now);
  EXPECT_FALSE(p.b.fetching());
  p.now += 50'000;
  p.b.tick(p.now);
  p.b.on_advert("a", "a:1", advert(v), p.now);
  EXPECT_TRUE(p.b.fetching());
}

TEST(RulesSyncTest, TextAboveTheBoundIsRefusedAndCounted) {
  RulesSyncOptions small = options();
  small.max_rules_bytes = 2000;
  Pair p(small);
  const std::string text = text_of(2001, 4);
  const RulesVersion v = version(1, "a", text);
  p.a.set_local(v, text);
  p.b.on_advert("a", "a:1", advert(v), p.now);
  p.exchange([](std::vector<RulesOut>&) {});
  EXPECT_EQ(p.b.stats().too_large, 1u);
  EXPECT_FALSE(p.b.fetching());
  p.b.on_advert("a", "a:1", advert(v), p.now);  // refused: not fetched again
  EXPECT_FALSE(p.b.fetching());
}

TEST(RulesSyncTest, ConcurrentVersionsTheHighestWins) {
  RulesSync node(options());
  node.set_cluster_name("c");
  node.set_local(version(1, "m", "mine"), "mine");
  // Same version, lower origin: ignored; version 0 never fetched.
  node.on_advert("a", "a:1", advert(version(1, "a", "x")), 0);
  node.on_advert("z", "z:1", advert(version(0, "z", "y")), 0);
  EXPECT_FALSE(node.fetching());
  // Same version, higher origin: fetched.
  node.on_advert("x", "x:1", advert(version(1, "x", "x")), 0);
  ASSERT_TRUE(node.fetching());
  ASSERT_EQ(node.out().size(), 1u);
  EXPECT_EQ(node.out()[0].address, "x:1");
  node.out().clear();
  // A newer one supersedes the transfer.
  node.on_advert("y", "y:1", advert(version(2, "y", "y")), 0);
  EXPECT_EQ(node.stats().transfers_superseded, 1u);
  ASSERT_EQ(node.out().size(), 1u);
  EXPECT_EQ(node.out()[0].address, "y:1");
  EXPECT_EQ(node.out()[0].message.rules_request().rules().version(), 2u);
  // Applying locally above it ends the transfer; the Lamport clock saw 2.
  EXPECT_EQ(node.max_version_seen(), 2u);
  node.set_local(version(3, "m", "new"), "new");
  EXPECT_FALSE(node.fetching());
  // Refused versions are not asked again.
  node.on_advert("q", "q:1", advert(version(4, "q", "q")), 0);
  ASSERT_TRUE(node.fetching());
  node.refuse(version(4, "q", "q"));
  EXPECT_FALSE(node.fetching());
  node.on_advert("q", "q:1", advert(version(4, "q", "q")), 0);
  EXPECT_FALSE(node.fetching());
  EXPECT_EQ(node.advertised("q")->version, 4u);
}

TEST(RulesSyncTest, ServesOnlyWhatItHolds) {
  RulesSync node(options());
  const RulesVersion v = version(2, "n", "text");
  node.set_local(v, "text");
  peer::v1::RulesRequest request;
  *request.mutable_rules() = advert(version(1, "n", "old"));
  request.set_chunk_bytes(100);
  request.add_chunks(0);
  node.on_request("p:1", request);
  EXPECT_TRUE(node.out().empty());
  EXPECT_EQ(node.stats().requests_unknown, 1u);
  *request.mutable_rules() = advert(v);
  node.on_request("p:1", request);
  ASSERT_EQ(node.out().size(), 1u);
  EXPECT_EQ(node.out()[0].message.rules_chunk().data(), "text");
}

// The advertisement rides on every ClusterNode message and costs little.
TEST(RulesSyncTest, AdvertisementCostsLittleOfThePayload) {
  LimiterOptions limiter_options;
  limiter_options.replicated = true;
  Limiter limiter(limiter_options, RuleSet{});
  ClusterOptions o;
  o.membership.node_id = "node-a";
  o.membership.address = "127.0.0.1:7000";
  o.membership.seeds = {"127.0.0.1:7001"};
  ClusterNode node(o, limiter, 1);
  node.set_rules(version(12345, "node-a", "rules"), "rules");
  node.start(0);
  ASSERT_FALSE(node.outbox().empty());
  peer::v1::PeerMessage m;
  ASSERT_TRUE(m.ParseFromString(node.outbox()[0].payload));
  ASSERT_TRUE(m.has_rules());
  EXPECT_EQ(m.rules().version(), 12345u);
  const std::size_t advert_bytes = m.rules().ByteSizeLong() + 2;
  EXPECT_LE(advert_bytes, 60u);
  EXPECT_LT(advert_bytes * 20, o.max_payload_bytes);  // under 5% of the budget
}

}  // namespace
}  // namespace rlimit::core
