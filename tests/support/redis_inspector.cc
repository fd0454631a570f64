#include "support/redis_inspector.h"

#include <sys/time.h>

namespace rlimit::testing {

RedisInspector::RedisInspector(int port, const std::string& password) {
  timeval tv{2, 0};
  context_ = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (context_ != nullptr && context_->err == 0) redisSetTimeout(context_, tv);
  if (!password.empty()) command({"AUTH", password});
}

RedisInspector::~RedisInspector() {
  if (context_ != nullptr) redisFree(context_);
}

Reply RedisInspector::command(const std::vector<std::string>& args) {
  if (context_ == nullptr || context_->err != 0) return nullptr;
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  return Reply(static_cast<redisReply*>(
      redisCommandArgv(context_, static_cast<int>(args.size()), argv.data(), lengths.data())));
}

std::string RedisInspector::text(const std::vector<std::string>& args) {
  Reply r = command(args);
  if (!r) return "(no reply)";
  if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
  if (r->type == REDIS_REPLY_NIL) return "(nil)";
  if (r->str != nullptr) return std::string(r->str, r->len);
  return "(array)";
}

long long RedisInspector::integer(const std::vector<std::string>& args) {
  Reply r = command(args);
  return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1000;
}

}  // namespace rlimit::testing
