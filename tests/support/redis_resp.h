// Test helper: a hiredis reply tree parsed from RESP bytes, as a Redis
// server would have sent them (hiredis' own reader).
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <string>

namespace rlimit::testing {

struct ReplyFree {
  void operator()(redisReply* reply) const {
    if (reply != nullptr) freeReplyObject(reply);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

// Null when `resp` is not exactly one whole reply.
inline Reply parse_resp(const std::string& resp) {
  redisReader* reader = redisReaderCreate();
  Reply out;
  if (redisReaderFeed(reader, resp.data(), resp.size()) == REDIS_OK) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader, &raw) == REDIS_OK) out.reset(static_cast<redisReply*>(raw));
  }
  redisReaderFree(reader);
  return out;
}

}  // namespace rlimit::testing
