// The daemon's HTTP listener ([http], Boost.Beast): HTTP/1.1 with keep-alive
// on a TCP address, for the faces that speak HTTP (the /v1/check face now).
// It reads whole requests within their bounds (header and body size, time,
// connections: each refusal answered with its status, counted and closed)
// and hands each one to a handler that answers it synchronously. Runs on the
// daemon's event loop like everything else, so the handler may call the
// Dispatcher and the core directly. Not thread-safe; one per server.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "config/config.h"
#include "shell/counters.h"
#include "shell/http_check.h"

namespace rlimit::shell {

class HttpServer {
 public:
  // Answers one request.
  using Handler = std::function<HttpAnswer(const HttpRequestView& request)>;
  // Answers one request later (awaiting work done off the event loop; the
  // connection waits, nothing else does).
  using AwaitedHandler =
      std::function<boost::asio::awaitable<HttpAnswer>(const HttpRequestView& request)>;

  // `settings` and `counters` must outlive the server.
  HttpServer(boost::asio::io_context& io, const config::HttpSettings& settings,
             ShellCounters& counters, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds settings.listen and starts accepting; false with `error` set when
  // the address does not resolve or cannot be bound.
  bool start(std::string& error);
  // Requests for `path` (the target up to '?') are answered by `handler`
  // instead (the rules API's applies). Set before start.
  void set_awaited_path(std::string path, AwaitedHandler handler) {
    awaited_path_ = std::move(path);
    awaited_handler_ = std::move(handler);
  }
  // Stops accepting and closes every connection. Idempotent.
  void stop();
  // The address bound ("127.0.0.1:8081"; port 0 in the file shows the port
  // the kernel chose), once started.
  std::string local_address() const;

 private:
  struct Connection;
  boost::asio::awaitable<void> accept_loop();
  boost::asio::awaitable<void> serve(std::shared_ptr<Connection> connection);

  boost::asio::io_context& io_;
  const config::HttpSettings& settings_;
  ShellCounters& counters_;
  Handler handler_;
  std::string awaited_path_;
  AwaitedHandler awaited_handler_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Connection>> connections_;
  std::uint64_t next_connection_id_ = 1;
  bool stopped_ = false;
  bool rejecting_ = false;  // only the first of a run of rejections warns
};

}  // namespace rlimit::shell
