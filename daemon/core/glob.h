// Shell-style glob patterns for descriptor values: `*` any run of characters,
// `?` one character, `[abc]`, `[a-z]`, `[!a-z]` one character of a set, `\x`
// the character x. Pure; a compiled Glob is immutable and thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rlimit::core {

class Glob {
 public:
  // A compiled pattern, or nullopt with `error` set (unclosed `[`, trailing
  // `\`, empty set, reversed range).
  static std::optional<Glob> compile(std::string_view pattern, std::string* error);

  bool matches(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  explicit Glob(std::string pattern) : pattern_(std::move(pattern)) {}
  std::string pattern_;
};

}  // namespace rlimit::core
