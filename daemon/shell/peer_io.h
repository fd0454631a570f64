// Pieces the two peer transports share: address splitting, bind resolution,
// refusal counting and throttled warnings. Internal to the shell (the
// transports' .cc files); uses Asio. Single-threaded.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/basic_resolver.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/time.h"
#include "shell/counters.h"
#include "shell/envelope.h"
#include "shell/peer_address.h"
#include "shell/peer_transport.h"

namespace rlimit::shell::peer_io {

// "ip:port", with brackets around an IPv6 address.
std::string format_endpoint(const boost::asio::ip::address& address, std::uint16_t port);

// Resolves a bind address synchronously (once, at start, so blocking on DNS
// is acceptable there).
template <typename Protocol>
std::optional<typename Protocol::endpoint> resolve_bind(boost::asio::io_context& io,
                                                        const std::string& bind,
                                                        std::string& error) {
  const std::optional<HostPort> split = split_address(bind, /*allow_port_zero=*/true, &error);
  if (!split) {
    error = "bind address \"" + bind + "\": " + error;
    return std::nullopt;
  }
  boost::system::error_code code;
  typename Protocol::resolver resolver(io);
  const auto results =
      resolver.resolve(split->host, std::to_string(split->port),
                       Protocol::resolver::passive | Protocol::resolver::numeric_service, code);
  if (code || results.empty()) {
    error = "bind address \"" + bind +
            "\" does not resolve: " + (code ? code.message() : std::string("no address"));
    return std::nullopt;
  }
  return results.begin()->endpoint();
}

// Counts one refused envelope under its reason.
void count_refusal(EnvelopeError error, PeerCounters& counters);

// A warning for something that can repeat at line rate (garbage from a peer,
// a failing send): logged at most once per interval with the number of
// repeats since, and at debug level in between.
class ThrottledWarning {
 public:
  explicit ThrottledWarning(core::TimeUs interval_us = 10'000'000) : interval_us_(interval_us) {}

  // Logs `message` at warn level if the interval has passed, else at debug.
  void log(core::TimeUs now, const std::string& message);

 private:
  core::TimeUs interval_us_;
  core::TimeUs last_warned_us_ = 0;
  bool warned_ = false;
  std::uint64_t suppressed_ = 0;
};

// The handle a transport factory returns: shares ownership of the
// implementation with its coroutines (so they never outlive it) and stops it
// when dropped.
template <typename Impl>
class TransportHandle final : public PeerTransport {
 public:
  explicit TransportHandle(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  ~TransportHandle() override {
    try {
      impl_->stop();
    } catch (...) {  // a destructor must not throw; the sockets close with the impl anyway
    }
  }
  TransportHandle(const TransportHandle&) = delete;
  TransportHandle& operator=(const TransportHandle&) = delete;

  void send(const std::string& address, std::string_view payload) override {
    impl_->send(address, payload);
  }
  std::size_t queued_bytes() const override { return impl_->queued_bytes(); }
  std::string local_address() const override { return impl_->local_address(); }
  void stop() override { impl_->stop(); }

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace rlimit::shell::peer_io
