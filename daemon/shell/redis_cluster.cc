#include "shell/redis_cluster.h"

#include <hiredis/hiredis.h>

#include <charconv>

namespace rlimit::shell {
namespace {

std::optional<std::uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

std::optional<std::uint16_t> parse_slot(std::string_view text) {
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || value >= kRedisClusterSlots) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

bool is_string(const redisReply* r) {
  return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

}  // namespace

std::uint16_t redis_crc16(std::string_view bytes) {
  std::uint16_t crc = 0;
  for (const char c : bytes) {
    crc ^= static_cast<std::uint16_t>(static_cast<std::uint8_t>(c) << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

std::uint16_t redis_key_slot(std::string_view key_name) {
  const std::size_t open = key_name.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key_name.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key_name = key_name.substr(open + 1, close - open - 1);
    }
  }
  return redis_crc16(key_name) & (kRedisClusterSlots - 1);
}

std::string format_node_address(const RedisNodeAddress& address) {
  const bool ipv6 = address.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

std::optional<std::vector<RedisSlotRange>> parse_cluster_slots(const redisReply* reply,
                                                               std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<std::vector<RedisSlotRange>> {
    if (error != nullptr) *error = "CLUSTER SLOTS reply: " + why;
    return std::nullopt;
  };
  if (reply == nullptr) return fail("none");
  if (reply->type == REDIS_REPLY_ERROR) return fail(std::string(reply->str, reply->len));
  if (reply->type != REDIS_REPLY_ARRAY) return fail("not an array");
  std::vector<RedisSlotRange> ranges;
  ranges.reserve(reply->elements);
  for (std::size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    if (range == nullptr || range->type != REDIS_REPLY_ARRAY || range->elements < 3) {
      return fail("range " + std::to_string(i) + " is not [start, end, master, ...]");
    }
    const redisReply* start = range->element[0];
    const redisReply* end = range->element[1];
    const redisReply* master = range->element[2];
    if (start == nullptr || end == nullptr || start->type != REDIS_REPLY_INTEGER ||
        end->type != REDIS_REPLY_INTEGER || start->integer < 0 || end->integer < start->integer ||
        end->integer >= kRedisClusterSlots) {
      return fail("range " + std::to_string(i) + " has bad slot numbers");
    }
    if (master == nullptr || master->type != REDIS_REPLY_ARRAY || master->elements < 2 ||
        !is_string(master->element[0]) || master->element[1] == nullptr ||
        master->element[1]->type != REDIS_REPLY_INTEGER || master->element[1]->integer <= 0 ||
        master->element[1]->integer > 65535) {
      return fail("range " + std::to_string(i) + " has no master [host, port]");
    }
    RedisSlotRange out;
    out.first = static_cast<std::uint16_t>(start->integer);
    out.last = static_cast<std::uint16_t>(end->integer);
    out.master.host.assign(master->element[0]->str, master->element[0]->len);
    if (out.master.host == "?") out.master.host.clear();  // endpoint unknown: the node asked
    out.master.port = static_cast<std::uint16_t>(master->element[1]->integer);
    ranges.push_back(std::move(out));
  }
  return ranges;
}

std::optional<RedisRedirect> parse_redirect(std::string_view text) {
  RedisRedirect redirect;
  if (text.starts_with("MOVED ")) {
    redirect.kind = RedisRedirect::Kind::kMoved;
    text.remove_prefix(6);
  } else if (text.starts_with("ASK ")) {
    redirect.kind = RedisRedirect::Kind::kAsk;
    text.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const std::size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::optional<std::uint16_t> slot = parse_slot(text.substr(0, space));
  if (!slot) return std::nullopt;
  redirect.slot = *slot;
  std::string_view endpoint = text.substr(space + 1);
  const std::size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::optional<std::uint16_t> port = parse_port(endpoint.substr(colon + 1));
  if (!port) return std::nullopt;
  std::string_view host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  redirect.target.host = std::string(host);
  redirect.target.port = *port;
  return redirect;
}

}  // namespace rlimit::shell
