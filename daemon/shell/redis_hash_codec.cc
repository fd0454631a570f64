#include "shell/redis_hash_codec.h"

#include <charconv>

namespace rlimit::shell {
namespace {

constexpr std::size_t kIncarnationHexDigits = 16;
constexpr char kHexDigits[] = "0123456789abcdef";

int lower_hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string encode_field(std::string_view origin, std::uint64_t incarnation) {
  std::string field(kIncarnationHexDigits, '0');
  for (std::size_t i = 0; i < kIncarnationHexDigits; ++i) {
    field[kIncarnationHexDigits - 1 - i] = kHexDigits[(incarnation >> (4 * i)) & 0xf];
  }
  field.append(origin);
  return field;
}

std::optional<core::StoreEntry> decode_field(std::string_view field) {
  if (field.size() < kIncarnationHexDigits) return std::nullopt;
  std::uint64_t incarnation = 0;
  for (std::size_t i = 0; i < kIncarnationHexDigits; ++i) {
    const int digit = lower_hex_value(field[i]);
    if (digit < 0) return std::nullopt;
    incarnation = (incarnation << 4) | static_cast<std::uint64_t>(digit);
  }
  core::StoreEntry entry;
  entry.origin = std::string(field.substr(kIncarnationHexDigits));
  entry.incarnation = incarnation;
  return entry;
}

std::string encode_consumed(std::uint64_t consumed) { return std::to_string(consumed); }

std::optional<std::uint64_t> decode_consumed(std::string_view text) {
  if (text.empty() || (text.size() > 1 && text.front() == '0')) return std::nullopt;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;  // > 2^64-1
  return value;
}

DecodedFields decode_fields(const std::vector<std::string_view>& field_value_pairs) {
  DecodedFields out;
  const std::size_t pairs = field_value_pairs.size() / 2;
  out.entries.reserve(pairs);
  for (std::size_t i = 0; i < pairs; ++i) {
    std::optional<core::StoreEntry> entry = decode_field(field_value_pairs[2 * i]);
    const std::optional<std::uint64_t> consumed = decode_consumed(field_value_pairs[2 * i + 1]);
    if (!entry || !consumed) {
      ++out.skipped;
      continue;
    }
    entry->consumed = *consumed;
    out.entries.push_back(std::move(*entry));
  }
  if (field_value_pairs.size() % 2 != 0) ++out.skipped;
  return out;
}

}  // namespace rlimit::shell
