#include "shell/logging.h"

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>

namespace rlimit::shell {
namespace {

constexpr std::array<std::string_view, 7> kLevels = {"trace", "debug",    "info", "warn",
                                                     "error", "critical", "off"};

// The level names of log_level, so a shipper's filter uses the words of the
// configuration (spdlog's own say "warning").
std::string_view level_name(spdlog::level::level_enum level) {
  const auto index = static_cast<std::size_t>(level);
  return index < kLevels.size() ? kLevels[index] : "unknown";
}

// The length of the well-formed UTF-8 sequence at the start of `text`
// (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF), or 0.
std::size_t utf8_sequence_length(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80;  // range of the second byte
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

// {"ts":"...Z","level":"...","msg":"..."} and a newline.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    line_.clear();
    line_ += R"({"ts":")";
    append_timestamp(msg.time);
    line_ += R"(","level":")";
    line_ += level_name(msg.level);
    line_ += R"(","msg":")";
    append_json_escaped(std::string_view(msg.payload.data(), msg.payload.size()), line_);
    line_ += "\"}\n";
    dest.append(line_.data(), line_.data() + line_.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }

 private:
  // RFC 3339 in UTC with milliseconds: 2026-01-02T03:04:05.678Z.
  void append_timestamp(spdlog::log_clock::time_point time) {
    const auto since_epoch = time.time_since_epoch();
    const auto seconds = std::chrono::floor<std::chrono::seconds>(since_epoch);
    const auto millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
    const std::time_t whole = static_cast<std::time_t>(seconds.count());
    std::tm utc{};
    ::gmtime_r(&whole, &utc);
    std::array<char, 40> text{};
    const int n = std::snprintf(text.data(), text.size(), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                                utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour,
                                utc.tm_min, utc.tm_sec, static_cast<int>(millis));
    if (n > 0) line_.append(text.data(), static_cast<std::size_t>(n));
  }

  std::string line_;  // reused: one allocation for the life of the logger
};

void protobuf_to_spdlog(google::protobuf::LogLevel level, const char* file, int line,
                        const std::string& message) {
  // Parse complaints about client bytes are the client's problem; the session
  // already logs one line per bad frame.
  const auto spd_level =
      level >= google::protobuf::LOGLEVEL_FATAL ? spdlog::level::critical : spdlog::level::debug;
  spdlog::log(spd_level, "protobuf {}:{}: {}", file, line, message);
}

// gRPC logs only what GRPC_VERBOSITY lets through (errors by default).
void grpc_to_spdlog(gpr_log_func_args* args) {
  spdlog::level::level_enum level = spdlog::level::debug;
  if (args->severity == GPR_LOG_SEVERITY_INFO) level = spdlog::level::info;
  if (args->severity == GPR_LOG_SEVERITY_ERROR) level = spdlog::level::err;
  spdlog::log(level, "grpc {}:{}: {}", args->file != nullptr ? args->file : "?", args->line,
              args->message != nullptr ? args->message : "");
}

}  // namespace

bool is_log_level(std::string_view level) {
  for (std::string_view known : kLevels) {
    if (known == level) return true;
  }
  return false;
}

std::optional<LogFormat> parse_log_format(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return std::nullopt;
}

std::unique_ptr<spdlog::formatter> make_log_formatter(LogFormat format) {
  if (format == LogFormat::kJson) return std::make_unique<JsonFormatter>();
  return std::make_unique<spdlog::pattern_formatter>("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
}

void append_json_escaped(std::string_view text, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      if (const std::size_t length = utf8_sequence_length(text.substr(i)); length > 0) {
        out.append(text.substr(i, length));
        i += length;
      } else {
        out += "\\ufffd";  // not UTF-8: a JSON parser would reject the line
        ++i;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
}

void setup_logging(std::string_view level, LogFormat format) {
  // _mt: gRPC's threads log too (its messages, the face's shutdown).
  auto logger = spdlog::stderr_logger_mt("rlimitd");
  logger->set_formatter(make_log_formatter(format));
  spdlog::set_default_logger(logger);
  set_log_level(level);
  route_library_logs();
}

void route_library_logs() {
  google::protobuf::SetLogHandler(&protobuf_to_spdlog);
  gpr_set_log_function(&grpc_to_spdlog);
}

bool set_log_level(std::string_view level) {
  if (!is_log_level(level)) return false;
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
  spdlog::flush_on(spdlog::level::warn);
  return true;
}

}  // namespace rlimit::shell
