// The rules state file (shell/rules_service.h): format_state_file and
// parse_state_file read back every document, whatever its origin holds.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "shell/rules_service.h"

namespace rlimit::shell {
namespace {

RulesDocument document_from(std::string origin) {
  const std::string text =
      "[[rule]]\nname = \"a\"\nmatch = { u = { each = true } }\nlimit = 1\n"
      "period = \"1s\"\n";
  return RulesDocument{core::RulesVersion{6, std::move(origin), sha256(text)}, text};
}

TEST(RulesStateFileTest, ReadsBackWhatItWrote) {
  const RulesDocument written = document_from("node-a");
  std::string error;
  const std::optional<RulesDocument> read = parse_state_file(format_state_file(written), error);
  ASSERT_TRUE(read.has_value()) << error;
  EXPECT_EQ(read->version.version, 6u);
  EXPECT_EQ(read->version.origin, "node-a");
  EXPECT_EQ(read->version.digest, written.version.digest);
  EXPECT_EQ(read->text, written.text);
}

// Found by fuzz_rules_api: a rule set received from a peer whose origin held
// a line break was persisted with the break in the header, and the file did
// not read back ("malformed rlimit rules state header"), so a restart lost it.
TEST(RulesStateFileTest, AnOriginWithLineBreaksAndBackslashesReadsBack) {
  for (const std::string& origin :
       {std::string("a\nb"), std::string("\r\n"), std::string("x\\ny"), std::string("\\"),
        std::string("tail\\"), std::string("\0\0\n[[rule]] =", 13)}) {
    const RulesDocument written = document_from(origin);
    const std::string file = format_state_file(written);
    std::string error;
    const std::optional<RulesDocument> read = parse_state_file(file, error);
    ASSERT_TRUE(read.has_value()) << error << " (origin of " << origin.size() << " bytes)";
    EXPECT_EQ(read->version.origin, origin);
    EXPECT_EQ(read->text, written.text);
    EXPECT_EQ(format_state_file(*read), file);
  }
}

// Files written before origins were escaped: a backslash not followed by n,
// r or a backslash is the origin's own.
TEST(RulesStateFileTest, AnUnescapedBackslashIsKept) {
  const RulesDocument written = document_from("plain");
  std::string file = format_state_file(written);
  const std::string plain = "# origin = plain\n";
  file.replace(file.find(plain), plain.size(), "# origin = dom\\user\n");
  std::string error;
  const std::optional<RulesDocument> read = parse_state_file(file, error);
  ASSERT_TRUE(read.has_value()) << error;
  EXPECT_EQ(read->version.origin, "dom\\user");
}

}  // namespace
}  // namespace rlimit::shell
