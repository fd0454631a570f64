// Reading hiredis replies (Redis mode, shell/redis_store.h): a hash as
// HGETALL or the store's script returns it, and a reply's size on the wire.
// Pure and thread-safe; any reply tree is accepted (a malformed one is
// refused or its bad fields skipped and counted, never trusted).
#pragma once

#include <cstddef>
#include <optional>

#include "shell/redis_hash_codec.h"

struct redisReply;   // hiredis
struct redisReader;  // hiredis

namespace rlimit::shell {

// The entries of a hash reply (an array of field, value, ...; an empty array
// for a key that does not exist). Elements that are not strings count as
// skipped fields. nullopt when the reply is not an array.
std::optional<DecodedFields> decode_hash_reply(const redisReply* reply);

// The bytes `reply` took on the wire in RESP2 (what the store's bytes_in
// counts): exact for every reply hiredis 0.14 builds.
std::size_t resp_encoded_size(const redisReply* reply);

// The most elements one reply array may declare. hiredis 0.14 allocates an
// array's element pointers as soon as its header arrives ("*163844282\r\n",
// 12 bytes, is 1.3 GB) and has no bound of its own (later versions have
// maxelements). No reply of the store comes near: an HGETALL holds two per
// origin of one key.
inline constexpr int kMaxReplyArrayElements = 1 << 20;

// Makes `reader` refuse an array above kMaxReplyArrayElements: the reply
// fails as hiredis fails an allocation (REDIS_ERR_OOM), and the store drops
// the connection as for any read error. Call on every context's reader.
void bound_reply_arrays(redisReader* reader);

}  // namespace rlimit::shell
