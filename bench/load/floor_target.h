// The floor any Unix-socket request/response pays: a forked child echoes a
// reply of a check's size for every request of a check's size, over a
// socketpair, with plain blocking read/write and no decoding. One child per
// client thread, pinned to `server_cpu` when that is >= 0 (as a daemon pinned
// there would be).
#pragma once

#include <cstddef>
#include <memory>

#include "load/target.h"

namespace rlimit::bench {

// A check for user=bench-N is about 32 bytes framed, its answer about 56.
inline constexpr std::size_t kFloorRequestBytes = 32;
inline constexpr std::size_t kFloorReplyBytes = 56;

std::unique_ptr<Target> make_floor_target(std::size_t request_bytes = kFloorRequestBytes,
                                          std::size_t reply_bytes = kFloorReplyBytes,
                                          int server_cpu = -1);

}  // namespace rlimit::bench
