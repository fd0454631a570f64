#include "shell/http_server.h"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <exception>
#include <utility>

namespace rlimit::shell {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::as_tuple;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

// How long accept waits after a failure such as EMFILE (see server.cc).
constexpr std::chrono::milliseconds kAcceptBackoff{50};
// An answer to a client that does not read it is dropped after this long.
constexpr std::chrono::seconds kWriteTimeout{10};

}  // namespace

struct HttpServer::Connection {
  explicit Connection(tcp::socket socket, std::uint64_t id) : stream(std::move(socket)), id(id) {}
  beast::tcp_stream stream;
  std::uint64_t id;
};

HttpServer::HttpServer(asio::io_context& io, const config::HttpSettings& settings,
                       ShellCounters& counters, Handler handler)
    : io_(io),
      settings_(settings),
      counters_(counters),
      handler_(std::move(handler)),
      acceptor_(io) {}

HttpServer::~HttpServer() { stop(); }

bool HttpServer::start(std::string& error) {
  std::string host;
  std::uint16_t port = 0;
  if (!config::parse_host_port(settings_.listen, &host, &port, &error)) {
    error = "http listen \"" + settings_.listen + "\": " + error;
    return false;
  }
  boost::system::error_code ec;
  tcp::resolver resolver(io_);
  const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec || endpoints.empty()) {
    error = "http listen \"" + settings_.listen + "\": cannot resolve: " + ec.message();
    return false;
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    error = "http listen \"" + settings_.listen + "\": " + ec.message();
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    return false;
  }
  asio::co_spawn(io_, accept_loop(), [](std::exception_ptr failure) {
    if (!failure) return;
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      spdlog::error("http: accept loop failed: {}", e.what());
    }
  });
  spdlog::info("http: listening on {}", local_address());
  return true;
}

std::string HttpServer::local_address() const {
  boost::system::error_code ec;
  const tcp::endpoint endpoint = acceptor_.local_endpoint(ec);
  if (ec) return settings_.listen;
  const std::string address = endpoint.address().to_string();
  return (endpoint.address().is_v6() ? "[" + address + "]" : address) + ":" +
         std::to_string(endpoint.port());
}

void HttpServer::stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  // A copy: closing ends the connections' coroutines, which erase themselves.
  const auto open = connections_;
  for (const auto& [id, connection] : open) connection->stream.socket().close(ignored);
}

asio::awaitable<void> HttpServer::accept_loop() {
  asio::steady_timer backoff(io_);
  while (!stopped_) {
    auto [error, socket] = co_await acceptor_.async_accept(as_tuple(use_awaitable));
    if (stopped_ || error == asio::error::operation_aborted) break;
    if (error) {
      spdlog::warn("http: accept failed: {}", error.message());
      backoff.expires_after(kAcceptBackoff);
      co_await backoff.async_wait(as_tuple(use_awaitable));
      continue;
    }
    if (connections_.size() >= settings_.max_connections) {
      ++counters_.http_connections_rejected;
      spdlog::log(rejecting_ ? spdlog::level::debug : spdlog::level::warn,
                  "http: connection refused: {} open, [http] max_connections is {}",
                  connections_.size(), settings_.max_connections);
      rejecting_ = true;
      boost::system::error_code ignored;
      socket.close(ignored);
      continue;
    }
    rejecting_ = false;
    // Answers are small and written whole: without TCP_NODELAY, Nagle holds
    // a second answer on a connection for the client's delayed ACK (~40 ms
    // to a pipelining client).
    boost::system::error_code nodelay_error;
    socket.set_option(tcp::no_delay(true), nodelay_error);
    ++counters_.http_connections_accepted;
    ++counters_.http_connections_open;
    auto connection = std::make_shared<Connection>(std::move(socket), next_connection_id_++);
    connections_.emplace(connection->id, connection);
    asio::co_spawn(io_, serve(connection), [this, id = connection->id](std::exception_ptr failure) {
      if (failure) {
        try {
          std::rethrow_exception(failure);
        } catch (const std::exception& e) {
          spdlog::warn("http: connection {} failed: {}", id, e.what());
        }
      }
      connections_.erase(id);
      --counters_.http_connections_open;
    });
  }
}

asio::awaitable<void> HttpServer::serve(std::shared_ptr<Connection> connection) {
  beast::tcp_stream& stream = connection->stream;
  beast::flat_buffer buffer;
  bool first = true;
  while (!stopped_) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(settings_.max_header_bytes);
    parser.body_limit(settings_.max_body_bytes);
    stream.expires_after(std::chrono::microseconds(first ? settings_.request_timeout_us
                                                         : settings_.idle_timeout_us));
    auto [read_error, read_bytes] =
        co_await http::async_read(stream, buffer, parser, as_tuple(use_awaitable));
    HttpAnswer refusal;
    if (read_error) {
      // partial_message: the client went away mid-request; nothing to answer.
      if (read_error == http::error::end_of_stream || read_error == asio::error::eof ||
          read_error == http::error::partial_message ||
          read_error == asio::error::operation_aborted ||
          read_error == asio::error::connection_reset) {
        break;
      }
      if (read_error == beast::error::timeout) {
        // Idle between requests is normal; a request begun and not finished is not.
        if (parser.got_some()) ++counters_.http_timeouts;
        break;
      }
      if (read_error == http::error::body_limit) {
        ++counters_.http_too_large;
        refusal = http_error(413, "the body is larger than [http] max_body_bytes (" +
                                      std::to_string(settings_.max_body_bytes) + ")");
      } else if (read_error == http::error::header_limit) {
        ++counters_.http_too_large;
        refusal = http_error(431,
                             "the request line and headers are larger than [http] "
                             "max_header_bytes (" +
                                 std::to_string(settings_.max_header_bytes) + ")");
      } else if (read_error.category() == make_error_code(http::error::bad_target).category()) {
        ++counters_.http_malformed;
        refusal = http_error(400, "malformed HTTP request: " + read_error.message());
      } else {
        break;  // the connection failed; nothing to answer
      }
    }

    const bool refused = static_cast<bool>(read_error);
    HttpAnswer answer;
    unsigned version = 11;
    bool keep_alive = false;
    if (refused) {
      answer = std::move(refusal);
    } else {
      ++counters_.http_requests;
      const auto& request = parser.get();
      version = request.version();
      keep_alive = request.keep_alive();
      const HttpRequestView view{
          .method =
              std::string_view(request.method_string().data(), request.method_string().size()),
          .target = std::string_view(request.target().data(), request.target().size()),
          .body = request.body(),
          .header = [&request](std::string_view name) -> std::optional<std::string_view> {
            const auto field = request.find(beast::string_view(name.data(), name.size()));
            if (field == request.end()) return std::nullopt;
            return std::string_view(field->value().data(), field->value().size());
          }};
      const std::string_view path = view.target.substr(0, view.target.find('?'));
      if (awaited_handler_ && path == awaited_path_) {
        answer = co_await awaited_handler_(view);
      } else {
        answer = handler_(view);
      }
    }
    http::response<http::string_body> response{static_cast<http::status>(answer.status), version};
    response.set(http::field::server, "rlimitd/" RLIMIT_VERSION);
    response.set(http::field::content_type, answer.content_type);
    for (const auto& [name, value] : answer.headers) response.set(name, value);
    response.body() = std::move(answer.body);
    response.keep_alive(keep_alive);
    response.prepare_payload();
    stream.expires_after(kWriteTimeout);
    auto [write_error, written] =
        co_await http::async_write(stream, response, as_tuple(use_awaitable));
    if (write_error || !keep_alive || refused) break;
    first = false;
  }
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream.socket().close(ignored);
}

}  // namespace rlimit::shell
