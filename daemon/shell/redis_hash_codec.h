// How a core key's per-origin counters are laid out in a Redis hash (Redis
// mode, shell/redis_store.h): one field per (origin, incarnation), named
// encode_field(), holding the consumed count in canonical decimal. Pure and
// thread-safe; decode_fields() takes any bytes (what a store returned, or a
// fuzzer's input) and never fails: what does not decode is skipped and
// counted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/store.h"

namespace rlimit::shell {

// Sixteen lowercase hex digits of `incarnation`, then `origin`'s bytes as
// they are: unambiguous for any origin (the prefix has a fixed length).
std::string encode_field(std::string_view origin, std::uint64_t incarnation);

// The inverse; nullopt unless `field` is 16 lowercase hex digits followed by
// the origin (which may hold any bytes, or none).
std::optional<core::StoreEntry> decode_field(std::string_view field);

// Canonical decimal: "0", or a non-zero digit then digits, at most
// 18446744073709551615. Canonical so that the store's script can compare two
// values as strings (longer is larger, then lexicographically) without Lua's
// doubles, which lose integers above 2^53.
std::string encode_consumed(std::uint64_t consumed);
std::optional<std::uint64_t> decode_consumed(std::string_view text);

struct DecodedFields {
  std::vector<core::StoreEntry> entries;  // in the order given
  std::uint64_t skipped = 0;  // fields or values that did not decode, or a lone last field
};

// A hash as HGETALL lists it: field, value, field, value, ...
DecodedFields decode_fields(const std::vector<std::string_view>& field_value_pairs);

}  // namespace rlimit::shell
