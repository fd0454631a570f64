#include "core/glob.h"

#include <vector>

namespace rlimit::core {
namespace {

// Matches one bracket set starting at pattern[p] == '['. Returns the index
// after the closing ']' and sets `matched`; the pattern is known valid.
std::size_t match_set(std::string_view pattern, std::size_t p, char c, bool* matched) {
  ++p;  // '['
  bool negate = false;
  if (p < pattern.size() && (pattern[p] == '!' || pattern[p] == '^')) {
    negate = true;
    ++p;
  }
  bool found = false;
  bool first = true;
  while (p < pattern.size() && (pattern[p] != ']' || first)) {
    first = false;
    char lo = pattern[p];
    if (lo == '\\') lo = pattern[++p];
    ++p;
    char hi = lo;
    if (p + 1 < pattern.size() && pattern[p] == '-' && pattern[p + 1] != ']') {
      hi = pattern[p + 1];
      if (hi == '\\') hi = pattern[++p + 1];
      p += 2;
    }
    if (c >= lo && c <= hi) found = true;
  }
  *matched = found != negate;
  return p + 1;
}

}  // namespace

std::optional<Glob> Glob::compile(std::string_view pattern, std::string* error) {
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      if (i + 1 == pattern.size()) {
        if (error) *error = "glob \"" + std::string(pattern) + "\" ends with a lone '\\'";
        return std::nullopt;
      }
      ++i;
    } else if (c == '[') {
      std::size_t j = i + 1;
      if (j < pattern.size() && (pattern[j] == '!' || pattern[j] == '^')) ++j;
      const std::size_t set_start = j;
      bool closed = false;
      for (; j < pattern.size(); ++j) {
        if (pattern[j] == '\\') {
          ++j;
          continue;
        }
        if (pattern[j] == ']' && j > set_start) {
          closed = true;
          break;
        }
        if (pattern[j] == '-' && j > set_start && j + 1 < pattern.size() && pattern[j + 1] != ']') {
          char lo = pattern[j - 1];
          char hi = pattern[j + 1] == '\\' && j + 2 < pattern.size() ? pattern[j + 2] : pattern[j + 1];
          if (hi < lo) {
            if (error) {
              *error = "glob \"" + std::string(pattern) + "\" has a reversed range " + lo + "-" + hi;
            }
            return std::nullopt;
          }
        }
      }
      if (!closed) {
        if (error) *error = "glob \"" + std::string(pattern) + "\" has an unclosed '['";
        return std::nullopt;
      }
      i = j;
    }
  }
  return Glob(std::string(pattern));
}

bool Glob::matches(std::string_view text) const {
  // Iterative matcher with single-star backtracking: linear in practice and
  // never exponential (each '*' resumes from the last star only).
  const std::string_view p = pattern_;
  std::size_t pi = 0, ti = 0;
  std::size_t star_p = std::string_view::npos, star_t = 0;
  while (ti < text.size()) {
    if (pi < p.size()) {
      const char pc = p[pi];
      if (pc == '*') {
        star_p = pi++;
        star_t = ti;
        continue;
      }
      if (pc == '?') {
        ++pi;
        ++ti;
        continue;
      }
      if (pc == '[') {
        bool matched = false;
        const std::size_t next = match_set(p, pi, text[ti], &matched);
        if (matched) {
          pi = next;
          ++ti;
          continue;
        }
      } else {
        const char literal = (pc == '\\') ? p[pi + 1] : pc;
        if (literal == text[ti]) {
          pi += (pc == '\\') ? 2 : 1;
          ++ti;
          continue;
        }
      }
    }
    if (star_p == std::string_view::npos) return false;
    pi = star_p + 1;
    ti = ++star_t;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

}  // namespace rlimit::core
