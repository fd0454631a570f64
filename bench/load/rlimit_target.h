// rlimitd through libclient: the checks name descriptor user=bench-<key>.
// Synchronous requests go through Client::check / check_batch, pipelined
// ones through submit / receive (one check per frame).
#pragma once

#include <memory>
#include <string>

#include "load/target.h"

namespace rlimit::bench {

std::unique_ptr<Target> make_rlimit_target(const std::string& socket_path);

}  // namespace rlimit::bench
