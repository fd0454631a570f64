// Human-readable output for the tools: durations in the largest sensible
// units, limit/period pairs, and a plain aligned text table. Header-only;
// pure functions and a value type, thread-compatible.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace rlimit::tools {

// 1500 -> "1.5ms", 2500000 -> "2.5s", 90000000 -> "1m30s", -1 -> "never".
inline std::string format_duration_us(std::int64_t us) {
  if (us < 0) return "never";
  if (us == 0) return "0";
  char buf[64];
  const auto with_decimal = [&](double v, const char* unit) {
    std::snprintf(buf, sizeof(buf), "%.1f", v);
    std::string text = buf;
    if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0)
      text.resize(text.size() - 2);
    return text + unit;
  };
  if (us < 1000) return std::to_string(us) + "us";
  if (us < 1'000'000) return with_decimal(static_cast<double>(us) / 1e3, "ms");
  if (us < 60'000'000) return with_decimal(static_cast<double>(us) / 1e6, "s");
  std::int64_t s = us / 1'000'000;
  const std::int64_t d = s / 86400;
  s %= 86400;
  const std::int64_t h = s / 3600;
  s %= 3600;
  const std::int64_t m = s / 60;
  s %= 60;
  std::string text;
  if (d > 0) text += std::to_string(d) + "d";
  if (h > 0) text += std::to_string(h) + "h";
  if (m > 0 && d == 0) text += std::to_string(m) + "m";
  if (s > 0 && d == 0 && h == 0) text += std::to_string(s) + "s";
  return text;
}

// A period in its exact largest unit: 1000 -> "1s", 86400000 -> "1d", 1500 -> "1500ms".
inline std::string format_period_ms(std::uint64_t ms) {
  struct Unit {
    std::uint64_t ms;
    const char* name;
  };
  static constexpr Unit kUnits[] = {
      {86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1000, "s"}};
  if (ms == 0) return "0ms";
  for (const Unit& unit : kUnits) {
    if (ms % unit.ms == 0) return std::to_string(ms / unit.ms) + unit.name;
  }
  return std::to_string(ms) + "ms";
}

// "10/1s"
inline std::string format_rate(std::uint64_t limit, std::uint64_t period_ms) {
  return std::to_string(limit) + "/" + format_period_ms(period_ms);
}

// Columns padded to their widest cell, two spaces apart. Numeric-looking
// columns can be right-aligned.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : rows_{std::move(header)} {
    right_.assign(rows_.front().size(), false);
  }
  void align_right(std::size_t column) {
    if (column < right_.size()) right_[column] = true;
  }
  void add_row(std::vector<std::string> row) {
    row.resize(rows_.front().size());
    rows_.push_back(std::move(row));
  }
  void add_separator() { rows_.emplace_back(); }

  std::string render(std::string_view indent = "") const {
    std::vector<std::size_t> width(rows_.front().size(), 0);
    for (const auto& row : rows_) {
      for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    }
    std::size_t total = 0;
    for (std::size_t w : width) total += w + 2;
    std::string out;
    for (const auto& row : rows_) {
      out += indent;
      if (row.empty()) {
        out.append(total > 2 ? total - 2 : 0, '-');
        out += '\n';
        continue;
      }
      std::string line;
      for (std::size_t i = 0; i < row.size(); ++i) {
        const std::size_t pad = width[i] - row[i].size();
        if (right_[i]) line.append(pad, ' ');
        line += row[i];
        if (!right_[i]) line.append(pad, ' ');
        if (i + 1 < row.size()) line += "  ";
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line;
      out += '\n';
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

}  // namespace rlimit::tools
