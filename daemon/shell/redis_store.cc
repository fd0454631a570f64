#include "shell/redis_store.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

#include "config/config.h"
#include "shell/redis_cluster.h"
#include "shell/redis_hash_codec.h"
#include "shell/redis_reply.h"

namespace rlimit::shell {
namespace {

using Clock = std::chrono::steady_clock;

// KEYS[1]: the hash; ARGV[1]: ttl in ms; ARGV[2..]: field, value, ... Raises
// each field to the value given unless it holds a larger one. Values are
// canonical decimals (redis_hash_codec.h), so the longer is the larger and
// equal lengths compare as strings; Lua numbers are doubles and would round
// counters above 2^53. A field holding anything else is overwritten.
constexpr std::string_view kRaiseScript = R"lua(local key = KEYS[1]
for i = 2, #ARGV, 2 do
  local new = ARGV[i + 1]
  local old = redis.call('HGET', key, ARGV[i])
  if not old or not (old == '0' or string.find(old, '^[1-9]%d*$')) or #new > #old or
      (#new == #old and new > old) then
    redis.call('HSET', key, ARGV[i], new)
  end
end
redis.call('PEXPIRE', key, ARGV[1])
return redis.call('HGETALL', key)
)lua";

struct ReplyDeleter {
  void operator()(redisReply* reply) const {
    if (reply != nullptr) freeReplyObject(reply);
  }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

timeval to_timeval(std::int64_t ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

std::string reply_text(const redisReply* reply) {
  if (reply == nullptr) return "no reply";
  if (reply->type == REDIS_REPLY_ERROR || reply->type == REDIS_REPLY_STATUS ||
      reply->type == REDIS_REPLY_STRING) {
    return std::string(reply->str, reply->len);
  }
  return "reply of type " + std::to_string(reply->type);
}

struct Node {
  RedisNodeAddress address;
  std::string name;  // "host:port", for messages
  redisContext* context = nullptr;
  Clock::time_point next_connect_at{};
  std::int64_t backoff_ms = 0;  // 0 after a success
  std::string last_error;
};

// One command of a batch: a write (the script) or a read (HGETALL) of one key.
struct Op {
  bool write = false;
  std::size_t index = 0;  // into the batch's writes or reads
  std::string name;       // key_prefix + key
  std::uint16_t slot = 0;
  std::optional<std::size_t> ask_node;  // ASK: the next try goes there, after ASKING
  bool use_eval = false;                // NOSCRIPT: send the script itself
  bool failed = false;
  std::vector<core::StoreEntry> entries;
};

}  // namespace

core::StoreResult failed_store_result(const core::StoreBatch& batch, std::string error) {
  core::StoreResult result;
  result.id = batch.id;
  result.ok = false;
  result.error = std::move(error);
  for (const core::StoreWrite& write : batch.writes) result.failed_writes.push_back(write.key);
  return result;
}

std::string RedisStore::check_options(const RedisStoreOptions& o) {
  if (o.addresses.empty()) return "no Redis address";
  if (!o.cluster && o.addresses.size() != 1) {
    return "a single Redis server takes exactly one address (" +
           std::to_string(o.addresses.size()) + " given; set cluster for Redis Cluster)";
  }
  for (const std::string& address : o.addresses) {
    std::string error;
    if (!config::parse_host_port(address, nullptr, nullptr, &error)) {
      return "Redis address \"" + address + "\": " + error;
    }
  }
  if (!o.username.empty() && o.password.empty()) return "a Redis username needs a password";
  if (o.connect_timeout_ms <= 0) return "connect_timeout_ms must be > 0";
  if (o.command_timeout_ms <= 0) return "command_timeout_ms must be > 0";
  if (o.reconnect_backoff_min_ms <= 0) return "reconnect_backoff_min_ms must be > 0";
  if (o.reconnect_backoff_max_ms < o.reconnect_backoff_min_ms) {
    return "reconnect_backoff_max_ms must be >= reconnect_backoff_min_ms";
  }
  if (o.max_queued_batches == 0) return "max_queued_batches must be >= 1";
  if (o.slots_refresh_interval_ms <= 0) return "slots_refresh_interval_ms must be > 0";
  if (o.slots_refresh_min_interval_ms < 0) return "slots_refresh_min_interval_ms must be >= 0";
  return "";
}

struct RedisStore::Impl {
  explicit Impl(RedisStoreOptions o) : options(std::move(o)) {
    for (const std::string& address : options.addresses) {
      RedisNodeAddress seed;
      config::parse_host_port(address, &seed.host, &seed.port, nullptr);
      seeds.push_back(seed);
      node_index(seed);
    }
    slot_owner.assign(kRedisClusterSlots, -1);
  }

  ~Impl() {
    for (Node& node : nodes) close(node);
  }

  const RedisStoreOptions options;

  // Shared with the callers; guarded by `mutex`.
  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::pair<core::StoreBatch, Done>> queue;
  bool stopping = false;
  RedisStoreStats stats;
  std::thread worker;

  // The worker's alone.
  std::vector<RedisNodeAddress> seeds;
  std::vector<Node> nodes;            // seeds first, then nodes learned from the cluster
  std::vector<int> slot_owner;        // cluster: index into nodes per slot, -1 unknown
  bool slots_known = false;           // a CLUSTER SLOTS map was installed
  bool slots_refresh_wanted = false;  // a MOVED or a failure since
  Clock::time_point last_slots_refresh{};
  std::string slots_error;  // why the last refresh failed, for messages
  std::string script_sha;

  void count(std::uint64_t RedisStoreStats::*field, std::uint64_t n = 1) {
    std::lock_guard<std::mutex> lock(mutex);
    stats.*field += n;
  }

  std::size_t node_index(const RedisNodeAddress& address) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].address == address) return i;
    }
    Node node;
    node.address = address;
    node.name = format_node_address(address);
    nodes.push_back(std::move(node));
    return nodes.size() - 1;
  }

  static void close(Node& node) {
    if (node.context != nullptr) redisFree(node.context);
    node.context = nullptr;
  }

  // An open connection failed (I/O error, timeout, protocol error): its
  // replies can no longer be matched to commands.
  void lose(Node& node, const std::string& why) {
    close(node);
    node.last_error = why;
    count(&RedisStoreStats::connections_lost);
    if (options.cluster) slots_refresh_wanted = true;
  }

  // Appends one command to `context`'s pipeline, counting it in `result`.
  static void append(redisContext* context, const std::vector<std::string_view>& argv,
                     core::StoreResult& result) {
    std::vector<const char*> pointers;
    std::vector<std::size_t> lengths;
    pointers.reserve(argv.size());
    lengths.reserve(argv.size());
    for (const std::string_view arg : argv) {
      pointers.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    char* command = nullptr;
    const int length = redisFormatCommandArgv(&command, static_cast<int>(argv.size()),
                                              pointers.data(), lengths.data());
    if (length < 0) throw std::bad_alloc();
    const int appended =
        redisAppendFormattedCommand(context, command, static_cast<std::size_t>(length));
    redisFreeCommand(command);
    if (appended != REDIS_OK) throw std::bad_alloc();
    ++result.commands;
    result.bytes_out += static_cast<std::uint64_t>(length);
  }

  // The next reply of `context`'s pipeline, or null with `*error` set (the
  // connection is then unusable) and `*timed_out` when the wait timed out.
  ReplyPtr read_reply(redisContext* context, core::StoreResult& result, std::string* error,
                      bool* timed_out) {
    void* raw = nullptr;
    errno = 0;
    if (redisGetReply(context, &raw) != REDIS_OK || raw == nullptr) {
      const int saved_errno = errno;
      *timed_out =
          context->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK);
      *error = *timed_out ? "timed out after " + std::to_string(options.command_timeout_ms) + " ms"
                          : std::string(context->errstr[0] != '\0' ? context->errstr : "I/O error");
      if (raw != nullptr) freeReplyObject(raw);
      return nullptr;
    }
    ReplyPtr reply(static_cast<redisReply*>(raw));
    result.bytes_in += resp_encoded_size(reply.get());
    return reply;
  }

  bool connect_failed(Node& node, const std::string& why, std::string* error) {
    count(&RedisStoreStats::connect_failures);
    node.backoff_ms = node.backoff_ms == 0
                          ? options.reconnect_backoff_min_ms
                          : std::min(2 * node.backoff_ms, options.reconnect_backoff_max_ms);
    node.next_connect_at = Clock::now() + std::chrono::milliseconds(node.backoff_ms);
    node.last_error = why;
    if (options.cluster) slots_refresh_wanted = true;
    *error = node.name + ": " + why;
    return false;
  }

  // Opens, authenticates and loads the script on `node` unless it is open;
  // false (with `*error`) when it cannot, at once while in backoff.
  bool connect(Node& node, core::StoreResult& result, std::string* error) {
    if (node.context != nullptr) return true;
    const Clock::time_point now = Clock::now();
    if (now < node.next_connect_at) {
      count(&RedisStoreStats::connects_deferred);
      const auto wait_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(node.next_connect_at - now).count();
      *error = node.name + ": unreachable (" + node.last_error + "); next connect attempt in " +
               std::to_string(wait_ms) + " ms";
      return false;
    }
    count(&RedisStoreStats::connects);
    redisContext* context = redisConnectWithTimeout(node.address.host.c_str(), node.address.port,
                                                    to_timeval(options.connect_timeout_ms));
    if (context == nullptr || context->err != 0) {
      const std::string why =
          "connect: " + std::string(context != nullptr ? context->errstr : "out of memory");
      if (context != nullptr) redisFree(context);
      return connect_failed(node, why, error);
    }
    redisSetTimeout(context, to_timeval(options.command_timeout_ms));
    redisEnableKeepAlive(context);
    bound_reply_arrays(context->reader);
    // AUTH and SCRIPT LOAD in one round trip.
    const bool auth = !options.password.empty();
    if (auth && !options.username.empty()) {
      append(context, {"AUTH", options.username, options.password}, result);
    } else if (auth) {
      append(context, {"AUTH", options.password}, result);
    }
    append(context, {"SCRIPT", "LOAD", kRaiseScript}, result);
    ++result.round_trips;
    std::string why;
    bool timed_out = false;
    for (int i = 0; i < (auth ? 2 : 1) && why.empty(); ++i) {
      ReplyPtr reply = read_reply(context, result, &why, &timed_out);
      if (!reply) break;
      const bool is_auth = auth && i == 0;
      if (is_auth && reply->type != REDIS_REPLY_STATUS) {
        why = "AUTH: " + reply_text(reply.get());
      } else if (!is_auth) {
        if (reply->type != REDIS_REPLY_STRING) {
          why = "SCRIPT LOAD: " + reply_text(reply.get());
        } else {
          script_sha.assign(reply->str, reply->len);
        }
      }
    }
    if (!why.empty()) {
      redisFree(context);
      return connect_failed(node, why, error);
    }
    node.context = context;
    node.backoff_ms = 0;
    node.last_error.clear();
    return true;
  }

  static void fail(Op& op, core::StoreResult& result, const std::string& error) {
    op.failed = true;
    if (result.ok) {
      result.ok = false;
      result.error = error;
    }
  }

  void append_op(redisContext* context, const core::StoreBatch& batch, const Op& op,
                 core::StoreResult& result) {
    if (!op.write) {
      append(context, {"HGETALL", op.name}, result);
      return;
    }
    const core::StoreWrite& write = batch.writes[op.index];
    std::vector<std::string> strings;
    strings.reserve(1 + 2 * write.entries.size());
    strings.push_back(std::to_string(write.ttl_ms));
    for (const core::StoreEntry& entry : write.entries) {
      strings.push_back(encode_field(entry.origin, entry.incarnation));
      strings.push_back(encode_consumed(entry.consumed));
    }
    std::vector<std::string_view> argv;
    argv.reserve(4 + strings.size());
    if (op.use_eval || script_sha.empty()) {
      argv.insert(argv.end(), {"EVAL", kRaiseScript});
    } else {
      argv.insert(argv.end(), {"EVALSHA", script_sha});
    }
    argv.insert(argv.end(), {"1", op.name});
    for (const std::string& s : strings) argv.push_back(s);
    append(context, argv, result);
  }

  // Handles one op's reply from node `node_at`: done, failed, or queued in
  // `next` to be sent again (MOVED, ASK, NOSCRIPT).
  void take_reply(std::size_t node_at, Op& op, std::size_t op_at, const redisReply* reply,
                  core::StoreResult& result, std::vector<std::size_t>& next) {
    const std::string where = "redis " + nodes[node_at].name;
    if (reply->type == REDIS_REPLY_ERROR) {
      const std::string text(reply->str, reply->len);
      if (std::optional<RedisRedirect> redirect = parse_redirect(text)) {
        if (!options.cluster) {
          fail(op, result, where + ": " + text + " (a Redis Cluster node: set cluster)");
          return;
        }
        if (redirect->target.host.empty()) redirect->target.host = nodes[node_at].address.host;
        const std::size_t target = node_index(redirect->target);
        if (redirect->kind == RedisRedirect::Kind::kMoved) {
          count(&RedisStoreStats::moved);
          slot_owner[redirect->slot] = static_cast<int>(target);
          slots_refresh_wanted = true;
          op.ask_node.reset();
        } else {
          count(&RedisStoreStats::ask);
          op.ask_node = target;
        }
        next.push_back(op_at);
        return;
      }
      if (op.write && !op.use_eval && text.starts_with("NOSCRIPT")) {
        count(&RedisStoreStats::noscript);
        op.use_eval = true;
        next.push_back(op_at);
        return;
      }
      fail(op, result, where + ": " + text);
      return;
    }
    std::optional<DecodedFields> decoded = decode_hash_reply(reply);
    if (!decoded) {
      fail(op, result,
           where + ": unexpected " + reply_text(reply) + " to " +
               (op.write ? "the script" : "HGETALL"));
      return;
    }
    if (decoded->skipped != 0) count(&RedisStoreStats::fields_skipped, decoded->skipped);
    op.entries = std::move(decoded->entries);
    op.ask_node.reset();
  }

  // Sends `list`'s ops to node `node_at` in one pipeline and reads every reply.
  void run_pipeline(std::size_t node_at, const std::vector<std::size_t>& list,
                    const core::StoreBatch& batch, std::vector<Op>& ops, core::StoreResult& result,
                    std::vector<std::size_t>& next) {
    // A connection that was open before may have been closed by the server
    // in between (restart, idle timeout): when it fails before any reply and
    // not by a timeout, one fresh connection is tried. Safe: writes only
    // raise to absolute values.
    constexpr int kAttempts = 2;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      const bool reused = nodes[node_at].context != nullptr;
      std::string error;
      if (!connect(nodes[node_at], result, &error)) {
        for (const std::size_t i : list) fail(ops[i], result, "redis " + error);
        return;
      }
      redisContext* context = nodes[node_at].context;
      std::vector<std::size_t> sent;  // op index per command; SIZE_MAX for ASKING
      for (const std::size_t i : list) {
        if (ops[i].ask_node) {
          append(context, {"ASKING"}, result);
          sent.push_back(SIZE_MAX);
        }
        append_op(context, batch, ops[i], result);
        sent.push_back(i);
      }
      ++result.round_trips;
      std::size_t replies = 0;
      for (; replies < sent.size(); ++replies) {
        bool timed_out = false;
        ReplyPtr reply = read_reply(context, result, &error, &timed_out);
        if (!reply) {
          lose(nodes[node_at], error);
          if (reused && replies == 0 && !timed_out && attempt + 1 < kAttempts) break;
          for (std::size_t j = replies; j < sent.size(); ++j) {
            if (sent[j] != SIZE_MAX) {
              fail(ops[sent[j]], result, "redis " + nodes[node_at].name + ": " + error);
            }
          }
          return;
        }
        if (sent[replies] == SIZE_MAX)
          continue;  // ASKING's +OK (or an error the next reply repeats)
        take_reply(node_at, ops[sent[replies]], sent[replies], reply.get(), result, next);
      }
      if (replies == sent.size()) return;
    }
  }

  // Cluster: installs a CLUSTER SLOTS map when none is known yet, when one is
  // wanted (after a MOVED or a failure, at most once per
  // slots_refresh_min_interval_ms) and every slots_refresh_interval_ms.
  void maybe_refresh_slots(core::StoreResult& result) {
    const Clock::time_point now = Clock::now();
    const auto since = now - last_slots_refresh;
    const bool due = !slots_known ||
                     (slots_refresh_wanted &&
                      since >= std::chrono::milliseconds(options.slots_refresh_min_interval_ms)) ||
                     since >= std::chrono::milliseconds(options.slots_refresh_interval_ms);
    if (!due) return;
    last_slots_refresh = now;
    // Open nodes first (no connect), then the others in order.
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].context != nullptr) order.push_back(i);
    }
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].context == nullptr) order.push_back(i);
    }
    std::string error;
    for (const std::size_t i : order) {
      if (!connect(nodes[i], result, &error)) continue;
      append(nodes[i].context, {"CLUSTER", "SLOTS"}, result);
      ++result.round_trips;
      bool timed_out = false;
      ReplyPtr reply = read_reply(nodes[i].context, result, &error, &timed_out);
      if (!reply) {
        lose(nodes[i], error);
        continue;
      }
      std::optional<std::vector<RedisSlotRange>> ranges = parse_cluster_slots(reply.get(), &error);
      if (!ranges || ranges->empty()) {  // e.g. a node that knows no slots yet: ask another
        if (ranges) error = "CLUSTER SLOTS reply: no slots";
        error = nodes[i].name + ": " + error;
        continue;
      }
      install_slots(*ranges, nodes[i].address.host);
      count(&RedisStoreStats::slot_refreshes);
      return;
    }
    slots_error = error;
    count(&RedisStoreStats::slot_refresh_failures);
  }

  // Rebuilds `nodes` as the seeds plus the map's masters (keeping open
  // connections), so nodes that left the cluster are closed and forgotten.
  void install_slots(const std::vector<RedisSlotRange>& ranges, const std::string& asked_host) {
    std::vector<Node> old = std::move(nodes);
    nodes.clear();
    auto index_of = [&](const RedisNodeAddress& address) {
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (nodes[i].address == address) return i;
      }
      for (Node& node : old) {
        if (node.address == address && !node.name.empty()) {
          nodes.push_back(std::move(node));
          node = Node{};
          return nodes.size() - 1;
        }
      }
      return node_index(address);
    };
    for (const RedisNodeAddress& seed : seeds) index_of(seed);
    slot_owner.assign(kRedisClusterSlots, -1);
    for (const RedisSlotRange& range : ranges) {
      RedisNodeAddress master = range.master;
      if (master.host.empty()) master.host = asked_host;
      const int owner = static_cast<int>(index_of(master));
      for (unsigned slot = range.first; slot <= range.last; ++slot) slot_owner[slot] = owner;
    }
    for (Node& node : old) close(node);
    slots_known = true;
    slots_refresh_wanted = false;
  }

  core::StoreResult run(const core::StoreBatch& batch) {
    core::StoreResult result;
    result.id = batch.id;
    std::vector<Op> ops;
    ops.reserve(batch.writes.size() + batch.reads.size());
    auto add = [&](bool write, std::size_t index, const std::string& key) {
      Op op;
      op.write = write;
      op.index = index;
      op.name = options.key_prefix + key;
      if (options.cluster) op.slot = redis_key_slot(op.name);
      ops.push_back(std::move(op));
    };
    for (std::size_t i = 0; i < batch.writes.size(); ++i) add(true, i, batch.writes[i].key);
    for (std::size_t i = 0; i < batch.reads.size(); ++i) add(false, i, batch.reads[i]);
    if (ops.empty()) return result;
    if (options.cluster) maybe_refresh_slots(result);

    std::vector<std::size_t> pending(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) pending[i] = i;
    for (std::uint32_t round = 0; !pending.empty() && round <= options.max_redirects; ++round) {
      std::map<std::size_t, std::vector<std::size_t>> by_node;
      for (const std::size_t i : pending) {
        Op& op = ops[i];
        if (op.ask_node) {
          by_node[*op.ask_node].push_back(i);
        } else if (!options.cluster) {
          by_node[0].push_back(i);
        } else if (slot_owner[op.slot] >= 0) {
          by_node[static_cast<std::size_t>(slot_owner[op.slot])].push_back(i);
        } else {
          fail(op, result,
               "redis cluster: no node known for slot " + std::to_string(op.slot) +
                   (slots_known ? "" : " (no CLUSTER SLOTS map yet; last: " + slots_error + ")"));
        }
      }
      std::vector<std::size_t> next;
      for (const auto& [node_at, list] : by_node) {
        run_pipeline(node_at, list, batch, ops, result, next);
      }
      pending = std::move(next);
    }
    if (!pending.empty()) {
      count(&RedisStoreStats::redirects_exhausted, pending.size());
      for (const std::size_t i : pending) {
        fail(ops[i], result,
             "redis cluster: slot " + std::to_string(ops[i].slot) + " still redirected after " +
                 std::to_string(options.max_redirects) + " redirects (max_redirects)");
      }
    }

    for (Op& op : ops) {
      const std::string& key = op.write ? batch.writes[op.index].key : batch.reads[op.index];
      if (op.failed) {
        if (op.write) result.failed_writes.push_back(key);
        continue;
      }
      result.keys.push_back(core::StoreKey{key, std::move(op.entries)});
    }
    return result;
  }

  void complete(const core::StoreResult& result, bool cancelled) {
    std::lock_guard<std::mutex> lock(mutex);
    ++stats.batches_completed;
    if (!result.ok) ++stats.batches_failed;
    if (cancelled) ++stats.batches_cancelled;
    stats.commands += result.commands;
    stats.round_trips += result.round_trips;
    stats.bytes_out += result.bytes_out;
    stats.bytes_in += result.bytes_in;
  }

  void work() {
    // A write to a connection Redis reset raises SIGPIPE, which would end
    // the process unless ignored; blocked here, hiredis sees EPIPE instead.
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (stopping) break;
      std::pair<core::StoreBatch, Done> job = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      core::StoreResult result;
      try {
        result = run(job.first);
      } catch (const std::exception& e) {
        result = failed_store_result(job.first, std::string("redis store: ") + e.what());
        for (Node& node : nodes) close(node);
      }
      complete(result, false);
      job.second(std::move(result));
    }
    std::deque<std::pair<core::StoreBatch, Done>> cancelled;
    {
      std::lock_guard<std::mutex> lock(mutex);
      cancelled.swap(queue);
    }
    for (auto& [batch, done] : cancelled) {
      core::StoreResult result = failed_store_result(batch, "redis store stopped");
      complete(result, true);
      done(std::move(result));
    }
    for (Node& node : nodes) close(node);
  }
};

RedisStore::RedisStore(RedisStoreOptions options) {
  const std::string error = check_options(options);
  if (!error.empty()) throw std::invalid_argument(error);
  impl_ = std::make_unique<Impl>(std::move(options));
  impl_->worker = std::thread([impl = impl_.get()] { impl->work(); });
}

RedisStore::~RedisStore() { stop(); }

std::optional<core::StoreResult> RedisStore::submit(core::StoreBatch batch, Done done) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->stopping) {
      ++impl_->stats.batches_refused_stopped;
      return failed_store_result(batch, "redis store stopped");
    }
    if (impl_->queue.size() >= impl_->options.max_queued_batches) {
      ++impl_->stats.batches_refused_queue_full;
      return failed_store_result(
          batch, "redis store busy: " + std::to_string(impl_->options.max_queued_batches) +
                     " batches already waiting (max_queued_batches)");
    }
    ++impl_->stats.batches_submitted;
    impl_->queue.emplace_back(std::move(batch), std::move(done));
  }
  impl_->wake.notify_one();
  return std::nullopt;
}

void RedisStore::stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->worker.joinable() && impl_->worker.get_id() != std::this_thread::get_id()) {
    impl_->worker.join();
  }
}

RedisStoreStats RedisStore::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

}  // namespace rlimit::shell
