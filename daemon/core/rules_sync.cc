#include "core/rules_sync.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace rlimit::core {
namespace {

// A chunk smaller than this makes a transfer absurdly chatty; a request
// asking for one is refused.
constexpr std::uint32_t kMinChunkBytes = 64;
// Room left for the varint length of the data field.
constexpr std::size_t kDataLengthBytes = 4;

RulesVersion from_proto(const peer::v1::RulesVersion& v) {
  return RulesVersion{v.version(), v.origin(), v.digest()};
}

void to_proto(const RulesVersion& v, peer::v1::RulesVersion& out) {
  out.set_version(v.version);
  out.set_origin(v.origin);
  out.set_digest(v.digest);
}

}  // namespace

RulesSync::RulesSync(RulesSyncOptions options) : options_(std::move(options)) {}

void RulesSync::set_local(RulesVersion version, std::string text) {
  max_seen_ = std::max(max_seen_, version.version);
  local_ = std::move(version);
  local_text_ = std::move(text);
  // A transfer of what we now hold, or of something older, is moot.
  if (transfer_ && !transfer_->version.newer_than(local_)) transfer_.reset();
  if (received_ && !received_->version.newer_than(local_)) received_.reset();
}

const RulesVersion* RulesSync::advertised(std::string_view node_id) const {
  auto it = advertised_.find(node_id);
  return it == advertised_.end() ? nullptr : &it->second;
}

bool RulesSync::refused(const RulesVersion& version, TimeUs now) const {
  for (const RulesVersion& r : refused_) {
    if (r.same(version)) return true;
  }
  for (const auto& [v, until] : backoff_) {
    if (v.same(version) && now < until) return true;
  }
  return false;
}

std::uint32_t RulesSync::chunk_bytes_for(std::string_view cluster, std::string_view from_id,
                                         std::string_view from_address,
                                         const RulesVersion& version) const {
  // The largest header the sender can put on a chunk, with every number at
  // its widest; piggybacked membership news is trimmed to fit by the sender.
  peer::v1::PeerMessage m;
  m.set_cluster(cluster.data(), cluster.size());
  m.set_from_id(from_id.data(), from_id.size());
  m.set_from_address(from_address.data(), from_address.size());
  m.set_from_incarnation(std::numeric_limits<std::uint64_t>::max());
  RulesVersion widest = version;
  widest.version = std::numeric_limits<std::uint64_t>::max();
  to_proto(widest, *m.mutable_rules());
  peer::v1::RulesChunk* chunk = m.mutable_rules_chunk();
  to_proto(widest, *chunk->mutable_rules());
  chunk->set_chunk_bytes(std::numeric_limits<std::uint32_t>::max());
  chunk->set_index(std::numeric_limits<std::uint32_t>::max());
  chunk->set_total_bytes(std::numeric_limits<std::uint32_t>::max());
  const std::size_t overhead = m.ByteSizeLong() + 1 + kDataLengthBytes;
  if (overhead + kMinChunkBytes > options_.max_payload_bytes) return 0;
  return static_cast<std::uint32_t>(options_.max_payload_bytes - overhead);
}

void RulesSync::on_advert(std::string_view from_id, std::string_view address,
                          const peer::v1::RulesVersion& advert, TimeUs now) {
  // Every message carries one: the common case (nothing new, not newer than
  // ours) allocates nothing.
  max_seen_ = std::max(max_seen_, advert.version());
  // RulesVersion::newer_than, without building one for the common case.
  const bool above_local = advert.version() != local_.version ? advert.version() > local_.version
                           : advert.origin() != local_.origin ? advert.origin() > local_.origin
                                                              : advert.digest() > local_.digest;
  auto it = advertised_.find(from_id);
  const bool known = it != advertised_.end() && it->second.version == advert.version() &&
                     it->second.origin == advert.origin() && it->second.digest == advert.digest();
  if (known && (advert.version() == 0 || !above_local)) return;
  RulesVersion version = from_proto(advert);
  if (it != advertised_.end()) {
    it->second = version;
  } else if (advertised_.size() < options_.max_advertisers) {
    advertised_.emplace(std::string(from_id), version);
  }
  if (version.version == 0 || !above_local || refused(version, now)) return;
  if (received_ && !version.newer_than(received_->version)) return;  // the shell has it
  if (transfer_) {
    if (transfer_->version.same(version)) {
      // Another source for the same version: asked if the current one fails.
      for (const Source& s : transfer_->sources) {
        if (s.id == from_id) return;
      }
      if (transfer_->sources.size() < 16) {
        transfer_->sources.push_back(Source{std::string(from_id), std::string(address)});
      }
      return;
    }
    if (!version.newer_than(transfer_->version)) return;
    ++stats_.transfers_superseded;
  }
  ++stats_.adverts_newer;
  start(version, Source{std::string(from_id), std::string(address)}, now);
}

void RulesSync::start(const RulesVersion& version, Source source, TimeUs now) {
  ++stats_.transfers_started;
  // Not emplace(): clang 14 finds Transfer (default member initializers, in
  // the class that holds the optional) not default-constructible there.
  transfer_ = Transfer{};
  transfer_->version = version;
  transfer_->sources.push_back(std::move(source));
  ask(now);
}

void RulesSync::ask(TimeUs now) {
  Transfer& t = *transfer_;
  const Source& source = t.sources[t.source % t.sources.size()];
  // The chunk size is fixed by the first request; a later source uses it too
  // (every node of a cluster has the same payload budget).
  if (t.chunk_bytes == 0) {
    t.chunk_bytes = chunk_bytes_for(cluster_name_, source.id, source.address, t.version);
    if (t.chunk_bytes == 0) {
      abandon(now);
      return;
    }
  }
  t.asked.clear();
  const std::uint32_t chunks =
      t.total_bytes ? (*t.total_bytes + t.chunk_bytes - 1) / t.chunk_bytes : options_.window_chunks;
  for (std::uint32_t i = 0; i < chunks && t.asked.size() < options_.window_chunks; ++i) {
    if (i < t.have.size() && t.have[i]) continue;
    t.asked.push_back(i);
  }
  if (t.asked.empty() && !t.total_bytes) t.asked.push_back(0);  // an empty text: chunk 0
  RulesOut request{source.address, {}};
  peer::v1::RulesRequest* body = request.message.mutable_rules_request();
  to_proto(t.version, *body->mutable_rules());
  body->set_chunk_bytes(t.chunk_bytes);
  for (std::uint32_t i : t.asked) body->add_chunks(i);
  out_.push_back(std::move(request));
  ++stats_.requests_sent;
  t.deadline_us = now + options_.request_timeout_us;
}

void RulesSync::on_request(std::string_view address, const peer::v1::RulesRequest& request) {
  const RulesVersion wanted = from_proto(request.rules());
  const std::uint32_t chunk_bytes = request.chunk_bytes();
  // A chunk never needs more than a mesh frame holds (64 KiB); a request
  // for larger ones, or for one chunk many times over, would make one small
  // packet cost many copies of the text.
  constexpr std::uint32_t kMaxChunkBytes = 64 * 1024;
  if (local_.version == 0 || !wanted.same(local_) || chunk_bytes < kMinChunkBytes ||
      chunk_bytes > kMaxChunkBytes ||
      request.chunks_size() >
          static_cast<int>(std::max<std::uint32_t>(options_.window_chunks, 64))) {
    ++stats_.requests_unknown;
    return;
  }
  ++stats_.requests_served;
  const std::size_t total = local_text_.size();
  const std::size_t chunks = total == 0 ? 1 : (total + chunk_bytes - 1) / chunk_bytes;
  std::vector<std::uint32_t> served;
  served.reserve(static_cast<std::size_t>(request.chunks_size()));
  for (std::uint32_t index : request.chunks()) {
    if (index >= chunks || std::find(served.begin(), served.end(), index) != served.end()) {
      continue;
    }
    served.push_back(index);
    RulesOut answer{std::string(address), {}};
    peer::v1::RulesChunk* chunk = answer.message.mutable_rules_chunk();
    to_proto(local_, *chunk->mutable_rules());
    chunk->set_chunk_bytes(chunk_bytes);
    chunk->set_index(index);
    chunk->set_total_bytes(static_cast<std::uint32_t>(total));
    const std::size_t offset = static_cast<std::size_t>(index) * chunk_bytes;
    chunk->set_data(local_text_.substr(offset, chunk_bytes));
    out_.push_back(std::move(answer));
    ++stats_.chunks_sent;
  }
}

void RulesSync::on_chunk(const peer::v1::RulesChunk& chunk, TimeUs now) {
  if (!transfer_ || !transfer_->version.same(from_proto(chunk.rules()))) {
    ++stats_.chunks_stale;
    return;
  }
  Transfer& t = *transfer_;
  if (chunk.chunk_bytes() != t.chunk_bytes ||
      (t.total_bytes && chunk.total_bytes() != *t.total_bytes)) {
    ++stats_.chunks_malformed;
    return;
  }
  if (!t.total_bytes) {
    if (chunk.total_bytes() > options_.max_rules_bytes) {
      ++stats_.too_large;
      refuse(t.version);
      transfer_.reset();
      return;
    }
    t.total_bytes = chunk.total_bytes();
    const std::uint32_t chunks =
        *t.total_bytes == 0 ? 1 : (*t.total_bytes + t.chunk_bytes - 1) / t.chunk_bytes;
    t.have.assign(chunks, false);
    t.data.assign(*t.total_bytes, '\0');
  }
  const std::uint32_t total = *t.total_bytes;
  const std::uint64_t offset = static_cast<std::uint64_t>(chunk.index()) * t.chunk_bytes;
  const std::uint64_t expected =
      chunk.index() < t.have.size() ? std::min<std::uint64_t>(t.chunk_bytes, total - offset) : 0;
  if (chunk.index() >= t.have.size() || chunk.data().size() != expected) {
    ++stats_.chunks_malformed;
    return;
  }
  if (t.have[chunk.index()]) {
    ++stats_.chunks_duplicate;
    return;
  }
  ++stats_.chunks_received;
  t.retries = 0;  // progress: the retry bound counts timeouts in a row
  t.have[chunk.index()] = true;
  ++t.have_count;
  t.data.replace(offset, chunk.data().size(), chunk.data());
  if (t.have_count == t.have.size()) {
    ++stats_.transfers_completed;
    received_ =
        Received{t.version, std::move(t.data), t.sources[t.source % t.sources.size()].address};
    transfer_.reset();
    return;
  }
  // The window in flight is whole: ask for the next one at once.
  const bool window_done = std::all_of(t.asked.begin(), t.asked.end(), [&](std::uint32_t i) {
    return i < t.have.size() && t.have[i];
  });
  if (window_done) ask(now);
}

void RulesSync::tick(TimeUs now) {
  std::erase_if(backoff_, [now](const auto& entry) { return now >= entry.second; });
  if (!transfer_ || now < transfer_->deadline_us) return;
  Transfer& t = *transfer_;
  if (t.retries >= options_.max_retries) {
    abandon(now);
    return;
  }
  ++t.retries;
  ++stats_.retries;
  ++t.source;  // the next peer advertising this version, if any
  ask(now);
}

void RulesSync::abandon(TimeUs now) {
  ++stats_.transfers_abandoned;
  backoff_.emplace_back(transfer_->version, now + options_.retry_backoff_us);
  transfer_.reset();
}

std::optional<RulesSync::Received> RulesSync::take_received() {
  std::optional<Received> r = std::move(received_);
  received_.reset();
  return r;
}

void RulesSync::retry_later(const RulesVersion& version, TimeUs now) {
  if (backoff_.size() >= kMaxRefused) backoff_.erase(backoff_.begin());
  backoff_.emplace_back(version, now + options_.retry_backoff_us);
  if (transfer_ && transfer_->version.same(version)) transfer_.reset();
}

void RulesSync::refuse(const RulesVersion& version) {
  ++stats_.refused;
  if (refused_.size() >= kMaxRefused) refused_.erase(refused_.begin());
  refused_.push_back(version);
  if (transfer_ && transfer_->version.same(version)) transfer_.reset();
}

}  // namespace rlimit::core
