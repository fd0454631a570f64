#include "core/rule.h"

namespace rlimit::core {

std::string SourceLocation::to_string() const {
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

bool ValueMatcher::matches(std::string_view value) const {
  switch (kind) {
    case ValueMatchKind::kAny:
      return true;
    case ValueMatchKind::kExact:
      return value == pattern;
    case ValueMatchKind::kPrefix:
      return value.starts_with(pattern);
    case ValueMatchKind::kGlob:
      return glob && glob->matches(value);
  }
  return false;
}

std::string ValueMatcher::describe() const {
  std::string text;
  switch (kind) {
    case ValueMatchKind::kAny:
      text = "*";
      break;
    case ValueMatchKind::kExact:
      text = "\"" + pattern + "\"";
      break;
    case ValueMatchKind::kPrefix:
      text = "prefix:\"" + pattern + "\"";
      break;
    case ValueMatchKind::kGlob:
      text = "glob:\"" + (glob ? glob->pattern() : pattern) + "\"";
      break;
  }
  if (each) text += " (each)";
  return text;
}

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kTokenBucket:
      return "token_bucket";
  }
  return "unknown";
}

namespace {

bool same_matcher(const ValueMatcher& a, const ValueMatcher& b) {
  const std::string& pa = a.glob ? a.glob->pattern() : a.pattern;
  const std::string& pb = b.glob ? b.glob->pattern() : b.pattern;
  return a.kind == b.kind && a.each == b.each && pa == pb;
}

bool same_match(const std::vector<DescriptorMatch>& a, const std::vector<DescriptorMatch>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].key != b[i].key || !same_matcher(a[i].value, b[i].value)) return false;
  }
  return true;
}

}  // namespace

bool Rule::same_definition(const Rule& other) const {
  if (!same_match(match, other.match) || params != other.params || algorithm != other.algorithm ||
      overrides.size() != other.overrides.size()) {
    return false;
  }
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    if (!same_match(overrides[i].match, other.overrides[i].match) ||
        overrides[i].params != other.overrides[i].params) {
      return false;
    }
  }
  return true;
}

std::string Rule::describe_match() const {
  if (match.empty()) return "(every request)";
  std::string text;
  for (const DescriptorMatch& m : match) {
    if (!text.empty()) text += ", ";
    text += m.key + "=" + m.value.describe();
  }
  return text;
}

}  // namespace rlimit::core
