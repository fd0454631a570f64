// The HTTP load target's response reader (bench/load/http_target.h): where a
// response ends in a buffer of pipelined answers, its status, and what it
// refuses rather than misread.
#include <gtest/gtest.h>

#include <string>

#include "load/http_target.h"

namespace rlimit::bench {
namespace {

using State = HttpResponseParse::State;

const std::string kAllowed =
    "HTTP/1.1 200 OK\r\nServer: rlimitd/0.1.0\r\nContent-Type: application/json\r\n"
    "content-length: 15\r\n\r\n{\"allowed\":true}";

TEST(HttpResponse, ReadsStatusAndLengthByContentLength) {
  const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
  const HttpResponseParse p = parse_http_response(ok);
  ASSERT_EQ(p.state, State::kComplete);
  EXPECT_EQ(p.status, 200u);
  EXPECT_EQ(p.length, ok.size());
  EXPECT_FALSE(p.close);
}

TEST(HttpResponse, IncompleteUntilTheWholeBodyIsThere) {
  const std::string whole = "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 5\r\n\r\nabcde";
  for (std::size_t n = 0; n < whole.size(); ++n) {
    EXPECT_EQ(parse_http_response(whole.substr(0, n)).state, State::kIncomplete) << n;
  }
  const HttpResponseParse p = parse_http_response(whole);
  ASSERT_EQ(p.state, State::kComplete);
  EXPECT_EQ(p.status, 429u);
}

TEST(HttpResponse, StopsAtTheFirstOfPipelinedAnswers) {
  const std::string two =
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
      "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n";
  const HttpResponseParse first = parse_http_response(two);
  ASSERT_EQ(first.state, State::kComplete);
  EXPECT_EQ(first.status, 200u);
  const HttpResponseParse second = parse_http_response(std::string_view(two).substr(first.length));
  ASSERT_EQ(second.state, State::kComplete);
  EXPECT_EQ(second.status, 429u);
  EXPECT_EQ(first.length + second.length, two.size());
}

TEST(HttpResponse, HeaderNamesAnyCaseAndValuesTrimmed) {
  const HttpResponseParse p = parse_http_response(kAllowed);
  ASSERT_EQ(p.state, State::kComplete);
  EXPECT_EQ(p.length, kAllowed.size() - 1);  // the body is 15 bytes; one is left over
  const std::string spaced = "HTTP/1.1 403 Forbidden\r\nCONTENT-LENGTH: \t1 \r\n\r\nx";
  ASSERT_EQ(parse_http_response(spaced).state, State::kComplete);
  EXPECT_EQ(parse_http_response(spaced).status, 403u);
}

TEST(HttpResponse, ConnectionCloseAndHttp10) {
  EXPECT_TRUE(parse_http_response("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
                                  "Content-Length: 0\r\n\r\n")
                  .close);
  EXPECT_TRUE(parse_http_response("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").close);
  EXPECT_FALSE(
      parse_http_response("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
          .close);
}

TEST(HttpResponse, BodilessStatusesNeedNoLength) {
  const HttpResponseParse p = parse_http_response("HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1");
  ASSERT_EQ(p.state, State::kComplete);
  EXPECT_EQ(p.status, 204u);
  EXPECT_EQ(p.length, 27u);
}

TEST(HttpResponse, RefusesWhatItWouldMisread) {
  for (const std::string bad : {
           std::string("SSH-2.0-OpenSSH\r\n"),
           std::string("HTTP/1.1 200 OK\r\n\r\n"),  // no length
           std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
           std::string("HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nno colon here\r\nContent-Length: 0\r\n\r\n"),
           std::string("HTTP/1.1 200OK\r\nContent-Length: 0\r\n\r\n"),
       }) {
    const HttpResponseParse p = parse_http_response(bad);
    EXPECT_EQ(p.state, State::kBad) << bad;
    EXPECT_FALSE(p.error.empty()) << bad;
  }
  // A prefix of something that is not HTTP is refused before it completes.
  EXPECT_EQ(parse_http_response("SSH").state, State::kBad);
  EXPECT_EQ(parse_http_response("HTT").state, State::kIncomplete);
}

}  // namespace
}  // namespace rlimit::bench
