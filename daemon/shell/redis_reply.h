// Reading hiredis replies (Redis mode, shell/redis_store.h): a hash as
// HGETALL or the store's script returns it, and a reply's size on the wire.
// Pure and thread-safe; any reply tree is accepted (a malformed one is
// refused or its bad fields skipped and counted, never trusted).
#pragma once

#include <cstddef>
#include <optional>

#include "shell/redis_hash_codec.h"

struct redisReply;  // hiredis

namespace rlimit::shell {

// The entries of a hash reply (an array of field, value, ...; an empty array
// for a key that does not exist). Elements that are not strings count as
// skipped fields. nullopt when the reply is not an array.
std::optional<DecodedFields> decode_hash_reply(const redisReply* reply);

// The bytes `reply` took on the wire in RESP2 (what the store's bytes_in
// counts): exact for every reply hiredis 0.14 builds.
std::size_t resp_encoded_size(const redisReply* reply);

}  // namespace rlimit::shell
