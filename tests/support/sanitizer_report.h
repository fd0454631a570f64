// Test support: finds a sanitizer's report (ASan, LeakSanitizer, UBSan, TSan)
// in a child process's output or log, so a test that runs rlimitd or
// rlimitctl under build-asan or build-tsan fails when the child reported one,
// whatever its exit code. Pure; thread-safe.
#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace rlimit::testing {

// The first line of `text` that starts a sanitizer report, or an empty view.
// The markers are the runtimes' own report headers (g++ and clang alike).
inline std::string_view sanitizer_report(std::string_view text) {
  static constexpr std::array<std::string_view, 5> kMarkers = {
      "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
      "SUMMARY: UndefinedBehaviorSanitizer", ": runtime error: "};
  std::string_view::size_type first = std::string_view::npos;
  for (const std::string_view marker : kMarkers) {
    first = std::min(first, text.find(marker));
  }
  if (first == std::string_view::npos) return {};
  const auto line_start = text.rfind('\n', first);
  const auto begin = line_start == std::string_view::npos ? 0 : line_start + 1;
  const auto end = text.find('\n', first);
  return text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
}

}  // namespace rlimit::testing
