// Process-wide logging: spdlog to stderr, and protobuf's own messages routed
// into it (so a client sending bad UTF-8 cannot write to stderr directly).
// Call from the main thread before the event loop starts.
#pragma once

#include <string_view>

namespace rlimit::shell {

// True if `level` names a log level: trace, debug, info, warn, error,
// critical, off.
bool is_log_level(std::string_view level);

// Installs the stderr logger at `level` (which must satisfy is_log_level).
void setup_logging(std::string_view level);

// Changes the level of the installed logger; false if `level` is unknown.
bool set_log_level(std::string_view level);

}  // namespace rlimit::shell
