#include "shell/gossip_transport.h"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shell/clock.h"
#include "shell/peer_io.h"

namespace rlimit::shell {
namespace {

namespace asio = boost::asio;
using asio::as_tuple;
using asio::use_awaitable;
using udp = asio::ip::udp;

// A resolved name is trusted this long (a restarted peer may come back on
// another IP under the same name); a failed one is retried after this.
constexpr core::TimeUs kNameTtlUs = 30 * core::kUsPerSecond;
constexpr core::TimeUs kFailureTtlUs = 5 * core::kUsPerSecond;
// Bounds on what addresses may cost: routes cached, datagrams held while a
// name resolves.
constexpr std::size_t kMaxRoutes = 8192;
constexpr std::size_t kMaxWaitingPerRoute = 64;
// After a receive error (not a bad datagram: the socket itself), pause so a
// persistent error cannot spin the loop.
constexpr std::chrono::milliseconds kReceiveErrorPause{10};

class Gossip : public std::enable_shared_from_this<Gossip> {
 public:
  Gossip(asio::io_context& io, const PeerTransportOptions& options, Keyring& keyring,
         PeerCounters& counters, PeerTransport::PayloadHandler handler)
      : io_(io),
        options_(options),
        keyring_(keyring),
        counters_(counters),
        handler_(std::move(handler)),
        socket_(io),
        resolver_(io),
        pause_(io) {}

  bool open(std::string& error);
  void start();
  void send(const std::string& address, std::string_view payload);
  std::size_t queued_bytes() const { return waiting_bytes_; }
  std::string local_address() const;
  void stop();

 private:
  struct Route {
    std::optional<udp::endpoint> endpoint;
    core::TimeUs expires_us = 0;  // 0: never (an IP literal)
    bool resolving = false;
    std::vector<std::string> waiting;  // sealed datagrams held until the name resolves
  };

  asio::awaitable<void> receive_loop();
  Route& route_for(const std::string& address, core::TimeUs now);
  // Starts resolving the route's name; on a malformed address the route
  // fails for kFailureTtlUs instead.
  void resolve(const std::string& address, Route& route, core::TimeUs now);
  void on_resolved(const std::string& address, const boost::system::error_code& error,
                   const udp::resolver::results_type& results);
  void send_datagram(const udp::endpoint& to, const std::string& datagram);

  asio::io_context& io_;
  const PeerTransportOptions options_;
  Keyring& keyring_;
  PeerCounters& counters_;
  PeerTransport::PayloadHandler handler_;
  udp::socket socket_;
  udp::resolver resolver_;
  asio::steady_timer pause_;
  std::string buffer_;  // one datagram; a byte more than mtu_bytes to detect oversize
  std::string sealed_;  // scratch for send
  std::unordered_map<std::string, Route> routes_;
  std::size_t waiting_bytes_ = 0;
  bool stopped_ = false;
  peer_io::ThrottledWarning refused_warning_;
  peer_io::ThrottledWarning send_warning_;
};

bool Gossip::open(std::string& error) {
  const std::optional<udp::endpoint> endpoint =
      peer_io::resolve_bind<udp>(io_, options_.bind, error);
  if (!endpoint) return false;
  boost::system::error_code code;
  socket_.open(endpoint->protocol(), code);
  if (!code) socket_.bind(*endpoint, code);
  // Sends never wait: a full send buffer drops the datagram (see the header).
  if (!code) socket_.non_blocking(true, code);
  if (code) {
    error = "cannot bind UDP " + options_.bind + ": " + code.message();
    return false;
  }
  return true;
}

void Gossip::start() {
  auto self = shared_from_this();
  asio::co_spawn(io_, receive_loop(), [self](const std::exception_ptr& failure) {
    if (!failure) return;
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      spdlog::critical("gossip receive loop failed: {}", e.what());
    }
    self->stop();
  });
}

std::string Gossip::local_address() const {
  boost::system::error_code code;
  const udp::endpoint local = socket_.local_endpoint(code);
  if (code) return options_.bind;
  return peer_io::format_endpoint(local.address(), local.port());
}

void Gossip::stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
  resolver_.cancel();
  pause_.cancel();
  routes_.clear();
  waiting_bytes_ = 0;
}

asio::awaitable<void> Gossip::receive_loop() {
  buffer_.resize(static_cast<std::size_t>(options_.mtu_bytes) + 1);
  while (!stopped_) {
    udp::endpoint sender;
    auto [error, bytes] =
        co_await socket_.async_receive_from(asio::buffer(buffer_), sender, as_tuple(use_awaitable));
    if (stopped_ || error == asio::error::operation_aborted) break;
    if (error) {
      ++counters_.peer_receive_errors;
      refused_warning_.log(steady_now_us(), "gossip: receive failed: " + error.message());
      pause_.expires_after(kReceiveErrorPause);
      co_await pause_.async_wait(as_tuple(use_awaitable));
      continue;
    }
    ++counters_.peer_packets_received;
    counters_.peer_bytes_received += bytes;
    if (bytes > options_.mtu_bytes) {
      // Linux truncates to the buffer, so "more than mtu_bytes" is all we know.
      ++counters_.peer_oversize;
      refused_warning_.log(steady_now_us(),
                           "gossip: dropped a datagram from " +
                               peer_io::format_endpoint(sender.address(), sender.port()) +
                               " above mtu_bytes (" + std::to_string(options_.mtu_bytes) + ")");
      continue;
    }
    EnvelopeError refusal{};
    const std::optional<std::string_view> payload =
        keyring_.open(std::string_view(buffer_.data(), bytes), refusal);
    if (!payload) {
      peer_io::count_refusal(refusal, counters_);
      refused_warning_.log(steady_now_us(),
                           "gossip: dropped a datagram from " +
                               peer_io::format_endpoint(sender.address(), sender.port()) + ": " +
                               envelope_error_name(refusal));
      continue;
    }
    try {
      handler_(*payload);
    } catch (const std::exception& e) {
      // A bug handling one message must not end the receive loop for all.
      spdlog::error("gossip: handling a message from {} failed: {}",
                    peer_io::format_endpoint(sender.address(), sender.port()), e.what());
    }
  }
}

void Gossip::send(const std::string& address, std::string_view payload) {
  if (stopped_) return;
  if (payload.size() + kEnvelopeOverheadBytes > options_.mtu_bytes) {
    // The core packs payloads to mtu_bytes - kEnvelopeOverheadBytes; a
    // bigger one would be refused by every receiver, so it is not sent.
    ++counters_.peer_send_errors;
    send_warning_.log(steady_now_us(), "gossip: a " + std::to_string(payload.size()) +
                                           "-byte payload does not fit mtu_bytes; not sent");
    return;
  }
  sealed_.clear();
  keyring_.seal_into(payload, sealed_);
  const core::TimeUs now = steady_now_us();
  Route& route = route_for(address, now);
  const bool expired = route.expires_us != 0 && now >= route.expires_us;
  if (route.endpoint) {
    // A stale name is refreshed in the background; until then the old
    // address is the best guess.
    if (expired && !route.resolving) resolve(address, route, now);
    send_datagram(*route.endpoint, sealed_);
    return;
  }
  if (!route.resolving) {
    if (!expired) {
      ++counters_.peer_unroutable_dropped;  // failed recently; retried after kFailureTtlUs
      return;
    }
    resolve(address, route, now);
    if (!route.resolving) {  // failed at once
      ++counters_.peer_unroutable_dropped;
      return;
    }
  }
  if (route.waiting.size() >= kMaxWaitingPerRoute) {
    ++counters_.peer_unroutable_dropped;
    return;
  }
  waiting_bytes_ += sealed_.size();
  route.waiting.push_back(sealed_);
}

Gossip::Route& Gossip::route_for(const std::string& address, core::TimeUs now) {
  if (auto it = routes_.find(address); it != routes_.end()) return it->second;
  if (routes_.size() >= kMaxRoutes) {
    // Addresses come only from authenticated peers, so this takes a very
    // large cluster or churn; start over, keeping lookups in flight.
    std::erase_if(routes_, [](const auto& entry) { return !entry.second.resolving; });
  }
  Route& route = routes_[address];
  std::string error;
  const std::optional<HostPort> split = split_address(address, /*allow_port_zero=*/false, &error);
  if (!split) {
    ++counters_.peer_resolve_failures;
    send_warning_.log(now, "gossip: peer address \"" + address + "\": " + error);
    route.expires_us = now + kFailureTtlUs;
    return route;
  }
  boost::system::error_code code;
  const asio::ip::address ip = asio::ip::make_address(split->host, code);
  if (!code) {
    route.endpoint = udp::endpoint(ip, split->port);
  } else {
    route.expires_us = now;  // a name: resolve it on first use
  }
  return route;
}

void Gossip::resolve(const std::string& address, Route& route, core::TimeUs now) {
  std::string error;
  const std::optional<HostPort> split = split_address(address, /*allow_port_zero=*/false, &error);
  if (!split) {
    route.expires_us = now + kFailureTtlUs;
    return;
  }
  route.resolving = true;
  auto self = shared_from_this();
  resolver_.async_resolve(split->host, std::to_string(split->port), udp::resolver::numeric_service,
                          [self, address](const boost::system::error_code& error,
                                          const udp::resolver::results_type& results) {
                            self->on_resolved(address, error, results);
                          });
}

void Gossip::on_resolved(const std::string& address, const boost::system::error_code& error,
                         const udp::resolver::results_type& results) {
  if (stopped_) return;
  auto it = routes_.find(address);
  if (it == routes_.end()) return;
  Route& route = it->second;
  route.resolving = false;
  const core::TimeUs now = steady_now_us();
  // Prefer an address of the socket's family: a v4 socket cannot reach v6.
  std::optional<udp::endpoint> found;
  boost::system::error_code code;
  const udp::endpoint local = socket_.local_endpoint(code);
  for (const auto& entry : results) {
    if (!found || (!code && entry.endpoint().protocol() == local.protocol())) {
      found = entry.endpoint();
      if (!code && found->protocol() == local.protocol()) break;
    }
  }
  if (error || !found) {
    ++counters_.peer_resolve_failures;
    send_warning_.log(now, "gossip: peer address \"" + address + "\" does not resolve: " +
                               (error ? error.message() : std::string("no address")));
    if (!route.endpoint) {
      // Keep a stale address if we had one; otherwise give up for a while.
      route.expires_us = now + kFailureTtlUs;
      counters_.peer_unroutable_dropped += route.waiting.size();
    }
  } else {
    route.endpoint = *found;
    route.expires_us = now + kNameTtlUs;
  }
  std::vector<std::string> waiting = std::move(route.waiting);
  route.waiting.clear();
  for (const std::string& datagram : waiting) {
    waiting_bytes_ -= datagram.size();
    if (route.endpoint) send_datagram(*route.endpoint, datagram);
  }
}

void Gossip::send_datagram(const udp::endpoint& to, const std::string& datagram) {
  boost::system::error_code error;
  const std::size_t sent = socket_.send_to(asio::buffer(datagram), to, 0, error);
  if (error == asio::error::would_block || error == asio::error::try_again ||
      error == asio::error::no_buffer_space) {
    ++counters_.peer_send_dropped;
    return;
  }
  if (error) {
    ++counters_.peer_send_errors;
    send_warning_.log(steady_now_us(), "gossip: send to " +
                                           peer_io::format_endpoint(to.address(), to.port()) +
                                           " failed: " + error.message());
    return;
  }
  ++counters_.peer_packets_sent;
  counters_.peer_bytes_sent += sent;
}

}  // namespace

PeerTransportOpen open_gossip_transport(asio::io_context& io, const PeerTransportOptions& options,
                                        Keyring& keyring, PeerCounters& counters,
                                        PeerTransport::PayloadHandler handler) {
  PeerTransportOpen result;
  auto gossip = std::make_shared<Gossip>(io, options, keyring, counters, std::move(handler));
  if (!gossip->open(result.error)) return result;
  gossip->start();
  result.transport = std::make_unique<peer_io::TransportHandle<Gossip>>(std::move(gossip));
  return result;
}

}  // namespace rlimit::shell
