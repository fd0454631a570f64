// rlimitctl against the real daemon: decisions, exit codes, JSON.
#include "fixture.h"

namespace rlimit::testing {
namespace {

const char* kOnePerHour = R"(
[[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 1
period = "1h"
)";

class RlimitctlTest : public DaemonTest {
 protected:
  RunResult ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {program_path("rlimitctl"), "--socket", socket_path()});
    return run_program(args);
  }
};

TEST_F(RlimitctlTest, CheckExitCodes) {
  start(kOnePerHour);
  RunResult allowed = ctl({"check", "user=alice"});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_NE(allowed.output.find("per-user"), std::string::npos) << allowed.output;
  RunResult denied = ctl({"check", "user=alice"});
  EXPECT_EQ(denied.exit_code, 1) << denied.output;
  RunResult usage = ctl({"check", "no-equals-sign"});
  EXPECT_EQ(usage.exit_code, 2) << usage.output;
  RunResult json = ctl({"check", "user=bob", "--cost", "1", "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_NE(json.output.find("\"allowed\": true"), std::string::npos) << json.output;
}

TEST_F(RlimitctlTest, UnavailableDaemonExitsThree) {
  RunResult result = ctl({"check", "user=alice"});
  EXPECT_EQ(result.exit_code, 3) << result.output;
}

TEST_F(RlimitctlTest, StatusTextAndJson) {
  start(kOnePerHour);
  ctl({"check", "user=a"});
  RunResult text = ctl({"status"});
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("test"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("per-user"), std::string::npos) << text.output;
  RunResult json = ctl({"status", "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_NE(json.output.find("\"node_id\": \"test\""), std::string::npos) << json.output;
  EXPECT_NE(json.output.find("\"checks\""), std::string::npos) << json.output;
}

}  // namespace
}  // namespace rlimit::testing
