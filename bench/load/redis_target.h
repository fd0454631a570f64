// Redis through hiredis, three ways of answering the same checks:
//  - kLuaTokenBucket: a token bucket in a Lua script (EVALSHA), what services
//    that rate-limit with Redis commonly run;
//  - kIncrExpire: a fixed window, INCR of a per-window key plus EXPIRE NX,
//    sent together (two commands, one decision);
//  - kIncr: INCR alone, not a limiter (no window, nothing expires), the
//    cheapest thing Redis can do per check: an upper bound for Redis.
// The keys are the same as rlimitd's (bench-<key>), under a prefix per kind.
#pragma once

#include <memory>
#include <string>

#include "load/target.h"

namespace rlimit::bench {

enum class RedisKind { kLuaTokenBucket, kIncrExpire, kIncr };
const char* redis_kind_label(RedisKind kind);

std::unique_ptr<Target> make_redis_target(const std::string& host, int port, RedisKind kind,
                                          const LimitSpec& limit);

}  // namespace rlimit::bench
