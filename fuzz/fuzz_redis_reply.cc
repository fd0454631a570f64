// Redis mode's replies: the input is what a Redis server (or anything
// listening where one should be) sends; hiredis's own reader (the one the
// store's connections use) turns it into replies, and each goes through
// what RedisStore does with them: decode_hash_reply (HGETALL of a key's
// per-origin counters), parse_cluster_slots (CLUSTER SLOTS), parse_redirect
// (a MOVED/ASK error) and resp_encoded_size (bytes_in). Properties: every
// entry a hash decodes to encodes back to the same field and value
// (encode_field, encode_consumed); slot ranges are within 0..16383 and in
// order; a redirection's slot is a slot.
#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "shell/redis_cluster.h"
#include "shell/redis_hash_codec.h"
#include "shell/redis_reply.h"

namespace {

constexpr std::uint16_t kMaxSlot = 16383;

void check_reply(const redisReply* reply) {
  (void)rlimit::shell::resp_encoded_size(reply);
  if (const std::optional<rlimit::shell::DecodedFields> decoded =
          rlimit::shell::decode_hash_reply(reply)) {
    for (const auto& entry : decoded->entries) {
      const std::string field = rlimit::shell::encode_field(entry.origin, entry.incarnation);
      const std::optional<rlimit::core::StoreEntry> back = rlimit::shell::decode_field(field);
      FUZZ_CHECK(back.has_value());
      FUZZ_CHECK(back->origin == entry.origin && back->incarnation == entry.incarnation);
      const std::string value = rlimit::shell::encode_consumed(entry.consumed);
      FUZZ_CHECK(rlimit::shell::decode_consumed(value) == entry.consumed);
    }
  }
  std::string error;
  if (const auto ranges = rlimit::shell::parse_cluster_slots(reply, &error)) {
    for (const auto& range : *ranges)
      FUZZ_CHECK(range.first <= range.last && range.last <= kMaxSlot);
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    if (const auto redirect =
            rlimit::shell::parse_redirect(std::string_view(reply->str, reply->len))) {
      FUZZ_CHECK(redirect->slot <= kMaxSlot);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  redisReader* reader = redisReaderCreate();
  FUZZ_CHECK(reader != nullptr);
  rlimit::shell::bound_reply_arrays(reader);  // as RedisStore's connections are
  if (redisReaderFeed(reader, reinterpret_cast<const char*>(data), size) == REDIS_OK) {
    // Every reply the bytes hold; a bound so a run always ends.
    for (std::size_t replies = 0; replies <= size; ++replies) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader, &reply) != REDIS_OK || reply == nullptr) break;
      check_reply(static_cast<const redisReply*>(reply));
      freeReplyObject(reply);
    }
  }
  redisReaderFree(reader);
  return 0;
}
