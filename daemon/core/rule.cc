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

namespace {
constexpr const char* kAlgorithmNames[kAlgorithmCount] = {
    "token_bucket", "leaky_bucket", "fixed_window",      "sliding_window", "sliding_log",
    "gcra",         "smooth_bursty", "smooth_warming_up", "concurrency"};
}  // namespace

const char* algorithm_name(Algorithm algorithm) {
  const auto index = static_cast<std::size_t>(algorithm);
  return index < kAlgorithmCount ? kAlgorithmNames[index] : "unknown";
}

std::optional<Algorithm> algorithm_from_name(std::string_view name) {
  for (std::size_t i = 0; i < kAlgorithmCount; ++i) {
    if (name == kAlgorithmNames[i]) return static_cast<Algorithm>(i);
  }
  return std::nullopt;
}

std::string AlgorithmOptions::describe() const {
  const AlgorithmOptions defaults;
  std::string text;
  const auto add = [&](const std::string& item) {
    if (!text.empty()) text += ' ';
    text += item;
  };
  if (shaper) add("shaper");
  if (max_delay_us != defaults.max_delay_us) add("max_delay=" + std::to_string(max_delay_us) + "us");
  if (max_entries != defaults.max_entries) add("max_entries=" + std::to_string(max_entries));
  if (warmup_us != defaults.warmup_us) add("warmup=" + std::to_string(warmup_us) + "us");
  if (cold_factor != defaults.cold_factor) add("cold_factor=" + std::to_string(cold_factor));
  if (start_empty) add("start=empty");
  if (lease_ttl_us != defaults.lease_ttl_us) add("lease_ttl=" + std::to_string(lease_ttl_us) + "us");
  if (local) add("local");
  if (throttle.mode != algorithms::ThrottleMode::kHard) {
    add(std::string("mode=") + algorithms::throttle_mode_name(throttle.mode));
  }
  if (throttle.soft_percent != 0) add("soft_percent=" + std::to_string(throttle.soft_percent));
  if (throttle.elastic_threshold_permille != 0) {
    add("elastic_threshold=" + std::to_string(throttle.elastic_threshold_permille) + "permille");
  }
  return text;
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
      options != other.options ||
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
