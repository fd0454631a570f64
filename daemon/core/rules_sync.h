// The exchange of rule sets between the nodes of a cluster, pure: what each
// peer advertises, fetching a newer rule set in chunks that fit the payload
// budget, reassembling it within a bound, retrying what UDP lost. Time comes
// in as an argument; nothing here reads a clock, parses rules or hashes: the
// shell validates a received text, checks its digest and applies it
// (docs/cluster.md, "Rules across the cluster").
//
// Versions are ordered by (version, origin), lexicographically. Version 0 is
// a node's own config file: it is advertised (so drift shows) but never
// fetched. A node fetches the newest version above its own that it has not
// refused, from the peers that advertise it, one window of chunks at a time;
// a window not whole within request_timeout_us is asked again (from the next
// peer advertising the same version), at most max_retries times in a row
// without a new chunk arriving, after which
// the transfer is abandoned and that version is not tried again for
// retry_backoff_us. Chunks are idempotent: duplicates and reordering change
// nothing; a chunk of another version, or one that contradicts the transfer
// (size, length), is dropped and counted.
//
// Not thread-safe: driven by ClusterNode on the event loop.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/time.h"
#include "rlimit/v1/peer.pb.h"

namespace rlimit::core {

struct RulesVersion {
  std::uint64_t version = 0;
  std::string origin;  // node id that applied it
  std::string digest;  // SHA-256 of the text, 32 raw bytes (the shell computes it)

  // (version, origin, digest) order. The digest decides only between two
  // texts with the same (version, origin): a node that lost its state file
  // and applied again before hearing from its peers. Without it such a
  // cluster would stay split, each side "not newer" than the other; with
  // it every node converges on the higher digest.
  bool newer_than(const RulesVersion& other) const {
    if (version != other.version) return version > other.version;
    if (origin != other.origin) return origin > other.origin;
    return digest > other.digest;
  }
  bool same(const RulesVersion& other) const {
    return version == other.version && origin == other.origin && digest == other.digest;
  }
};

struct RulesSyncOptions {
  std::uint32_t max_payload_bytes = 1400 - 37;
  std::uint64_t max_rules_bytes = 1 << 20;  // a text above this is refused (counted)
  TimeUs request_timeout_us = 300'000;      // a window not whole by then is asked again
  std::uint32_t max_retries = 8;            // then the transfer is abandoned (counted)
  TimeUs retry_backoff_us = 5'000'000;      // before an abandoned version is tried again
  std::uint32_t window_chunks = 8;          // chunks asked per request
  std::uint32_t max_advertisers = 4096;     // peers whose advertisement is remembered
};

struct RulesSyncStats {
  std::uint64_t adverts_newer = 0;  // advertisements above our version (not refused)
  std::uint64_t transfers_started = 0;
  std::uint64_t transfers_completed = 0;   // texts handed to the shell
  std::uint64_t transfers_abandoned = 0;   // retries exhausted
  std::uint64_t transfers_superseded = 0;  // a newer version appeared mid-transfer
  std::uint64_t too_large = 0;             // total_bytes above max_rules_bytes: refused
  std::uint64_t requests_sent = 0;
  std::uint64_t retries = 0;  // windows asked again after a timeout
  std::uint64_t requests_served = 0;
  std::uint64_t requests_unknown = 0;  // asked for a version we do not hold (or bad)
  std::uint64_t chunks_sent = 0;
  std::uint64_t chunks_received = 0;  // accepted into the transfer
  std::uint64_t chunks_duplicate = 0;
  std::uint64_t chunks_stale = 0;      // not for the transfer in progress
  std::uint64_t chunks_malformed = 0;  // contradicts the transfer
  std::uint64_t refused = 0;           // texts the shell could not use (invalid, digest)
};

// A request or chunk for ClusterNode to send to `address`.
struct RulesOut {
  std::string address;
  peer::v1::PeerMessage message;  // only the body is set
};

class RulesSync {
 public:
  explicit RulesSync(RulesSyncOptions options);

  // The rule set in force here, and its text (served to peers that ask).
  void set_local(RulesVersion version, std::string text);
  const RulesVersion& local() const { return local_; }
  const std::string& local_text() const { return local_text_; }
  // The highest version number seen anywhere (ours, advertised, received):
  // an apply here takes this + 1.
  std::uint64_t max_version_seen() const { return max_seen_; }

  // `from_id` at `address` advertised `version` (on any message).
  void on_advert(std::string_view from_id, std::string_view address,
                 const peer::v1::RulesVersion& version, TimeUs now);
  // A peer asks for chunks; answers go to out().
  void on_request(std::string_view address, const peer::v1::RulesRequest& request);
  void on_chunk(const peer::v1::RulesChunk& chunk, TimeUs now);
  // Timeouts and retries.
  void tick(TimeUs now);
  // The node forgets a peer's advertisement (bounded by max_advertisers).
  void forget(std::string_view from_id) {
    if (auto it = advertised_.find(from_id); it != advertised_.end()) advertised_.erase(it);
  }

  // A whole text received, for the shell to check and apply (once).
  struct Received {
    RulesVersion version;
    std::string text;
    std::string from_address;
  };
  std::optional<Received> take_received();
  // The shell could not use `version` (invalid here, or its text does not
  // match the digest): not fetched again; our own stays advertised.
  void refuse(const RulesVersion& version);
  // The shell could use `version` but not keep it now (its state file could
  // not be written): fetched again once retry_backoff_us has passed.
  void retry_later(const RulesVersion& version, TimeUs now);

  // What peers advertised last, by node id.
  const RulesVersion* advertised(std::string_view node_id) const;
  // True while a transfer is in progress.
  bool fetching() const { return transfer_.has_value(); }

  // What to send; the caller takes it and leaves it empty.
  std::vector<RulesOut>& out() { return out_; }
  const RulesSyncStats& stats() const { return stats_; }
  const RulesSyncOptions& options() const { return options_; }

  // Data bytes per chunk when `address` (node `from_id`) sends chunks of
  // `version` to a cluster named `cluster`, so that the whole message fits
  // max_payload_bytes; 0 if nothing fits.
  std::uint32_t chunk_bytes_for(std::string_view cluster, std::string_view from_id,
                                std::string_view from_address, const RulesVersion& version) const;
  // Set by ClusterNode: the cluster name and the header sizes above need it.
  void set_cluster_name(std::string name) { cluster_name_ = std::move(name); }

 private:
  struct Source {
    std::string id;
    std::string address;
  };
  struct Transfer {
    RulesVersion version;
    std::vector<Source> sources;  // peers advertising it, most recent last
    std::size_t source = 0;       // index asked now
    std::uint32_t chunk_bytes = 0;
    std::optional<std::uint32_t> total_bytes;  // from the first chunk
    std::string data;
    std::vector<bool> have;
    std::uint32_t have_count = 0;
    std::vector<std::uint32_t> asked;  // the window in flight
    TimeUs deadline_us = 0;
    std::uint32_t retries = 0;
  };

  bool refused(const RulesVersion& version, TimeUs now) const;
  void start(const RulesVersion& version, Source source, TimeUs now);
  // Asks the current source for the next window of missing chunks.
  void ask(TimeUs now);
  void abandon(TimeUs now);

  RulesSyncOptions options_;
  std::string cluster_name_;
  RulesVersion local_;
  std::string local_text_;
  std::uint64_t max_seen_ = 0;
  // Transparent, so a lookup by string_view allocates nothing.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, RulesVersion, NameHash, std::equal_to<>> advertised_;
  std::optional<Transfer> transfer_;
  std::optional<Received> received_;
  // Versions the shell refused (bounded: the newest kMaxRefused), and
  // abandoned ones until their backoff ends.
  static constexpr std::size_t kMaxRefused = 16;
  std::vector<RulesVersion> refused_;
  std::vector<std::pair<RulesVersion, TimeUs>> backoff_;
  std::vector<RulesOut> out_;
  RulesSyncStats stats_;
};

}  // namespace rlimit::core
