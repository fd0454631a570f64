#include "shell/rules_digest.h"

#include <openssl/evp.h>

#include <algorithm>
#include <string_view>
#include <vector>

namespace rlimit::shell {
namespace {

void field(std::string& out, std::string_view value) {
  out += std::to_string(value.size());
  out += ':';
  out += value;
}

void field(std::string& out, std::int64_t value) { field(out, std::to_string(value)); }

void matches(std::string& out, const std::vector<core::DescriptorMatch>& match) {
  field(out, static_cast<std::int64_t>(match.size()));
  for (const core::DescriptorMatch& m : match) {
    field(out, m.key);
    field(out, m.value.describe());
  }
}

void params(std::string& out, const core::BucketParams& p) {
  field(out, p.limit);
  field(out, p.period_us);
  field(out, p.burst);
}

}  // namespace

std::string canonical_rules(const core::RuleSet& rules) {
  std::vector<std::string> parts;
  parts.reserve(rules.rules.size() + rules.exemptions.size());
  for (const core::Rule& rule : rules.rules) {
    std::string& s = parts.emplace_back("rule ");
    field(s, rule.name);
    field(s, core::algorithm_name(rule.algorithm));
    matches(s, rule.match);
    params(s, rule.params);
    field(s, rule.options.describe());
    field(s, static_cast<std::int64_t>(rule.overrides.size()));
    for (const core::Override& o : rule.overrides) {
      matches(s, o.match);
      params(s, o.params);
    }
  }
  for (const core::Exemption& exemption : rules.exemptions) {
    std::string& s = parts.emplace_back("exempt ");
    matches(s, exemption.match);
    std::vector<std::string> names = exemption.rules;
    std::sort(names.begin(), names.end());
    field(s, static_cast<std::int64_t>(names.size()));
    for (const std::string& name : names) field(s, name);
  }
  // One order whatever the file's (rule names are unique, so no two rules tie).
  std::sort(parts.begin(), parts.end());
  std::string text;
  for (const std::string& part : parts) field(text, part);
  return text;
}

std::uint64_t rules_digest(const core::RuleSet& rules) {
  const std::string text = canonical_rules(rules);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_bytes = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &digest_bytes, EVP_sha256(), nullptr) != 1 ||
      digest_bytes < 8) {
    return 0;  // OpenSSL without SHA-256: no digest (alerts compare equal zeros)
  }
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | digest[i];
  return value >> 12;  // the first 52 bits
}

}  // namespace rlimit::shell
