// The peer port past the envelope: a fresh node of a cluster (a replicated
// Limiter with every algorithm behind a ClusterNode) receives a sequence of
// payloads (fuzz_records.h), each sealed with the cluster's key by this
// target and opened by the node's Keyring as the transports open them, so
// the fuzzer reaches the gossip, membership, rules-sync and ledger-merge
// code behind the MAC. The node is ticked between payloads (7 ms apart), so
// probes, suspicion, anti-entropy and the rules transfer they start run too,
// and a rule set received whole is handed back as the server would (refused
// here: nothing is installed). The raw input itself is also offered to the
// Keyring, as a datagram from anyone would be.
// Properties: an envelope this keyring sealed opens to the same payload; a
// damaged one or the raw input never opens; every payload the node sends
// stays within its max_payload_bytes.
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/cluster_node.h"
#include "core/limiter.h"
#include "fuzz_check.h"
#include "fuzz_cluster.h"
#include "fuzz_records.h"
#include "fuzz_rules.h"
#include "shell/envelope.h"

namespace {

using rlimit::core::TimeUs;

rlimit::shell::Keyring& keyring() {
  static rlimit::shell::Keyring ring = [] {
    rlimit::shell::KeyringLoad load =
        rlimit::shell::Keyring::parse(rlimit::fuzz::kClusterSecrets, "fuzz.key");
    FUZZ_CHECK(load.keyring.has_value());
    return std::move(*load.keyring);
  }();
  return ring;
}

// The rules, compiled once: every input's Limiter shares them.
const rlimit::core::Limiter& compiled_rules() {
  static const rlimit::core::Limiter compiled(rlimit::fuzz::fuzz_limiter_options(),
                                              rlimit::fuzz::fuzz_rules());
  return compiled;
}

// Node 0 as node_options makes it, also taking unsequenced messages (as a
// node in a rolling upgrade does): a payload the fuzzer made from a seed
// reaches past the replay window whether or not its seq survived.
rlimit::core::ClusterOptions fuzzed_node_options() {
  rlimit::core::ClusterOptions options = rlimit::fuzz::node_options(0);
  options.replay.accept_unsequenced = true;
  return options;
}

void check_outbox(rlimit::core::ClusterNode& node) {
  for (const rlimit::core::OutPacket& packet : node.outbox()) {
    FUZZ_CHECK(packet.payload.size() <= node.options().max_payload_bytes);
  }
  node.outbox().clear();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  rlimit::fuzz::quiet_protobuf();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  rlimit::shell::Keyring& ring = keyring();
  rlimit::shell::EnvelopeError error{};
  FUZZ_CHECK(!ring.open(input, error).has_value());

  rlimit::core::LimiterOptions limiter_options = rlimit::fuzz::fuzz_limiter_options();
  limiter_options.replicated = true;
  rlimit::core::Limiter limiter(limiter_options, compiled_rules());
  rlimit::core::ClusterNode node(fuzzed_node_options(), limiter, /*seed=*/42);
  TimeUs now = rlimit::fuzz::kStartUs;
  node.start(now);
  check_outbox(node);

  rlimit::fuzz::Records records(input);
  std::string_view payload;
  std::string sealed;
  // Enough payloads to join, gossip, suspect and fetch rules; more only slow
  // the search down.
  constexpr std::size_t kMaxPayloads = 32;
  std::size_t count = 0;
  while (count++ < kMaxPayloads && records.next(payload)) {
    sealed.clear();
    ring.seal_into(payload, sealed);
    const std::optional<std::string_view> opened = ring.open(sealed, error);
    FUZZ_CHECK(opened.has_value() && *opened == payload);
    sealed[sealed.size() / 2] ^= 0x20;  // one bit anywhere breaks the MAC (or the magic)
    FUZZ_CHECK(!ring.open(sealed, error).has_value());
    sealed[sealed.size() / 2] ^= 0x20;

    node.on_payload(*ring.open(sealed), now);
    check_outbox(node);
    if (std::optional<rlimit::core::RulesSync::Received> received = node.take_received_rules()) {
      node.refuse_rules(received->version);
    }
    now += rlimit::fuzz::kPayloadIntervalUs;
    node.tick(now);
    check_outbox(node);
  }
  return 0;
}
