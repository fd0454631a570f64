#include "shell/peer_io.h"

#include <spdlog/spdlog.h>

namespace rlimit::shell::peer_io {

std::string format_endpoint(const boost::asio::ip::address& address, std::uint16_t port) {
  if (address.is_v6()) return "[" + address.to_string() + "]:" + std::to_string(port);
  return address.to_string() + ":" + std::to_string(port);
}

void count_refusal(EnvelopeError error, PeerCounters& counters) {
  switch (error) {
    case EnvelopeError::kTooShort:
    case EnvelopeError::kBadMagic:
      ++counters.peer_malformed;
      return;
    case EnvelopeError::kUnknownKey:
      ++counters.peer_unknown_key;
      return;
    case EnvelopeError::kBadMac:
      ++counters.peer_bad_mac;
      return;
  }
}

void ThrottledWarning::log(core::TimeUs now, const std::string& message) {
  if (warned_ && now - last_warned_us_ < interval_us_) {
    ++suppressed_;
    spdlog::debug("{}", message);
    return;
  }
  if (suppressed_ > 0) {
    spdlog::warn("{} ({} more like it in the last {} s)", message, suppressed_,
                 (now - last_warned_us_) / core::kUsPerSecond);
  } else {
    spdlog::warn("{}", message);
  }
  warned_ = true;
  last_warned_us_ = now;
  suppressed_ = 0;
}

}  // namespace rlimit::shell::peer_io
