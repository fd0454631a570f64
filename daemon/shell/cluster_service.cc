#include "shell/cluster_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <exception>
#include <utility>

#include "shell/clock.h"
#include "shell/gossip_transport.h"
#include "shell/member_watch.h"
#include "shell/mesh_transport.h"
#include "shell/peer_address.h"
#include "shell/peer_transport.h"

namespace rlimit::shell {

namespace asio = boost::asio;
using asio::as_tuple;
using asio::use_awaitable;

namespace {

constexpr core::TimeUs kMaxTickUs = 5 * core::kUsPerMs;
constexpr core::TimeUs kMinTickUs = 1 * core::kUsPerMs;
// While a leave is flushed, how often the mesh's queue is looked at.
constexpr std::chrono::milliseconds kFlushPoll{2};

bool is_unspecified_host(const std::string& address) {
  std::string error;
  const std::optional<HostPort> split = split_address(address, /*allow_port_zero=*/true, &error);
  return split && is_wildcard_host(split->host);
}

bool has_port_zero(const std::string& address) {
  std::string error;
  const std::optional<HostPort> split = split_address(address, /*allow_port_zero=*/true, &error);
  return split && split->port == 0;
}

}  // namespace

core::ClusterOptions make_cluster_options(const ClusterServiceOptions& options,
                                          const std::string& bound_address) {
  const config::ClusterSettings& s = options.settings;
  core::ClusterOptions out;
  out.cluster_name = s.name;
  core::MembershipOptions& m = out.membership;
  m.node_id = options.node_id;
  // Peers reach us at the advertised address, else at the bind address as
  // written (a name stays a name), else, for port 0, where the kernel bound.
  if (!s.advertise.empty()) {
    m.address = s.advertise;
  } else if (has_port_zero(s.bind)) {
    m.address = bound_address;
  } else {
    m.address = s.bind;
  }
  m.incarnation = options.incarnation;
  m.seeds = s.seeds;
  m.probe_interval_us = s.probe_interval_us;
  m.probe_timeout_us = s.probe_timeout_us;
  m.indirect_probes = s.indirect_probes;
  m.suspicion_timeout_us = s.suspicion_timeout_us;
  m.dead_retention_us = s.dead_retention_us;
  m.rejoin_interval_us = s.rejoin_interval_us;
  m.table_sync_interval_us = s.table_sync_interval_us;
  m.max_members = s.max_members;
  out.gossip_interval_us = s.gossip_interval_us;
  // A mesh sends every change to every live peer over its connections.
  out.fanout = s.mode == config::ClusterMode::kMesh ? 0 : s.fanout;
  out.max_payload_bytes = s.mtu_bytes > kEnvelopeOverheadBytes
                              ? static_cast<std::uint32_t>(s.mtu_bytes - kEnvelopeOverheadBytes)
                              : 0;
  out.anti_entropy_interval_us = s.anti_entropy_interval_us;
  out.max_packets_per_round = s.max_packets_per_round;
  out.rules_sync.max_rules_bytes = s.max_rules_bytes;
  out.replay.max_age_us = s.replay_max_age_us;
  out.replay.accept_unsequenced = s.accept_unsequenced;
  // Every member, a restarting one briefly under two ids' worth of state,
  // and room for senders forgotten by membership but still in the window.
  out.replay.max_senders = 2 * s.max_members + 64;
  out.ledger_bounds = make_ledger_bounds(s);
  out.owners_per_key = s.owners_per_key;
  out.routed_max_origins = s.routed_max_origins;
  out.routed_min_members = s.routed_min_members;
  return out;
}

core::Ledger::Bounds make_ledger_bounds(const config::ClusterSettings& s) {
  return {.max_origins = s.max_origins,
          .max_keys = s.max_ledger_keys,
          .max_entries_per_key = s.max_entries_per_key};
}

core::TimeUs tick_interval_us(const config::ClusterSettings& settings) {
  return std::clamp<core::TimeUs>(settings.gossip_interval_us, kMinTickUs, kMaxTickUs);
}

struct ClusterService::State : std::enable_shared_from_this<State> {
  State(asio::io_context& io_context, ClusterServiceOptions service_options, Keyring ring,
        core::Limiter& limiter_ref)
      : io(io_context),
        options(std::move(service_options)),
        keyring(std::move(ring)),
        limiter(limiter_ref),
        tick_timer(io_context),
        flush_timer(io_context) {}

  bool open(std::string& error);
  void on_payload(std::string_view payload);
  // Sends what the node put in its outbox, then logs membership changes.
  void after_event();
  asio::awaitable<void> tick_loop();
  asio::awaitable<void> flush_then_stop();
  void spawn(std::string_view what, asio::awaitable<void> task);
  void stop();

  asio::io_context& io;
  const ClusterServiceOptions options;
  Keyring keyring;
  core::Limiter& limiter;
  PeerCounters counters;
  std::unique_ptr<core::ClusterNode> node;  // built once the socket is bound
  std::unique_ptr<PeerTransport> transport;
  asio::steady_timer tick_timer;
  asio::steady_timer flush_timer;
  MemberWatch watch;
  std::function<void()> done;
  bool leaving = false;
  bool stopped = false;
};

bool ClusterService::State::open(std::string& error) {
  const config::ClusterSettings& s = options.settings;
  PeerTransportOptions transport_options{
      .bind = s.bind,
      .mtu_bytes = s.mtu_bytes,
      .reconnect_backoff_min_us = s.reconnect_backoff_min_us,
      .reconnect_backoff_max_us = s.reconnect_backoff_max_us,
      .max_peer_queue_bytes = s.max_peer_queue_bytes,
      // Every member may connect to us, and a restarting one briefly twice.
      .max_incoming_connections = s.max_members + 64,
  };
  // The transport never calls the handler after stop(), and this state stops
  // it before it goes, so a plain pointer is safe.
  auto handler = [this](std::string_view payload) { on_payload(payload); };
  PeerTransportOpen opened =
      s.mode == config::ClusterMode::kMesh
          ? open_mesh_transport(io, transport_options, keyring, counters, handler)
          : open_gossip_transport(io, transport_options, keyring, counters, handler);
  if (!opened.transport) {
    error = std::move(opened.error);
    return false;
  }
  transport = std::move(opened.transport);

  core::ClusterOptions cluster_options = make_cluster_options(options, transport->local_address());
  const std::string address = cluster_options.membership.address;
  if (s.advertise.empty() && is_unspecified_host(s.bind)) {
    spdlog::warn(
        "cluster: bind {} is a wildcard and advertise is not set; peers will be told to reach "
        "this node at {}, which they cannot: set advertise",
        s.bind, address);
  }
  node = std::make_unique<core::ClusterNode>(std::move(cluster_options), limiter, options.seed);
  node->set_rules(options.rules, options.rules_text);
  node->set_system_clock_offset_us(system_now_us() - steady_now_us());
  spdlog::info(
      "cluster \"{}\": {} on {} as node {} at {} (incarnation {}), {} seeds, signing key id {:02x} "
      "of {}",
      s.name, config::cluster_mode_name(s.mode), transport->local_address(), options.node_id,
      address, options.incarnation, s.seeds.size(), keyring.signing_key_id(), keyring.size());
  node->start(steady_now_us());
  after_event();
  spawn("cluster tick loop", tick_loop());
  return true;
}

void ClusterService::State::spawn(std::string_view what, asio::awaitable<void> task) {
  auto self = shared_from_this();
  asio::co_spawn(io, std::move(task), [self, what](const std::exception_ptr& failure) {
    if (!failure) return;
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      // The node keeps enforcing locally; only its cluster traffic stops.
      spdlog::critical("{} failed: {}; this node leaves the cluster", what, e.what());
    }
    self->stop();
  });
}

void ClusterService::State::on_payload(std::string_view payload) {
  if (stopped || node == nullptr) return;
  const core::TimeUs now = steady_now_us();
  node->set_system_clock_offset_us(system_now_us() - now);
  node->on_payload(payload, now);
  after_event();
}

void ClusterService::State::after_event() {
  std::vector<core::OutPacket>& outbox = node->outbox();
  if (!stopped) {
    for (const core::OutPacket& packet : outbox) transport->send(packet.address, packet.payload);
  }
  outbox.clear();
  for (const std::string& line : watch.update(node->membership().members())) {
    spdlog::info("cluster: {}", line);
  }
  // A newer rule set arrived whole: the server checks and applies it.
  if (std::optional<core::RulesSync::Received> received = node->take_received_rules()) {
    if (options.on_rules) options.on_rules(std::move(*received));
  }
}

asio::awaitable<void> ClusterService::State::tick_loop() {
  const auto interval = std::chrono::microseconds(tick_interval_us(options.settings));
  while (!stopped && !leaving) {
    tick_timer.expires_after(interval);
    auto [error] = co_await tick_timer.async_wait(as_tuple(use_awaitable));
    if (error || stopped || leaving) break;
    const core::TimeUs now = steady_now_us();
    node->set_system_clock_offset_us(system_now_us() - now);
    node->tick(now);
    after_event();
  }
}

asio::awaitable<void> ClusterService::State::flush_then_stop() {
  const core::TimeUs deadline = steady_now_us() + kLeaveFlushUs;
  while (!stopped && transport->queued_bytes() > 0 && steady_now_us() < deadline) {
    flush_timer.expires_after(kFlushPoll);
    co_await flush_timer.async_wait(as_tuple(use_awaitable));
  }
  if (!stopped && transport->queued_bytes() > 0) {
    spdlog::info("cluster: {} bytes of the leave not sent after {} ms; leaving anyway",
                 transport->queued_bytes(), kLeaveFlushUs / core::kUsPerMs);
  }
  stop();
}

void ClusterService::State::stop() {
  if (stopped) return;
  stopped = true;
  tick_timer.cancel();
  flush_timer.cancel();
  if (transport != nullptr) transport->stop();
  spdlog::info("cluster: stopped");
  if (done) {
    // Moved out first: `done` may destroy the service that owns this state.
    auto callback = std::move(done);
    done = nullptr;
    callback();
  }
}

std::unique_ptr<ClusterService> ClusterService::start(asio::io_context& io,
                                                      ClusterServiceOptions options,
                                                      Keyring keyring, core::Limiter& limiter,
                                                      std::string& error) {
  auto state = std::make_shared<State>(io, std::move(options), std::move(keyring), limiter);
  if (!state->open(error)) return nullptr;
  return std::unique_ptr<ClusterService>(new ClusterService(std::move(state)));
}

ClusterService::ClusterService(std::shared_ptr<State> state) : state_(std::move(state)) {}

ClusterService::~ClusterService() {
  state_->done = nullptr;
  try {
    state_->stop();
  } catch (...) {  // a destructor must not throw; the transport closes with the state anyway
  }
}

void ClusterService::leave(std::function<void()> done) {
  State& s = *state_;
  if (s.leaving) return;
  if (s.stopped) {  // the cluster side failed earlier: nothing to announce
    if (done) done();
    return;
  }
  s.leaving = true;
  s.done = std::move(done);
  s.tick_timer.cancel();
  s.node->leave(steady_now_us());
  s.after_event();
  spdlog::info("cluster: leaving");
  s.spawn("cluster leave", s.flush_then_stop());
}

void ClusterService::replace_keyring(Keyring keyring) {
  // The transport holds a reference to this member; assigning in place
  // changes what it signs and verifies with from the next datagram on.
  state_->keyring = std::move(keyring);
  spdlog::info("cluster: keyring reloaded: {} secrets, signing key id {:02x}",
               state_->keyring.size(), state_->keyring.signing_key_id());
}

void ClusterService::set_rules(const core::RulesVersion& version, std::string text) {
  state_->node->set_rules(version, std::move(text));
}

void ClusterService::refuse_rules(const core::RulesVersion& version) {
  state_->node->refuse_rules(version);
}

void ClusterService::retry_rules_later(const core::RulesVersion& version) {
  state_->node->retry_rules_later(version, steady_now_us());
}

const core::ClusterNode& ClusterService::node() const { return *state_->node; }
const PeerCounters& ClusterService::counters() const { return state_->counters; }
const char* ClusterService::mode_name() const {
  return state_->options.settings.mode == config::ClusterMode::kMesh ? "mesh" : "gossip";
}
std::string ClusterService::local_address() const { return state_->transport->local_address(); }
bool ClusterService::stopped() const { return state_->stopped; }

}  // namespace rlimit::shell
