// rlimit::Client: POSIX I/O on one AF_UNIX stream socket, every call bounded
// by ClientOptions::timeout_ms: sends and reads never block (MSG_DONTWAIT)
// except the wait for a reply, which blocks in recv() under SO_RCVTIMEO when
// a call starts waiting, and in poll() otherwise. No Asio here: the client
// must stay thin enough to embed anywhere.
//
// Invariants of Client::Impl:
//  - `in_flight_` lists, oldest first, every request whose frame is in `out_`
//    or already written on the current connection; the daemon answers frames
//    in order, so the next reply must carry `in_flight_.front().id`.
//  - Any I/O failure or protocol desync closes the socket and clears `in_`,
//    `out_` and `in_flight_`, answering every unanswered ticket. A late reply
//    dies with its socket, so it can never be taken for a later request's.
//  - `tickets_` holds submitted checks in submission order until receive()
//    returns them; a ticket is `ready` once answered (by the daemon or by a
//    failure).
#include "rlimit/client.h"

#include <errno.h>
#include <fcntl.h>
#include <google/protobuf/arena.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <thread>
#include <utility>

#include "rlimit/ratelimit_headers.h"
#include "rlimit/v1/client.pb.h"
#include "wire/check_codec.h"
#include "wire/frame.h"

namespace rlimit {
namespace {

namespace pb = ::rlimit::v1;
using Clock = std::chrono::steady_clock;

// submit() sends once this much is queued, so pipelining needs no flush() to
// make progress and the buffer stays bounded.
constexpr std::size_t kAutoFlushBytes = 64 * 1024;
constexpr std::size_t kReadChunkBytes = 16 * 1024;
// Consumed input is dropped from the front of the buffer past this offset.
constexpr std::size_t kCompactInputBytes = 64 * 1024;
// The arena's first block is reused across calls, so a typical request or
// response is built/parsed without touching the heap.
constexpr std::size_t kArenaBlockBytes = 16 * 1024;
// A connection quiet for this long is checked for EOF before it is used (a
// restarted daemon); a busier one finds out from send() (EPIPE), which is
// retried once on a fresh connection when nothing had been sent.
constexpr auto kIdleProbeAfter = std::chrono::milliseconds(50);

DecisionStatus map_status(pb::CheckResult::Status status) {
  switch (status) {
    case pb::CheckResult::OK:
      return DecisionStatus::kOk;
    case pb::CheckResult::EXEMPT:
      return DecisionStatus::kExempt;
    case pb::CheckResult::INVALID:
      return DecisionStatus::kInvalid;
    case pb::CheckResult::KEY_TABLE_FULL:
      return DecisionStatus::kKeyTableFull;
    default:
      // A status newer than this client: the daemon's `allowed` still holds.
      return DecisionStatus::kOk;
  }
}

void decode_result(const pb::CheckResult& result, Decision& out) {
  out.allowed = result.allowed();
  out.status = map_status(result.status());
  out.error = result.error();
  out.rules.resize(static_cast<std::size_t>(result.rules_size()));
  for (int i = 0; i < result.rules_size(); ++i) {
    const pb::RuleResult& r = result.rules(i);
    RuleStatus& s = out.rules[static_cast<std::size_t>(i)];
    s.name = r.name();
    s.allowed = r.allowed();
    s.limit = r.limit();
    s.period_ms = r.period_ms();
    s.burst = r.burst();
    s.remaining = r.remaining();
    s.retry_after_us = r.retry_after_us();
    s.reset_after_us = r.reset_after_us();
    s.algorithm = r.algorithm();
    s.delay_us = r.delay_us();
    s.lease = r.lease();
    s.over_limit = r.over_limit();
  }
  out.delay_us = result.delay_us();
}

void decode_result(const wire::CheckResponseView& response, const wire::CheckResultView& result,
                   Decision& out) {
  out.allowed = result.allowed;
  out.status = map_status(static_cast<pb::CheckResult::Status>(result.status));
  out.error.assign(result.error);
  out.rules.resize(result.rule_count);
  for (std::uint32_t i = 0; i < result.rule_count; ++i) {
    const wire::RuleResultView& r = response.rules[result.first_rule + i];
    RuleStatus& s = out.rules[i];
    s.name.assign(r.name);
    s.allowed = r.allowed;
    s.limit = r.limit;
    s.period_ms = r.period_ms;
    s.burst = r.burst;
    s.remaining = r.remaining;
    s.retry_after_us = r.retry_after_us;
    s.reset_after_us = r.reset_after_us;
    s.algorithm.assign(r.algorithm);
    s.delay_us = r.delay_us;
    s.lease.assign(r.lease);
    s.over_limit = r.over_limit;
  }
  out.delay_us = result.delay_us;
}

pb::Check::Mode to_proto(CheckMode mode) {
  switch (mode) {
    case CheckMode::kPeek:
      return pb::Check::PEEK;
    case CheckMode::kReserve:
      return pb::Check::RESERVE;
    case CheckMode::kCheck:
      break;
  }
  return pb::Check::CHECK;
}

LeaseStatus map_lease_status(int status) {
  switch (status) {
    case pb::ReleaseResponse::DONE:
      return LeaseStatus::kDone;
    case pb::ReleaseResponse::UNKNOWN_LEASE:
      return LeaseStatus::kUnknown;
    case pb::ReleaseResponse::NOT_A_LEASE:
      return LeaseStatus::kNotALease;
    case pb::ReleaseResponse::MALFORMED_LEASE:
      return LeaseStatus::kMalformed;
    default:
      return LeaseStatus::kFailed;  // a status newer than this client
  }
}

std::string describe_error(const pb::Error& error) {
  std::string text = "daemon error ";
  const std::string& name = pb::Error::Code_Name(error.code());
  // A code newer than this client has no name here.
  text += name.empty() ? std::to_string(static_cast<int>(error.code())) : name;
  if (!error.message().empty()) {
    text += ": ";
    text += error.message();
  }
  return text;
}

// A check's mode and longest wait, as sent.
struct CheckOptions {
  CheckMode mode = CheckMode::kCheck;
  std::optional<std::chrono::microseconds> max_wait;
};

// Checks go out through the hand-written encoder (wire/check_codec.h): the
// same bytes protobuf would write, without building a message per call.
void write_check(std::span<const Descriptor> descriptors, std::uint64_t cost,
                 const InlineLimit* inline_limit, const CheckOptions& options,
                 wire::CheckRequestWriter& writer) {
  writer.begin_check();
  for (const Descriptor& d : descriptors) writer.add_descriptor(d.key, d.value);
  // Unset means 1 on the wire; leaving it out keeps the common frame small.
  if (cost != 1) writer.set_cost(cost);
  if (inline_limit != nullptr) {
    writer.set_inline_limit(inline_limit->key, inline_limit->limit, inline_limit->period_ms,
                            inline_limit->burst);
  }
  writer.set_mode(to_proto(options.mode));
  if (options.max_wait) writer.set_max_wait_us(options.max_wait->count());
  writer.end_check();
}

void write_check(const CheckRequest& request, wire::CheckRequestWriter& writer) {
  write_check(request.descriptors, request.cost,
              request.inline_limit ? &*request.inline_limit : nullptr,
              CheckOptions{request.mode, request.max_wait}, writer);
}

void fill_descriptors(std::span<const Descriptor> descriptors,
                      google::protobuf::RepeatedPtrField<pb::Descriptor>& out) {
  for (const Descriptor& d : descriptors) {
    pb::Descriptor* descriptor = out.Add();
    descriptor->set_key(d.key);
    descriptor->set_value(d.value);
  }
}

std::string errno_text(const char* what, int err) {
  std::string text = what;
  text += ": ";
  text += std::strerror(err);
  return text;
}

}  // namespace

const char* to_string(DecisionStatus status) {
  switch (status) {
    case DecisionStatus::kOk:
      return "ok";
    case DecisionStatus::kExempt:
      return "exempt";
    case DecisionStatus::kInvalid:
      return "invalid";
    case DecisionStatus::kKeyTableFull:
      return "key_table_full";
    case DecisionStatus::kUnavailable:
      return "unavailable";
    case DecisionStatus::kProtocolError:
      return "protocol_error";
  }
  return "unknown";
}

const char* to_string(LeaseStatus status) {
  switch (status) {
    case LeaseStatus::kDone:
      return "done";
    case LeaseStatus::kUnknown:
      return "unknown";
    case LeaseStatus::kNotALease:
      return "not_a_lease";
    case LeaseStatus::kMalformed:
      return "malformed";
    case LeaseStatus::kFailed:
      return "failed";
  }
  return "failed";
}

std::vector<std::string> Decision::leases() const {
  std::vector<std::string> tokens;
  for (const RuleStatus& rule : rules) {
    if (!rule.lease.empty()) tokens.push_back(rule.lease);
  }
  return tokens;
}

bool Decision::over_limit() const {
  return std::any_of(rules.begin(), rules.end(), [](const RuleStatus& r) { return r.over_limit; });
}

std::int64_t Decision::retry_after_us() const {
  if (allowed) return 0;
  std::int64_t longest = 0;
  for (const RuleStatus& rule : rules) {
    if (rule.allowed) continue;
    if (rule.retry_after_us < 0) return -1;
    longest = std::max(longest, rule.retry_after_us);
  }
  return longest;
}

RateLimitHeaders ratelimit_headers(const Decision& decision) {
  std::vector<RateLimitHeaderItem> items;
  items.reserve(decision.rules.size());
  for (const RuleStatus& rule : decision.rules) {
    items.push_back({.name = rule.name,
                     .limit = rule.limit,
                     .period_ms = rule.algorithm == "concurrency" ? 0 : rule.period_ms,
                     .remaining = rule.remaining,
                     .reset_after_us = rule.reset_after_us});
  }
  return ratelimit_headers(items, decision.allowed, decision.retry_after_us());
}

struct Client::Impl {
  enum class Kind : std::uint8_t { kTicket, kSync };
  struct InFlight {
    std::uint64_t id;
    Kind kind;
  };
  struct Ticket {
    std::uint64_t id;
    bool ready = false;
    Decision decision;
  };
  struct Failure {
    DecisionStatus status = DecisionStatus::kUnavailable;
    std::string message;
  };

  explicit Impl(ClientOptions opts)
      : options(std::move(opts)),
        socket_path(options.socket_path.empty() ? wire::default_socket_path()
                                                : options.socket_path),
        arena_block(new char[kArenaBlockBytes]),
        arena(make_arena_options(arena_block.get())),
        backoff_ms(options.reconnect_backoff_min_ms) {
    if (options.max_frame_bytes == 0) options.max_frame_bytes = wire::kDefaultMaxFrameBytes;
    if (options.reconnect_backoff_max_ms < options.reconnect_backoff_min_ms) {
      options.reconnect_backoff_max_ms = options.reconnect_backoff_min_ms;
    }
  }

  ~Impl() { close_socket(); }

  static google::protobuf::ArenaOptions make_arena_options(char* block) {
    google::protobuf::ArenaOptions arena_options;
    arena_options.initial_block = block;
    arena_options.initial_block_size = kArenaBlockBytes;
    return arena_options;
  }

  Decision fail_decision(DecisionStatus status, std::string message) const {
    Decision decision;
    decision.allowed = options.fail_mode == FailMode::kOpen;
    decision.status = status;
    decision.error = std::move(message);
    return decision;
  }

  Clock::time_point deadline() const {
    return Clock::now() + std::chrono::milliseconds(options.timeout_ms);
  }

  // ---- connection -------------------------------------------------------

  void close_socket() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    in.clear();
    in_offset = 0;
    out.clear();
    out_offset = 0;
    unsent_frames = 0;
    peer_gone_before_send = false;
  }

  // Closes the connection and answers every unanswered ticket, in order.
  void fail_all(const Failure& failure) {
    close_socket();
    in_flight.clear();
    for (Ticket& ticket : tickets) {
      if (ticket.ready) continue;
      ticket.ready = true;
      ticket.decision = fail_decision(failure.status, failure.message);
    }
    ticket_hint = 0;
  }

  // An idle connection the daemon has closed (restart, idle timeout) shows
  // EOF; dropping it here lets this call reconnect instead of failing. Only
  // after a quiet spell: on a busy connection the extra syscall would cost
  // every call, and send() reports a closed peer anyway (see pump()).
  void drop_if_stale(Clock::time_point now) {
    const Clock::time_point last_used = std::exchange(last_used_at, now);
    if (fd < 0 || !in_flight.empty() || in_offset < in.size()) return;
    if (now - last_used < kIdleProbeAfter) return;
    probe_for_eof();
  }

  // drop_if_stale when the clock has not been read: reads it only if the
  // connection is idle (a pipelining caller never is).
  void drop_if_stale() {
    if (fd < 0 || !in_flight.empty() || in_offset < in.size()) return;
    drop_if_stale(Clock::now());
  }

  void probe_for_eof() {
    char byte;
    const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    // EOF, an error, or bytes nobody asked for: start afresh.
    close_socket();
  }

  void note_connect_failure(Clock::time_point now) {
    next_connect_at = now + std::chrono::milliseconds(backoff_ms);
    const std::uint64_t doubled = std::uint64_t{backoff_ms} * 2;
    backoff_ms = static_cast<std::uint32_t>(
        std::min<std::uint64_t>(doubled, options.reconnect_backoff_max_ms));
    if (backoff_ms == 0) backoff_ms = options.reconnect_backoff_min_ms;
  }

  bool connect_socket(Clock::time_point until, Failure& failure) {
    const Clock::time_point now = Clock::now();
    if (now < next_connect_at) {
      failure = {DecisionStatus::kUnavailable,
                 "daemon unreachable (" + last_connect_error + "); waiting to reconnect"};
      return false;
    }
    const auto give_up = [&](std::string message) {
      if (fd >= 0) ::close(fd);
      fd = -1;
      last_connect_error = message;
      note_connect_failure(Clock::now());
      failure = {DecisionStatus::kUnavailable, "connect " + socket_path + ": " + message};
      return false;
    };

    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path.size() >= sizeof(addr.sun_path)) return give_up("socket path too long");
    std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());

    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return give_up(std::strerror(errno));

    for (;;) {
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) break;
      const int err = errno;
      if (err == EAGAIN) {
        // The daemon's accept backlog is full; the attempt did not start.
        // Retry briefly within this call's deadline.
        if (Clock::now() >= until) return give_up("accept backlog full");
        fresh_deadline = false;
        ::poll(nullptr, 0, 1);
        continue;
      }
      if (err != EINPROGRESS && err != EINTR) return give_up(std::strerror(err));
      pollfd p{fd, POLLOUT, 0};
      fresh_deadline = false;
      const int ready = poll_until(p, until);
      if (ready <= 0) return give_up(ready == 0 ? "timed out" : std::strerror(errno));
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
      if (so_error != 0) return give_up(std::strerror(so_error));
      break;
    }
    // From here on the socket blocks only where asked: every send and recv
    // passes MSG_DONTWAIT except the one waiting for a reply (wait_for_reply),
    // which blocks up to timeout_ms (SO_RCVTIMEO).
    blocking_wait = false;
    if (options.timeout_ms > 0) {
      const timeval tv{static_cast<time_t>(options.timeout_ms / 1000),
                       static_cast<suseconds_t>((options.timeout_ms % 1000) * 1000)};
      const int flags = ::fcntl(fd, F_GETFL);
      blocking_wait = flags >= 0 &&
                      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0 &&
                      ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0;
    }
    backoff_ms = options.reconnect_backoff_min_ms;
    next_connect_at = {};
    last_used_at = Clock::now();
    return true;
  }

  // poll() on one fd until `until`; EINTR is retried. Returns poll's result.
  static int poll_until(pollfd& p, Clock::time_point until) {
    for (;;) {
      const auto left = until - Clock::now();
      if (left <= Clock::duration::zero()) return 0;
      // Round up so a sub-millisecond remainder still waits instead of spinning.
      const auto left_ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
      const int timeout =
          static_cast<int>(std::min<std::int64_t>(left_ms, std::numeric_limits<int>::max()));
      p.revents = 0;
      const int rc = ::poll(&p, 1, timeout);
      if (rc < 0 && errno == EINTR) continue;
      if (rc == 0 && Clock::now() < until) continue;
      return rc;
    }
  }

  // ---- frames -----------------------------------------------------------

  // Appends one Request frame (version and id filled in here) and records it
  // as in flight. Returns false, appending nothing, if it exceeds
  // max_frame_bytes.
  template <typename Fill>
  bool queue_request(Kind kind, std::uint64_t id, Fill&& fill) {
    arena.Reset();
    auto* request = google::protobuf::Arena::CreateMessage<pb::Request>(&arena);
    request->set_version(pb::VERSION_1);
    request->set_id(id);
    fill(*request);
    if (!wire::append_message_frame(out, *request, options.max_frame_bytes)) return false;
    in_flight.push_back({id, kind});
    ++unsent_frames;
    return true;
  }

  // The same for a CheckRequest, whose checks `write(writer)` adds.
  template <typename Write>
  bool queue_checks(Kind kind, std::uint64_t id, Write&& write) {
    writer.begin(id);
    write(writer);
    if (!writer.finish(out, options.max_frame_bytes)) return false;
    in_flight.push_back({id, kind});
    ++unsent_frames;
    return true;
  }

  Ticket* find_ticket(std::uint64_t id) {
    // Replies arrive in order, so the answer is almost always right after the
    // last one found; fall back to a scan for safety.
    for (std::size_t i = ticket_hint; i < tickets.size(); ++i) {
      if (tickets[i].id == id) {
        ticket_hint = i + 1;
        return &tickets[i];
      }
    }
    for (std::size_t i = 0; i < std::min(ticket_hint, tickets.size()); ++i) {
      if (tickets[i].id == id) {
        ticket_hint = i + 1;
        return &tickets[i];
      }
    }
    return nullptr;
  }

  // Decodes the complete frames in `in` until `done()`. A sync reply stops the
  // loop with `sync_reply` set: check replies in the common shape are read
  // into `view` (pointing into `in`, which is then left as it is until the
  // next call), anything else is parsed by protobuf (valid until the next
  // arena reset).
  template <typename Done>
  bool process_frames(Done&& done, Failure& failure) {
    bool keep_input = false;
    while (!done()) {
      const std::string_view buffered(in.data() + in_offset, in.size() - in_offset);
      const wire::FrameView frame = wire::next_frame(
          buffered, std::max(options.max_frame_bytes, wire::kDefaultMaxResponseBytes));
      if (frame.status == wire::FrameStatus::kNeedMore) break;
      if (frame.status == wire::FrameStatus::kTooLarge) {
        failure = {DecisionStatus::kProtocolError, "reply frame of " +
                                                       std::to_string(frame.declared_bytes) +
                                                       " bytes is above the reply limit"};
        return false;
      }
      const pb::Response* response = nullptr;
      const bool fast = wire::decode_check_response(frame.payload, view);
      if (!fast) {
        arena.Reset();
        auto* parsed = google::protobuf::Arena::CreateMessage<pb::Response>(&arena);
        if (!parsed->ParseFromArray(frame.payload.data(), static_cast<int>(frame.payload.size()))) {
          failure = {DecisionStatus::kProtocolError, "malformed reply frame"};
          return false;
        }
        response = parsed;
      }
      in_offset += frame.consumed;
      const std::uint64_t id = fast ? view.id : response->id();
      if (in_flight.empty() || id != in_flight.front().id) {
        // Out of step with the daemon (e.g. an Error for a frame it could not
        // read, carrying id 0): nothing later on this stream can be trusted.
        failure.status = DecisionStatus::kProtocolError;
        failure.message =
            response != nullptr && response->has_error()
                ? describe_error(response->error())
                : "reply id " + std::to_string(id) +
                      (in_flight.empty() ? " with nothing outstanding"
                                         : ", expected " + std::to_string(in_flight.front().id));
        return false;
      }
      const InFlight answered = in_flight.front();
      in_flight.pop_front();
      if (answered.kind == Kind::kSync) {
        sync_reply = {response, fast, true};
        keep_input = fast;
        break;
      }
      Ticket* ticket = find_ticket(answered.id);
      if (ticket == nullptr) continue;  // cannot happen: every ticket is kept until received
      ticket->ready = true;
      if (fast) {
        decode_check_reply(view, 1, &ticket->decision, nullptr);
      } else {
        decode_check_reply(*response, 1, &ticket->decision, nullptr);
      }
    }
    if (keep_input) return true;
    if (in_offset == in.size()) {
      in.clear();
      in_offset = 0;
    } else if (in_offset > kCompactInputBytes) {
      in.erase(0, in_offset);
      in_offset = 0;
    }
    return true;
  }

  // decode_check_reply for a reply read by the fast decoder.
  void decode_check_reply(const wire::CheckResponseView& response, std::size_t count, Decision* one,
                          std::vector<Decision>* many) {
    if (many != nullptr) many->resize(count);
    if (response.results.size() == count) {
      for (std::size_t i = 0; i < count; ++i) {
        decode_result(response, response.results[i], one != nullptr ? *one : (*many)[i]);
      }
      return;
    }
    const std::string problem = "reply carries " + std::to_string(response.results.size()) +
                                " results for " + std::to_string(count) + " checks";
    for (std::size_t i = 0; i < count; ++i) {
      (one != nullptr ? *one : (*many)[i]) = fail_decision(DecisionStatus::kProtocolError, problem);
    }
  }

  // A sync call's reply as process_frames left it.
  void decode_sync_check_reply(std::size_t count, Decision* one, std::vector<Decision>* many) {
    if (sync_reply.fast) {
      decode_check_reply(view, count, one, many);
    } else {
      decode_check_reply(*sync_reply.message, count, one, many);
    }
  }

  // Fills `count` decisions (into `one`, or into `many` resized to `count`)
  // from a reply to a CheckRequest of `count` checks. A reply that does not fit
  // the request answers every check with kProtocolError by FailMode.
  void decode_check_reply(const pb::Response& response, std::size_t count, Decision* one,
                          std::vector<Decision>* many) {
    const auto emit = [&](std::size_t i) -> Decision& {
      if (one != nullptr) return *one;
      return (*many)[i];
    };
    if (many != nullptr) many->resize(count);
    std::string problem;
    DecisionStatus status = DecisionStatus::kProtocolError;
    if (response.has_error()) {
      problem = describe_error(response.error());
    } else if (!response.has_check()) {
      problem = "reply to a check carries no check results";
    } else if (static_cast<std::size_t>(response.check().results_size()) != count) {
      problem = "reply carries " + std::to_string(response.check().results_size()) +
                " results for " + std::to_string(count) + " checks";
    } else {
      for (std::size_t i = 0; i < count; ++i) {
        decode_result(response.check().results(static_cast<int>(i)), emit(i));
      }
      return;
    }
    for (std::size_t i = 0; i < count; ++i) emit(i) = fail_decision(status, problem);
  }

  // ---- the pump ---------------------------------------------------------

  bool write_some(Failure& failure) {
    while (out_offset < out.size()) {
      const ssize_t n =
          ::send(fd, out.data() + out_offset, out.size() - out_offset, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        out_offset += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      // The daemon closed the connection before any of what is in flight
      // was sent: pump() may send it all again on a new connection.
      peer_gone_before_send = n < 0 && (errno == EPIPE || errno == ECONNRESET) && out_offset == 0 &&
                              unsent_frames == in_flight.size();
      failure = {DecisionStatus::kUnavailable, errno_text("send", errno)};
      return false;
    }
    out.clear();
    out_offset = 0;
    unsent_frames = 0;
    return true;
  }

  bool read_some(Failure& failure) {
    char chunk[kReadChunkBytes];
    for (;;) {
      const ssize_t n = ::recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
      if (n > 0) {
        in.append(chunk, static_cast<std::size_t>(n));
        // A short read drained the socket; skip the recv() that would say so.
        if (static_cast<std::size_t>(n) < sizeof(chunk)) return true;
        continue;
      }
      if (n == 0) {
        failure = {DecisionStatus::kUnavailable, "daemon closed the connection"};
        return false;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      failure = {DecisionStatus::kUnavailable, errno_text("recv", errno)};
      return false;
    }
  }

  // Connects if needed, then writes `out` and reads replies (dispatching them)
  // until `done()` or `until`. Reading while writing keeps a daemon that
  // answers as it reads from stalling on a full socket buffer. On failure the
  // connection is closed and every ticket answered.
  // Callers compute `until` just before calling, so a first wait may use the
  // whole timeout (see wait_for_reply).
  template <typename Done>
  bool pump(Clock::time_point until, Done&& done, Failure& failure) {
    fresh_deadline = true;
    if (pump_once(until, done, failure)) return true;
    if (peer_gone_before_send) {
      // Nothing reached the daemon: send the same frames on a new connection.
      ::close(fd);
      fd = -1;
      in.clear();
      in_offset = 0;
      peer_gone_before_send = false;
      if (pump_once(until, done, failure)) return true;
    }
    fail_all(failure);
    return false;
  }

  // Waits for a reply inside recv() itself: one syscall where poll() + recv()
  // would take two. Only for the first wait of a pump() call, which starts
  // with all of the call's time left but for the microseconds spent encoding
  // and sending, since SO_RCVTIMEO is the whole timeout_ms; later waits (a
  // partial reply, a slow connect) use poll() and the exact deadline. Returns
  // false with `failure` set; sets `waited` when it did wait.
  bool wait_for_reply(Clock::time_point until, bool& waited, Failure& failure) {
    waited = false;
    if (!blocking_wait || !fresh_deadline) return true;
    fresh_deadline = false;
    waited = true;
    char chunk[kReadChunkBytes];
    for (;;) {
      const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n > 0) {
        in.append(chunk, static_cast<std::size_t>(n));
        return true;
      }
      if (n == 0) {
        failure = {DecisionStatus::kUnavailable, "daemon closed the connection"};
        return false;
      }
      if (errno == EINTR) {
        if (Clock::now() < until) continue;
        errno = EAGAIN;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        failure = {DecisionStatus::kUnavailable,
                   "no reply within " + std::to_string(options.timeout_ms) + " ms"};
      } else {
        failure = {DecisionStatus::kUnavailable, errno_text("recv", errno)};
      }
      return false;
    }
  }

  template <typename Done>
  bool pump_once(Clock::time_point until, Done&& done, Failure& failure) {
    if (done()) return true;
    if (fd < 0 && !connect_socket(until, failure)) return false;
    for (;;) {
      if (!process_frames(done, failure)) return false;
      if (done()) return true;
      if (out_offset < out.size() && !write_some(failure)) return false;
      if (out_offset >= out.size()) {
        bool waited = false;
        if (!wait_for_reply(until, waited, failure)) return false;
        if (waited) continue;
      }
      pollfd p{fd, static_cast<short>(POLLIN | (out_offset < out.size() ? POLLOUT : 0)), 0};
      const int rc = poll_until(p, until);
      if (rc < 0) {
        failure = {DecisionStatus::kUnavailable, errno_text("poll", errno)};
        return false;
      }
      if (rc == 0) {
        failure = {DecisionStatus::kUnavailable,
                   "no reply within " + std::to_string(options.timeout_ms) + " ms"};
        return false;
      }
      if ((p.revents & POLLOUT) != 0 && !write_some(failure)) return false;
      if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !read_some(failure)) return false;
      if ((p.revents & POLLNVAL) != 0) {
        failure = {DecisionStatus::kUnavailable, "socket closed unexpectedly"};
        return false;
      }
    }
  }

  // Sends one request queued by `queue(id)` and waits for its reply. On
  // success returns true with `sync_reply` set; on failure false with
  // `failure` set.
  template <typename Queue>
  bool round_trip(Queue&& queue, Failure& failure) {
    const Clock::time_point now = Clock::now();
    const Clock::time_point until = now + std::chrono::milliseconds(options.timeout_ms);
    drop_if_stale(now);
    const std::uint64_t id = next_id++;
    if (!queue(id)) {
      failure = {DecisionStatus::kProtocolError, "request exceeds max_frame_bytes (" +
                                                     std::to_string(options.max_frame_bytes) + ")"};
      return false;
    }
    sync_reply = {};
    const auto answered = [this] { return sync_reply.done; };
    return pump(until, answered, failure);
  }

  // A status or members request: protobuf both ways. nullptr on failure, or
  // when the reply is a check reply (which no status request gets).
  template <typename Fill>
  const pb::Response* round_trip_message(Fill&& fill, Failure& failure) {
    const bool ok =
        round_trip([&](std::uint64_t id) { return queue_request(Kind::kSync, id, fill); }, failure);
    if (!ok) return nullptr;
    if (sync_reply.fast) {
      static const pb::Response kEmpty;
      return &kEmpty;  // no status, no members: the caller says so
    }
    return sync_reply.message;
  }

  // A request answered by one body (reset, status, members, rules): the
  // reply, or nullptr with `*error` (if not null) saying why: no answer, an
  // Error from the daemon, or a reply without the body asked for (then
  // `missing`).
  template <typename Fill, typename HasBody>
  const pb::Response* ask(Fill&& fill, HasBody has_body, const char* missing, std::string* error) {
    Failure failure;
    const pb::Response* response = round_trip_message(std::forward<Fill>(fill), failure);
    std::string why;
    if (response == nullptr) {
      why = std::move(failure.message);
    } else if (response->has_error()) {
      why = describe_error(response->error());
    } else if (!has_body(*response)) {
      why = missing;
    } else {
      return response;
    }
    if (error != nullptr) *error = std::move(why);
    return nullptr;
  }

  Decision check_one(std::span<const Descriptor> descriptors, std::uint64_t cost,
                     const InlineLimit* inline_limit, const CheckOptions& check_options = {}) {
    Failure failure;
    const bool ok = round_trip(
        [&](std::uint64_t id) {
          return queue_checks(Kind::kSync, id, [&](wire::CheckRequestWriter& w) {
            write_check(descriptors, cost, inline_limit, check_options, w);
          });
        },
        failure);
    if (!ok) return fail_decision(failure.status, std::move(failure.message));
    Decision decision;
    decode_sync_check_reply(1, &decision, nullptr);
    return decision;
  }

  ClientOptions options;
  std::string socket_path;
  int fd = -1;
  std::uint64_t next_id = 1;
  std::uint64_t refused_over_max_pending = 0;

  std::string out;  // frames not yet written, from out_offset on
  std::size_t out_offset = 0;
  std::string in;  // bytes read and not yet decoded, from in_offset on
  std::size_t in_offset = 0;
  std::deque<InFlight> in_flight;
  std::size_t unsent_frames = 0;  // frames in `out` of which nothing was sent yet
  bool peer_gone_before_send = false;
  bool blocking_wait = false;        // the socket blocks in recv(flags 0) up to timeout_ms
  bool fresh_deadline = false;       // no wait yet in this pump() call
  Clock::time_point last_used_at{};  // start of the last call, or the connect
  std::deque<Ticket> tickets;
  std::size_t ticket_hint = 0;

  std::unique_ptr<char[]> arena_block;
  google::protobuf::Arena arena;
  wire::CheckRequestWriter writer;
  wire::CheckResponseView view;
  struct SyncReply {
    const pb::Response* message = nullptr;  // parsed by protobuf, or
    bool fast = false;                      // read into `view`
    bool done = false;
  };
  SyncReply sync_reply;

  std::uint32_t backoff_ms;
  Clock::time_point next_connect_at{};
  std::string last_connect_error;
};

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

Decision Client::check(const std::vector<Descriptor>& descriptors, std::uint64_t cost) {
  return impl_->check_one(descriptors, cost, nullptr);
}

Decision Client::check(std::initializer_list<Descriptor> descriptors, std::uint64_t cost) {
  return impl_->check_one(std::span(descriptors.begin(), descriptors.size()), cost, nullptr);
}

Decision Client::check(const CheckRequest& request) {
  return impl_->check_one(request.descriptors, request.cost,
                          request.inline_limit ? &*request.inline_limit : nullptr,
                          {request.mode, request.max_wait});
}

Decision Client::peek(const CheckRequest& request) {
  return impl_->check_one(request.descriptors, request.cost,
                          request.inline_limit ? &*request.inline_limit : nullptr,
                          {CheckMode::kPeek, request.max_wait});
}

Decision Client::reserve(const CheckRequest& request,
                         std::optional<std::chrono::microseconds> max_wait) {
  return impl_->check_one(request.descriptors, request.cost,
                          request.inline_limit ? &*request.inline_limit : nullptr,
                          {CheckMode::kReserve, max_wait ? max_wait : request.max_wait});
}

Decision Client::acquire(const CheckRequest& request,
                         std::optional<std::chrono::microseconds> max_wait) {
  Decision decision = reserve(request, max_wait);
  // Only a daemon's allowance carries a wait; a fail-open answer has none.
  if (decision.allowed && decision.delay_us > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(decision.delay_us));
  }
  return decision;
}

LeaseStatus Client::release(std::string_view lease, std::string* error) {
  const std::string token(lease);
  return release_leases(std::span(&token, 1), /*extend=*/false, error).front();
}

LeaseStatus Client::extend(std::string_view lease, std::string* error) {
  const std::string token(lease);
  return release_leases(std::span(&token, 1), /*extend=*/true, error).front();
}

std::vector<LeaseStatus> Client::release_leases(std::span<const std::string> leases, bool extend,
                                                std::string* error) {
  std::vector<LeaseStatus> statuses(leases.size(), LeaseStatus::kFailed);
  if (leases.empty()) return statuses;
  Impl& impl = *impl_;
  Impl::Failure failure;
  const v1::Response* response = impl.round_trip_message(
      [&](v1::Request& r) {
        v1::ReleaseRequest* body = r.mutable_release();
        for (const std::string& lease : leases) body->add_leases(lease);
        body->set_extend(extend);
      },
      failure);
  std::string problem;
  if (response == nullptr) {
    problem = std::move(failure.message);
  } else if (response->has_error()) {
    problem = describe_error(response->error());
  } else if (!response->has_release() ||
             static_cast<std::size_t>(response->release().statuses_size()) != leases.size()) {
    problem = "reply to a release carries no status per lease";
  } else {
    for (std::size_t i = 0; i < leases.size(); ++i) {
      statuses[i] = map_lease_status(response->release().statuses(static_cast<int>(i)));
    }
  }
  if (error != nullptr) *error = std::move(problem);
  return statuses;
}

std::optional<ResetResult> Client::reset(const CheckRequest& request, std::string* error) {
  Impl& impl = *impl_;
  const v1::Response* response = impl.ask(
      [&](v1::Request& r) {
        v1::ResetRequest* body = r.mutable_reset();
        fill_descriptors(request.descriptors, *body->mutable_descriptors());
        if (request.inline_limit) {
          v1::InlineLimit* limit = body->mutable_inline_limit();
          limit->set_key(request.inline_limit->key);
          limit->set_limit(request.inline_limit->limit);
          limit->set_period_ms(request.inline_limit->period_ms);
          limit->set_burst(request.inline_limit->burst);
        }
      },
      [](const v1::Response& r) { return r.has_reset(); },
      "reply to a reset carries no reset result", error);
  if (response == nullptr) return std::nullopt;
  ResetResult result;
  result.keys_reset = response->reset().keys_reset();
  result.rules.assign(response->reset().rules().begin(), response->reset().rules().end());
  if (error != nullptr) error->clear();
  return result;
}

std::optional<ResetResult> Client::reset(std::span<const Descriptor> descriptors,
                                         std::string* error) {
  CheckRequest request;
  request.descriptors.assign(descriptors.begin(), descriptors.end());
  return reset(request, error);
}

std::vector<Decision> Client::check_batch(std::span<const CheckRequest> requests) {
  std::vector<Decision> decisions;
  if (requests.empty()) return decisions;
  Impl& impl = *impl_;
  Impl::Failure failure;
  const bool ok = impl.round_trip(
      [&](std::uint64_t id) {
        return impl.queue_checks(Impl::Kind::kSync, id, [&](wire::CheckRequestWriter& w) {
          for (const CheckRequest& request : requests) write_check(request, w);
        });
      },
      failure);
  if (!ok) {
    decisions.assign(requests.size(), impl.fail_decision(failure.status, failure.message));
    return decisions;
  }
  impl.decode_sync_check_reply(requests.size(), nullptr, &decisions);
  return decisions;
}

std::uint64_t Client::submit(const CheckRequest& request) {
  Impl& impl = *impl_;
  const std::uint64_t id = impl.next_id++;
  if (impl.tickets.size() >= impl.options.max_pending) {
    ++impl.refused_over_max_pending;
    impl.tickets.push_back(
        {id, true,
         impl.fail_decision(DecisionStatus::kUnavailable,
                            "max_pending (" + std::to_string(impl.options.max_pending) +
                                ") checks already outstanding; receive() some first")});
    return id;
  }
  impl.drop_if_stale();
  const bool queued = impl.queue_checks(
      Impl::Kind::kTicket, id, [&](wire::CheckRequestWriter& w) { write_check(request, w); });
  if (queued) {
    impl.tickets.push_back({id, false, {}});
  } else {
    impl.tickets.push_back(
        {id, true,
         impl.fail_decision(DecisionStatus::kProtocolError,
                            "request exceeds max_frame_bytes (" +
                                std::to_string(impl.options.max_frame_bytes) + ")")});
  }
  if (impl.out.size() - impl.out_offset >= kAutoFlushBytes) flush();
  return id;
}

void Client::flush() {
  Impl& impl = *impl_;
  if (impl.out_offset >= impl.out.size()) return;
  Impl::Failure failure;
  const auto written = [&impl] { return impl.out_offset >= impl.out.size(); };
  impl.pump(impl.deadline(), written, failure);
}

std::pair<std::uint64_t, Decision> Client::receive() {
  Impl& impl = *impl_;
  if (impl.tickets.empty()) {
    Decision decision;
    decision.allowed = false;
    decision.status = DecisionStatus::kInvalid;
    decision.error = "receive() with nothing pending";
    return {0, std::move(decision)};
  }
  if (!impl.tickets.front().ready) {
    Impl::Failure failure;
    const auto answered = [&impl] { return impl.tickets.front().ready; };
    // Replies already read need neither the clock nor a syscall.
    if (!impl.process_frames(answered, failure)) {
      impl.fail_all(failure);
    } else if (!answered()) {
      impl.pump(impl.deadline(), answered, failure);
    }
  }
  // pump() either answered the front ticket or failed, which answers them all.
  Impl::Ticket& front = impl.tickets.front();
  std::pair<std::uint64_t, Decision> result{front.id, std::move(front.decision)};
  impl.tickets.pop_front();
  if (impl.ticket_hint > 0) --impl.ticket_hint;
  return result;
}

std::size_t Client::pending() const { return impl_ ? impl_->tickets.size() : 0; }

std::uint64_t Client::refused_over_max_pending() const {
  return impl_ ? impl_->refused_over_max_pending : 0;
}

std::optional<DaemonStatus> Client::status(std::string* error) {
  Impl& impl = *impl_;
  const v1::Response* response = impl.ask([](v1::Request& r) { r.mutable_status(); },
                                          [](const v1::Response& r) { return r.has_status(); },
                                          "reply to a status request carries no status", error);
  if (response == nullptr) return std::nullopt;
  const v1::StatusResponse& s = response->status();
  DaemonStatus status;
  status.node_id = s.node_id();
  status.version = s.version();
  status.uptime_ms = s.uptime_ms();
  status.keys = s.keys();
  status.max_keys = s.max_keys();
  status.config_source = s.config_source();
  status.rules.reserve(static_cast<std::size_t>(s.rules_size()));
  for (const v1::RuleInfo& r : s.rules()) {
    status.rules.push_back(
        {r.name(), r.algorithm(), r.limit(), r.period_ms(), r.burst(), r.match(), r.overrides()});
  }
  status.counters.reserve(static_cast<std::size_t>(s.counters_size()));
  for (const v1::Counter& c : s.counters()) status.counters.emplace_back(c.name(), c.value());
  if (error != nullptr) error->clear();
  return status;
}

std::optional<ClusterMembers> Client::members(std::string* error) {
  Impl& impl = *impl_;
  const v1::Response* response = impl.ask([](v1::Request& r) { r.mutable_members(); },
                                          [](const v1::Response& r) { return r.has_members(); },
                                          "reply to a members request carries no members", error);
  if (response == nullptr) return std::nullopt;
  const v1::MembersResponse& m = response->members();
  ClusterMembers members;
  members.cluster = m.cluster();
  members.mode = m.mode();
  members.members.reserve(static_cast<std::size_t>(m.members_size()));
  for (const v1::MemberInfo& info : m.members()) {
    members.members.push_back({info.node_id(), info.address(), info.state(), info.incarnation(),
                               info.seq(), info.last_heard_ms_ago(), info.self(),
                               info.rules_version(), info.rules_origin(), info.rules_digest()});
  }
  if (error != nullptr) error->clear();
  return members;
}

bool Client::connected() const { return impl_ && impl_->fd >= 0; }

const ClientOptions& Client::options() const { return impl_->options; }

std::string RulesError::to_string() const {
  if (line == 0) return file + ": " + message;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

std::optional<RulesResult> Client::rules_request(int action, std::string_view text,
                                                 std::string_view name, std::string* error) {
  Impl& impl = *impl_;
  const v1::Response* response = impl.ask(
      [&](v1::Request& r) {
        v1::RulesRequest* body = r.mutable_rules();
        body->set_action(static_cast<v1::RulesRequest::Action>(action));
        body->set_text(text.data(), text.size());
        body->set_name(name.data(), name.size());
      },
      [](const v1::Response& r) { return r.has_rules(); },
      "reply to a rules request carries no rules", error);
  if (response == nullptr) return std::nullopt;
  const v1::RulesResponse& r = response->rules();
  RulesResult result;
  result.status = r.status() == v1::RulesResponse::INVALID  ? RulesResult::Status::kInvalid
                  : r.status() == v1::RulesResponse::FAILED ? RulesResult::Status::kFailed
                                                            : RulesResult::Status::kOk;
  result.version = r.version();
  result.origin = r.origin();
  result.digest = r.digest();
  result.text = r.text();
  for (const v1::RulesError& e : r.errors()) {
    result.errors.push_back({e.file(), e.line(), e.column(), e.message()});
  }
  result.message = r.message();
  result.kept = r.kept();
  result.changed = r.changed();
  result.added = r.added();
  result.removed = r.removed();
  if (error != nullptr) error->clear();
  return result;
}

std::optional<RulesResult> Client::rules(std::string* error) {
  return rules_request(v1::RulesRequest::SHOW, {}, {}, error);
}

std::optional<RulesResult> Client::validate_rules(std::string_view text, std::string_view name,
                                                  std::string* error) {
  return rules_request(v1::RulesRequest::VALIDATE, text, name, error);
}

std::optional<RulesResult> Client::apply_rules(std::string_view text, std::string_view name,
                                               std::string* error) {
  return rules_request(v1::RulesRequest::APPLY, text, name, error);
}

}  // namespace rlimit
