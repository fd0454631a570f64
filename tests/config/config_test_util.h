// Helpers shared by the config loader's tests: load a TOML text, and print
// every error of a result (for a failed expectation's message).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "config/config.h"

namespace rlimit::config::test_util {

inline constexpr std::int64_t kSecondUs = 1'000'000;

inline LoadResult load(std::string_view text) { return load_config(text, "test.toml"); }

inline std::string all_errors(const LoadResult& result) {
  std::string text;
  for (const ConfigError& e : result.errors) text += "  " + e.to_string() + "\n";
  return text;
}

}  // namespace rlimit::config::test_util
