#include "wire/frame.h"

#include <google/protobuf/message_lite.h>
#include <sys/stat.h>

#include <cstdlib>

namespace rlimit::wire {

FrameView next_frame(std::string_view buffer, std::uint32_t max_frame_bytes) {
  FrameView view;
  if (buffer.size() < kFrameHeaderBytes) return view;
  const auto* b = reinterpret_cast<const unsigned char*>(buffer.data());
  const std::uint32_t len = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) |
                            (std::uint32_t{b[2]} << 8) | std::uint32_t{b[3]};
  view.declared_bytes = len;
  if (len > max_frame_bytes) {
    view.status = FrameStatus::kTooLarge;
    return view;
  }
  if (buffer.size() - kFrameHeaderBytes < len) return view;
  view.status = FrameStatus::kComplete;
  view.payload = buffer.substr(kFrameHeaderBytes, len);
  view.consumed = kFrameHeaderBytes + len;
  return view;
}

void append_frame_header(std::string& out, std::uint32_t payload_bytes) {
  const char header[kFrameHeaderBytes] = {
      static_cast<char>(payload_bytes >> 24), static_cast<char>(payload_bytes >> 16),
      static_cast<char>(payload_bytes >> 8), static_cast<char>(payload_bytes)};
  out.append(header, kFrameHeaderBytes);
}

bool append_message_frame(std::string& out, const google::protobuf::MessageLite& message,
                          std::uint32_t max_frame_bytes) {
  const std::size_t bytes = message.ByteSizeLong();
  if (bytes > max_frame_bytes) return false;
  const std::size_t start = out.size();
  append_frame_header(out, static_cast<std::uint32_t>(bytes));
  out.resize(start + kFrameHeaderBytes + bytes);
  auto* dst = reinterpret_cast<std::uint8_t*>(out.data() + start + kFrameHeaderBytes);
  if (bytes > 0 && message.SerializeWithCachedSizesToArray(dst) != dst + bytes) {
    out.resize(start);
    return false;
  }
  return true;
}

std::string default_socket_path() {
  const char* runtime_dir = std::getenv("XDG_RUNTIME_DIR");
  struct stat st {};
  if (runtime_dir != nullptr && runtime_dir[0] == '/' && ::stat(runtime_dir, &st) == 0 &&
      S_ISDIR(st.st_mode)) {
    return std::string(runtime_dir) + "/rlimitd.sock";
  }
  return "/tmp/rlimitd.sock";
}

}  // namespace rlimit::wire
