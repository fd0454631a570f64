#include "shell/unix_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace rlimit::shell {
namespace {

class UnixSocketTest : public ::testing::Test {
 protected:
  UnixSocketTest() {
    char pattern[] = "/tmp/rlimit-shell-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    path_ = dir_ + "/rlimitd.sock";
  }
  ~UnixSocketTest() override {
    for (int fd : fds_) ::close(fd);
    std::filesystem::remove_all(dir_);
  }

  // A socket bound at path_; listening or not.
  int bind_socket(bool listening) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    if (listening) {
      EXPECT_EQ(::listen(fd, 4), 0);
    }
    fds_.push_back(fd);
    return fd;
  }

  std::string dir_;
  std::string path_;
  std::vector<int> fds_;
};

TEST_F(UnixSocketTest, AbsentPathIsFree) {
  const FreePathResult result = free_socket_path(path_);
  EXPECT_TRUE(result.ok) << result.error;
  EXPECT_FALSE(result.removed_stale);
}

TEST_F(UnixSocketTest, StaleSocketIsRemoved) {
  ::close(bind_socket(/*listening=*/false));
  fds_.clear();
  ASSERT_TRUE(std::filesystem::exists(path_));
  const FreePathResult result = free_socket_path(path_);
  EXPECT_TRUE(result.ok) << result.error;
  EXPECT_TRUE(result.removed_stale);
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(UnixSocketTest, LiveSocketIsRefused) {
  bind_socket(/*listening=*/true);
  const FreePathResult result = free_socket_path(path_);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.error.find("another rlimitd is listening on " + path_), std::string::npos)
      << result.error;
  EXPECT_TRUE(std::filesystem::exists(path_));
}

TEST_F(UnixSocketTest, RegularFileIsRefused) {
  std::ofstream(path_) << "precious";
  const FreePathResult result = free_socket_path(path_);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.error.find("not a socket"), std::string::npos) << result.error;
  EXPECT_TRUE(std::filesystem::exists(path_));
}

TEST_F(UnixSocketTest, OverlongPathIsRefused) {
  const FreePathResult result = free_socket_path(dir_ + "/" + std::string(200, 'x'));
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.error.find("too long"), std::string::npos) << result.error;
}

TEST_F(UnixSocketTest, RemovesOnlyTheFileItMade) {
  bind_socket(/*listening=*/true);
  const std::optional<FileId> ours = file_id(path_);
  ASSERT_TRUE(ours.has_value());

  // Another daemon replaced the path: leave its socket alone.
  ASSERT_EQ(::unlink(path_.c_str()), 0);
  bind_socket(/*listening=*/true);
  EXPECT_EQ(remove_if_same(path_, *ours), RemoveResult::kReplaced);
  EXPECT_TRUE(std::filesystem::exists(path_));

  const std::optional<FileId> theirs = file_id(path_);
  ASSERT_TRUE(theirs.has_value());
  EXPECT_EQ(remove_if_same(path_, *theirs), RemoveResult::kRemoved);
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_EQ(remove_if_same(path_, *theirs), RemoveResult::kGone);
}

}  // namespace
}  // namespace rlimit::shell
