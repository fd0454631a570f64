#include "wire/check_codec.h"

#include <cstring>
#include <vector>

#include "wire/frame.h"

namespace rlimit::wire {
namespace {

// Protobuf wire types.
constexpr std::uint32_t kVarint = 0;
constexpr std::uint32_t kLength = 2;

constexpr char tag(std::uint32_t field, std::uint32_t wire_type) {
  return static_cast<char>((field << 3) | wire_type);  // fields here are all < 16
}

std::size_t varint_bytes(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void put_varint(std::string& out, std::uint64_t v) {
  char buf[10];
  std::size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out.append(buf, n);
}

// Field sizes and writers, leaving out proto3 defaults as protobuf does.
std::size_t varint_field_bytes(std::uint64_t v) { return v == 0 ? 0 : 1 + varint_bytes(v); }
std::size_t string_field_bytes(std::string_view s) {
  return s.empty() ? 0 : 1 + varint_bytes(s.size()) + s.size();
}
std::size_t message_field_bytes(std::size_t bytes) { return 1 + varint_bytes(bytes) + bytes; }

void put_varint_field(std::string& out, std::uint32_t field, std::uint64_t v) {
  if (v == 0) return;
  out.push_back(tag(field, kVarint));
  put_varint(out, v);
}
void put_string_field(std::string& out, std::uint32_t field, std::string_view s) {
  if (s.empty()) return;
  out.push_back(tag(field, kLength));
  put_varint(out, s.size());
  out.append(s);
}
void put_message_header(std::string& out, std::uint32_t field, std::size_t bytes) {
  out.push_back(tag(field, kLength));
  put_varint(out, bytes);
}

// The same writers on a raw cursor, for a buffer already sized: the response
// is written once its size is known, without a bounds check per byte.
char* write_varint(char* p, std::uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}
char* write_varint_field(char* p, std::uint32_t field, std::uint64_t v) {
  if (v == 0) return p;
  *p++ = tag(field, kVarint);
  return write_varint(p, v);
}
char* write_string_field(char* p, std::uint32_t field, std::string_view s) {
  if (s.empty()) return p;
  *p++ = tag(field, kLength);
  p = write_varint(p, s.size());
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}
char* write_message_header(char* p, std::uint32_t field, std::size_t bytes) {
  *p++ = tag(field, kLength);
  return write_varint(p, bytes);
}

// proto3 `string` fields must be UTF-8, which protobuf checks; plain ASCII
// needs no check, anything else is left to protobuf.
bool ascii(std::string_view s) {
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, s.data() + i, 8);
    if ((word & 0x8080808080808080ull) != 0) return false;
  }
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0x80) != 0) return false;
  }
  return true;
}

// Bounds-checked reading of one message's fields, accepting no encoding
// protobuf refuses: it reads a tag or a length from at most five bytes
// (ReadTag, ReadSize), and a length only below 2^31 less its 16 slop bytes.
class Reader {
 public:
  static constexpr int kMaxValueBytes = 10;
  static constexpr int kMaxTagOrLengthBytes = 5;
  static constexpr std::uint64_t kMaxLength = 0x7fffffff - 16;

  explicit Reader(std::string_view bytes)
      : p_(reinterpret_cast<const unsigned char*>(bytes.data())), end_(p_ + bytes.size()) {}

  bool done() const { return p_ == end_; }

  // A value: at most ten bytes, the tenth carrying only the top bit.
  bool varint(std::uint64_t& v) { return varint_within(v, kMaxValueBytes); }

  // Reads a tag; false at a malformed one or field number 0.
  bool field(std::uint32_t& number, std::uint32_t& wire_type) {
    std::uint64_t t;
    if (!varint_within(t, kMaxTagOrLengthBytes) || (t >> 3) == 0 || (t >> 3) > 0x1fffffff) {
      return false;
    }
    number = static_cast<std::uint32_t>(t >> 3);
    wire_type = static_cast<std::uint32_t>(t & 7);
    return true;
  }

  bool bytes(std::string_view& out) {
    std::uint64_t n;
    if (!varint_within(n, kMaxTagOrLengthBytes) || n > kMaxLength ||
        n > static_cast<std::uint64_t>(end_ - p_)) {
      return false;
    }
    out = std::string_view(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(n));
    p_ += n;
    return true;
  }

  bool text(std::string_view& out) { return bytes(out) && ascii(out); }

 private:
  bool varint_within(std::uint64_t& v, int max_bytes) {
    v = 0;
    for (int shift = 0; shift < 7 * max_bytes; shift += 7) {
      if (p_ == end_) return false;
      const unsigned char b = *p_++;
      // The tenth byte may only carry the top bit.
      if (shift == 63 && b > 1) return false;
      v |= std::uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }

  const unsigned char* p_;
  const unsigned char* end_;
};

// Every decode step below returns false for anything but the common shape.

bool decode_descriptor(std::string_view bytes, DescriptorView& d) {
  Reader r(bytes);
  while (!r.done()) {
    std::uint32_t field, type;
    if (!r.field(field, type) || type != kLength) return false;
    if (field == 1) {
      if (!r.text(d.key)) return false;
    } else if (field == 2) {
      if (!r.text(d.value)) return false;
    } else {
      return false;
    }
  }
  return true;
}

bool decode_inline_limit(std::string_view bytes, InlineLimitView& limit) {
  Reader r(bytes);
  while (!r.done()) {
    std::uint32_t field, type;
    if (!r.field(field, type)) return false;
    if (field == 1) {
      if (type != kLength || !r.text(limit.key)) return false;
      continue;
    }
    if (type != kVarint) return false;
    std::uint64_t* target = field == 2   ? &limit.limit
                            : field == 3 ? &limit.period_ms
                            : field == 4 ? &limit.burst
                                         : nullptr;
    if (target == nullptr || !r.varint(*target)) return false;
  }
  return true;
}

bool decode_check(std::string_view bytes, CheckRequestView& out) {
  CheckView check;
  check.first_descriptor = static_cast<std::uint32_t>(out.descriptors.size());
  Reader r(bytes);
  while (!r.done()) {
    std::uint32_t field, type;
    if (!r.field(field, type)) return false;
    if (field == 1 && type == kLength) {
      std::string_view sub;
      if (!r.bytes(sub) || !decode_descriptor(sub, out.descriptors.emplace_back())) return false;
    } else if (field == 2 && type == kVarint) {
      if (!r.varint(check.cost)) return false;
      check.has_cost = true;
    } else if (field == 3 && type == kLength && !check.has_inline_limit) {
      // A second inline_limit would be merged into the first: protobuf's job.
      std::string_view sub;
      if (!r.bytes(sub) || !decode_inline_limit(sub, check.inline_limit)) return false;
      check.has_inline_limit = true;
    } else if (field == 4 && type == kVarint) {
      // An enum is an int32 protobuf truncates to; values this daemon does
      // not know are left to it.
      std::uint64_t mode;
      if (!r.varint(mode) || mode > 2) return false;
      check.mode = static_cast<std::int32_t>(mode);
    } else if (field == 5 && type == kVarint) {
      std::uint64_t wait;
      if (!r.varint(wait)) return false;
      check.has_max_wait_us = true;
      check.max_wait_us = static_cast<std::int64_t>(wait);
    } else {
      return false;
    }
  }
  check.descriptor_count =
      static_cast<std::uint32_t>(out.descriptors.size()) - check.first_descriptor;
  out.checks.push_back(check);
  return true;
}

bool decode_rule_result(std::string_view bytes, RuleResultView& rule) {
  Reader r(bytes);
  while (!r.done()) {
    std::uint32_t field, type;
    if (!r.field(field, type)) return false;
    if (field == 1) {
      if (type != kLength || !r.text(rule.name)) return false;
      continue;
    }
    if (field == 9) {
      if (type != kLength || !r.text(rule.algorithm)) return false;
      continue;
    }
    if (field == 11) {
      if (type != kLength || !r.bytes(rule.lease)) return false;  // bytes: no UTF-8 rule
      continue;
    }
    std::uint64_t v;
    if (type != kVarint || field > 12 || !r.varint(v)) return false;
    switch (field) {
      case 2:
        rule.allowed = v != 0;
        break;
      case 3:
        rule.limit = v;
        break;
      case 4:
        rule.period_ms = v;
        break;
      case 5:
        rule.burst = v;
        break;
      case 6:
        rule.remaining = v;
        break;
      case 7:
        rule.retry_after_us = static_cast<std::int64_t>(v);
        break;
      case 8:
        rule.reset_after_us = static_cast<std::int64_t>(v);
        break;
      case 10:
        rule.delay_us = static_cast<std::int64_t>(v);
        break;
      case 12:
        rule.over_limit = v != 0;
        break;
    }
  }
  return true;
}

bool decode_check_result(std::string_view bytes, CheckResponseView& out) {
  CheckResultView result;
  result.first_rule = static_cast<std::uint32_t>(out.rules.size());
  Reader r(bytes);
  while (!r.done()) {
    std::uint32_t field, type;
    if (!r.field(field, type)) return false;
    std::uint64_t v;
    if (field == 1 && type == kVarint) {
      if (!r.varint(v)) return false;
      result.allowed = v != 0;
    } else if (field == 2 && type == kVarint) {
      if (!r.varint(v)) return false;
      result.status = static_cast<std::int32_t>(v);  // enums are int32 on the wire
    } else if (field == 3 && type == kLength) {
      std::string_view sub;
      if (!r.bytes(sub) || !decode_rule_result(sub, out.rules.emplace_back())) return false;
    } else if (field == 4 && type == kLength) {
      if (!r.text(result.error)) return false;
    } else if (field == 5 && type == kVarint) {
      if (!r.varint(v)) return false;
      result.delay_us = static_cast<std::int64_t>(v);
    } else {
      return false;
    }
  }
  result.rule_count = static_cast<std::uint32_t>(out.rules.size()) - result.first_rule;
  out.results.push_back(result);
  return true;
}

std::size_t rule_result_bytes(const RuleResultView& rule) {
  return string_field_bytes(rule.name) + (rule.allowed ? 2 : 0) + varint_field_bytes(rule.limit) +
         varint_field_bytes(rule.period_ms) + varint_field_bytes(rule.burst) +
         varint_field_bytes(rule.remaining) +
         varint_field_bytes(static_cast<std::uint64_t>(rule.retry_after_us)) +
         varint_field_bytes(static_cast<std::uint64_t>(rule.reset_after_us)) +
         string_field_bytes(rule.algorithm) +
         varint_field_bytes(static_cast<std::uint64_t>(rule.delay_us)) +
         string_field_bytes(rule.lease) + (rule.over_limit ? 2 : 0);
}

}  // namespace

// ---- Request ---------------------------------------------------------------

bool decode_check_request(std::string_view payload, CheckRequestView& out) {
  out.clear();
  bool seen_check = false;
  Reader r(payload);
  while (!r.done()) {
    std::uint32_t field, type;
    if (!r.field(field, type)) return false;
    if (field == 1 && type == kVarint) {
      if (!r.varint(out.version)) return false;
    } else if (field == 2 && type == kVarint) {
      if (!r.varint(out.id)) return false;
    } else if (field == 3 && type == kLength && !seen_check) {
      seen_check = true;
      std::string_view body;
      if (!r.bytes(body)) return false;
      Reader checks(body);
      while (!checks.done()) {
        std::uint32_t f, t;
        std::string_view sub;
        if (!checks.field(f, t) || f != 1 || t != kLength || !checks.bytes(sub) ||
            !decode_check(sub, out)) {
          return false;
        }
      }
    } else {
      return false;
    }
  }
  return seen_check && out.version == 1;
}

void CheckRequestWriter::begin(std::uint64_t id) {
  id_ = id;
  body_.clear();
}

void CheckRequestWriter::begin_check() { check_.clear(); }

void CheckRequestWriter::add_descriptor(std::string_view key, std::string_view value) {
  const std::size_t bytes = string_field_bytes(key) + string_field_bytes(value);
  const std::size_t at = check_.size();
  check_.resize(at + message_field_bytes(bytes));
  char* p = write_message_header(check_.data() + at, 1, bytes);
  p = write_string_field(p, 1, key);
  write_string_field(p, 2, value);
}

void CheckRequestWriter::set_cost(std::uint64_t cost) {
  // `optional`: present even when 0.
  check_.push_back(tag(2, kVarint));
  put_varint(check_, cost);
}

void CheckRequestWriter::set_inline_limit(std::string_view key, std::uint64_t limit,
                                          std::uint64_t period_ms, std::uint64_t burst) {
  put_message_header(check_, 3,
                     string_field_bytes(key) + varint_field_bytes(limit) +
                         varint_field_bytes(period_ms) + varint_field_bytes(burst));
  put_string_field(check_, 1, key);
  put_varint_field(check_, 2, limit);
  put_varint_field(check_, 3, period_ms);
  put_varint_field(check_, 4, burst);
}

void CheckRequestWriter::set_mode(std::int32_t mode) {
  put_varint_field(check_, 4, static_cast<std::uint64_t>(static_cast<std::int64_t>(mode)));
}

void CheckRequestWriter::set_max_wait_us(std::int64_t max_wait_us) {
  check_.push_back(tag(5, kVarint));
  put_varint(check_, static_cast<std::uint64_t>(max_wait_us));
}

void CheckRequestWriter::end_check() {
  put_message_header(body_, 1, check_.size());
  body_ += check_;
}

bool CheckRequestWriter::finish(std::string& out, std::uint32_t max_frame_bytes) {
  const std::size_t payload = 2 + varint_field_bytes(id_) + message_field_bytes(body_.size());
  if (payload > max_frame_bytes) return false;
  append_frame_header(out, static_cast<std::uint32_t>(payload));
  const std::size_t at = out.size();
  out.resize(at + payload);
  char* p = write_varint_field(out.data() + at, 1, 1);  // version: VERSION_1
  p = write_varint_field(p, 2, id_);
  p = write_message_header(p, 3, body_.size());
  std::memcpy(p, body_.data(), body_.size());
  return true;
}

// ---- Response --------------------------------------------------------------

bool decode_check_response(std::string_view payload, CheckResponseView& out) {
  out.clear();
  bool seen_check = false;
  Reader r(payload);
  while (!r.done()) {
    std::uint32_t field, type;
    if (!r.field(field, type)) return false;
    if (field == 1 && type == kVarint) {
      if (!r.varint(out.id)) return false;
    } else if (field == 2 && type == kLength && !seen_check) {
      seen_check = true;
      std::string_view body;
      if (!r.bytes(body)) return false;
      Reader results(body);
      while (!results.done()) {
        std::uint32_t f, t;
        std::string_view sub;
        if (!results.field(f, t) || f != 1 || t != kLength || !results.bytes(sub) ||
            !decode_check_result(sub, out)) {
          return false;
        }
      }
    } else {
      return false;
    }
  }
  return seen_check;
}

void CheckResponseWriter::begin(std::uint64_t id) {
  id_ = id;
  body_.clear();
}

void CheckResponseWriter::add_result(bool allowed, std::int32_t status, std::string_view error,
                                     const RuleResultView* rules, std::size_t rule_count,
                                     std::int64_t delay_us) {
  const auto status_bits = static_cast<std::uint64_t>(static_cast<std::int64_t>(status));
  const auto delay_bits = static_cast<std::uint64_t>(delay_us);
  std::size_t bytes = (allowed ? 2 : 0) + varint_field_bytes(status_bits) +
                      string_field_bytes(error) + varint_field_bytes(delay_bits);
  // Rule sizes are computed once; most results have one or two rules.
  constexpr std::size_t kSizesOnStack = 8;
  std::size_t sizes_on_stack[kSizesOnStack];
  std::vector<std::size_t> sizes_on_heap;
  std::size_t* sizes = sizes_on_stack;
  if (rule_count > kSizesOnStack) {
    sizes_on_heap.resize(rule_count);
    sizes = sizes_on_heap.data();
  }
  for (std::size_t i = 0; i < rule_count; ++i) {
    sizes[i] = rule_result_bytes(rules[i]);
    bytes += message_field_bytes(sizes[i]);
  }
  const std::size_t at = body_.size();
  body_.resize(at + message_field_bytes(bytes));
  char* p = write_message_header(body_.data() + at, 1, bytes);
  p = write_varint_field(p, 1, allowed ? 1 : 0);
  p = write_varint_field(p, 2, status_bits);
  for (std::size_t i = 0; i < rule_count; ++i) {
    const RuleResultView& rule = rules[i];
    p = write_message_header(p, 3, sizes[i]);
    p = write_string_field(p, 1, rule.name);
    p = write_varint_field(p, 2, rule.allowed ? 1 : 0);
    p = write_varint_field(p, 3, rule.limit);
    p = write_varint_field(p, 4, rule.period_ms);
    p = write_varint_field(p, 5, rule.burst);
    p = write_varint_field(p, 6, rule.remaining);
    p = write_varint_field(p, 7, static_cast<std::uint64_t>(rule.retry_after_us));
    p = write_varint_field(p, 8, static_cast<std::uint64_t>(rule.reset_after_us));
    p = write_string_field(p, 9, rule.algorithm);
    p = write_varint_field(p, 10, static_cast<std::uint64_t>(rule.delay_us));
    p = write_string_field(p, 11, rule.lease);
    p = write_varint_field(p, 12, rule.over_limit ? 1 : 0);
  }
  p = write_string_field(p, 4, error);
  p = write_varint_field(p, 5, delay_bits);
}

std::size_t CheckResponseWriter::payload_bytes() const {
  return varint_field_bytes(id_) + message_field_bytes(body_.size());
}

void CheckResponseWriter::finish(std::string& out) {
  const std::size_t payload = payload_bytes();
  const std::size_t at = out.size();
  out.resize(at + kFrameHeaderBytes + payload);
  char* p = out.data() + at;
  const auto n = static_cast<std::uint32_t>(payload);
  *p++ = static_cast<char>(n >> 24);
  *p++ = static_cast<char>(n >> 16);
  *p++ = static_cast<char>(n >> 8);
  *p++ = static_cast<char>(n);
  p = write_varint_field(p, 1, id_);
  p = write_message_header(p, 2, body_.size());
  std::memcpy(p, body_.data(), body_.size());
}

}  // namespace rlimit::wire
