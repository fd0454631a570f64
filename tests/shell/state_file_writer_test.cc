// The rules state file written off the event loop (shell/state_file_writer.h)
// and the rules service's applies that wait for it (shell/rules_service.h):
// the loop keeps running while a write blocks, results come back on the loop
// in the order asked, and an apply is in force only once its file is written,
// a failed write leaving the rules in force and counted.
#include "shell/state_file_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "shell/rules_service.h"

namespace rlimit::shell {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// Runs `io` until `done()` or `bound` has passed; true if done.
template <typename Done>
bool run_until(asio::io_context& io, Done done, std::chrono::milliseconds bound = 5000ms) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!done() && std::chrono::steady_clock::now() < until) {
    io.restart();
    io.run_for(10ms);
  }
  return done();
}

// A write standing in for a disk that takes its time: it returns once
// released, or after 3 s.
struct SlowDisk {
  std::atomic<bool> started{false};
  std::atomic<bool> released{false};
  std::atomic<bool> finished{false};
  std::thread::id writer_thread;
  StateFileWriter::Write write() {
    return [this](const std::string&, const std::string&) -> std::optional<std::string> {
      writer_thread = std::this_thread::get_id();
      started = true;
      const auto until = std::chrono::steady_clock::now() + 3s;
      while (!released && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(1ms);
      }
      finished = true;
      return std::nullopt;
    };
  }
};

TEST(StateFileWriterTest, TheEventLoopRunsWhileAWriteBlocks) {
  asio::io_context io;
  SlowDisk disk;
  StateFileWriter writer(io, disk.write());
  bool written = false;
  std::thread::id done_thread;
  writer.write("unused", "contents", [&](std::optional<std::string> error) {
    EXPECT_FALSE(error.has_value());
    written = true;
    done_thread = std::this_thread::get_id();
  });
  EXPECT_EQ(writer.pending(), 1u);
  // The loop's timers fire while the disk holds the write.
  asio::steady_timer timer(io, 20ms);
  bool fired = false;
  timer.async_wait([&](boost::system::error_code) { fired = true; });
  ASSERT_TRUE(run_until(io, [&] { return fired; }));
  EXPECT_TRUE(disk.started.load());
  EXPECT_FALSE(disk.finished.load()) << "the timer waited for the write";
  EXPECT_FALSE(written);
  disk.released = true;
  ASSERT_TRUE(run_until(io, [&] { return written; }));
  EXPECT_NE(disk.writer_thread, std::this_thread::get_id());
  EXPECT_EQ(done_thread, std::this_thread::get_id());
  EXPECT_EQ(writer.pending(), 0u);
}

TEST(StateFileWriterTest, ResultsComeBackInOrderWithTheirErrors) {
  asio::io_context io;
  StateFileWriter writer(io, [](const std::string& path, const std::string&) {
    return path == "b" ? std::optional<std::string>("disk full") : std::nullopt;
  });
  std::vector<std::string> order;
  for (const char* path : {"a", "b", "c"}) {
    writer.write(path, "x", [&order, path](std::optional<std::string> error) {
      order.push_back(std::string(path) + (error ? ":" + *error : ""));
    });
  }
  ASSERT_TRUE(run_until(io, [&] { return order.size() == 3; }));
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b:disk full", "c"}));
}

TEST(StateFileWriterTest, WritesTheFileAtomicallyAndReportsAMissingDirectory) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("state-file-writer-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  asio::io_context io;
  std::vector<std::optional<std::string>> results;
  {
    StateFileWriter writer(io);
    writer.write((dir / "rules.toml").string(), "first",
                 [&](std::optional<std::string> error) { results.push_back(error); });
    writer.write((dir / "rules.toml").string(), "second",
                 [&](std::optional<std::string> error) { results.push_back(error); });
    writer.write((dir / "missing" / "rules.toml").string(), "third",
                 [&](std::optional<std::string> error) { results.push_back(error); });
    ASSERT_TRUE(run_until(io, [&] { return results.size() == 3; }));
  }
  EXPECT_FALSE(results[0].has_value());
  EXPECT_FALSE(results[1].has_value());
  ASSERT_TRUE(results[2].has_value());
  EXPECT_NE(results[2]->find("cannot create a temporary file"), std::string::npos) << *results[2];
  std::ifstream file(dir / "rules.toml");
  std::stringstream contents;
  contents << file.rdbuf();
  EXPECT_EQ(contents.str(), "second");
  // Nothing left beside it.
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u);
  std::filesystem::remove_all(dir);
}

std::string rules_text(int limit) {
  return "[[rule]]\nname = \"a\"\nmatch = { u = { each = true } }\nlimit = " +
         std::to_string(limit) + "\nperiod = \"1s\"\n";
}

// The rules service with a Persist the test finishes by hand.
struct DeferredRules {
  DeferredRules()
      : rules(
            {.node_id = "n1", .state_file = "/nonexistent/only-named", .load = {}},
            [this](core::RuleSet set) {
              installed.push_back(set.rules.empty() ? 0 : set.rules[0].params.limit);
              return core::ReplaceSummary{};
            },
            counters) {
    rules.set_persist([this](std::string contents, RulesService::Persisted done) {
      persists.push_back({std::move(contents), std::move(done)});
    });
  }
  struct Persist {
    std::string contents;
    RulesService::Persisted done;
  };
  RulesCounters counters;
  std::vector<std::int64_t> installed;  // each installed set's first limit
  std::vector<Persist> persists;
  RulesService rules;
};

TEST(RulesServiceAsyncTest, AnApplyIsInForceOnlyOnceItsFileIsWritten) {
  DeferredRules d;
  std::vector<RulesService::Outcome> outcomes;
  d.rules.apply(rules_text(7), "first", [&](RulesService::Outcome o) { outcomes.push_back(o); });
  d.rules.apply(rules_text(9), "second", [&](RulesService::Outcome o) { outcomes.push_back(o); });
  // Both wait for their files; nothing is in force yet, and the second is
  // numbered after the first.
  ASSERT_EQ(d.persists.size(), 2u);
  EXPECT_TRUE(outcomes.empty());
  EXPECT_TRUE(d.installed.empty());
  EXPECT_EQ(d.rules.applies_in_progress(), 2u);
  EXPECT_EQ(d.rules.current().version.version, 0u);
  std::string error;
  const std::optional<RulesDocument> first = parse_state_file(d.persists[0].contents, error);
  const std::optional<RulesDocument> second = parse_state_file(d.persists[1].contents, error);
  ASSERT_TRUE(first && second) << error;
  EXPECT_EQ(first->version.version, 1u);
  EXPECT_EQ(second->version.version, 2u);
  // A peer's version 1 arriving meanwhile is moot: 2 is being persisted.
  bool moot = false;
  d.rules.apply_received(first->version, first->text, "peer", [&](RulesService::Outcome o) {
    moot = o.status == RulesService::Status::kOk;
  });
  EXPECT_TRUE(moot);
  EXPECT_EQ(d.persists.size(), 2u);
  // The first write fails: reported, counted, nothing installed.
  d.persists[0].done(std::string("disk full"));
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].status, RulesService::Status::kFailed);
  EXPECT_NE(outcomes[0].message.find("cannot persist them: disk full"), std::string::npos);
  EXPECT_EQ(d.counters.persist_failures, 1u);
  EXPECT_TRUE(d.installed.empty());
  EXPECT_EQ(d.rules.current().version.version, 0u);
  // The second is written: in force now.
  d.persists[1].done(std::nullopt);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[1].status, RulesService::Status::kOk);
  EXPECT_EQ(d.installed, (std::vector<std::int64_t>{9}));
  EXPECT_EQ(d.rules.current().version.version, 2u);
  EXPECT_EQ(d.rules.applies_in_progress(), 0u);
  EXPECT_EQ(d.counters.applies, 1u);
  // The answered-at-once apply refuses to pretend.
  EXPECT_EQ(d.rules.apply(rules_text(3), "sync").status, RulesService::Status::kFailed);
}

}  // namespace
}  // namespace rlimit::shell
