// The log formats: the JSON one must stay valid JSON, one object per line,
// whatever bytes a message carries; gRPC's and protobuf's messages reach the
// installed logger.
#include "shell/logging.h"

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <chrono>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace rlimit::shell {
namespace {

// One formatted line for `message` at `level`, at a fixed time.
std::string format_line(LogFormat format, spdlog::level::level_enum level,
                        std::string_view message) {
  // 2026-01-02T03:04:05.678Z
  const auto time = spdlog::log_clock::time_point(std::chrono::milliseconds(1767323045678));
  const spdlog::details::log_msg msg(time, spdlog::source_loc{}, "test", level,
                                     spdlog::string_view_t(message.data(), message.size()));
  spdlog::memory_buf_t out;
  make_log_formatter(format)->format(msg, out);
  return std::string(out.data(), out.size());
}

// The line parsed as one JSON object with exactly ts, level and msg, or a
// test failure.
boost::json::object parse_line(const std::string& line) {
  EXPECT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per message";
  boost::system::error_code error;
  boost::json::value value = boost::json::parse(line, error);
  EXPECT_FALSE(error) << error.message() << " in " << line;
  if (error || !value.is_object()) return {};
  boost::json::object object = value.as_object();
  EXPECT_EQ(object.size(), 3u) << line;
  EXPECT_TRUE(object.contains("ts") && object.contains("level") && object.contains("msg")) << line;
  return object;
}

std::string msg_of(const std::string& line) {
  const boost::json::object object = parse_line(line);
  const boost::json::value* msg = object.if_contains("msg");
  return msg != nullptr && msg->is_string() ? std::string(msg->as_string()) : "<no msg>";
}

TEST(LoggingTest, ParsesFormatNames) {
  EXPECT_EQ(parse_log_format("text"), LogFormat::kText);
  EXPECT_EQ(parse_log_format("json"), LogFormat::kJson);
  EXPECT_FALSE(parse_log_format("JSON"));
  EXPECT_FALSE(parse_log_format(""));
  EXPECT_FALSE(parse_log_format("logfmt"));
}

TEST(LoggingTest, JsonLineHasUtcTimestampLevelAndMessage) {
  EXPECT_EQ(format_line(LogFormat::kJson, spdlog::level::info, "listening on /run/x.sock"),
            R"({"ts":"2026-01-02T03:04:05.678Z","level":"info","msg":"listening on /run/x.sock"})"
            "\n");
}

TEST(LoggingTest, JsonLevelsUseTheConfigurationsNames) {
  const std::vector<std::pair<spdlog::level::level_enum, std::string>> levels = {
      {spdlog::level::trace, "trace"}, {spdlog::level::debug, "debug"},
      {spdlog::level::info, "info"},   {spdlog::level::warn, "warn"},
      {spdlog::level::err, "error"},   {spdlog::level::critical, "critical"}};
  for (const auto& [level, name] : levels) {
    const boost::json::object object = parse_line(format_line(LogFormat::kJson, level, "x"));
    EXPECT_EQ(object.at("level").as_string(), name);
    // Every name is one log_level accepts, so a shipper filters with the same words.
    EXPECT_TRUE(is_log_level(name)) << name;
  }
}

TEST(LoggingTest, JsonEscapesQuotesBackslashesNewlinesAndControlBytes) {
  const std::string message =
      "rule \"api\" at C:\\rules\\x.toml\nsecond line\r\n\ttab \b\f bell\a nul" +
      std::string(1, '\0') + " esc\x1b unit\x1f del\x7f end";
  const std::string line = format_line(LogFormat::kJson, spdlog::level::warn, message);
  EXPECT_EQ(msg_of(line), message);  // the parser gives back every byte
  // and the line itself holds no raw control byte.
  for (std::size_t i = 0; i + 1 < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    EXPECT_TRUE(c >= 0x20 && c != 0x7f) << "raw byte " << int(c) << " at " << i << " in " << line;
  }
  EXPECT_NE(line.find(R"(rule \"api\" at C:\\rules\\x.toml\nsecond line\r\n\ttab \b\f bell\u0007)"),
            std::string::npos)
      << line;
}

TEST(LoggingTest, JsonEveryByteAloneGivesValidJson) {
  for (int byte = 0; byte < 256; ++byte) {
    const std::string message = "<" + std::string(1, static_cast<char>(byte)) + ">";
    const std::string decoded = msg_of(format_line(LogFormat::kJson, spdlog::level::info, message));
    if (byte < 0x80) {
      EXPECT_EQ(decoded, message) << "byte " << byte;
    } else {
      EXPECT_EQ(decoded, "<\xEF\xBF\xBD>") << "byte " << byte;  // U+FFFD
    }
  }
}

TEST(LoggingTest, JsonKeepsUtf8AndReplacesWhatIsNotUtf8) {
  const std::string utf8 = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF";
  EXPECT_EQ(msg_of(format_line(LogFormat::kJson, spdlog::level::info, utf8)), utf8);

  const std::string replacement = "\xEF\xBF\xBD";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\xC3", replacement},                                      // cut short at the end
      {"\xC3(", replacement + "("},                               // bad continuation
      {"\xC0\xAF", replacement + replacement},                    // overlong '/'
      {"\xE0\x80\xAF", replacement + replacement + replacement},  // overlong, 3 bytes
      {"\xED\xA0\x80", replacement + replacement + replacement},  // a UTF-16 surrogate
      {"\xF4\x90\x80\x80",
       replacement + replacement + replacement + replacement},  // above U+10FFFF
      {"\xF5\x80", replacement + replacement},
      {"a\xFF"
       "b",
       "a" + replacement + "b"},
  };
  for (const auto& [bytes, expected] : cases) {
    EXPECT_EQ(msg_of(format_line(LogFormat::kJson, spdlog::level::info, bytes)), expected)
        << boost::json::serialize(boost::json::string(expected));
  }
}

TEST(LoggingTest, TextLineIsTimeLevelMessage) {
  const std::string line = format_line(LogFormat::kText, spdlog::level::warn, "a \"quoted\" word");
  EXPECT_TRUE(std::regex_match(
      line, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} warning a "quoted" word\n)")))
      << line;
}

// The installed logger's formatter stamps the wall clock in UTC.
TEST(LoggingTest, JsonLoggerWritesOneObjectPerLine) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = std::make_shared<spdlog::logger>("json-test", sink);
  logger->set_formatter(make_log_formatter(LogFormat::kJson));
  logger->set_level(spdlog::level::trace);
  logger->info("first {}", "\"one\"");
  logger->error("second\nline");
  std::istringstream lines(out.str());
  std::string line;
  std::vector<std::string> messages;
  while (std::getline(lines, line)) {
    const boost::json::object object = parse_line(line + "\n");
    const std::string ts(object.at("ts").as_string());
    EXPECT_TRUE(std::regex_match(ts, std::regex(R"(20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
        << ts;
    messages.emplace_back(object.at("msg").as_string());
  }
  EXPECT_EQ(messages, (std::vector<std::string>{"first \"one\"", "second\nline"}));
}

// gRPC and protobuf log through their own functions; routed, a JSON log
// carries their messages as JSON too.
TEST(LoggingTest, LibraryMessagesReachTheDefaultLogger) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = std::make_shared<spdlog::logger>("library-test", sink);
  logger->set_formatter(make_log_formatter(LogFormat::kJson));
  logger->set_level(spdlog::level::trace);
  const std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  route_library_logs();

  // As grpc_init does (the daemon's gRPC face calls it): errors only, unless
  // GRPC_VERBOSITY says otherwise.
  gpr_log_verbosity_init();
  gpr_log(__FILE__, __LINE__, GPR_LOG_SEVERITY_ERROR, "grpc says \"%s\"", "hello");
  GOOGLE_LOG(WARNING) << "protobuf says \"hi\"";

  // Both stay routed, now to the previous default logger.
  spdlog::set_default_logger(previous);

  std::istringstream lines(out.str());
  std::string grpc_line;
  std::string protobuf_line;
  ASSERT_TRUE(std::getline(lines, grpc_line)) << out.str();
  ASSERT_TRUE(std::getline(lines, protobuf_line)) << out.str();
  const boost::json::object grpc = parse_line(grpc_line + "\n");
  EXPECT_EQ(grpc.at("level").as_string(), "error");
  EXPECT_NE(std::string(grpc.at("msg").as_string()).find("grpc says \"hello\""), std::string::npos)
      << grpc_line;
  const boost::json::object protobuf = parse_line(protobuf_line + "\n");
  EXPECT_EQ(protobuf.at("level").as_string(), "debug");
  EXPECT_NE(std::string(protobuf.at("msg").as_string()).find("protobuf says \"hi\""),
            std::string::npos)
      << protobuf_line;
}

}  // namespace
}  // namespace rlimit::shell
