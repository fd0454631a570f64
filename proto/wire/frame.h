// Framing shared by rlimitd and libclient: a 4-byte big-endian payload length,
// then the payload (a serialized rlimit.v1.Request or Response). Pure functions
// over byte buffers; no I/O. Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace google::protobuf {
class MessageLite;
}

namespace rlimit::wire {

inline constexpr std::size_t kFrameHeaderBytes = 4;
inline constexpr std::uint32_t kDefaultMaxFrameBytes = 64 * 1024;
// Responses may be larger than requests (a batch of checks each matching
// several rules); clients accept replies up to this size.
inline constexpr std::uint32_t kDefaultMaxResponseBytes = 16 * 1024 * 1024;

enum class FrameStatus {
  kComplete,  // `payload` holds one whole frame; drop `consumed` bytes.
  kNeedMore,  // the buffer holds only part of a frame
  kTooLarge,  // the declared length exceeds the limit; the stream is unusable
};

struct FrameView {
  FrameStatus status = FrameStatus::kNeedMore;
  std::string_view payload;        // valid while the buffer is
  std::size_t consumed = 0;        // header + payload, when kComplete
  std::uint32_t declared_bytes = 0;  // payload length the header declares
};

// Looks for one frame at the start of `buffer`.
FrameView next_frame(std::string_view buffer, std::uint32_t max_frame_bytes);

// Appends the 4-byte header for a payload of `payload_bytes`.
void append_frame_header(std::string& out, std::uint32_t payload_bytes);

// Appends header + serialized `message`. Returns false if the message does not
// serialize or is larger than `max_frame_bytes` (nothing is appended then).
bool append_message_frame(std::string& out, const google::protobuf::MessageLite& message,
                          std::uint32_t max_frame_bytes = kDefaultMaxFrameBytes);

// The socket path both rlimitd and clients use when none is given:
// $XDG_RUNTIME_DIR/rlimitd.sock if that variable names a directory, else
// /tmp/rlimitd.sock.
std::string default_socket_path();

}  // namespace rlimit::wire
