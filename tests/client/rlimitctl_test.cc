// rlimitctl end to end against the fake daemon: exit codes and JSON output.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "../support/sanitizer_report.h"
#include "fake_server.h"

namespace rlimit {
namespace {

using testing::FakeServer;
using Action = FakeServer::Action;

struct CtlRun {
  int exit_code = -1;
  std::string out;
};

CtlRun run_ctl(const std::string& args) {
  // Tests look at the exit code and stdout; stderr goes to a temporary file
  // that is only searched for a sanitizer's report (build-asan, build-tsan).
  char err_path[] = "/tmp/rlimitctl_test_XXXXXX";
  const int fd = ::mkstemp(err_path);
  EXPECT_GE(fd, 0);
  if (fd >= 0) ::close(fd);
  const std::string command = std::string(RLIMITCTL_PATH) + " " + args + " 2>" + err_path;
  CtlRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe != nullptr) {
    std::array<char, 4096> chunk;
    std::size_t n;
    while ((n = std::fread(chunk.data(), 1, chunk.size(), pipe)) > 0) {
      run.out.append(chunk.data(), n);
    }
    const int status = ::pclose(pipe);
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::ostringstream err;
  err << std::ifstream(err_path).rdbuf();
  ::unlink(err_path);
  const std::string err_text = err.str();
  EXPECT_TRUE(testing::sanitizer_report(err_text).empty())
      << "rlimitctl " << args << " reported:\n" << err_text;
  return run;
}

// A strict recursive-descent JSON checker (RFC 8259 grammar; strings must not
// hold raw control characters).
class JsonChecker {
 public:
  static bool valid(std::string_view text) {
    JsonChecker c(text);
    c.ws();
    if (!c.value()) return false;
    c.ws();
    return c.i_ == c.s_.size();
  }

 private:
  explicit JsonChecker(std::string_view s) : s_(s) {}
  bool eat(char ch) {
    if (i_ < s_.size() && s_[i_] == ch) {
      ++i_;
      return true;
    }
    return false;
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  bool string() {
    if (!eat('"')) return false;
    while (i_ < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c == '\\') {
        if (i_ >= s_.size()) return false;
        const char e = s_[i_++];
        if (e == 'u') {
          for (int k = 0; k < 4; ++k) {
            if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_++])))
              return false;
          }
        } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
          return false;
        }
      }
    }
    return false;
  }
  bool number() {
    const std::size_t start = i_;
    eat('-');
    if (eat('0')) {
    } else {
      if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) return false;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    if (eat('.')) {
      if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) return false;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    return i_ > start;
  }
  bool value() {
    ws();
    if (i_ >= s_.size()) return false;
    switch (s_[i_]) {
      case '{': {
        ++i_;
        ws();
        if (eat('}')) return true;
        do {
          ws();
          if (!string()) return false;
          ws();
          if (!eat(':') || !value()) return false;
          ws();
        } while (eat(','));
        return eat('}');
      }
      case '[': {
        ++i_;
        ws();
        if (eat(']')) return true;
        do {
          if (!value()) return false;
          ws();
        } while (eat(','));
        return eat(']');
      }
      case '"':
        return string();
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      default:
        return number();
    }
  }
  std::string_view s_;
  std::size_t i_ = 0;
};

TEST(JsonCheckerTest, SanityOfTheChecker) {
  EXPECT_TRUE(JsonChecker::valid(R"({"a":[1,-2,0.5,true,null,"x\n"]})"));
  EXPECT_FALSE(JsonChecker::valid(R"({"a":1,})"));
  EXPECT_FALSE(JsonChecker::valid("\"raw\ncontrol\""));
}

FakeServer::Handler decide(bool allowed) {
  return [allowed](const v1::Request& request, v1::Response& response) {
    if (request.has_status()) {
      v1::StatusResponse* s = response.mutable_status();
      s->set_node_id("node \"one\"\n");
      s->set_version("0.1.0");
      s->set_uptime_ms(3'723'000);
      s->set_config_source("/etc/rlimitd.toml");
      s->set_keys(3);
      s->set_max_keys(100);
      v1::RuleInfo* rule = s->add_rules();
      rule->set_name("per-user");
      rule->set_algorithm("token_bucket");
      rule->set_limit(10);
      rule->set_period_ms(1000);
      rule->set_burst(20);
      rule->set_match("user=* (each)\x01\t");
      s->add_counters()->set_name("checks");
      return Action::kReply;
    }
    v1::CheckResult* result = response.mutable_check()->add_results();
    result->set_allowed(allowed);
    v1::RuleResult* rule = result->add_rules();
    rule->set_name("per-user");
    rule->set_allowed(allowed);
    rule->set_limit(10);
    rule->set_period_ms(1000);
    rule->set_burst(20);
    rule->set_remaining(allowed ? 19 : 0);
    rule->set_retry_after_us(allowed ? 0 : 100'000);
    rule->set_reset_after_us(2'000'000);
    return Action::kReply;
  };
}

TEST(RlimitctlTest, AllowedExitsZero) {
  FakeServer server(decide(true));
  const CtlRun run = run_ctl("--socket " + server.socket_path() + " check user=alice");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("allowed"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("10/1s"), std::string::npos) << run.out;
}

TEST(RlimitctlTest, DeniedExitsOneWithValidJson) {
  FakeServer server(decide(false));
  const CtlRun run =
      run_ctl("check --socket " + server.socket_path() + " user=alice path=/a=b --cost 3 --json");
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_TRUE(JsonChecker::valid(run.out)) << run.out;
  EXPECT_NE(run.out.find(R"("allowed": false)"), std::string::npos) << run.out;
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  const v1::Check& check = requests[0].check().checks(0);
  EXPECT_EQ(check.cost(), 3u);
  ASSERT_EQ(check.descriptors_size(), 2);
  EXPECT_EQ(check.descriptors(1).value(), "/a=b");
}

TEST(RlimitctlTest, MalformedDescriptorIsAUsageError) {
  FakeServer server(decide(true));
  EXPECT_EQ(run_ctl("--socket " + server.socket_path() + " check useralice").exit_code, 2);
  EXPECT_EQ(run_ctl("--socket " + server.socket_path() + " check =alice").exit_code, 2);
  EXPECT_EQ(run_ctl("--socket " + server.socket_path() + " frobnicate").exit_code, 2);
  EXPECT_EQ(server.frames(), 0u);
}

TEST(RlimitctlTest, UnavailableDaemonExitsThree) {
  FakeServer server;
  const CtlRun run = run_ctl("--timeout-ms 100 --socket " + server.missing_socket_path() +
                             " check user=alice --json");
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_TRUE(JsonChecker::valid(run.out)) << run.out;
  EXPECT_NE(run.out.find("unavailable"), std::string::npos) << run.out;
  EXPECT_EQ(run_ctl("--socket " + server.missing_socket_path() + " status").exit_code, 3);
}

TEST(RlimitctlTest, StatusTextAndJson) {
  FakeServer server(decide(true));
  const CtlRun text = run_ctl("--socket " + server.socket_path() + " status");
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("per-user"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("1h2m"), std::string::npos) << text.out;
  const CtlRun json = run_ctl("--socket " + server.socket_path() + " status --json");
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_TRUE(JsonChecker::valid(json.out)) << json.out;
  EXPECT_NE(json.out.find(R"("max_keys": 100)"), std::string::npos) << json.out;
}

// A gossip cluster of three as node-a sees it.
Action cluster_of_three(const v1::Request& request, v1::Response& response) {
  if (!request.has_members()) return FakeServer::allow_all(request, response);
  v1::MembersResponse* m = response.mutable_members();
  m->set_cluster("prod");
  m->set_mode("gossip");
  auto add = [&](const char* node, const char* address, const char* state,
                 std::uint64_t incarnation, std::uint64_t seq, std::int64_t heard, bool self) {
    v1::MemberInfo* member = m->add_members();
    member->set_node_id(node);
    member->set_address(address);
    member->set_state(state);
    member->set_incarnation(incarnation);
    member->set_seq(seq);
    member->set_last_heard_ms_ago(heard);
    member->set_self(self);
  };
  add("node-a", "10.0.0.1:7946", "alive", 3, 41, 0, true);
  add("node-b\t\"quoted\"", "[fd00::2]:7946", "suspect", 7, 1099511627776, 1500, false);
  add("node-c", "node-c.internal:7946", "alive", 0, 0, -1, false);
  return Action::kReply;
}

TEST(RlimitctlTest, MembersTable) {
  FakeServer server(cluster_of_three);
  const CtlRun run = run_ctl("--socket " + server.socket_path() + " members");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  for (std::string_view needle : {"prod", "gossip", "NODE", "ADDRESS", "STATE", "INCARNATION",
                                  "SEQ", "LAST HEARD", "node-a (self)", "10.0.0.1:7946", "suspect",
                                  "[fd00::2]:7946", "1099511627776", "1.5s ago", "never"}) {
    EXPECT_NE(run.out.find(needle), std::string::npos) << needle << "\n" << run.out;
  }
  // Only the answering node is marked.
  EXPECT_EQ(run.out.find("(self)"), run.out.rfind("(self)")) << run.out;
  EXPECT_EQ(run.out.find("node-b\t\"quoted\" (self)"), std::string::npos) << run.out;
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_TRUE(requests[0].has_members());
}

TEST(RlimitctlTest, MembersJsonCarriesEveryField) {
  FakeServer server(cluster_of_three);
  const CtlRun run = run_ctl("members --json --socket " + server.socket_path());
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(JsonChecker::valid(run.out)) << run.out;
  for (std::string_view needle : {
           R"("cluster": "prod")",
           R"("mode": "gossip")",
           R"("members": [)",
           R"("node_id": "node-a")",
           R"("address": "10.0.0.1:7946")",
           R"("state": "alive")",
           R"("incarnation": 3)",
           R"("seq": 41)",
           R"("last_heard_ms_ago": 0)",
           R"("self": true)",
           R"("node_id": "node-b\t\"quoted\"")",
           R"("seq": 1099511627776)",
           R"("last_heard_ms_ago": 1500)",
           R"("self": false)",
           R"("last_heard_ms_ago": -1)",
       }) {
    EXPECT_NE(run.out.find(needle), std::string::npos) << needle << "\n" << run.out;
  }
}

TEST(RlimitctlTest, MembersOfASingleNode) {
  FakeServer server;  // allow_all: mode none, no members
  const CtlRun text = run_ctl("--socket " + server.socket_path() + " members");
  EXPECT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find("none"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("NODE"), std::string::npos) << text.out;
  const CtlRun json = run_ctl("--socket " + server.socket_path() + " members --json");
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_TRUE(JsonChecker::valid(json.out)) << json.out;
  EXPECT_NE(json.out.find(R"("members": [])"), std::string::npos) << json.out;
}

TEST(RlimitctlTest, MembersUnavailableOrRefusedExitsThree) {
  FakeServer server;
  const CtlRun missing =
      run_ctl("--timeout-ms 100 --socket " + server.missing_socket_path() + " members --json");
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_EQ(missing.out, "");  // nothing on stdout that could be mistaken for an answer

  // A daemon that does not know the request.
  server.set_handler([](const v1::Request&, v1::Response& response) {
    response.mutable_error()->set_code(v1::Error::UNKNOWN_MESSAGE_TYPE);
    return Action::kReply;
  });
  EXPECT_EQ(run_ctl("--socket " + server.socket_path() + " members").exit_code, 3);
  EXPECT_EQ(run_ctl("--socket " + server.socket_path() + " members --bogus").exit_code, 2);
}

}  // namespace
}  // namespace rlimit
