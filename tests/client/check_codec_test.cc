// The hand-written check codec against protobuf itself: what it writes is
// byte for byte what protobuf writes, and whatever it accepts protobuf reads
// the same way (random messages, and random damage to them).
#include "wire/check_codec.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "rlimit/v1/client.pb.h"
#include "wire/frame.h"

namespace rlimit::wire {
namespace {

std::string random_text(std::mt19937_64& rng, std::size_t max_len) {
  std::string s(rng() % (max_len + 1), ' ');
  for (char& c : s) c = static_cast<char>(rng() % 2 == 0 ? 'a' + rng() % 26 : rng() % 128);
  return s;
}

std::uint64_t random_number(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:
      return 0;
    case 1:
      return rng() % 128;
    case 2:
      return rng() % 100'000;
    default:
      return rng() >> (rng() % 64);
  }
}

v1::Request random_request(std::mt19937_64& rng) {
  v1::Request request;
  request.set_version(v1::VERSION_1);
  request.set_id(random_number(rng));
  v1::CheckRequest* body = request.mutable_check();
  const int checks = static_cast<int>(rng() % 5);
  for (int i = 0; i < checks; ++i) {
    v1::Check* check = body->add_checks();
    const int descriptors = static_cast<int>(rng() % 4);
    for (int d = 0; d < descriptors; ++d) {
      v1::Descriptor* descriptor = check->add_descriptors();
      descriptor->set_key(random_text(rng, 10));
      descriptor->set_value(random_text(rng, 300));
    }
    if (rng() % 2 == 0) check->set_cost(random_number(rng));
    if (rng() % 3 == 0) {
      v1::InlineLimit* limit = check->mutable_inline_limit();
      limit->set_key(random_text(rng, 20));
      limit->set_limit(random_number(rng));
      limit->set_period_ms(random_number(rng));
      limit->set_burst(random_number(rng));
    }
    check->set_mode(static_cast<v1::Check::Mode>(rng() % 3));
    switch (rng() % 4) {
      case 0:
        check->set_max_wait_us(-1);
        break;
      case 1:
        check->set_max_wait_us(static_cast<std::int64_t>(random_number(rng)));
        break;
      default:
        break;  // unset
    }
  }
  return request;
}

// The view says what the message says.
void expect_same(const CheckRequestView& view, const v1::Request& request) {
  EXPECT_EQ(view.version, static_cast<std::uint64_t>(request.version()));
  EXPECT_EQ(view.id, request.id());
  ASSERT_TRUE(request.has_check());
  ASSERT_EQ(view.checks.size(), static_cast<std::size_t>(request.check().checks_size()));
  for (int i = 0; i < request.check().checks_size(); ++i) {
    const v1::Check& check = request.check().checks(i);
    const CheckView& c = view.checks[static_cast<std::size_t>(i)];
    ASSERT_EQ(c.descriptor_count, static_cast<std::uint32_t>(check.descriptors_size()));
    for (int d = 0; d < check.descriptors_size(); ++d) {
      const DescriptorView& dv =
          view.descriptors[c.first_descriptor + static_cast<std::uint32_t>(d)];
      EXPECT_EQ(dv.key, check.descriptors(d).key());
      EXPECT_EQ(dv.value, check.descriptors(d).value());
    }
    EXPECT_EQ(c.has_cost, check.has_cost());
    if (check.has_cost()) {
      EXPECT_EQ(c.cost, check.cost());
    }
    EXPECT_EQ(c.has_inline_limit, check.has_inline_limit());
    if (check.has_inline_limit()) {
      EXPECT_EQ(c.inline_limit.key, check.inline_limit().key());
      EXPECT_EQ(c.inline_limit.limit, check.inline_limit().limit());
      EXPECT_EQ(c.inline_limit.period_ms, check.inline_limit().period_ms());
      EXPECT_EQ(c.inline_limit.burst, check.inline_limit().burst());
    }
    EXPECT_EQ(c.mode, static_cast<std::int32_t>(check.mode()));
    EXPECT_EQ(c.has_max_wait_us, check.has_max_wait_us());
    if (check.has_max_wait_us()) {
      EXPECT_EQ(c.max_wait_us, check.max_wait_us());
    }
  }
}

TEST(CheckCodecTest, RequestWriterWritesWhatProtobufWrites) {
  std::mt19937_64 rng(1);
  CheckRequestWriter writer;
  for (int n = 0; n < 2000; ++n) {
    const v1::Request request = random_request(rng);
    writer.begin(request.id());
    for (const v1::Check& check : request.check().checks()) {
      writer.begin_check();
      for (const v1::Descriptor& d : check.descriptors()) writer.add_descriptor(d.key(), d.value());
      if (check.has_cost()) writer.set_cost(check.cost());
      if (check.has_inline_limit()) {
        const v1::InlineLimit& l = check.inline_limit();
        writer.set_inline_limit(l.key(), l.limit(), l.period_ms(), l.burst());
      }
      writer.set_mode(check.mode());
      if (check.has_max_wait_us()) writer.set_max_wait_us(check.max_wait_us());
      writer.end_check();
    }
    std::string ours = "prefix";
    ASSERT_TRUE(writer.finish(ours, 1 << 20));
    std::string theirs = "prefix";
    ASSERT_TRUE(append_message_frame(theirs, request, 1 << 20));
    ASSERT_EQ(ours, theirs) << request.DebugString();
  }
}

TEST(CheckCodecTest, RequestWriterRespectsTheFrameBound) {
  CheckRequestWriter writer;
  writer.begin(7);
  writer.begin_check();
  writer.add_descriptor("user", std::string(100, 'x'));
  writer.end_check();
  std::string out;
  EXPECT_FALSE(writer.finish(out, 50));
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(writer.finish(out, 200));
}

TEST(CheckCodecTest, DecodesEveryCommonRequestAsProtobufDoes) {
  std::mt19937_64 rng(2);
  CheckRequestView view;
  for (int n = 0; n < 2000; ++n) {
    const v1::Request request = random_request(rng);
    const std::string payload = request.SerializeAsString();
    ASSERT_TRUE(decode_check_request(payload, view)) << request.DebugString();
    expect_same(view, request);
  }
}

TEST(CheckCodecTest, LeavesUncommonRequestsToProtobuf) {
  CheckRequestView view;
  v1::Request status;
  status.set_version(v1::VERSION_1);
  status.mutable_status();
  EXPECT_FALSE(decode_check_request(status.SerializeAsString(), view));

  v1::Request members;
  members.set_version(v1::VERSION_1);
  members.mutable_members();
  EXPECT_FALSE(decode_check_request(members.SerializeAsString(), view));

  v1::Request check;
  check.set_version(v1::VERSION_1);
  check.set_id(3);
  v1::Descriptor* d = check.mutable_check()->add_checks()->add_descriptors();
  d->set_key("user");
  d->set_value("alice");
  ASSERT_TRUE(decode_check_request(check.SerializeAsString(), view));

  v1::Request other_version = check;
  other_version.set_version(static_cast<v1::Version>(2));
  EXPECT_FALSE(decode_check_request(other_version.SerializeAsString(), view));
  EXPECT_FALSE(decode_check_request("", view));  // no body, version 0

  v1::Request utf8 = check;
  utf8.mutable_check()->mutable_checks(0)->mutable_descriptors(0)->set_value("caf\xc3\xa9");
  EXPECT_FALSE(decode_check_request(utf8.SerializeAsString(), view));

  // A mode this codec does not know (protobuf keeps it as an open enum value).
  v1::Request new_mode = check;
  new_mode.mutable_check()->mutable_checks(0)->set_mode(static_cast<v1::Check::Mode>(3));
  EXPECT_FALSE(decode_check_request(new_mode.SerializeAsString(), view));
  v1::Request reserve = check;
  reserve.mutable_check()->mutable_checks(0)->set_mode(v1::Check::RESERVE);
  reserve.mutable_check()->mutable_checks(0)->set_max_wait_us(0);
  ASSERT_TRUE(decode_check_request(reserve.SerializeAsString(), view));
  EXPECT_EQ(view.checks[0].mode, static_cast<std::int32_t>(v1::Check::RESERVE));
  EXPECT_TRUE(view.checks[0].has_max_wait_us);  // optional: present although 0
  EXPECT_EQ(view.checks[0].max_wait_us, 0);

  // Release and reset bodies are protobuf's.
  v1::Request release;
  release.set_version(v1::VERSION_1);
  release.mutable_release()->add_leases("lease");
  EXPECT_FALSE(decode_check_request(release.SerializeAsString(), view));
  v1::Request reset;
  reset.set_version(v1::VERSION_1);
  reset.mutable_reset()->add_descriptors()->set_key("user");
  EXPECT_FALSE(decode_check_request(reset.SerializeAsString(), view));

  // An unknown field (number 9, varint) after the known ones.
  EXPECT_FALSE(decode_check_request(check.SerializeAsString() + "\x48\x01", view));
  // The body twice: protobuf merges the two.
  const std::string body = check.SerializeAsString().substr(4);  // after version and id
  EXPECT_FALSE(decode_check_request(check.SerializeAsString() + body, view));
}

// Protobuf reads a tag or a length from at most five bytes (a length also
// below 2^31 - 16, its slop guard); a longer encoding of the same number is
// an error to it, so the codec must refuse it too. Found by fuzz_check_codec.
TEST(CheckCodecTest, RefusesTagsAndLengthsLongerThanProtobufReads) {
  v1::Request check;
  check.set_version(v1::VERSION_1);
  check.set_id(3);
  check.mutable_check()->add_checks()->add_descriptors()->set_key("user");
  const std::string good = check.SerializeAsString();
  ASSERT_EQ(good.substr(0, 4), std::string("\x08\x01\x10\x03", 4));  // version, id
  CheckRequestView view;
  ASSERT_TRUE(decode_check_request(good, view));

  // Each case: the same message with one varint written longer, and whether
  // protobuf still reads it.
  struct Case {
    const char* what;
    std::string payload;
    bool protobuf_reads;
  };
  const std::string rest = good.substr(4);
  const std::vector<Case> cases = {
      {"version's tag in 5 bytes", std::string("\x88\x80\x80\x80\x00\x01", 6) + good.substr(2),
       true},
      {"version's tag in 6 bytes", std::string("\x88\x80\x80\x80\x80\x00\x01", 7) + good.substr(2),
       false},
      {"id in 10 bytes (a value, not a tag or length)",
       std::string("\x08\x01\x10\x83\x80\x80\x80\x80\x80\x80\x80\x80\x00", 13) + rest, true},
      {"body's length in 5 bytes",
       std::string("\x08\x01\x10\x03\x1a", 5) +
           std::string(1, static_cast<char>(0x80 | static_cast<unsigned char>(rest[1]))) +
           std::string("\x80\x80\x80\x00", 4) + rest.substr(2),
       true},
      {"body's length in 6 bytes",
       std::string("\x08\x01\x10\x03\x1a", 5) +
           std::string(1, static_cast<char>(0x80 | static_cast<unsigned char>(rest[1]))) +
           std::string("\x80\x80\x80\x80\x00", 5) + rest.substr(2),
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    v1::Request parsed;
    ASSERT_EQ(parsed.ParseFromString(c.payload), c.protobuf_reads);  // the case is right
    EXPECT_EQ(decode_check_request(c.payload, view), c.protobuf_reads);
    if (c.protobuf_reads) expect_same(view, parsed);
  }
}

// Damaged bytes: whatever the codec accepts, protobuf reads the same way.
TEST(CheckCodecTest, AcceptsNothingProtobufReadsDifferently) {
  std::mt19937_64 rng(3);
  CheckRequestView view;
  int accepted = 0;
  for (int n = 0; n < 20'000; ++n) {
    std::string payload = random_request(rng).SerializeAsString();
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !payload.empty(); ++e) {
      const std::size_t at = rng() % payload.size();
      switch (rng() % 3) {
        case 0:
          payload[at] = static_cast<char>(rng());
          break;
        case 1:
          payload.erase(at, 1 + rng() % 4);
          break;
        default:
          payload.insert(at, 1, static_cast<char>(rng()));
          break;
      }
    }
    if (!decode_check_request(payload, view)) continue;
    ++accepted;
    v1::Request parsed;
    ASSERT_TRUE(parsed.ParseFromString(payload));
    expect_same(view, parsed);
  }
  EXPECT_GT(accepted, 100);  // the damage is not always fatal
}

v1::Response random_response(std::mt19937_64& rng) {
  v1::Response response;
  response.set_id(random_number(rng));
  v1::CheckResponse* body = response.mutable_check();
  const int results = static_cast<int>(rng() % 5);
  for (int i = 0; i < results; ++i) {
    v1::CheckResult* result = body->add_results();
    result->set_allowed(rng() % 2 == 0);
    result->set_status(static_cast<v1::CheckResult::Status>(rng() % 4));
    if (rng() % 4 == 0) result->set_error(random_text(rng, 40));
    const int rules = static_cast<int>(rng() % 4);
    for (int r = 0; r < rules; ++r) {
      v1::RuleResult* rule = result->add_rules();
      rule->set_name(random_text(rng, 20));
      rule->set_allowed(rng() % 2 == 0);
      rule->set_limit(random_number(rng));
      rule->set_period_ms(random_number(rng));
      rule->set_burst(random_number(rng));
      rule->set_remaining(random_number(rng));
      rule->set_retry_after_us(rng() % 3 == 0 ? -1
                                              : static_cast<std::int64_t>(random_number(rng) >> 1));
      rule->set_reset_after_us(static_cast<std::int64_t>(random_number(rng) >> 1));
      if (rng() % 2 == 0) rule->set_algorithm(rng() % 2 == 0 ? "gcra" : "leaky_bucket");
      if (rng() % 3 == 0) rule->set_delay_us(static_cast<std::int64_t>(random_number(rng) >> 1));
      if (rng() % 3 == 0) {
        // Any bytes: a key and a big-endian id.
        std::string lease(rng() % 40, '\0');
        for (char& c : lease) c = static_cast<char>(rng());
        rule->set_lease(lease);
      }
      rule->set_over_limit(rng() % 4 == 0);
    }
    if (rng() % 3 == 0) result->set_delay_us(static_cast<std::int64_t>(random_number(rng) >> 1));
  }
  return response;
}

RuleResultView view_of(const v1::RuleResult& r) {
  return {.name = r.name(),
          .allowed = r.allowed(),
          .limit = r.limit(),
          .period_ms = r.period_ms(),
          .burst = r.burst(),
          .remaining = r.remaining(),
          .retry_after_us = r.retry_after_us(),
          .reset_after_us = r.reset_after_us(),
          .algorithm = r.algorithm(),
          .delay_us = r.delay_us(),
          .lease = r.lease(),
          .over_limit = r.over_limit()};
}

void expect_same(const CheckResponseView& view, const v1::Response& response) {
  EXPECT_EQ(view.id, response.id());
  ASSERT_TRUE(response.has_check());
  ASSERT_EQ(view.results.size(), static_cast<std::size_t>(response.check().results_size()));
  for (int i = 0; i < response.check().results_size(); ++i) {
    const v1::CheckResult& result = response.check().results(i);
    const CheckResultView& rv = view.results[static_cast<std::size_t>(i)];
    EXPECT_EQ(rv.allowed, result.allowed());
    EXPECT_EQ(rv.status, static_cast<std::int32_t>(result.status()));
    EXPECT_EQ(rv.error, result.error());
    EXPECT_EQ(rv.delay_us, result.delay_us());
    ASSERT_EQ(rv.rule_count, static_cast<std::uint32_t>(result.rules_size()));
    for (int r = 0; r < result.rules_size(); ++r) {
      const RuleResultView& got = view.rules[rv.first_rule + static_cast<std::uint32_t>(r)];
      const RuleResultView want = view_of(result.rules(r));
      EXPECT_EQ(got.name, want.name);
      EXPECT_EQ(got.allowed, want.allowed);
      EXPECT_EQ(got.limit, want.limit);
      EXPECT_EQ(got.period_ms, want.period_ms);
      EXPECT_EQ(got.burst, want.burst);
      EXPECT_EQ(got.remaining, want.remaining);
      EXPECT_EQ(got.retry_after_us, want.retry_after_us);
      EXPECT_EQ(got.reset_after_us, want.reset_after_us);
      EXPECT_EQ(got.algorithm, want.algorithm);
      EXPECT_EQ(got.delay_us, want.delay_us);
      EXPECT_EQ(got.lease, want.lease);
      EXPECT_EQ(got.over_limit, want.over_limit);
    }
  }
}

TEST(CheckCodecTest, ResponseWriterWritesWhatProtobufWrites) {
  std::mt19937_64 rng(4);
  CheckResponseWriter writer;
  std::vector<RuleResultView> rules;
  for (int n = 0; n < 2000; ++n) {
    const v1::Response response = random_response(rng);
    writer.begin(response.id());
    for (const v1::CheckResult& result : response.check().results()) {
      rules.clear();
      for (const v1::RuleResult& r : result.rules()) rules.push_back(view_of(r));
      writer.add_result(result.allowed(), result.status(), result.error(), rules.data(),
                        rules.size(), result.delay_us());
    }
    EXPECT_EQ(writer.payload_bytes(), response.ByteSizeLong());
    std::string ours = "x";
    writer.finish(ours);
    std::string theirs = "x";
    ASSERT_TRUE(append_message_frame(theirs, response, 1 << 24));
    ASSERT_EQ(ours, theirs) << response.DebugString();
  }
}

TEST(CheckCodecTest, DecodesCheckResponsesAndLeavesTheRestToProtobuf) {
  std::mt19937_64 rng(5);
  CheckResponseView view;
  for (int n = 0; n < 2000; ++n) {
    const v1::Response response = random_response(rng);
    const std::string payload = response.SerializeAsString();  // the view points into it
    ASSERT_TRUE(decode_check_response(payload, view));
    expect_same(view, response);
  }
  v1::Response error;
  error.set_id(4);
  error.mutable_error()->set_code(v1::Error::TOO_MANY_CHECKS);
  EXPECT_FALSE(decode_check_response(error.SerializeAsString(), view));
  v1::Response status;
  status.mutable_status()->set_node_id("n");
  EXPECT_FALSE(decode_check_response(status.SerializeAsString(), view));
  EXPECT_FALSE(decode_check_response("", view));

  // The response decoder (libclient's) reads tags and lengths as protobuf
  // does too: 5 bytes at most.
  v1::Response one;
  one.set_id(9);
  one.mutable_check()->add_results()->set_allowed(true);
  const std::string good = one.SerializeAsString();
  ASSERT_EQ(good.substr(0, 2), std::string("\x08\x09", 2));  // id first
  const std::string tag_in_5 = std::string("\x88\x80\x80\x80\x00", 5) + good.substr(1);
  const std::string tag_in_6 = std::string("\x88\x80\x80\x80\x80\x00", 6) + good.substr(1);
  v1::Response parsed_5;
  ASSERT_TRUE(parsed_5.ParseFromString(tag_in_5));
  ASSERT_TRUE(decode_check_response(tag_in_5, view));
  expect_same(view, parsed_5);
  v1::Response parsed_6;
  ASSERT_FALSE(parsed_6.ParseFromString(tag_in_6));
  EXPECT_FALSE(decode_check_response(tag_in_6, view));

  int accepted = 0;
  for (int n = 0; n < 20'000; ++n) {
    std::string payload = random_response(rng).SerializeAsString();
    if (payload.empty()) continue;
    const std::size_t at = rng() % payload.size();
    if (rng() % 2 == 0) {
      payload[at] = static_cast<char>(rng());
    } else {
      payload.erase(at, 1 + rng() % 3);
    }
    if (!decode_check_response(payload, view)) continue;
    ++accepted;
    v1::Response parsed;
    ASSERT_TRUE(parsed.ParseFromString(payload));
    expect_same(view, parsed);
  }
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace rlimit::wire
