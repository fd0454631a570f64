#include "shell/redis_reply.h"

#include <hiredis/hiredis.h>

#include <string>
#include <string_view>
#include <vector>

namespace rlimit::shell {
namespace {

std::size_t decimal_digits(long long value) { return std::to_string(value).size(); }

// hiredis's own functions (every reader starts with the same table), with
// createArray refusing what is above the bound.
redisReplyObjectFunctions* bounded_functions(const redisReplyObjectFunctions* defaults) {
  static const redisReplyObjectFunctions* const base = defaults;
  // Not const only because hiredis's reader holds a non-const pointer.
  static redisReplyObjectFunctions bounded = [] {
    redisReplyObjectFunctions functions = *base;
    functions.createArray = [](const redisReadTask* task, int elements) -> void* {
      if (elements > kMaxReplyArrayElements) return nullptr;  // the reader's REDIS_ERR_OOM
      return base->createArray(task, elements);
    };
    return functions;
  }();
  return &bounded;
}

}  // namespace

std::optional<DecodedFields> decode_hash_reply(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return std::nullopt;
  std::vector<std::string_view> flat;
  flat.reserve(reply->elements);
  std::uint64_t not_strings = 0;
  for (std::size_t i = 0; i + 1 < reply->elements; i += 2) {
    const redisReply* field = reply->element[i];
    const redisReply* value = reply->element[i + 1];
    if (field == nullptr || value == nullptr || field->type != REDIS_REPLY_STRING ||
        value->type != REDIS_REPLY_STRING) {
      ++not_strings;
      continue;
    }
    flat.emplace_back(field->str, field->len);
    flat.emplace_back(value->str, value->len);
  }
  DecodedFields decoded = decode_fields(flat);
  decoded.skipped += not_strings + (reply->elements % 2);
  return decoded;
}

void bound_reply_arrays(redisReader* reader) {
  if (reader == nullptr || reader->fn == nullptr) return;
  reader->fn = bounded_functions(reader->fn);
}

std::size_t resp_encoded_size(const redisReply* reply) {
  if (reply == nullptr) return 0;
  switch (reply->type) {
    case REDIS_REPLY_STRING:  // $<len>\r\n<bytes>\r\n
      return 1 + decimal_digits(static_cast<long long>(reply->len)) + 2 + reply->len + 2;
    case REDIS_REPLY_STATUS:  // +<text>\r\n
    case REDIS_REPLY_ERROR:   // -<text>\r\n
      return 1 + reply->len + 2;
    case REDIS_REPLY_INTEGER:  // :<n>\r\n
      return 1 + decimal_digits(reply->integer) + 2;
    case REDIS_REPLY_NIL:  // $-1\r\n (or *-1\r\n)
      return 5;
    case REDIS_REPLY_ARRAY: {  // *<n>\r\n<elements>
      std::size_t size = 1 + decimal_digits(static_cast<long long>(reply->elements)) + 2;
      for (std::size_t i = 0; i < reply->elements; ++i)
        size += resp_encoded_size(reply->element[i]);
      return size;
    }
    default:
      return 0;
  }
}

}  // namespace rlimit::shell
