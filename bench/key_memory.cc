// Measures the memory a held key costs: fills a Limiter with N distinct
// per-user buckets and reports the heap growth (glibc mallinfo2: small
// chunks plus mmap'd blocks, where big arrays live) and RSS growth per key.
// Run: build/bin/rlimit-keymem --keys 1000000 [--algorithm gcra]
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "core/limiter.h"
#include "core/time.h"

namespace {

// Bytes allocated: chunks in the heap plus blocks glibc mmap'd on their own.
std::size_t heap_bytes() {
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Bytes per held key in rlimitd's key table"};
  std::size_t keys = 1'000'000;
  std::size_t value_bytes = 12;
  std::string algorithm_name = "token_bucket";
  app.add_option("--keys", keys, "distinct keys to hold");
  app.add_option("--algorithm", algorithm_name, "the rule's algorithm (token_bucket, gcra, ...)");
  app.add_option("--value-bytes", value_bytes, "length of each descriptor value (>= 8)");
  CLI11_PARSE(app, argc, argv);
  if (value_bytes < 8) value_bytes = 8;

  using namespace rlimit::core;
  Rule rule;
  rule.name = "per-user";
  ValueMatcher each;
  each.each = true;
  rule.match.push_back({"user", each});
  rule.params = {10, kUsPerSecond, 10};
  const std::optional<Algorithm> algorithm = algorithm_from_name(algorithm_name);
  if (!algorithm) {
    std::fprintf(stderr, "rlimit-keymem: unknown algorithm \"%s\"\n", algorithm_name.c_str());
    return 2;
  }
  rule.algorithm = *algorithm;
  rule.options.lease_ttl_us = kUsPerSecond;  // concurrency
  RuleSet rules;
  rules.rules.push_back(rule);
  Limiter limiter({.max_keys = keys}, std::move(rules));

  const std::size_t heap_before = heap_bytes();
  const long rss_before = rss_kib();
  CheckOutput out;
  std::string value(value_bytes, '0');
  for (std::size_t i = 0; i < keys; ++i) {
    const std::string digits = std::to_string(i);
    value.replace(value_bytes - digits.size(), digits.size(), digits);
    const Descriptor d[] = {{"user", value}};
    limiter.check({d, 1, nullptr}, kUsPerSecond, out);
  }
  const std::size_t heap_after = heap_bytes();
  const long rss_after = rss_kib();
  // The key's own bytes: 9-byte header (rule fingerprint, override) + 4-byte
  // length + the value.
  const std::size_t key_bytes = 9 + 4 + value_bytes;
  const double heap_per_key = static_cast<double>(heap_after - heap_before) / static_cast<double>(keys);
  const double rss_per_key = (rss_after - rss_before) * 1024.0 / static_cast<double>(keys);
  std::printf("algorithm            %s\n", algorithm_name.c_str());
  std::printf("keys held            %zu\n", limiter.key_count());
  std::printf("key bytes            %zu (rule header 9 + length 4 + value %zu)\n", key_bytes, value_bytes);
  std::printf("heap per key         %.1f bytes\n", heap_per_key);
  std::printf("heap per key beyond  %.1f bytes (overhead beyond the key's own bytes)\n",
              heap_per_key - static_cast<double>(key_bytes));
  std::printf("rss per key          %.1f bytes\n", rss_per_key);
  return 0;
}
