// The framing shared by rlimitd and libclient (proto/wire/frame.h).
#include "wire/frame.h"

#include <gtest/gtest.h>

#include <string>

#include "rlimit/v1/client.pb.h"

namespace rlimit::wire {
namespace {

std::string header(std::uint32_t n) {
  std::string out;
  append_frame_header(out, n);
  return out;
}

TEST(FrameTest, HeaderIsBigEndian) {
  const std::string h = header(0x01020304);
  ASSERT_EQ(h.size(), kFrameHeaderBytes);
  EXPECT_EQ(h, std::string("\x01\x02\x03\x04", 4));
}

TEST(FrameTest, CompleteFrame) {
  const std::string buffer = header(3) + "abc" + "tail";
  const FrameView view = next_frame(buffer, kDefaultMaxFrameBytes);
  EXPECT_EQ(view.status, FrameStatus::kComplete);
  EXPECT_EQ(view.payload, "abc");
  EXPECT_EQ(view.consumed, 7u);
  EXPECT_EQ(view.declared_bytes, 3u);
}

TEST(FrameTest, PartialHeaderAndPartialPayloadNeedMore) {
  EXPECT_EQ(next_frame("", kDefaultMaxFrameBytes).status, FrameStatus::kNeedMore);
  EXPECT_EQ(next_frame(std::string("\0\0", 2), kDefaultMaxFrameBytes).status,
            FrameStatus::kNeedMore);
  const std::string partial = header(10) + "12345";
  const FrameView view = next_frame(partial, kDefaultMaxFrameBytes);
  EXPECT_EQ(view.status, FrameStatus::kNeedMore);
  EXPECT_EQ(view.declared_bytes, 10u);
  EXPECT_EQ(view.consumed, 0u);
}

TEST(FrameTest, TooLargeIsReportedFromTheHeaderAlone) {
  const FrameView view = next_frame(header(1001), 1000);
  EXPECT_EQ(view.status, FrameStatus::kTooLarge);
  EXPECT_EQ(view.declared_bytes, 1001u);
  EXPECT_EQ(next_frame(header(1000) + std::string(1000, 'x'), 1000).status, FrameStatus::kComplete);
  EXPECT_EQ(next_frame(header(0xffffffff), kDefaultMaxFrameBytes).status, FrameStatus::kTooLarge);
}

TEST(FrameTest, ZeroLengthFrameIsComplete) {
  const FrameView view = next_frame(header(0), kDefaultMaxFrameBytes);
  EXPECT_EQ(view.status, FrameStatus::kComplete);
  EXPECT_TRUE(view.payload.empty());
  EXPECT_EQ(view.consumed, kFrameHeaderBytes);
  // An empty payload is a valid (all-default) message.
  v1::Request request;
  EXPECT_TRUE(request.ParseFromArray(view.payload.data(), 0));
  EXPECT_EQ(request.id(), 0u);
}

TEST(FrameTest, MessageRoundTripsAndFramesFollowEachOther) {
  v1::Request first;
  first.set_version(v1::VERSION_1);
  first.set_id(7);
  v1::Descriptor* d = first.mutable_check()->add_checks()->add_descriptors();
  d->set_key("user");
  d->set_value("alice");
  v1::Request second;
  second.set_version(v1::VERSION_1);
  second.set_id(8);
  second.mutable_status();

  std::string buffer;
  ASSERT_TRUE(append_message_frame(buffer, first));
  ASSERT_TRUE(append_message_frame(buffer, second));

  FrameView view = next_frame(buffer, kDefaultMaxFrameBytes);
  ASSERT_EQ(view.status, FrameStatus::kComplete);
  v1::Request decoded;
  ASSERT_TRUE(decoded.ParseFromArray(view.payload.data(), static_cast<int>(view.payload.size())));
  EXPECT_EQ(decoded.id(), 7u);
  EXPECT_EQ(decoded.check().checks(0).descriptors(0).value(), "alice");

  view = next_frame(std::string_view(buffer).substr(view.consumed), kDefaultMaxFrameBytes);
  ASSERT_EQ(view.status, FrameStatus::kComplete);
  ASSERT_TRUE(decoded.ParseFromArray(view.payload.data(), static_cast<int>(view.payload.size())));
  EXPECT_EQ(decoded.id(), 8u);
  EXPECT_TRUE(decoded.has_status());
}

TEST(FrameTest, OversizedMessageAppendsNothing) {
  v1::Request request;
  request.mutable_check()->add_checks()->add_descriptors()->set_value(std::string(500, 'x'));
  std::string buffer = "keep";
  EXPECT_FALSE(append_message_frame(buffer, request, 100));
  EXPECT_EQ(buffer, "keep");
  EXPECT_TRUE(append_message_frame(buffer, request, 1000));
  EXPECT_EQ(next_frame(std::string_view(buffer).substr(4), 1000).status, FrameStatus::kComplete);
}

TEST(FrameTest, DefaultSocketPathHonoursXdgRuntimeDir) {
  const char* saved = std::getenv("XDG_RUNTIME_DIR");
  const std::string saved_value = saved ? saved : "";
  ::setenv("XDG_RUNTIME_DIR", "/tmp", 1);
  EXPECT_EQ(default_socket_path(), "/tmp/rlimitd.sock");
  ::setenv("XDG_RUNTIME_DIR", "/definitely/not/a/dir", 1);
  EXPECT_EQ(default_socket_path(), "/tmp/rlimitd.sock");
  ::unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(default_socket_path(), "/tmp/rlimitd.sock");
  if (saved != nullptr) ::setenv("XDG_RUNTIME_DIR", saved_value.c_str(), 1);
}

}  // namespace
}  // namespace rlimit::wire
