// A tiny streaming JSON writer for the tools' --json output. Strings are
// escaped per RFC 8259 and invalid UTF-8 is replaced by U+FFFD, so the output
// is valid JSON whatever bytes a daemon sends. Not thread-safe; header-only.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlimit::tools {

class JsonWriter {
 public:
  // `indent` spaces per level, one value per line; 0: compact, on one line.
  explicit JsonWriter(int indent = 2) : indent_(indent) {}

  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }

  // Inside an object: the next value's name.
  JsonWriter& key(std::string_view name) {
    separate();
    append_string(name);
    out_ += indent_ > 0 ? ": " : ":";
    after_key_ = true;
    return *this;
  }

  JsonWriter& value(std::string_view text) {
    separate();
    append_string(text);
    return *this;
  }
  // Without this, a string literal would convert to bool, not string_view.
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(bool b) {
    separate();
    out_ += b ? "true" : "false";
    return *this;
  }
  template <std::integral T>
  requires(!std::same_as<T, bool>) JsonWriter& value(T number) {
    separate();
    out_ += std::to_string(number);
    return *this;
  }
  JsonWriter& null() {
    separate();
    out_ += "null";
    return *this;
  }

  // key(name).value(v) in one call.
  template <typename T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }

  const std::string& str() const { return out_; }

  // Appends `text` as a quoted, escaped JSON string.
  static void escape_into(std::string& out, std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += '"';
    std::size_t i = 0;
    while (i < text.size()) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c < 0x80) {
        switch (c) {
          case '"':
            out += "\\\"";
            break;
          case '\\':
            out += "\\\\";
            break;
          case '\b':
            out += "\\b";
            break;
          case '\f':
            out += "\\f";
            break;
          case '\n':
            out += "\\n";
            break;
          case '\r':
            out += "\\r";
            break;
          case '\t':
            out += "\\t";
            break;
          default:
            if (c < 0x20) {
              out += "\\u00";
              out += kHex[c >> 4];
              out += kHex[c & 0xf];
            } else {
              out += static_cast<char>(c);
            }
        }
        ++i;
        continue;
      }
      const std::size_t n = utf8_sequence_bytes(text.substr(i));
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.data() + i, n);
        i += n;
      }
    }
    out += '"';
  }

 private:
  // Length of the well-formed UTF-8 sequence (2-4 bytes) at the start of `s`,
  // or 0 if it is not one (overlong forms, surrogates and > U+10FFFF included).
  static std::size_t utf8_sequence_bytes(std::string_view s) {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    const unsigned char lead = byte(0);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (lead >= 0xc2 && lead <= 0xdf) {
      n = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
      n = 3;
      if (lead == 0xe0) lo = 0xa0;
      if (lead == 0xed) hi = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      n = 4;
      if (lead == 0xf0) lo = 0x90;
      if (lead == 0xf4) hi = 0x8f;
    } else {
      return 0;
    }
    if (s.size() < n) return 0;
    if (byte(1) < lo || byte(1) > hi) return 0;
    for (std::size_t i = 2; i < n; ++i) {
      if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
    }
    return n;
  }

  void append_string(std::string_view text) { escape_into(out_, text); }

  void new_line(std::size_t depth) {
    if (indent_ <= 0) return;
    out_ += '\n';
    out_.append(depth * static_cast<std::size_t>(indent_), ' ');
  }

  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
      new_line(first_.size());
    }
  }

  JsonWriter& open(char bracket) {
    separate();
    out_ += bracket;
    first_.push_back(true);
    return *this;
  }

  JsonWriter& close(char bracket) {
    if (!first_.empty()) {
      const bool empty = first_.back();
      first_.pop_back();
      if (!empty) new_line(first_.size());  // "{}" and "[]" stay on one line
    }
    out_ += bracket;
    return *this;
  }

  int indent_;
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
};

}  // namespace rlimit::tools
