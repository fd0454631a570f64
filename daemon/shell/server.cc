#include "shell/server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <random>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/limiter.h"
#include "rlimit/v1/client.pb.h"
#include "shell/clock.h"
#include "shell/cluster_service.h"
#include "shell/counters.h"
#include "shell/dispatch.h"
#include "shell/event_loop.h"
#include "shell/grpc_face.h"
#include "shell/health.h"
#include "shell/http_check.h"
#include "shell/http_server.h"
#include "shell/load_meter.h"
#include "shell/logging.h"
#include "shell/metrics.h"
#include "shell/redis_service.h"
#include "shell/reload.h"
#include "shell/rules_await.h"
#include "shell/rules_digest.h"
#include "shell/rules_service.h"
#include "shell/sd_notify.h"
#include "shell/session.h"
#include "shell/state_file_writer.h"
#include "shell/status.h"
#include "shell/unix_socket.h"

namespace rlimit::shell {
namespace {

namespace asio = boost::asio;
using asio::as_tuple;
using asio::use_awaitable;
using Protocol = asio::local::stream_protocol;

// How long accept waits after a failure such as EMFILE: the connection stays
// queued, so retrying at once would spin.
constexpr std::chrono::milliseconds kAcceptBackoff{50};
// A sweep interval of zero or less would spin; this is the floor.
constexpr std::int64_t kMinSweepIntervalUs = 1000;

class Server {
 public:
  Server(asio::io_context& io, ServerOptions options)
      : io_(io),
        settings_(std::move(options.config.daemon)),
        cluster_settings_(std::move(options.config.cluster)),
        redis_settings_(std::move(options.config.redis)),
        http_settings_(std::move(options.config.http)),
        grpc_settings_(std::move(options.config.grpc)),
        keyring_(std::move(options.keyring)),
        config_path_(std::move(options.config_path)),
        overrides_(std::move(options.overrides)),
        status_{.node_id = settings_.node_id,
                .config_source = std::move(options.config.source),
                .started_us = steady_now_us()},
        limiter_(settings_.limiter, std::move(options.config.rules)),
        lease_tokens_(LeaseTokens::with_random_secret()),
        dispatcher_(limiter_, settings_, counters_, status_, lease_tokens_),
        acceptor_(io),
        sweep_timer_(io),
        grace_timer_(io),
        signals_(io, SIGTERM, SIGINT, SIGHUP),
        rules_(
            {.node_id = settings_.node_id,
             .state_file = settings_.rules_state_file,
             .load = {.max_rules = settings_.max_rules,
                      .max_descriptors_per_check = settings_.limiter.max_descriptors_per_check,
                      .mode = cluster_settings_.mode},
             .max_text_bytes = cluster_settings_.mode == config::ClusterMode::kNone
                                   ? 0
                                   : cluster_settings_.max_rules_bytes},
            [this](core::RuleSet rules) { return install_rules(std::move(rules)); },
            rules_counters_) {
    rules_.set_config_rules(std::move(options.config.rules_text));
    if (!settings_.rules_state_file.empty()) {
      // The state file is written off the event loop: a slow disk delays the
      // apply, not the checks.
      state_file_writer_ = std::make_unique<StateFileWriter>(io_);
      rules_.set_persist([this, path = settings_.rules_state_file](std::string contents,
                                                                   RulesService::Persisted done) {
        state_file_writer_->write(path, std::move(contents), std::move(done));
      });
    }
    dispatcher_.set_rules_service(&rules_);
    status_.rules = &rules_;
  }

  ~Server() { remove_socket_file(); }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the socket and starts the loops; false (logged) if the socket
  // cannot be set up.
  bool start();
  int exit_code() const { return exit_code_; }
  std::int64_t busy_poll_us() const { return settings_.busy_poll_us; }
  ShellCounters& counters() { return counters_; }

 private:
  bool listen();
  bool start_cluster();
  bool start_redis();
  // Starts the gRPC face when [grpc] names an address; false (logged) if it
  // cannot listen.
  bool start_grpc();
  bool start_http();
  // Answers one request of the HTTP listener (http_server.h).
  HttpAnswer answer_http(const HttpRequestView& request);
  // GET /metrics, /healthz and /readyz (metrics.h, health.h); nullopt for
  // any other path.
  std::optional<HttpAnswer> answer_operations(const HttpRequestView& request,
                                              std::string_view path);
  Readiness readiness_at(core::TimeUs now) const;
  asio::awaitable<void> accept_loop();
  asio::awaitable<void> sweep_loop();
  asio::awaitable<void> signal_loop();
  // Runs a server-wide coroutine; its failure stops the daemon with exit 1.
  void spawn(std::string_view what, asio::awaitable<void> task);

  void begin_shutdown(int exit_code);
  void force_close_sessions();
  void on_session_closed(std::uint64_t id);
  void maybe_finish_shutdown();
  void remove_socket_file();
  void reload();
  // Puts a rule set in force keeping the state of unchanged rules: the one
  // path of SIGHUP reloads and of the rules API (rules_service.h).
  core::ReplaceSummary install_rules(core::RuleSet rules);
  // A newer rule set received whole from a peer.
  void on_received_rules(core::RulesSync::Received received);
  // Re-reads the secret file, so secrets rotate without a restart.
  void reload_keyring();
  std::vector<std::shared_ptr<Session>> live_sessions() const;

  asio::io_context& io_;
  config::DaemonSettings settings_;                 // sessions and dispatcher read it live
  const config::ClusterSettings cluster_settings_;  // changes need a restart
  const config::RedisSettings redis_settings_;      // changes need a restart
  const config::HttpSettings http_settings_;        // changes need a restart
  const config::GrpcSettings grpc_settings_;        // changes need a restart
  std::optional<Keyring> keyring_;                  // until the cluster service takes it
  const std::string config_path_;
  const SettingOverrides overrides_;
  ShellCounters counters_;
  LoadMeter load_meter_;
  StatusContext status_;
  core::Limiter limiter_;
  LeaseTokens lease_tokens_;
  Dispatcher dispatcher_;

  Protocol::acceptor acceptor_;
  asio::steady_timer sweep_timer_;
  asio::steady_timer grace_timer_;
  asio::signal_set signals_;
  // The rules in force, their version and the rules API.
  RulesCounters rules_counters_;
  RulesService rules_;
  std::string rules_token_;  // [http] rules_token_file's contents; "": none asked

  // Declared after the limiter, so it is destroyed (and stops using it)
  // first.
  std::unique_ptr<ClusterService> cluster_;
  bool cluster_done_ = true;  // no cluster, or it has left
  // Redis mode ([cluster] mode = "redis") instead of a peer cluster.
  std::unique_ptr<RedisService> redis_;
  // The HTTP face, when [http] listen is set; its messages are reused.
  std::unique_ptr<HttpServer> http_;
  v1::Request http_request_;
  v1::Response http_response_;

  // Envoy's rate-limit API over gRPC (grpc_face.h), when [grpc] is set.
  // Declared after the dispatcher, so it stops (finishing its calls) first.
  std::unique_ptr<GrpcFace> grpc_;
  // Writes the rules state file off the event loop. Declared after the rules
  // service and the cluster its results reach, so it is destroyed (joined,
  // later results dropped) first.
  std::unique_ptr<StateFileWriter> state_file_writer_;

  std::unordered_map<std::uint64_t, std::weak_ptr<Session>> sessions_;
  std::uint64_t next_session_id_ = 1;
  std::optional<FileId> socket_file_;
  bool rejecting_ = false;  // only the first of a run of rejections warns
  bool shutting_down_ = false;
  bool finished_ = false;
  int exit_code_ = 0;
};

bool Server::start() {
  rules_.load_state_file();
  if (!listen()) return false;
  if (cluster_settings_.mode != config::ClusterMode::kNone && !start_cluster()) return false;
  if (!http_settings_.listen.empty() && !start_http()) return false;
  if (!start_grpc()) return false;
  spawn("accept loop", accept_loop());
  spawn("sweep loop", sweep_loop());
  spawn("signal loop", signal_loop());
  spdlog::info("rlimitd {} node {} listening on {} with {} rules from {}", RLIMIT_VERSION,
               settings_.node_id, settings_.socket_path, limiter_.rules().rules.size(),
               status_.config_source);
  return true;
}

bool Server::listen() {
  const std::string& path = settings_.socket_path;
  const FreePathResult free = free_socket_path(path);
  if (!free.ok) {
    spdlog::error("{}", free.error);
    return false;
  }
  if (free.removed_stale) spdlog::info("removed stale socket {}", path);

  boost::system::error_code error;
  acceptor_.open(Protocol(), error);
  if (!error) {
    // Created with the wanted mode, never wider, even for an instant.
    ScopedUmask umask(static_cast<mode_t>(~settings_.socket_mode & 0777));
    acceptor_.bind(Protocol::endpoint(path), error);
  }
  if (error) {
    spdlog::error("cannot bind {}: {}", path, error.message());
    return false;
  }
  socket_file_ = file_id(path);
  if (std::optional<std::string> problem = set_mode(path, settings_.socket_mode)) {
    spdlog::error("{}", *problem);
    return false;
  }
  acceptor_.listen(asio::socket_base::max_listen_connections, error);
  if (error) {
    spdlog::error("cannot listen on {}: {}", path, error.message());
    return false;
  }
  return true;
}

bool Server::start_redis() {
  // As a peer cluster's incarnation: the wall clock at start, so a restarted
  // node's counters are new entries and its old ones are history.
  const auto wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  std::string error;
  // The store carries what other nodes wrote: bounded as a peer's news is.
  limiter_.ledger().set_bounds(make_ledger_bounds(cluster_settings_));
  redis_ = RedisService::start(io_, redis_settings_, settings_.node_id,
                               static_cast<std::uint64_t>(wall_us), limiter_, error);
  if (redis_ == nullptr) {
    spdlog::error("{}", error);
    return false;
  }
  status_.cluster_mode = "redis";
  status_.redis = redis_.get();
  return true;
}

bool Server::start_cluster() {
  if (cluster_settings_.mode == config::ClusterMode::kRedis) return start_redis();
  if (!keyring_) {
    spdlog::error("cluster mode {} needs a keyring (secret_file)",
                  config::cluster_mode_name(cluster_settings_.mode));
    return false;
  }
  // The incarnation must grow across restarts of this node, so it comes from
  // the wall clock: microseconds since the epoch at start. Besides replay
  // protection's timestamps (shell/clock.h, system_now_us) this is the
  // daemon's only wall-clock read; everything else runs on steady_now_us(). A
  // clock set back by more than the downtime would make peers ignore the
  // restarted node until its old incarnation is forgotten (dead_retention_us).
  const auto wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  std::random_device device;
  const std::uint64_t seed = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  std::string error;
  cluster_ = ClusterService::start(io_,
                                   ClusterServiceOptions{
                                       .settings = cluster_settings_,
                                       .node_id = settings_.node_id,
                                       .incarnation = static_cast<std::uint64_t>(wall_us),
                                       .seed = seed,
                                       .rules = rules_.current().version,
                                       .rules_text = rules_.current().text,
                                       .on_rules =
                                           [this](core::RulesSync::Received received) {
                                             on_received_rules(std::move(received));
                                           },
                                   },
                                   std::move(*keyring_), limiter_, error);
  keyring_.reset();
  if (cluster_ == nullptr) {
    spdlog::error("cluster: {}", error);
    return false;
  }
  cluster_done_ = false;
  rules_.set_changed_hook(
      [this](const RulesDocument& rules) { cluster_->set_rules(rules.version, rules.text); });
  rules_.set_version_source([this] { return cluster_->node().rules_sync().max_version_seen(); });
  status_.cluster_mode = cluster_->mode_name();
  status_.cluster = &cluster_->node();
  status_.peer_counters = &cluster_->counters();
  return true;
}

bool Server::start_http() {
  if (http_settings_.rules_api && !http_settings_.rules_token_file.empty()) {
    std::string error;
    std::optional<std::string> token = read_token_file(http_settings_.rules_token_file, error);
    if (!token) {
      spdlog::error("http: {}", error);
      return false;
    }
    rules_token_ = std::move(*token);
  }
  http_ = std::make_unique<HttpServer>(
      io_, http_settings_, counters_,
      [this](const HttpRequestView& request) { return answer_http(request); });
  if (http_settings_.rules_api) {
    // Applies wait for the state file, written off the event loop.
    http_->set_awaited_path("/v1/rules", [this](const HttpRequestView& request) {
      return await_rules_http(rules_, rules_counters_, request, rules_token_);
    });
  }
  std::string error;
  if (!http_->start(error)) {
    spdlog::error("{}", error);
    return false;
  }
  return true;
}

HttpAnswer Server::answer_http(const HttpRequestView& request) {
  const std::string_view path = request.target.substr(0, request.target.find('?'));
  if (std::optional<HttpAnswer> answer = answer_operations(request, path)) return *answer;
  if (path == "/v1/rules" && http_settings_.rules_api) {
    return answer_rules_http(rules_, rules_counters_, request, rules_token_);
  }
  if (path != "/v1/check") {
    ++counters_.http_not_found;
    return http_error(404, "no such path; the daemon answers /v1/check");
  }
  const HttpCheckMapping mapping =
      map_http_check(request, http_settings_.deny_status,
                     settings_.limiter.max_descriptors_per_check, http_request_);
  if (!mapping.ok) {
    ++(mapping.error.status == 405 ? counters_.http_not_found : counters_.http_bad_requests);
    return mapping.error;
  }
  if (shutting_down_) return http_error(503, "the daemon is shutting down");
  ++counters_.http_checks;
  const auto started = std::chrono::steady_clock::now();
  dispatcher_.handle(http_request_, steady_now_us(started), http_response_);
  HttpAnswer answer =
      answer_http_check(http_response_, mapping.deny_status, http_settings_.ietf_headers);
  dispatcher_.decision_times().http.observe(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::steady_clock::now() - started)
                                                .count());
  if (answer.status == mapping.deny_status) ++counters_.http_denied;
  if (answer.status == 400) ++counters_.http_bad_requests;
  return answer;
}

std::optional<HttpAnswer> Server::answer_operations(const HttpRequestView& request,
                                                    std::string_view path) {
  if (path != "/metrics" && path != "/healthz" && path != "/readyz") return std::nullopt;
  if (request.method != "GET") {
    ++counters_.http_not_found;
    HttpAnswer answer = http_error(405, "use GET");
    answer.headers.emplace_back("Allow", "GET");
    return answer;
  }
  // Answered by the event loop itself: an answer means the loop turns.
  if (path == "/healthz") return healthz_answer();
  const core::TimeUs now = steady_now_us();
  Readiness ready = readiness_at(now);
  if (path == "/readyz") return std::move(ready.answer);
  HttpAnswer answer;
  answer.content_type = kMetricsContentType;
  write_metrics({.version = RLIMIT_VERSION,
                 .limiter = limiter_,
                 .counters = counters_,
                 .status = status_,
                 .decision_times = dispatcher_.decision_times(),
                 .rules_digest = rules_digest(limiter_.rules()),
                 .ready = ready.ready,
                 .now = now},
                answer.body);
  return answer;
}

Readiness Server::readiness_at(core::TimeUs now) const {
  ReadinessInput in{
      // The daemon does not start without a valid rule set, and a reload
      // that fails keeps the one in force.
      .rules_loaded = true,
      .rules = limiter_.rules().rules.size(),
      .stopping = shutting_down_,
      .clustered = cluster_ != nullptr,
      .started_us = status_.started_us,
      .now = now,
      .ready_after_seeds_unreachable_us = http_settings_.ready_after_seeds_unreachable_us,
  };
  if (cluster_ != nullptr) {
    const core::Membership& membership = cluster_->node().membership();
    in.joined = membership.joined();
    in.live_members = membership.live_peers().size();
  }
  return readiness(in);
}

bool Server::start_grpc() {
  if (grpc_settings_.listen.empty() && grpc_settings_.unix_socket.empty()) return true;
  std::string error;
  grpc_ = GrpcFace::start(
      io_, dispatcher_,
      {.settings = grpc_settings_,
       .limits = {.allow_inline_limits = settings_.limiter.allow_inline_limits,
                  .max_descriptors_per_check = settings_.limiter.max_descriptors_per_check}},
      error);
  if (grpc_ == nullptr) {
    spdlog::error("grpc: {}", error);
    return false;
  }
  status_.grpc_counters = &grpc_->counters();
  spdlog::info("grpc: serving Envoy's rate-limit API on {}", grpc_->addresses());
  return true;
}

void Server::spawn(std::string_view what, asio::awaitable<void> task) {
  asio::co_spawn(io_, std::move(task), [this, what](std::exception_ptr failure) {
    if (!failure) return;
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      spdlog::critical("{} failed: {}; shutting down", what, e.what());
    } catch (...) {
      spdlog::critical("{} failed with an unknown exception; shutting down", what);
    }
    begin_shutdown(1);
  });
}

asio::awaitable<void> Server::accept_loop() {
  asio::steady_timer backoff(io_);
  while (!shutting_down_) {
    auto [error, socket] = co_await acceptor_.async_accept(as_tuple(use_awaitable));
    if (shutting_down_ || error == asio::error::operation_aborted) break;
    if (error) {
      ++counters_.accept_errors;
      spdlog::warn("accept failed: {}", error.message());
      backoff.expires_after(kAcceptBackoff);
      co_await backoff.async_wait(as_tuple(use_awaitable));
      continue;
    }
    if (sessions_.size() >= settings_.max_connections) {
      ++counters_.connections_rejected;
      spdlog::log(rejecting_ ? spdlog::level::debug : spdlog::level::warn,
                  "connection refused: {} open, max_connections is {}", sessions_.size(),
                  settings_.max_connections);
      rejecting_ = true;
      boost::system::error_code ignored;
      socket.close(ignored);
      continue;
    }
    rejecting_ = false;
    ++counters_.connections_accepted;
    ++counters_.connections_open;
    const std::uint64_t id = next_session_id_++;
    auto session =
        std::make_shared<Session>(std::move(socket), id, dispatcher_, settings_, counters_,
                                  [this](std::uint64_t closed) { on_session_closed(closed); });
    sessions_.emplace(id, session);
    spdlog::debug("connection {} opened", id);
    session->start();
  }
}

asio::awaitable<void> Server::sweep_loop() {
  while (!shutting_down_) {
    sweep_timer_.expires_after(
        std::chrono::microseconds(std::max(settings_.sweep_interval_us, kMinSweepIntervalUs)));
    auto [error] = co_await sweep_timer_.async_wait(as_tuple(use_awaitable));
    if (error || shutting_down_) break;
    ++counters_.sweeps;
    const core::TimeUs now = steady_now_us();
    // Elastic rules read it from here (the dispatcher passes it with every
    // check). Time spent busy polling is idle time, not load.
    const core::TimeUs working_cpu_us =
        process_cpu_us() - static_cast<core::TimeUs>(counters_.busy_poll_cpu_us);
    counters_.load_permille = static_cast<std::uint64_t>(load_meter_.sample(now, working_cpu_us));
    limiter_.sweep(now, settings_.sweep_batch);
  }
}

asio::awaitable<void> Server::signal_loop() {
  // A stop signal may finish the shutdown right here (no sessions open); the
  // loop must not wait again then, or the event loop would never run dry.
  while (!finished_) {
    auto [error, signal] = co_await signals_.async_wait(as_tuple(use_awaitable));
    if (error) break;
    if (signal == SIGHUP) {
      if (shutting_down_) continue;
      reload();
    } else if (!shutting_down_) {
      spdlog::info("{} received: stopping", signal == SIGTERM ? "SIGTERM" : "SIGINT");
      begin_shutdown(0);
    } else {
      spdlog::warn("second stop signal: closing {} connections now", sessions_.size());
      force_close_sessions();
    }
  }
}

std::vector<std::shared_ptr<Session>> Server::live_sessions() const {
  // A copy: stopping a session may end it and erase it from the map.
  std::vector<std::shared_ptr<Session>> live;
  live.reserve(sessions_.size());
  for (const auto& [id, weak] : sessions_) {
    if (auto session = weak.lock()) live.push_back(std::move(session));
  }
  return live;
}

void Server::begin_shutdown(int exit_code) {
  if (exit_code != 0) exit_code_ = exit_code;
  if (shutting_down_) return;
  shutting_down_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  sweep_timer_.cancel();
  if (http_ != nullptr) http_->stop();
  // Does not block: calls already handed to the loop still finish here.
  if (grpc_ != nullptr) grpc_->shutdown(std::chrono::microseconds(settings_.shutdown_grace_us));
  // The socket file goes first, so new clients fail fast instead of queueing
  // on a listener that will never accept them.
  remove_socket_file();
  // Peers learn at once that this node is going, instead of suspecting it
  // for suspicion_timeout_us; its clients finish meanwhile.
  if (redis_ != nullptr) redis_->stop();
  if (cluster_ != nullptr && !cluster_done_) {
    cluster_->leave([this] {
      cluster_done_ = true;
      maybe_finish_shutdown();
    });
  }
  for (const auto& session : live_sessions()) session->stop();
  if (!sessions_.empty()) {
    spdlog::info("waiting up to {} ms for {} connections to finish",
                 settings_.shutdown_grace_us / 1000, sessions_.size());
    grace_timer_.expires_after(
        std::chrono::microseconds(std::max<std::int64_t>(0, settings_.shutdown_grace_us)));
    grace_timer_.async_wait([this](boost::system::error_code error) {
      if (error) return;
      if (!sessions_.empty()) {
        spdlog::warn("shutdown grace over: closing {} connections still busy", sessions_.size());
      }
      force_close_sessions();
    });
  }
  maybe_finish_shutdown();
}

void Server::force_close_sessions() {
  for (const auto& session : live_sessions()) {
    ++counters_.connections_force_closed;
    session->close_now();
  }
}

void Server::on_session_closed(std::uint64_t id) {
  sessions_.erase(id);
  --counters_.connections_open;
  if (shutting_down_) maybe_finish_shutdown();
}

void Server::maybe_finish_shutdown() {
  if (finished_ || !sessions_.empty() || !cluster_done_) return;
  finished_ = true;
  grace_timer_.cancel();
  // Stop listening for signals so the loop can run out of work and return.
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  signals_.clear(ignored);
  remove_socket_file();
  spdlog::info("rlimitd stopped");
}

void Server::remove_socket_file() {
  if (!socket_file_) return;
  switch (remove_if_same(settings_.socket_path, *socket_file_)) {
    case RemoveResult::kRemoved:
      spdlog::debug("removed {}", settings_.socket_path);
      break;
    case RemoveResult::kGone:
      break;
    case RemoveResult::kReplaced:
      spdlog::warn("left {} in place: it is no longer the socket this daemon made",
                   settings_.socket_path);
      break;
    case RemoveResult::kFailed:
      spdlog::warn("cannot remove {}: {}", settings_.socket_path, std::strerror(errno));
      break;
  }
  socket_file_.reset();
}

void Server::reload() {
  // The secret file is re-read with or without a config file (rotation
  // should not need one), and even if the config turns out invalid.
  if (cluster_ != nullptr) reload_keyring();
  if (config_path_.empty()) {
    spdlog::log(cluster_ != nullptr ? spdlog::level::info : spdlog::level::warn,
                "SIGHUP: no rules to reload: rlimitd was started without --config");
    return;
  }
  spdlog::info("SIGHUP received: reloading {}", config_path_);
  config::LoadResult loaded = config::load_config_file(config_path_);
  if (!loaded.ok()) {
    ++counters_.reload_failures;
    for (const config::ConfigError& error : loaded.errors) {
      spdlog::error("reload rejected: {}", error.to_string());
    }
    spdlog::error("reload rejected: keeping the {} rules in force", limiter_.rules().rules.size());
    return;
  }

  if (const std::vector<config::ConfigError> refused =
          config::check_rules_for_cluster(loaded.config.rules, cluster_settings_.mode);
      !refused.empty()) {
    ++counters_.reload_failures;
    for (const config::ConfigError& error : refused) {
      spdlog::error("reload rejected: {}", error.to_string());
    }
    spdlog::error("reload rejected: keeping the {} rules in force", limiter_.rules().rules.size());
    return;
  }

  apply_overrides(overrides_, loaded.config.daemon);
  SettingsChange change = merge_reloaded_settings(settings_, loaded.config.daemon);
  for (const std::string& ignored : change.ignored) {
    spdlog::warn("reload: {} changed in the file; ignored until restart", ignored);
  }
  for (const std::string& applied : change.applied) spdlog::info("reload: {}", applied);
  config::ClusterSettings cluster = loaded.config.cluster;
  apply_cluster_overrides(overrides_, cluster);
  for (const std::string& ignored : changed_cluster_settings(cluster_settings_, cluster)) {
    spdlog::warn("reload: {} changed; ignored until restart", ignored);
  }
  settings_ = std::move(change.settings);
  set_log_level(settings_.log_level);
  limiter_.set_max_keys(settings_.limiter.max_keys);

  if (const core::RulesVersion& applied = rules_.current().version; applied.version > 0) {
    // docs/cluster.md, "Rules across the cluster": the file's rules are
    // version 0, below any applied rule set.
    spdlog::info(
        "reloaded {}: settings only; the rules applied as version {} from {} stay in force (the "
        "file's rules are version 0: rlimitctl rules apply the file to make it the cluster's)",
        config_path_, applied.version, applied.origin);
    return;
  }
  const std::size_t rule_count = loaded.config.rules.rules.size();
  const core::ReplaceSummary summary = install_rules(std::move(loaded.config.rules));
  rules_.set_config_rules(std::move(loaded.config.rules_text));
  status_.config_source = std::move(loaded.config.source);
  ++counters_.reloads;
  spdlog::info("reloaded {}: {} rules ({} kept, {} changed, {} added, {} removed)", config_path_,
               rule_count, summary.kept, summary.changed, summary.added, summary.removed);
}

core::ReplaceSummary Server::install_rules(core::RuleSet rules) {
  return limiter_.replace_rules(std::move(rules));
}

void Server::on_received_rules(core::RulesSync::Received received) {
  const core::RulesVersion version = received.version;
  rules_.apply_received(received.version, received.text, received.from_address,
                        [this, version](const RulesService::Outcome& outcome) {
                          // Refused versions are not fetched again (logged once by the
                          // service); this node keeps advertising what it runs, so the drift
                          // shows. One it could not persist (a full disk, for a moment) is
                          // fetched again later.
                          if (outcome.status == RulesService::Status::kOk || cluster_ == nullptr)
                            return;
                          if (outcome.status == RulesService::Status::kFailed) {
                            cluster_->retry_rules_later(version);
                          } else {
                            cluster_->refuse_rules(version);
                          }
                        });
}

void Server::reload_keyring() {
  KeyringLoad loaded = Keyring::load_file(cluster_settings_.secret_file);
  for (const std::string& warning : loaded.warnings) spdlog::warn("{}", warning);
  if (!loaded.keyring) {
    spdlog::error("reload: keyring kept: {}", loaded.error);
    return;
  }
  cluster_->replace_keyring(std::move(*loaded.keyring));
}

}  // namespace

int run_server(ServerOptions options) {
  // A clustered limiter keeps the per-origin counters its peers exchange.
  options.config.daemon.limiter.replicated =
      options.config.cluster.mode != config::ClusterMode::kNone;
  options.config.daemon.limiter.counter_retention_min_us =
      options.config.cluster.counter_retention_us;
  options.config.daemon.limiter.fair_share = options.config.cluster.fair_share;
  asio::io_context io(1);
  Server server(io, std::move(options));
  if (!server.start()) return 1;
  // Every listener is up: a Type=notify unit's dependents may start now.
  if (std::optional<std::string> error = notify_service_manager("READY=1")) {
    spdlog::warn("{}", *error);
  }
  try {
    run_event_loop(io, server.busy_poll_us(), server.counters());
  } catch (const std::exception& e) {
    spdlog::critical("event loop failed: {}", e.what());
    return 1;
  }
  return server.exit_code();
}

}  // namespace rlimit::shell
