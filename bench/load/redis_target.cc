#include "load/redis_target.h"

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "load/key_picker.h"

namespace rlimit::bench {
namespace {

// KEYS[1] the bucket; ARGV limit, period_us, burst, cost. Tokens refill
// continuously from the server's clock; an idle bucket expires once full.
constexpr const char* kTokenBucketLua = R"lua(
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil then
  tokens = burst
  ts = now
end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * limit / period)
  ts = now
end
local allowed = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', ts)
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * period / math.max(limit, 1) / 1000) + 1000)
return {allowed, math.floor(tokens)}
)lua";

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisTarget final : public Target {
 public:
  RedisTarget(std::string host, int port, RedisKind kind, const LimitSpec& limit)
      : host_(std::move(host)), port_(port), kind_(kind), limit_(limit) {}

  ~RedisTarget() override {
    if (ctx_ != nullptr) redisFree(ctx_);
  }

  std::string open() override {
    timeval timeout{2, 0};
    ctx_ = redisConnectWithTimeout(host_.c_str(), port_, timeout);
    if (ctx_ == nullptr) return "redis: cannot allocate a context";
    if (ctx_->err != 0) return "redis " + host_ + ":" + std::to_string(port_) + ": " + ctx_->errstr;
    redisSetTimeout(ctx_, timeout);
    if (kind_ == RedisKind::kLuaTokenBucket) {
      Reply r(static_cast<redisReply*>(redisCommand(ctx_, "SCRIPT LOAD %s", kTokenBucketLua)));
      if (!r || r->type != REDIS_REPLY_STRING) {
        return std::string("redis SCRIPT LOAD failed: ") + (r ? r->str : ctx_->errstr);
      }
      sha_.assign(r->str, r->len);
    }
    limit_text_ = std::to_string(limit_.limit);
    period_us_text_ = std::to_string(limit_.period_ms * 1000);
    burst_text_ = std::to_string(limit_.burst);
    ttl_s_text_ = std::to_string(limit_.period_ms / 1000 + 2);
    return {};
  }

  void send(std::span<const std::uint64_t> keys) override {
    for (const std::uint64_t key : keys) append(key);
    sizes_.push_back(keys.size());
  }

  Tally receive() override {
    Tally t;
    const std::size_t n = sizes_.front();
    sizes_.pop_front();
    for (std::size_t i = 0; i < n; ++i) {
      if (broken_) {
        ++t.failed;
        continue;
      }
      void* raw = nullptr;
      if (redisGetReply(ctx_, &raw) != REDIS_OK) {
        broken_ = true;
        ++t.failed;
        continue;
      }
      Reply r(static_cast<redisReply*>(raw));
      bool allowed = false;
      bool ok = true;
      switch (kind_) {
        case RedisKind::kLuaTokenBucket:
          ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
               r->element[0]->type == REDIS_REPLY_INTEGER;
          allowed = ok && r->element[0]->integer == 1;
          break;
        case RedisKind::kIncrExpire: {
          ok = r->type == REDIS_REPLY_INTEGER;
          allowed = ok && static_cast<std::uint64_t>(r->integer) <= limit_.limit;
          void* expire = nullptr;  // the EXPIRE's answer
          if (redisGetReply(ctx_, &expire) != REDIS_OK) {
            broken_ = true;
            ok = false;
          }
          Reply e(static_cast<redisReply*>(expire));
          ok = ok && e && e->type == REDIS_REPLY_INTEGER;
          break;
        }
        case RedisKind::kIncr:
          ok = r->type == REDIS_REPLY_INTEGER;
          allowed = ok;
          break;
      }
      if (!ok)
        ++t.failed;
      else if (allowed)
        ++t.allowed;
      else
        ++t.denied;
    }
    return t;
  }

 private:
  void append(std::uint64_t key) {
    key_name(key, name_);
    switch (kind_) {
      case RedisKind::kLuaTokenBucket: {
        key_ = "tb:" + name_;
        const char* argv[] = {"EVALSHA",
                              sha_.c_str(),
                              "1",
                              key_.c_str(),
                              limit_text_.c_str(),
                              period_us_text_.c_str(),
                              burst_text_.c_str(),
                              "1"};
        const std::size_t lens[] = {7,
                                    sha_.size(),
                                    1,
                                    key_.size(),
                                    limit_text_.size(),
                                    period_us_text_.size(),
                                    burst_text_.size(),
                                    1};
        redisAppendCommandArgv(ctx_, 8, argv, lens);
        break;
      }
      case RedisKind::kIncrExpire: {
        const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
        key_ = "fw:" + name_ + ":" +
               std::to_string(now_ms / std::max<std::uint64_t>(limit_.period_ms, 1));
        const char* incr[] = {"INCR", key_.c_str()};
        const std::size_t incr_lens[] = {4, key_.size()};
        redisAppendCommandArgv(ctx_, 2, incr, incr_lens);
        const char* expire[] = {"EXPIRE", key_.c_str(), ttl_s_text_.c_str(), "NX"};
        const std::size_t expire_lens[] = {6, key_.size(), ttl_s_text_.size(), 2};
        redisAppendCommandArgv(ctx_, 4, expire, expire_lens);
        break;
      }
      case RedisKind::kIncr: {
        key_ = "c:" + name_;
        const char* incr[] = {"INCR", key_.c_str()};
        const std::size_t incr_lens[] = {4, key_.size()};
        redisAppendCommandArgv(ctx_, 2, incr, incr_lens);
        break;
      }
    }
  }

  const std::string host_;
  const int port_;
  const RedisKind kind_;
  const LimitSpec limit_;
  redisContext* ctx_ = nullptr;
  bool broken_ = false;
  std::string sha_;
  std::string limit_text_, period_us_text_, burst_text_, ttl_s_text_;
  std::string name_, key_;
  std::deque<std::size_t> sizes_;
};

}  // namespace

const char* redis_kind_label(RedisKind kind) {
  switch (kind) {
    case RedisKind::kLuaTokenBucket:
      return "redis lua token bucket (EVALSHA)";
    case RedisKind::kIncrExpire:
      return "redis INCR+EXPIRE fixed window";
    case RedisKind::kIncr:
      return "redis INCR alone (no limiter)";
  }
  return "redis";
}

std::unique_ptr<Target> make_redis_target(const std::string& host, int port, RedisKind kind,
                                          const LimitSpec& limit) {
  return std::make_unique<RedisTarget>(host, port, kind, limit);
}

}  // namespace rlimit::bench
