// The TOML loaders: config::load_config (the config file, at start and on
// SIGHUP) and config::load_rules (a rules document from the rules API, a
// peer or the state file). The first byte picks the loader and, for
// load_rules, the cluster mode it checks against; the rest is the text.
// Properties: a config that loads carries its rules as a document
// (Config::rules_text) that load_rules accepts with the same bounds and
// reads to the same number of rules and exemptions (that text is what the
// node persists and advertises); a rules document that loads keeps its
// canonical text, and that text is canonical already (a peer that
// canonicalizes it again gets the same digest).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "config/config.h"
#include "fuzz_check.h"

namespace {

using rlimit::config::ClusterMode;
using rlimit::config::LoadResult;
using rlimit::config::RulesLoadOptions;

void rules_document_reloads(const rlimit::config::Config& config) {
  RulesLoadOptions options;
  options.max_rules = config.daemon.max_rules;
  options.max_descriptors_per_check = config.daemon.limiter.max_descriptors_per_check;
  options.mode = config.cluster.mode;
  const LoadResult again = rlimit::config::load_rules(config.rules_text, "rules_text", options);
  if (!again.ok()) {
    std::fprintf(stderr, "rules_text:\n%s\nerror: %s\n", config.rules_text.c_str(),
                 again.errors.front().to_string().c_str());
  }
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again.config.rules.rules.size() == config.rules.rules.size());
  FUZZ_CHECK(again.config.rules.exemptions.size() == config.rules.exemptions.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned selector = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((selector & 3) == 0) {
    const LoadResult loaded = rlimit::config::load_config(text, "fuzz.toml");
    if (loaded.ok()) rules_document_reloads(loaded.config);
    return 0;
  }
  RulesLoadOptions options;
  options.max_rules = 64;
  options.mode = (selector & 3) == 1   ? ClusterMode::kNone
                 : (selector & 3) == 2 ? ClusterMode::kGossip
                                       : ClusterMode::kMesh;
  const LoadResult loaded = rlimit::config::load_rules(text, "fuzz-rules.toml", options);
  if (loaded.ok()) {
    const std::string canonical = rlimit::config::canonical_rules_text(text);
    FUZZ_CHECK(loaded.config.rules_text == canonical);
    FUZZ_CHECK(rlimit::config::canonical_rules_text(canonical) == canonical);
  }
  return 0;
}
