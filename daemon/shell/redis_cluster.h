// Redis Cluster's routing rules as a client needs them (Redis mode,
// shell/redis_store.h): which hash slot a key lives in, who owns which slots
// (a CLUSTER SLOTS reply), and where a MOVED or ASK error points. Pure and
// thread-safe; the parsers take any reply or text and return nullopt (with a
// message) rather than trust it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct redisReply;  // hiredis

namespace rlimit::shell {

inline constexpr std::uint16_t kRedisClusterSlots = 16384;

// CRC16-XMODEM (polynomial 0x1021, initial value 0), as Redis' crc16.c.
std::uint16_t redis_crc16(std::string_view bytes);

// The slot of a Redis key name exactly as Redis computes it: CRC16 of the
// name modulo 16384, or of the hash tag when the name holds a '{', a later
// '}', and at least one byte between the first '{' and the first '}' after it.
std::uint16_t redis_key_slot(std::string_view key_name);

struct RedisNodeAddress {
  std::string host;  // an IPv6 literal without brackets
  std::uint16_t port = 0;

  friend bool operator==(const RedisNodeAddress&, const RedisNodeAddress&) = default;
};

// "host:port", with brackets around an IPv6 literal.
std::string format_node_address(const RedisNodeAddress& address);

// One range of a CLUSTER SLOTS reply: the master serving [first, last].
struct RedisSlotRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  RedisNodeAddress master;  // host "" when the reply left it empty (the node asked)
};

// The ranges of a CLUSTER SLOTS reply (RESP2: an array of [start, end,
// [host, port, ...], replicas...]). nullopt and `*error` set when the reply
// is not that shape or a range is outside 0..16383 or reversed.
std::optional<std::vector<RedisSlotRange>> parse_cluster_slots(const redisReply* reply,
                                                               std::string* error);

// A cluster redirection: "MOVED <slot> <host>:<port>" (the slot has a new
// owner) or "ASK <slot> <host>:<port>" (this one key is being migrated: ask
// there once, after ASKING). host is "" when Redis left it empty (the
// replying node's host).
struct RedisRedirect {
  enum class Kind { kMoved, kAsk };
  Kind kind = Kind::kMoved;
  std::uint16_t slot = 0;
  RedisNodeAddress target;
};

std::optional<RedisRedirect> parse_redirect(std::string_view error_text);

}  // namespace rlimit::shell
