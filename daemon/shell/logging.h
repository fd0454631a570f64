// Process-wide logging: spdlog to stderr, as text for people or as one JSON
// object per line for log shippers, with protobuf's and gRPC's own messages
// routed into it (so a client sending bad UTF-8 cannot write to stderr
// directly, and a JSON log stays JSON). Call from the main thread before the
// event loop starts.
#pragma once

#include <spdlog/formatter.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace rlimit::shell {

enum class LogFormat {
  kText,  // 2026-01-02T03:04:05.678 info message (local time)
  kJson,  // {"ts":"2026-01-02T03:04:05.678Z","level":"info","msg":"message"} (UTC)
};

// True if `level` names a log level: trace, debug, info, warn, error,
// critical, off.
bool is_log_level(std::string_view level);

// Parses a log format name: "text" or "json".
std::optional<LogFormat> parse_log_format(std::string_view name);

// The formatter writing `format`, one line per message. The JSON one escapes
// quotes, backslashes and control bytes, and turns bytes that are not UTF-8
// into U+FFFD, so every line is valid JSON whatever the message holds.
std::unique_ptr<spdlog::formatter> make_log_formatter(LogFormat format);

// `text` as the inside of a JSON string (no surrounding quotes), appended to
// `out`.
void append_json_escaped(std::string_view text, std::string& out);

// Installs the stderr logger at `level` (which must satisfy is_log_level),
// writing `format`, and routes protobuf's and gRPC's messages into it.
void setup_logging(std::string_view level, LogFormat format);

// Sends protobuf's and gRPC's messages to spdlog's default logger (whichever
// is installed when they log). Part of setup_logging.
void route_library_logs();

// Changes the level of the installed logger; false if `level` is unknown.
bool set_log_level(std::string_view level);

}  // namespace rlimit::shell
