// Test support: a plain blocking hiredis connection to a Redis on loopback,
// for looking at what a store left in Redis and for driving a Redis Cluster
// (slots, migrations, failovers) from a test. Arguments are binary-safe.
// A connection that failed answers every command with a null reply. Not
// thread-safe; one owner.
#pragma once

#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "support/redis_resp.h"

namespace rlimit::testing {

class RedisInspector {
 public:
  // Connects to 127.0.0.1:`port` (2 s connect and command timeouts), then
  // AUTHs with `password` when it is not empty.
  explicit RedisInspector(int port, const std::string& password = "");
  ~RedisInspector();
  RedisInspector(const RedisInspector&) = delete;
  RedisInspector& operator=(const RedisInspector&) = delete;

  Reply command(const std::vector<std::string>& args);
  // The reply as text: an integer in decimal, "(nil)", a string or status or
  // error as is, "(array)", or "(no reply)".
  std::string text(const std::vector<std::string>& args);
  // The integer reply, or -1000 when the reply is not an integer.
  long long integer(const std::vector<std::string>& args);

 private:
  redisContext* context_ = nullptr;
};

}  // namespace rlimit::testing
