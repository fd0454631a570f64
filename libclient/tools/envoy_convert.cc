// envoyproxy/ratelimit YAML -> rlimit TOML. See envoy_convert.h for the
// mapping; the facts about ratelimit it relies on are those of its README and
// src/config/config_impl.go (GetLimit): one node per level, key_value before
// a wildcard before the key alone, a limit only at the request's last entry.
#include "envoy_convert.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rlimit::tools {
namespace {

// rlimit's bounds (docs/configuration.md, "Bounds at a glance").
constexpr std::size_t kMaxRuleNameBytes = 128;
constexpr std::size_t kMaxMatchDescriptors = 64;
constexpr std::size_t kDefaultMaxRules = 10'000;
// The key rlimit's Envoy face gives the domain.
constexpr std::string_view kDomainKey = "domain";

// ratelimit's units and their windows (utils.UnitToDivider: fixed windows
// aligned to Unix time; a month is 30 days, a year 365).
struct UnitInfo {
  std::string_view name;  // lower case; the YAML may use any case
  std::string_view period;
};
constexpr UnitInfo kUnits[] = {{"second", "1s"}, {"minute", "1m"}, {"hour", "1h"},  {"day", "1d"},
                               {"week", "7d"},   {"month", "30d"}, {"year", "365d"}};

constexpr std::string_view kRootKeys[] = {"domain", "descriptors"};
constexpr std::string_view kDescriptorKeys[] = {
    "key",         "value",           "rate_limit",     "descriptors",
    "shadow_mode", "detailed_metric", "value_to_metric"};
constexpr std::string_view kRateLimitKeys[] = {"unit", "requests_per_unit", "unlimited", "name",
                                               "replaces"};
constexpr std::string_view kReplacesKeys[] = {"name"};

template <std::size_t N>
bool contains(const std::string_view (&list)[N], std::string_view key) {
  return std::find(std::begin(list), std::end(list), key) != std::end(list);
}

// Keys ratelimit knows somewhere: elsewhere than their place it ignores them.
bool known_anywhere(std::string_view key) {
  return contains(kRootKeys, key) || contains(kDescriptorKeys, key) ||
         contains(kRateLimitKeys, key);
}

std::string join(const auto& list) {
  std::string out;
  for (std::string_view item : list) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

struct Limit {
  bool unlimited = false;
  bool has_requests = false;
  std::uint32_t requests_per_unit = 0;
  const UnitInfo* unit = nullptr;
  std::string name;
  std::vector<std::string> replaces;
};

enum class ValueKind { kAny, kExact, kPrefix };

struct Node {
  std::string key;
  ValueKind kind = ValueKind::kAny;
  std::string value;      // exact value, or prefix without its '*'
  std::string raw_value;  // as written ("" for none)
  std::optional<Limit> limit;
  bool shadow = false;
  std::vector<Node> children;
  YAML::Mark mark;
};

// The TOML basic string for `text` (valid UTF-8, as YAML input is).
std::string toml_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          static constexpr char kHex[] = "0123456789ABCDEF";
          out += "\\u00";
          out += kHex[u >> 4];
          out += kHex[u & 15];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// A TOML key: bare when it may be, else quoted.
std::string toml_key(std::string_view key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  return bare ? std::string(key) : toml_string(key);
}

// A comment line's text: one line, printable.
std::string comment_text(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? ' ' : c;
  }
  return out;
}

std::string matcher_toml(const Node& node, bool each) {
  switch (node.kind) {
    case ValueKind::kExact:
      return toml_string(node.value);
    case ValueKind::kPrefix:
      if (node.value.empty()) return each ? "{ each = true }" : "{}";
      return "{ prefix = " + toml_string(node.value) + (each ? ", each = true }" : " }");
    case ValueKind::kAny:
      break;
  }
  return each ? "{ each = true }" : "{}";
}

// "key", "key=value", "key=value*": a node as messages show it.
std::string describe(const Node& node) {
  return node.raw_value.empty() ? node.key : node.key + "=" + node.raw_value;
}

std::string describe_path(const std::vector<const Node*>& path) {
  std::string out = "(";
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (i > 0) out += ", ";
    out += describe(*path[i]);
  }
  return out + ")";
}

// ----- reading the YAML ----------------------------------------------------

class Reader {
 public:
  Reader(std::string_view source, EnvoyConvertResult& result) : source_(source), result_(result) {}

  std::string where(const YAML::Mark& mark) const {
    if (mark.is_null()) return std::string(source_);
    return std::string(source_) + ":" + std::to_string(mark.line + 1) + ":" +
           std::to_string(mark.column + 1);
  }
  void error(const YAML::Mark& mark, const std::string& message) {
    result_.errors.push_back(where(mark) + ": " + message);
  }
  void warn(const YAML::Mark& mark, const std::string& message) {
    result_.warnings.push_back(where(mark) + ": " + message);
  }

  // The document's domain and tree; false after reporting errors.
  bool read_root(const YAML::Node& root, std::string& domain, std::vector<Node>& tree) {
    if (root.IsNull()) {
      error(root.Mark(), "the document is empty (expected domain and descriptors)");
      return false;
    }
    if (!root.IsMap()) {
      error(root.Mark(), "expected a mapping with domain and descriptors");
      return false;
    }
    bool has_domain = false;
    for_each_entry(root, "the top level", kRootKeys,
                   [&](const std::string& key, const YAML::Node& value, const YAML::Mark&) {
                     if (key == "domain") {
                       if (auto text = read_string(value, "domain")) {
                         domain = *text;
                         has_domain = true;
                       }
                     } else if (key == "descriptors") {
                       read_descriptors(value, "descriptors", tree, 1);
                     }
                   });
    if (!has_domain || domain.empty()) {
      // ratelimit: "config file cannot have empty domain".
      if (!has_domain)
        error(root.Mark(), "domain is required (a config file cannot have an empty domain)");
      else
        error(root["domain"].Mark(), "domain must not be empty");
    }
    return result_.errors.empty();
  }

 private:
  // Calls `f(key, value, key_mark)` for each entry of the mapping `map`,
  // after refusing duplicate keys and unknown keys (ratelimit refuses keys it
  // does not know) and warning on known keys out of their place.
  template <std::size_t N, typename F>
  void for_each_entry(const YAML::Node& map, std::string_view place,
                      const std::string_view (&allowed)[N], F&& f) {
    std::map<std::string, YAML::Mark> seen;
    for (const auto& entry : map) {
      const YAML::Node key_node = entry.first;
      if (!key_node.IsScalar()) {
        error(key_node.Mark(), "a key in " + std::string(place) + " is not a string");
        continue;
      }
      const std::string key = key_node.Scalar();
      const auto [first, fresh] = seen.emplace(key, key_node.Mark());
      if (!fresh) {
        error(key_node.Mark(), "duplicate key '" + key + "' in " + std::string(place) +
                                   " (first at line " + std::to_string(first->second.line + 1) +
                                   ")");
        continue;
      }
      if (!contains(allowed, key)) {
        if (known_anywhere(key)) {
          warn(key_node.Mark(),
               "'" + key + "' means nothing in " + std::string(place) +
                   "; ignored, as ratelimit ignores it (expected: " + join(allowed) + ")");
        } else {
          error(key_node.Mark(), "unknown key '" + key + "' in " + std::string(place) +
                                     " (ratelimit refuses it too; expected: " + join(allowed) +
                                     ")");
        }
        continue;
      }
      f(key, entry.second, key_node.Mark());
    }
  }

  // A scalar as text (ratelimit reads any scalar into its string fields);
  // null reads as "".
  std::optional<std::string> read_string(const YAML::Node& node, std::string_view what) {
    if (node.IsNull()) return std::string();
    if (!node.IsScalar()) {
      error(node.Mark(), std::string(what) + " must be a string");
      return std::nullopt;
    }
    return node.Scalar();
  }

  std::optional<bool> read_bool(const YAML::Node& node, std::string_view what) {
    bool value = false;
    if (node.IsScalar() && YAML::convert<bool>::decode(node, value)) return value;
    error(node.Mark(), std::string(what) + " must be true or false");
    return std::nullopt;
  }

  std::optional<std::uint32_t> read_uint32(const YAML::Node& node, std::string_view what) {
    const std::string text = node.IsScalar() ? node.Scalar() : std::string();
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (!node.IsScalar() || text.empty() || ec != std::errc() || end != text.data() + text.size() ||
        value > std::numeric_limits<std::uint32_t>::max()) {
      error(node.Mark(), std::string(what) + " must be an integer from 0 to 4294967295, not '" +
                             comment_text(text) + "'");
      return std::nullopt;
    }
    return static_cast<std::uint32_t>(value);
  }

  void read_descriptors(const YAML::Node& node, const std::string& what, std::vector<Node>& out,
                        std::size_t depth) {
    if (node.IsNull()) return;
    if (!node.IsSequence()) {
      error(node.Mark(), what + " must be a list of descriptors");
      return;
    }
    // ratelimit: "duplicate descriptor composite key".
    std::map<std::pair<std::string, std::string>, YAML::Mark> composite;
    for (const YAML::Node& entry : node) {
      if (!entry.IsMap()) {
        error(entry.Mark(), "each entry of " + what + " must be a mapping (key, value, ...)");
        continue;
      }
      Node parsed;
      parsed.mark = entry.Mark();
      bool has_key = false;
      YAML::Node children;
      for_each_entry(entry, "a descriptor", kDescriptorKeys,
                     [&](const std::string& key, const YAML::Node& value, const YAML::Mark& at) {
                       if (key == "key") {
                         if (auto text = read_string(value, "key")) {
                           parsed.key = *text;
                           has_key = true;
                         }
                       } else if (key == "value") {
                         if (auto text = read_string(value, "value")) parsed.raw_value = *text;
                       } else if (key == "rate_limit") {
                         parsed.limit = read_rate_limit(value);
                       } else if (key == "descriptors") {
                         children = value;
                       } else if (key == "shadow_mode") {
                         if (auto flag = read_bool(value, "shadow_mode")) parsed.shadow = *flag;
                       } else {  // detailed_metric, value_to_metric
                         if (auto flag = read_bool(value, key); flag && *flag) {
                           warn(at, key +
                                        " only changes ratelimit's metric names; rlimit has no "
                                        "per-descriptor metrics, ignored");
                         }
                       }
                     });
      if (!has_key || parsed.key.empty()) {
        error(entry.Mark(), "descriptor has empty key (key is required)");
        continue;
      }
      if (parsed.raw_value.empty()) {
        parsed.kind = ValueKind::kAny;
      } else if (parsed.raw_value.back() == '*') {
        parsed.kind = ValueKind::kPrefix;
        parsed.value = parsed.raw_value.substr(0, parsed.raw_value.size() - 1);
      } else {
        parsed.kind = ValueKind::kExact;
        parsed.value = parsed.raw_value;
      }
      if (parsed.shadow && !parsed.limit) {
        warn(entry.Mark(), "shadow_mode on " + describe(parsed) +
                               ", which has no rate_limit, does nothing (here as in ratelimit)");
      }
      const auto [first, fresh] =
          composite.emplace(std::make_pair(parsed.key, parsed.raw_value), entry.Mark());
      if (!fresh) {
        error(entry.Mark(), "duplicate descriptor " + describe(parsed) +
                                " at this level (first at line " +
                                std::to_string(first->second.line + 1) + ")");
        continue;
      }
      if (children) read_descriptors(children, "descriptors", parsed.children, depth + 1);
      out.push_back(std::move(parsed));
    }
  }

  std::optional<Limit> read_rate_limit(const YAML::Node& node) {
    if (node.IsNull()) return std::nullopt;  // as ratelimit: no block
    if (!node.IsMap()) {
      error(node.Mark(), "rate_limit must be a mapping (unit, requests_per_unit, ...)");
      return std::nullopt;
    }
    Limit limit;
    std::optional<std::string> unit_text;
    YAML::Mark unit_mark = node.Mark();
    YAML::Mark requests_mark;
    for_each_entry(node, "rate_limit", kRateLimitKeys,
                   [&](const std::string& key, const YAML::Node& value, const YAML::Mark& at) {
                     if (key == "unit") {
                       unit_text = read_string(value, "unit");
                       unit_mark = value.Mark();
                     } else if (key == "requests_per_unit") {
                       if (auto n = read_uint32(value, "requests_per_unit")) {
                         limit.requests_per_unit = *n;
                         limit.has_requests = true;
                         requests_mark = at;
                       }
                     } else if (key == "unlimited") {
                       if (auto flag = read_bool(value, "unlimited")) limit.unlimited = *flag;
                     } else if (key == "name") {
                       if (auto text = read_string(value, "name")) limit.name = *text;
                     } else if (key == "replaces") {
                       read_replaces(value, limit.replaces);
                     }
                   });
    std::string unit_lower;
    for (const char c : unit_text.value_or("")) {
      unit_lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    for (const UnitInfo& unit : kUnits) {
      if (unit.name == unit_lower) limit.unit = &unit;
    }
    if (limit.unlimited) {
      if (limit.unit != nullptr) {
        error(unit_mark, "should not specify rate limit unit when unlimited");
      }
      if (limit.has_requests) {
        warn(requests_mark, "requests_per_unit means nothing with unlimited: true; ignored");
      }
    } else if (limit.unit == nullptr) {
      error(unit_mark, unit_text ? "invalid rate limit unit '" + comment_text(*unit_text) +
                                       "' (use second, minute, hour, day, week, month or year)"
                                 : std::string("rate_limit needs a unit (second, minute, hour, "
                                               "day, week, month or year)"));
    } else if (!limit.has_requests) {
      warn(node.Mark(),
           "rate_limit has no requests_per_unit: 0, as ratelimit reads it (every request is over "
           "the limit)");
    }
    for (const std::string& replaced : limit.replaces) {
      if (replaced.empty()) error(node.Mark(), "should not have an empty replaces entry");
      if (replaced == limit.name && !limit.name.empty()) {
        error(node.Mark(), "replaces should not contain name of same descriptor");
      }
    }
    return limit;
  }

  void read_replaces(const YAML::Node& node, std::vector<std::string>& out) {
    if (node.IsNull()) return;
    if (!node.IsSequence()) {
      error(node.Mark(), "replaces must be a list of {name: ...}");
      return;
    }
    for (const YAML::Node& entry : node) {
      if (!entry.IsMap()) {
        error(entry.Mark(), "each entry of replaces must be a mapping {name: ...}");
        continue;
      }
      std::string name;
      for_each_entry(entry, "a replaces entry", kReplacesKeys,
                     [&](const std::string&, const YAML::Node& value, const YAML::Mark&) {
                       if (auto text = read_string(value, "name")) name = *text;
                     });
      out.push_back(name);
    }
  }

  std::string_view source_;
  EnvoyConvertResult& result_;
};

// ----- writing the rules ---------------------------------------------------

struct RuleOut {
  std::string name;
  std::vector<const Node*> path;
  const Node* node = nullptr;
};

struct ExemptOut {
  std::string comment;
  std::string match;  // the TOML inline table's entries after domain
  std::vector<std::string> rules;
};

// Whether ratelimit, at the level of `node`, sends a request whose entry
// `sibling` matches to `sibling` rather than to `node`, for some value that
// `node` matches too (an exact value before a wildcard before the key alone;
// among wildcards, the first listed).
bool takes_precedence(const Node& sibling, const Node& node, bool sibling_listed_first) {
  if (&sibling == &node || sibling.key != node.key) return false;
  switch (node.kind) {
    case ValueKind::kExact:
      return false;
    case ValueKind::kAny:
      return sibling.kind != ValueKind::kAny;
    case ValueKind::kPrefix:
      if (sibling.kind == ValueKind::kExact) return sibling.value.starts_with(node.value);
      if (sibling.kind == ValueKind::kPrefix && sibling_listed_first) {
        return sibling.value.starts_with(node.value) || node.value.starts_with(sibling.value);
      }
      return false;
  }
  return false;
}

class Writer {
 public:
  Writer(Reader& reader, std::string domain, const std::vector<Node>& tree,
         EnvoyConvertResult& result)
      : reader_(reader), domain_(std::move(domain)), tree_(tree), result_(result) {}

  void run(std::string_view source) {
    std::vector<const Node*> path;
    std::vector<const std::vector<Node>*> levels;
    walk(tree_, path, levels);
    check_orders();
    for (const RuleOut& rule : rules_) {
      for (const std::string& replaced : rule.node->limit->replaces) {
        if (std::none_of(rules_.begin(), rules_.end(),
                         [&](const RuleOut& r) { return r.node->limit->name == replaced; })) {
          reader_.warn(rule.node->mark, "replaces names '" + replaced +
                                            "', which no rate_limit of this file is called");
        }
      }
    }
    if (rules_.size() > kDefaultMaxRules) {
      reader_.warn(YAML::Mark::null_mark(),
                   std::to_string(rules_.size()) +
                       " rules: more than rlimitd's default daemon.max_rules (" +
                       std::to_string(kDefaultMaxRules) + "); raise it in [daemon]");
    }
    add_extra_key_exemptions();
    add_notes();
    emit(source);
  }

 private:
  void walk(const std::vector<Node>& level, std::vector<const Node*>& path,
            std::vector<const std::vector<Node>*>& levels) {
    for (const Node& node : level) {
      if (node.key != kDomainKey) keys_.emplace(node.key, keys_.size());
      if (node.key == kDomainKey) {
        reader_.warn(node.mark,
                     "key 'domain' is where rlimit's Envoy face puts the domain; a check would "
                     "carry it twice, which rlimit refuses: " +
                         describe(node) + " and what is under it not converted");
        collect_keys(node);
        continue;
      }
      if (std::any_of(path.begin(), path.end(),
                      [&](const Node* n) { return n->key == node.key; })) {
        reader_.warn(node.mark, "key '" + node.key +
                                    "' appears twice on one path; rlimit refuses a check that "
                                    "carries a key twice: " +
                                    describe(node) + " and what is under it not converted");
        collect_keys(node);
        continue;
      }
      if (path.size() + 2 > kMaxMatchDescriptors) {
        reader_.warn(node.mark, "path deeper than an rlimit match may be (" +
                                    std::to_string(kMaxMatchDescriptors) +
                                    " descriptors with the domain): not converted");
        collect_keys(node);
        continue;
      }
      path.push_back(&node);
      levels.push_back(&level);
      if (node.limit && !node.limit->unlimited) {
        if (!node.limit->replaces.empty()) {
          reader_.warn(node.mark, "replaces " + join(node.limit->replaces) +
                                      " not expressed: rlimit checks each of a request's "
                                      "descriptors on its own and never drops one limit because "
                                      "another matched, so the replaced limits still apply");
        }
        add_rule(path, levels);
      } else if (node.limit) {
        unlimited_.push_back({path, &node});
      }
      walk(node.children, path, levels);
      path.pop_back();
      levels.pop_back();
    }
  }

  void collect_keys(const Node& node) {
    for (const Node& child : node.children) {
      if (child.key != kDomainKey) keys_.emplace(child.key, keys_.size());
      collect_keys(child);
    }
  }

  static std::string sanitize(std::string_view text) {
    std::string out;
    for (const char c : text) {
      const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == ':' || c == '-';
      out += ok ? c : '_';
    }
    return out;
  }

  // ratelimit's stats key (domain.key_value.key), made a valid, unique rule name.
  std::string rule_name(const std::vector<const Node*>& path) {
    std::string name = domain_;
    for (const Node* node : path) {
      name += "." + node->key;
      if (!node->raw_value.empty()) name += "_" + node->raw_value;
    }
    name = sanitize(name);
    if (name.size() > kMaxRuleNameBytes - 8) {
      std::uint32_t hash = 2166136261u;  // FNV-1a of the full name keeps cut names apart
      for (const char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
      static constexpr char kHex[] = "0123456789abcdef";
      name.resize(kMaxRuleNameBytes - 9);
      name += '-';
      for (int shift = 28; shift >= 0; shift -= 4) name += kHex[(hash >> shift) & 15];
    }
    std::string unique = name;
    for (int n = 2; names_.contains(unique); ++n) unique = name + "-" + std::to_string(n);
    names_.insert(unique);
    return unique;
  }

  void add_rule(const std::vector<const Node*>& path,
                const std::vector<const std::vector<Node>*>& levels) {
    RuleOut rule{rule_name(path), path, path.back()};
    // Precedence: at each level, values a more specific sibling takes.
    for (std::size_t i = 0; i < path.size(); ++i) {
      const Node& node = *path[i];
      bool listed_first = true;
      for (const Node& sibling : *levels[i]) {
        if (&sibling == &node) listed_first = false;
        if (!takes_precedence(sibling, node, listed_first)) continue;
        add_precedence_exemption(node, sibling, rule.name);
      }
    }
    rules_.push_back(std::move(rule));
  }

  void add_precedence_exemption(const Node& node, const Node& sibling, const std::string& rule) {
    const auto id = std::make_pair(&node, &sibling);
    const auto it = precedence_.find(id);
    if (it != precedence_.end()) {
      exemptions_[it->second].rules.push_back(rule);
      return;
    }
    precedence_.emplace(id, exemptions_.size());
    ExemptOut exempt;
    exempt.comment = "ratelimit sends " + node.key + " values that " + describe(sibling) + " (" +
                     reader_.where(sibling.mark) + ") matches there, not to " + describe(node) +
                     " (" + reader_.where(node.mark) + ")";
    exempt.match = toml_key(node.key) + " = " + matcher_toml(sibling, false);
    exempt.rules.push_back(rule);
    exemptions_.push_back(std::move(exempt));
  }

  // A rule applies only to requests that end at its node: a check carrying
  // any key of the file that its path does not name skips it.
  void add_extra_key_exemptions() {
    std::vector<std::pair<std::size_t, std::string>> ordered;
    for (const auto& [key, index] : keys_) ordered.emplace_back(index, key);
    std::sort(ordered.begin(), ordered.end());
    for (const auto& [index, key] : ordered) {
      ExemptOut exempt;
      for (const RuleOut& rule : rules_) {
        const bool named = std::any_of(rule.path.begin(), rule.path.end(),
                                       [&](const Node* n) { return n->key == key; });
        if (!named) exempt.rules.push_back(rule.name);
      }
      if (exempt.rules.empty()) continue;
      exempt.comment = "a request with a " + key +
                       " entry does not end at these rules' nodes (ratelimit: the request's depth "
                       "must match)";
      exempt.match = toml_key(key) + " = {}";
      exemptions_.push_back(std::move(exempt));
    }
  }

  // What rlimit's set matching cannot check, where it can matter here.
  void add_notes() {
    if (rules_.empty()) return;
    result_.notes.push_back(
        "an entry whose key appears nowhere in this file does not keep a rule off a request "
        "(ratelimit: such a request is deeper than the path and gets no limit)");
    if (std::any_of(rules_.begin(), rules_.end(),
                    [](const RuleOut& r) { return r.path.size() > 1; })) {
      result_.notes.push_back(
          "entry order is not checked: a request with a path's entries in another order meets "
          "that path's rule (ratelimit: no limit)");
    }
  }

  // Paths naming the same keys in other orders meet the same checks here.
  void check_orders() {
    std::map<std::vector<std::string>, const RuleOut*> by_set;
    for (const RuleOut& rule : rules_) {
      std::vector<std::string> keys;
      for (const Node* n : rule.path) keys.push_back(n->key);
      std::vector<std::string> sorted = keys;
      std::sort(sorted.begin(), sorted.end());
      const auto [it, fresh] = by_set.emplace(sorted, &rule);
      if (fresh) continue;
      const RuleOut& first = *it->second;
      const bool same_order =
          std::equal(first.path.begin(), first.path.end(), rule.path.begin(),
                     [](const Node* a, const Node* b) { return a->key == b->key; });
      if (!same_order) {
        reader_.warn(rule.node->mark,
                     describe_path(rule.path) + " names the keys of " + describe_path(first.path) +
                         " (" + reader_.where(first.node->mark) +
                         ") in another order; rlimit matches descriptors as a set, so a check "
                         "in either order may meet both rules");
      }
    }
  }

  void emit(std::string_view source) {
    std::string& out = result_.toml;
    out += "# rlimit rules converted by `rlimitctl convert envoy-ratelimit` from " +
           comment_text(source) + "\n";
    out += "# (envoyproxy/ratelimit domain " + comment_text(toml_string(domain_)) + ").\n#\n";
    out +=
        "# rlimit's Envoy face checks a request of this domain as the descriptors\n"
        "# domain = <the domain>, then the request's entries, so every rule matches domain.\n"
        "# Each limit is a fixed window aligned to Unix time, as ratelimit counts. ratelimit\n"
        "# picks one descriptor node per level and a limit only where the request ends;\n"
        "# the [[exempt]] tables below keep each rule off the requests ratelimit would send\n"
        "# elsewhere. rlimit matches descriptors by key, not by position, so:\n"
        "#  - the order of a request's entries is not checked: a request with a path's\n"
        "#    entries in another order meets that path's rule (ratelimit: no limit);\n"
        "#  - an entry whose key appears nowhere in this file does not keep a rule off the\n"
        "#    request (ratelimit: the request is deeper than the path, no limit).\n";
    if (!result_.warnings.empty()) {
      out += "#\n# Not converted or converted differently (also printed by rlimitctl):\n";
      for (const std::string& w : result_.warnings) out += "#  - " + comment_text(w) + "\n";
    }
    for (const auto& [path, node] : unlimited_) {
      out += "\n# " + comment_text(describe_path(path)) + " (" + reader_.where(node->mark) +
             "): unlimited in ratelimit; no rule (the exemptions keep other rules off it).\n";
    }
    const std::string domain_match =
        toml_key(std::string(kDomainKey)) + " = " + toml_string(domain_);
    for (const RuleOut& rule : rules_) {
      const Limit& limit = *rule.node->limit;
      out += "\n# " + comment_text(describe_path(rule.path)) + " (" +
             reader_.where(rule.node->mark) + "): " + std::to_string(limit.requests_per_unit) +
             " per " + std::string(limit.unit->name);
      if (limit.unit->name == "month" || limit.unit->name == "year") {
        out += " (ratelimit's " + std::string(limit.unit->period) + " window)";
      }
      if (rule.node->shadow) out += ", shadow_mode";
      if (!limit.name.empty()) out += ", rate_limit name " + comment_text(toml_string(limit.name));
      out += "\n";
      if (!limit.replaces.empty()) {
        out += "# NOT EXPRESSED: replaces " + comment_text(join(limit.replaces)) +
               ": the replaced limits still apply to requests this one meets.\n";
      }
      out += "[[rule]]\n";
      out += "name = " + toml_string(rule.name) + "\n";
      out += "match = { " + domain_match;
      for (const Node* node : rule.path) {
        out += ", " + toml_key(node->key) + " = " + matcher_toml(*node, true);
      }
      out += " }\n";
      if (limit.requests_per_unit == 0) {
        // fixed_window needs a limit of at least 1; a bucket that holds and
        // refills nothing refuses every request, as ratelimit's 0 does.
        out += "# 0: every request refused, by a token bucket that holds and refills nothing\n";
        out += "algorithm = \"token_bucket\"\nlimit = 0\nburst = 0\n";
      } else {
        out += "algorithm = \"fixed_window\"\n";
        out += "limit = " + std::to_string(limit.requests_per_unit) + "\n";
      }
      out += "period = \"" + std::string(limit.unit->period) + "\"\n";
      if (rule.node->shadow) out += "mode = \"shadow\"\n";
    }
    for (const ExemptOut& exempt : exemptions_) {
      out += "\n# " + comment_text(exempt.comment) + "\n";
      out += "[[exempt]]\n";
      out += "match = { " + domain_match + ", " + exempt.match + " }\n";
      out += "rules = [";
      for (std::size_t i = 0; i < exempt.rules.size(); ++i) {
        out += (i == 0 ? "" : ", ") + toml_string(exempt.rules[i]);
      }
      out += "]\n";
    }
  }

  Reader& reader_;
  std::string domain_;
  const std::vector<Node>& tree_;
  EnvoyConvertResult& result_;
  std::vector<RuleOut> rules_;
  std::vector<std::pair<std::vector<const Node*>, const Node*>> unlimited_;
  std::vector<ExemptOut> exemptions_;
  std::map<std::pair<const Node*, const Node*>, std::size_t> precedence_;
  std::map<std::string, std::size_t> keys_;  // -> first-seen order
  std::set<std::string> names_;
};

}  // namespace

EnvoyConvertResult convert_envoy_ratelimit(std::string_view yaml_text,
                                           std::string_view source_name) {
  EnvoyConvertResult result;
  Reader reader(source_name, result);
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    reader.error(e.mark, "malformed YAML: " + e.msg);
    return result;
  }
  if (documents.empty()) {
    reader.error(YAML::Mark::null_mark(),
                 "the file holds no YAML document (expected domain and descriptors)");
    return result;
  }
  if (documents.size() > 1) {
    reader.warn(documents[1].Mark(),
                "only the first YAML document is converted (ratelimit reads only the first)");
  }
  std::string domain;
  std::vector<Node> tree;
  try {
    if (!reader.read_root(documents[0], domain, tree)) return result;
    Writer(reader, domain, tree, result).run(source_name);
  } catch (const YAML::Exception& e) {
    reader.error(e.mark, "malformed YAML: " + e.msg);
  }
  if (!result.errors.empty()) result.toml.clear();
  return result;
}

}  // namespace rlimit::tools
