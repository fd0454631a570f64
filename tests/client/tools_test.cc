// The tools' helpers: the JSON writer must always produce valid JSON, and the
// human formats must read well.
#include <gtest/gtest.h>

#include <string>

#include "json_writer.h"
#include "text_format.h"

namespace rlimit::tools {
namespace {

std::string escaped(std::string_view text) {
  std::string out;
  JsonWriter::escape_into(out, text);
  return out;
}

TEST(JsonWriterTest, NestedStructure) {
  JsonWriter json(0);
  json.begin_object()
      .field("name", "per-user")
      .field("allowed", true)
      .field("limit", std::uint64_t{10})
      .field("retry", std::int64_t{-1})
      .field("small", 7u);
  json.key("rules").begin_array();
  json.begin_object().field("a", 1).end_object();
  json.begin_object().end_object();
  json.end_array();
  json.key("empty").begin_array().end_array();
  json.key("nothing").null();
  json.end_object();
  EXPECT_EQ(json.str(), R"({"name":"per-user","allowed":true,"limit":10,"retry":-1,"small":7,)"
                        R"("rules":[{"a":1},{}],"empty":[],"nothing":null})");
}

TEST(JsonWriterTest, IndentsByDefault) {
  JsonWriter json;
  json.begin_object().field("a", 1);
  json.key("list").begin_array().value("x").value(false).end_array();
  json.key("none").begin_object().end_object();
  json.end_object();
  EXPECT_EQ(json.str(),
            "{\n"
            "  \"a\": 1,\n"
            "  \"list\": [\n"
            "    \"x\",\n"
            "    false\n"
            "  ],\n"
            "  \"none\": {}\n"
            "}");
}

TEST(JsonWriterTest, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(escaped("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(escaped("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(escaped(std::string("\x01\x1f\0", 3)), R"("\u0001\u001f\u0000")");
  EXPECT_EQ(escaped("/path"), R"("/path")");
}

TEST(JsonWriterTest, KeepsValidUtf8AndReplacesInvalid) {
  EXPECT_EQ(escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  EXPECT_EQ(escaped("\xff"), R"("\ufffd")");
  EXPECT_EQ(escaped("\xc3"), R"("\ufffd")");                                // truncated
  EXPECT_EQ(escaped("\xc0\xaf"), R"("\ufffd\ufffd")");                      // overlong
  EXPECT_EQ(escaped("\xed\xa0\x80"), R"("\ufffd\ufffd\ufffd")");            // a surrogate
  EXPECT_EQ(escaped("\xf4\x90\x80\x80"), R"("\ufffd\ufffd\ufffd\ufffd")");  // > U+10FFFF
}

TEST(TextFormatTest, Durations) {
  EXPECT_EQ(format_duration_us(-1), "never");
  EXPECT_EQ(format_duration_us(0), "0");
  EXPECT_EQ(format_duration_us(850), "850us");
  EXPECT_EQ(format_duration_us(1500), "1.5ms");
  EXPECT_EQ(format_duration_us(250'000), "250ms");
  EXPECT_EQ(format_duration_us(2'500'000), "2.5s");
  EXPECT_EQ(format_duration_us(90'000'000), "1m30s");
  EXPECT_EQ(format_duration_us(3'600'000'000), "1h");
  EXPECT_EQ(format_duration_us(93'600'000'000), "1d2h");
}

TEST(TextFormatTest, RatesUseTheExactLargestUnit) {
  EXPECT_EQ(format_rate(10, 1000), "10/1s");
  EXPECT_EQ(format_rate(1000, 86'400'000), "1000/1d");
  EXPECT_EQ(format_rate(5, 60'000), "5/1m");
  EXPECT_EQ(format_rate(3, 1500), "3/1500ms");
}

TEST(TextFormatTest, TableAlignsColumns) {
  TextTable table({"RULE", "N"});
  table.align_right(1);
  table.add_row({"per-user", "5"});
  table.add_row({"x", "123"});
  EXPECT_EQ(table.render(), "RULE        N\nper-user    5\nx         123\n");
}

}  // namespace
}  // namespace rlimit::tools
