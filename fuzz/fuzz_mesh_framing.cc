// The mesh transport's incoming byte stream: frames of the 4-byte length
// (wire::next_frame, at most kMaxPeerFrameBytes) around sealed envelopes,
// read as Mesh::read_loop reads them (the loop itself is an Asio coroutine;
// this target runs its pure steps on the same bytes). The stream is built
// from records (fuzz_records.h): a record whose first byte is even is raw
// bytes from anyone; an odd one is a payload this target seals with the
// cluster key and frames, as a peer's send does.
// Properties: the sealed payloads come out whole and in order, a frame is
// never read past the stream, and the first frame that is too large or does
// not open ends the connection (nothing after it is handed on).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_records.h"
#include "shell/envelope.h"
#include "shell/peer_transport.h"
#include "wire/frame.h"

namespace {

rlimit::shell::Keyring& keyring() {
  static rlimit::shell::Keyring ring = [] {
    rlimit::shell::KeyringLoad load =
        rlimit::shell::Keyring::parse("a cluster secret for the fuzzer\n", "fuzz.key");
    FUZZ_CHECK(load.keyring.has_value());
    return std::move(*load.keyring);
  }();
  return ring;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  rlimit::shell::Keyring& ring = keyring();
  std::string stream;
  // Where each sealed payload starts in the stream, and what it carries.
  std::vector<std::pair<std::size_t, std::string_view>> sealed;
  rlimit::fuzz::Records records(std::string_view(reinterpret_cast<const char*>(data), size));
  std::string_view record;
  std::string envelope;
  bool any_raw = false;
  // Enough frames for a stream's every shape; more only slow the search.
  constexpr std::size_t kMaxRecords = 16;
  std::size_t count = 0;
  while (count++ < kMaxRecords && records.next(record)) {
    if (record.empty()) continue;
    if ((static_cast<unsigned char>(record[0]) & 1) == 0) {
      any_raw = true;
      stream.append(record.substr(1));
      continue;
    }
    const std::string_view payload = record.substr(1);
    envelope.clear();
    ring.seal_into(payload, envelope);
    sealed.emplace_back(stream.size(), payload);
    rlimit::wire::append_frame_header(stream, static_cast<std::uint32_t>(envelope.size()));
    stream += envelope;
  }

  std::size_t begin = 0;
  std::size_t next_sealed = 0;
  std::size_t sealed_opened = 0;
  for (;;) {
    const std::string_view pending(stream.data() + begin, stream.size() - begin);
    const rlimit::wire::FrameView frame =
        rlimit::wire::next_frame(pending, rlimit::shell::kMaxPeerFrameBytes);
    if (frame.status == rlimit::wire::FrameStatus::kNeedMore) break;
    if (frame.status == rlimit::wire::FrameStatus::kTooLarge) {
      FUZZ_CHECK(frame.declared_bytes > rlimit::shell::kMaxPeerFrameBytes);
      break;  // refused: the connection closes
    }
    FUZZ_CHECK(frame.consumed <= pending.size());
    FUZZ_CHECK(frame.payload.size() <= rlimit::shell::kMaxPeerFrameBytes);
    rlimit::shell::EnvelopeError error{};
    const std::optional<std::string_view> payload = ring.open(frame.payload, error);
    if (!payload) break;  // refused: the connection closes
    // Raw bytes can only open if they are an exact copy of a sealed frame
    // (none are forged); a frame the target sealed opens to its payload.
    while (next_sealed < sealed.size() && sealed[next_sealed].first < begin) ++next_sealed;
    if (next_sealed < sealed.size() && sealed[next_sealed].first == begin) {
      FUZZ_CHECK(*payload == sealed[next_sealed].second);
      ++sealed_opened;
    }
    begin += frame.consumed;
  }
  // With no raw bytes, every sealed payload came out.
  if (!any_raw) FUZZ_CHECK(sealed_opened == sealed.size() && begin == stream.size());
  return 0;
}
