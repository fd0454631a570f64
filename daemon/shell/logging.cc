#include "shell/logging.h"

#include <google/protobuf/stubs/logging.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <array>
#include <string>

namespace rlimit::shell {
namespace {

constexpr std::array<std::string_view, 7> kLevels = {"trace", "debug",    "info", "warn",
                                                     "error", "critical", "off"};

void protobuf_to_spdlog(google::protobuf::LogLevel level, const char* file, int line,
                        const std::string& message) {
  // Parse complaints about client bytes are the client's problem; the session
  // already logs one line per bad frame.
  const auto spd_level =
      level >= google::protobuf::LOGLEVEL_FATAL ? spdlog::level::critical : spdlog::level::debug;
  spdlog::log(spd_level, "protobuf {}:{}: {}", file, line, message);
}

}  // namespace

bool is_log_level(std::string_view level) {
  for (std::string_view known : kLevels) {
    if (known == level) return true;
  }
  return false;
}

void setup_logging(std::string_view level) {
  auto logger = spdlog::stderr_logger_st("rlimitd");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  set_log_level(level);
  google::protobuf::SetLogHandler(&protobuf_to_spdlog);
}

bool set_log_level(std::string_view level) {
  if (!is_log_level(level)) return false;
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
  spdlog::flush_on(spdlog::level::warn);
  return true;
}

}  // namespace rlimit::shell
