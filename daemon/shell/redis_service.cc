#include "shell/redis_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <utility>

#include "shell/clock.h"

namespace rlimit::shell {

namespace asio = boost::asio;

RedisStoreOptions make_redis_store_options(const config::RedisSettings& settings,
                                           std::string password) {
  RedisStoreOptions o;
  o.addresses = settings.addresses;
  o.cluster = settings.cluster;
  o.username = settings.username;
  o.password = std::move(password);
  o.key_prefix = settings.key_prefix;
  o.connect_timeout_ms = std::max<std::int64_t>(1, settings.connect_timeout_us / 1000);
  o.command_timeout_ms = std::max<std::int64_t>(1, settings.command_timeout_us / 1000);
  return o;
}

core::StoreSyncOptions make_store_sync_options(const config::RedisSettings& settings) {
  core::StoreSyncOptions o;
  o.sync_interval_us = settings.sync_interval_us;
  o.max_writes_per_batch = settings.max_writes_per_batch;
  o.max_reads_per_batch = settings.max_reads_per_batch;
  o.standin_max_us = settings.standin_max_us;
  // The store answers within its own timeouts (connect, then a command per
  // node, a redirect or two); a batch unanswered for much longer is given up.
  o.batch_timeout_us = std::max<std::int64_t>(
      5'000'000, 4 * (settings.connect_timeout_us + settings.command_timeout_us));
  return o;
}

std::optional<std::string> read_redis_password(const std::string& path, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "redis: password_file \"" + path + "\": cannot be read";
    return std::nullopt;
  }
  std::string line;
  std::getline(in, line);
  const auto first = line.find_first_not_of(" \t\r");
  const auto last = line.find_last_not_of(" \t\r");
  if (first == std::string::npos) {
    error = "redis: password_file \"" + path + "\": the first line is empty";
    return std::nullopt;
  }
  return line.substr(first, last - first + 1);
}

struct RedisService::State : std::enable_shared_from_this<State> {
  State(asio::io_context& io, core::StoreSyncOptions sync_options, core::Limiter& limiter,
        RedisStoreOptions store_options)
      : io(io),
        flush_bound(2 * (store_options.connect_timeout_ms + store_options.command_timeout_ms)),
        timer(io),
        sync(sync_options, limiter),
        store(std::move(store_options)),
        tick_us(std::clamp<core::TimeUs>(sync_options.sync_interval_us / 4, 1000, 5000)) {}

  void schedule() {
    timer.expires_after(std::chrono::microseconds(tick_us));
    timer.async_wait([weak = weak_from_this()](const boost::system::error_code& error) {
      std::shared_ptr<State> self = weak.lock();
      if (error || !self || self->stopped) return;
      self->tick();
      self->schedule();
    });
  }

  void tick() {
    std::optional<core::StoreBatch> batch = sync.tick(steady_now_us());
    report_health();
    if (!batch) return;
    std::optional<core::StoreResult> refused = store.submit(
        std::move(*batch), [weak = weak_from_this(), &io = io](core::StoreResult result) {
          // On the store's worker: back to the loop.
          asio::post(io, [weak, result = std::move(result)]() mutable {
            if (std::shared_ptr<State> self = weak.lock()) self->on_result(result);
          });
        });
    if (refused) on_result(*refused);
  }

  void on_result(const core::StoreResult& result) {
    sync.on_result(result, steady_now_us());
    report_health();
  }

  // Writes what the store may lack, once, when the node stops: waits for
  // the answer, bounded by the store's own timeouts (this is the stop path;
  // nothing else runs on the loop meanwhile).
  void flush(std::chrono::milliseconds bound) {
    std::optional<core::StoreBatch> batch = sync.final_batch(steady_now_us());
    if (!batch) return;
    const std::size_t keys = batch->writes.size();
    auto answer = std::make_shared<std::promise<core::StoreResult>>();
    std::future<core::StoreResult> future = answer->get_future();
    std::optional<core::StoreResult> refused = store.submit(
        std::move(*batch), [answer](core::StoreResult result) { answer->set_value(result); });
    if (refused) {
      spdlog::warn("redis: the last {} keys were not written on stop: {}", keys, refused->error);
      return;
    }
    if (future.wait_for(bound) != std::future_status::ready) {
      spdlog::warn("redis: the last {} keys were not written on stop: no answer within {} ms",
                   keys, bound.count());
      return;
    }
    const core::StoreResult result = future.get();
    sync.on_result(result, steady_now_us());
    if (result.ok) {
      spdlog::info("redis: wrote the last {} keys on stop", keys);
    } else {
      spdlog::warn("redis: the last {} keys were not all written on stop: {}", keys, result.error);
    }
  }

  void report_health() {
    if (!sync.take_health_change()) return;
    if (sync.store_healthy()) {
      spdlog::info(
          "redis: the store answers again; sharing consumption (writes that failed are "
          "written now, with their latest values)");
    } else {
      spdlog::warn(
          "redis: the store fails ({}); deciding from this node's state alone until it "
          "answers (fail-local)",
          sync.last_error());
    }
  }

  asio::io_context& io;
  // How long stop() waits for the last batch: a connect and a command, twice
  // (the batch in flight may finish first). Before `store`, which takes the
  // options.
  std::chrono::milliseconds flush_bound;
  asio::steady_timer timer;
  core::StoreSync sync;
  RedisStore store;
  core::TimeUs tick_us;
  bool stopped = false;
};

std::unique_ptr<RedisService> RedisService::start(asio::io_context& io,
                                                  const config::RedisSettings& settings,
                                                  const std::string& node_id,
                                                  std::uint64_t incarnation, core::Limiter& limiter,
                                                  std::string& error) {
  std::string password;
  if (!settings.password_file.empty()) {
    std::optional<std::string> read = read_redis_password(settings.password_file, error);
    if (!read) return nullptr;
    password = std::move(*read);
  }
  RedisStoreOptions store_options = make_redis_store_options(settings, std::move(password));
  if (std::string problem = RedisStore::check_options(store_options); !problem.empty()) {
    error = "redis: " + problem;
    return nullptr;
  }
  limiter.enable_replication(node_id, incarnation, steady_now_us());
  auto state = std::make_shared<State>(io, make_store_sync_options(settings), limiter,
                                       std::move(store_options));
  state->schedule();
  spdlog::info("redis: sharing consumption through {} {} every {} ms (prefix \"{}\")",
               settings.cluster ? "Redis Cluster at" : "Redis at",
               settings.addresses.empty() ? std::string() : settings.addresses.front(),
               settings.sync_interval_us / 1000, settings.key_prefix);
  return std::unique_ptr<RedisService>(new RedisService(std::move(state)));
}

RedisService::RedisService(std::shared_ptr<State> state) : state_(std::move(state)) {}

RedisService::~RedisService() { stop(); }

void RedisService::stop() {
  if (state_->stopped) return;
  state_->stopped = true;
  state_->timer.cancel();
  state_->flush(state_->flush_bound);
  state_->store.stop();
}

const core::StoreSync& RedisService::sync() const { return state_->sync; }

RedisStoreStats RedisService::store_stats() const { return state_->store.stats(); }

void RedisService::for_each_counter(
    const std::function<void(std::string_view, std::uint64_t)>& f) const {
  const core::StoreSyncStats& s = state_->sync.stats();
  f("store_batches", s.batches);
  f("store_batches_failed", s.batches_failed);
  f("store_batches_timed_out", s.batches_timed_out);
  f("store_batches_full", s.batches_full);
  f("store_keys_written", s.keys_written);
  f("store_keys_read", s.keys_read);
  f("store_writes_failed", s.writes_failed);
  f("store_entries_received", s.entries_received);
  f("store_entries_applied", s.entries_applied);
  f("store_tokens_charged_remote", s.tokens_charged_remote);
  f("store_tokens_charged_standin", s.tokens_charged_standin);
  f("store_standin_origins_untracked", s.standin_origins_untracked);
  f("store_down", s.store_down);
  f("store_healthy", state_->sync.store_healthy() ? 1 : 0);
  f("store_dirty_keys", state_->sync.dirty_keys());
  f("store_held_keys", state_->sync.held_keys());
  f("store_recent_origins", state_->sync.recent_origins());
  const RedisStoreStats r = state_->store.stats();
  f("redis_batches_refused_queue_full", r.batches_refused_queue_full);
  f("redis_commands", r.commands);
  f("redis_round_trips", r.round_trips);
  f("redis_bytes_out", r.bytes_out);
  f("redis_bytes_in", r.bytes_in);
  f("redis_connects", r.connects);
  f("redis_connect_failures", r.connect_failures);
  f("redis_connects_deferred", r.connects_deferred);
  f("redis_connections_lost", r.connections_lost);
  f("redis_moved", r.moved);
  f("redis_ask", r.ask);
  f("redis_noscript", r.noscript);
  f("redis_redirects_exhausted", r.redirects_exhausted);
  f("redis_slot_refreshes", r.slot_refreshes);
  f("redis_slot_refresh_failures", r.slot_refresh_failures);
  f("redis_fields_skipped", r.fields_skipped);
}

}  // namespace rlimit::shell
