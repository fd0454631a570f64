// fuzz_make_seeds <source dir> <out dir>: writes each fuzz target's seed
// corpus to <out dir>/<target>/, made the way real inputs are made: frames
// from libclient's encoders and protobuf, the payloads node 1 of a real
// two-node cluster sends node 0 (fuzz_cluster.h), HTTP and Envoy requests as
// proxies send them, and the repository's config files and scenarios.
// scripts/fuzz.sh runs it before fuzzing.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster_node.h"
#include "core/limiter.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "fuzz_cluster.h"
#include "fuzz_records.h"
#include "fuzz_rules.h"
#include "rlimit/v1/client.pb.h"
#include "shell/envelope.h"
#include "shell/redis_hash_codec.h"
#include "shell/rules_service.h"
#include "wire/check_codec.h"
#include "wire/frame.h"

namespace fs = std::filesystem;

namespace {

using rlimit::fuzz::append_record;

class Corpus {
 public:
  Corpus(fs::path dir, std::string target) : dir_(std::move(dir) / target) {
    fs::create_directories(dir_);
  }
  void add(std::string_view name, std::string_view bytes) {
    std::ofstream out(dir_ / std::string(name), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + (dir_ / std::string(name)).string());
  }

 private:
  fs::path dir_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string framed(const google::protobuf::MessageLite& message) {
  std::string out;
  rlimit::wire::append_message_frame(out, message, 1u << 20);
  return out;
}

// ---- client protocol -------------------------------------------------------

// A batch of checks as libclient writes it (the fast path's shape).
std::string check_batch(std::uint64_t id) {
  rlimit::wire::CheckRequestWriter writer;
  writer.begin(id);
  writer.begin_check();
  writer.add_descriptor("user", "alice");
  writer.add_descriptor("tier", "premium");
  writer.end_check();
  writer.begin_check();
  writer.add_descriptor("ip", "10.1.2.3");
  writer.add_descriptor("path", "/v1/abc/login");
  writer.set_cost(2);
  writer.end_check();
  writer.begin_check();
  writer.add_descriptor("api", "export");
  writer.set_mode(2);  // RESERVE
  writer.set_max_wait_us(250'000);
  writer.end_check();
  writer.begin_check();
  writer.add_descriptor("queue", "q1");
  writer.set_inline_limit("inline:q1", 5, 1000, 10);
  writer.set_mode(1);  // PEEK
  writer.end_check();
  writer.begin_check();
  writer.add_descriptor("model", "m");
  writer.add_descriptor("tenant", "t");
  writer.add_descriptor("path", "/api/search/x");
  writer.end_check();
  std::string out;
  writer.finish(out, 1u << 20);
  return out;
}

rlimit::v1::Request request_with_id(std::uint64_t id) {
  rlimit::v1::Request r;
  r.set_version(rlimit::v1::VERSION_1);
  r.set_id(id);
  return r;
}

std::vector<std::pair<std::string, std::string>> client_frames() {
  std::vector<std::pair<std::string, std::string>> frames;
  frames.emplace_back("check-batch", check_batch(1));
  {
    rlimit::v1::Request r = request_with_id(2);
    r.mutable_status();
    frames.emplace_back("status", framed(r));
  }
  {
    rlimit::v1::Request r = request_with_id(3);
    r.mutable_members();
    frames.emplace_back("members", framed(r));
  }
  {
    rlimit::v1::Request r = request_with_id(4);
    auto* reset = r.mutable_reset();
    auto* d = reset->add_descriptors();
    d->set_key("user");
    d->set_value("alice");
    frames.emplace_back("reset", framed(r));
  }
  {
    rlimit::v1::Request r = request_with_id(5);
    auto* release = r.mutable_release();
    release->add_leases(std::string(24, 'L'));
    release->set_extend(true);
    frames.emplace_back("release", framed(r));
  }
  {
    rlimit::v1::Request r = request_with_id(6);
    auto* rules = r.mutable_rules();
    rules->set_action(rlimit::v1::RulesRequest::VALIDATE);
    rules->set_text(std::string(rlimit::fuzz::kRulesText));
    rules->set_name("rules.toml");
    frames.emplace_back("rules-validate", framed(r));
    rules->set_action(rlimit::v1::RulesRequest::APPLY);
    rules->set_text(
        "[[rule]]\nname = \"per-user\"\nmatch = { user = { each = true } }\n"
        "limit = 3\nperiod = \"1s\"\n");
    frames.emplace_back("rules-apply", framed(r));
    rules->Clear();
    frames.emplace_back("rules-show", framed(r));
  }
  {
    // A check the fast decoder leaves to protobuf: two inline limits merge.
    rlimit::v1::Request r = request_with_id(7);
    auto* check = r.mutable_check()->add_checks();
    auto* d = check->add_descriptors();
    d->set_key("user");
    d->set_value("b\xc3\xa9la");  // not ASCII
    check->mutable_inline_limit()->set_key("k");
    check->mutable_inline_limit()->set_limit(3);
    check->mutable_inline_limit()->set_period_ms(60'000);
    frames.emplace_back("check-protobuf", framed(r));
  }
  return frames;
}

void response_seeds(Corpus& corpus) {
  rlimit::wire::CheckResponseWriter writer;
  writer.begin(9);
  rlimit::wire::RuleResultView rules[2];
  rules[0].name = "per-user";
  rules[0].allowed = true;
  rules[0].limit = 10;
  rules[0].period_ms = 1000;
  rules[0].burst = 20;
  rules[0].remaining = 19;
  rules[0].reset_after_us = 100'000;
  rules[0].algorithm = "token_bucket";
  rules[1].name = "export";
  rules[1].limit = 3;
  rules[1].retry_after_us = 5'000;
  rules[1].reset_after_us = -1;
  rules[1].algorithm = "concurrency";
  rules[1].lease = std::string_view("\x01\x02\x03\x04\x05\x06\x07\x08 lease tag bytes", 24);
  rules[1].over_limit = true;
  writer.add_result(true, 0, "", rules, 1);
  writer.add_result(false, 0, "", rules, 2, 3'000);
  writer.add_result(false, 2, "descriptor key \"user\" appears twice", nullptr, 0);
  std::string stream;
  writer.finish(stream);
  corpus.add("check-response", stream);
  rlimit::v1::Response error;
  error.set_id(10);
  error.mutable_error()->set_code(rlimit::v1::Error::TOO_MANY_CHECKS);
  error.mutable_error()->set_message("a batch of 2000 checks is above max_checks_per_frame 1024");
  stream += framed(error);
  corpus.add("check-then-error", stream);
  rlimit::v1::Response status;
  status.set_id(11);
  status.mutable_status()->set_node_id("node-a");
  auto* counter = status.mutable_status()->add_counters();
  counter->set_name("checks");
  counter->set_value(12345);
  corpus.add("status-response", framed(status));
}

// ---- peers -----------------------------------------------------------------

// Runs nodes 0 and 1 of the fuzz cluster for a while (node 1 serving local
// checks and a newer rule set) and keeps every payload node 1 sends node 0,
// in order: a real conversation for fuzz_peer to replay.
std::vector<std::string> node1_to_node0(int steps, bool with_rules) {
  rlimit::core::LimiterOptions limiter_options = rlimit::fuzz::fuzz_limiter_options();
  limiter_options.replicated = true;
  const rlimit::core::RuleSet rules = rlimit::fuzz::fuzz_rules();
  rlimit::core::Limiter limiter0(limiter_options, rules);
  rlimit::core::Limiter limiter1(limiter_options, rules);
  rlimit::core::ClusterNode node0(rlimit::fuzz::node_options(0), limiter0, 42);
  rlimit::core::ClusterNode node1(rlimit::fuzz::node_options(1), limiter1, 43);
  if (with_rules) {
    const std::string text(rlimit::fuzz::kRulesText);
    node1.set_rules(rlimit::core::RulesVersion{3, "n1", rlimit::shell::sha256(text)}, text);
  }
  rlimit::core::TimeUs now = rlimit::fuzz::kStartUs;
  node0.start(now);
  node1.start(now);
  std::vector<std::string> sent;
  rlimit::core::CheckOutput output;
  for (int step = 0; step < steps; ++step) {
    now += rlimit::fuzz::kPayloadIntervalUs;
    const std::string user = "u" + std::to_string(step % 5);
    const rlimit::core::Descriptor descriptors[] = {{"user", user}, {"ip", "192.0.2.7"}};
    rlimit::core::CheckInput input;
    input.descriptors = descriptors;
    limiter1.check(input, now, output);
    node0.tick(now);
    node1.tick(now);
    for (auto& packet : node1.outbox()) {
      if (packet.address == "10.0.0.1:7946") {
        sent.push_back(packet.payload);
        node0.on_payload(packet.payload, now);
      }
    }
    node1.outbox().clear();
    for (auto& packet : node0.outbox()) {
      if (packet.address == "10.0.0.2:7946") node1.on_payload(packet.payload, now);
    }
    node0.outbox().clear();
    if (auto received = node0.take_received_rules()) node0.refuse_rules(received->version);
  }
  return sent;
}

void peer_seeds(const fs::path& out) {
  Corpus peer(out, "fuzz_peer");
  Corpus mesh(out, "fuzz_mesh_framing");
  int n = 0;
  for (const auto& [steps, with_rules] : {std::pair{10, false}, {40, true}, {120, true}}) {
    const std::vector<std::string> payloads = node1_to_node0(steps, with_rules);
    std::string records, mesh_records;
    for (const std::string& payload : payloads) {
      append_record(records, payload);
      append_record(mesh_records, "\x01" + payload);
    }
    peer.add("conversation-" + std::to_string(n), records);
    mesh.add("conversation-" + std::to_string(n), mesh_records);
    // Each payload alone, for the first conversation.
    if (n == 0) {
      for (std::size_t i = 0; i < payloads.size() && i < 16; ++i) {
        std::string one;
        append_record(one, payloads[i]);
        peer.add("payload-" + std::to_string(i), one);
      }
    }
    ++n;
  }
  std::string garbage;
  append_record(garbage, "\x01hello");
  append_record(garbage, std::string("\x00\x00\x00\x05RLP1x", 9));
  append_record(garbage, std::string("\x00\xff\xff\xff\xff", 5));
  mesh.add("garbage", garbage);
}

// ---- HTTP, Envoy, config, rules -------------------------------------------

void http_seeds(Corpus& corpus) {
  const auto request = [](std::string_view method, std::string_view target, std::string_view body,
                          std::vector<std::pair<std::string_view, std::string_view>> headers) {
    std::string out;
    append_record(out, method);
    append_record(out, target);
    append_record(out, body);
    for (const auto& [name, value] : headers) {
      append_record(out, name);
      append_record(out, value);
    }
    return out;
  };
  corpus.add("get", request("GET", "/v1/check?user=alice&path=%2Fapi%2Fsearch&_cost=2&_mode=peek",
                            "", {}));
  corpus.add("nginx",
             request("GET",
                     "/v1/check?route=api&_header.ip=X-Rlimit-Ip&_optional_header.user=X-Rlimit-"
                     "User&_deny_status=403",
                     "", {{"X-Rlimit-Ip", "10.0.0.9"}, {"X-Rlimit-User", "bob"}}));
  corpus.add("traefik",
             request("GET",
                     "/v1/check?route=api&_header.ip=X-Forwarded-For&_header.method=X-"
                     "Forwarded-Method",
                     "", {{"X-Forwarded-For", "192.0.2.1"}, {"X-Forwarded-Method", "GET"}}));
  corpus.add("post-object",
             request("POST", "/v1/check",
                     R"({"descriptors": {"user": "alice", "tier": "premium"}, "cost": 3, )"
                     R"("mode": "reserve", "max_wait_ms": 200, "deny_status": 429})",
                     {{"Content-Type", "application/json"}}));
  corpus.add("post-array", request("POST", "/v1/check",
                                   R"({"descriptors": [{"key": "api", "value": "export"}, )"
                                   R"({"key": "queue", "value": "q"}], "mode": "check"})",
                                   {}));
}

void envoy_seeds(Corpus& corpus) {
  envoy::service::ratelimit::v3::RateLimitRequest request;
  request.set_domain("edge");
  auto* d = request.add_descriptors();
  auto* e = d->add_entries();
  e->set_key("remote_address");
  e->set_value("192.0.2.1");
  e = d->add_entries();
  e->set_key("user");
  e->set_value("alice");
  corpus.add("one", request.SerializeAsString());
  d = request.add_descriptors();
  e = d->add_entries();
  e->set_key("path");
  e->set_value("/api/search");
  d->mutable_limit()->set_requests_per_unit(10);
  d->mutable_limit()->set_unit(envoy::type::v3::RateLimitUnit::MINUTE);
  d->mutable_hits_addend()->set_value(2);
  request.set_hits_addend(3);
  corpus.add("override", request.SerializeAsString());
}

void config_seeds(const fs::path& source, Corpus& config, Corpus& rules_api) {
  int n = 0;
  std::vector<fs::path> files = {source / "config" / "rlimitd.toml"};
  for (const auto& entry : fs::directory_iterator(source / "simulations" / "scenarios")) {
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  }
  for (const fs::path& file : files) {
    const std::string text = read_file(file);
    config.add("config-" + file.stem().string(), std::string(1, '\0') + text);
    ++n;
  }
  const std::string rules(rlimit::fuzz::kRulesText);
  for (const char mode : {'\x01', '\x02', '\x03'}) {
    config.add(std::string("rules-") + std::to_string(int(mode)), mode + rules);
  }
  std::string put, received;
  append_record(put, "\x00");
  append_record(put, "Bearer fuzz-token");
  append_record(put, rules);
  rules_api.add("put", put);
  append_record(received, "\x01\x05");
  append_record(received, "");
  append_record(received, rules);
  append_record(received, "n1");
  rules_api.add("received", received);
  rlimit::shell::RulesDocument document{
      rlimit::core::RulesVersion{4, "n1", rlimit::shell::sha256(rules)}, rules};
  std::string state;
  append_record(state, "\x02");
  append_record(state, "");
  append_record(state, rlimit::shell::format_state_file(document));
  rules_api.add("state-file", state);
}

// What Redis answers the store: HGETALL of a key's counters, CLUSTER
// SLOTS, redirections and the small replies, in RESP2.
void redis_seeds(Corpus& corpus) {
  const auto bulk = [](std::string_view s) {
    return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
  };
  const std::string field0 = rlimit::shell::encode_field("n0", 1000);
  const std::string field1 = rlimit::shell::encode_field("node-b", 0xfffffffffffull);
  corpus.add("hgetall", "*4\r\n" + bulk(field0) + bulk("12345") + bulk(field1) +
                            bulk(rlimit::shell::encode_consumed(18446744073709551615ull)));
  corpus.add("hgetall-empty", "*0\r\n");
  corpus.add("cluster-slots", "*2\r\n*3\r\n:0\r\n:8191\r\n*3\r\n" + bulk("127.0.0.1") +
                                  ":7000\r\n" + bulk("id0") + "*4\r\n:8192\r\n:16383\r\n*2\r\n" +
                                  bulk("") + ":7001\r\n*2\r\n" + bulk("::1") + ":7002\r\n");
  corpus.add("moved", "-MOVED 3999 127.0.0.1:6381\r\n-ASK 12 [::1]:7000\r\n");
  corpus.add("small", "+OK\r\n:42\r\n$-1\r\n*-1\r\n-ERR unknown command\r\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fuzz_make_seeds <source dir> <out dir>\n";
    return 2;
  }
  const fs::path source = argv[1];
  const fs::path out = argv[2];
  try {
    Corpus dispatch(out, "fuzz_dispatch");
    Corpus codec(out, "fuzz_check_codec");
    std::string all;
    for (const auto& [name, frame] : client_frames()) {
      dispatch.add(name, frame);
      codec.add(name, frame.substr(rlimit::wire::kFrameHeaderBytes));
      all += frame;
    }
    dispatch.add("all-in-one-stream", all);
    std::string too_large = check_batch(20);
    too_large += std::string("\x00\x10\x00\x00", 4);  // a header above max_frame_bytes
    dispatch.add("then-too-large", too_large);

    Corpus client(out, "fuzz_client_frame");
    response_seeds(client);
    peer_seeds(out);
    Corpus http(out, "fuzz_http_check");
    http_seeds(http);
    Corpus envoy(out, "fuzz_envoy_mapping");
    envoy_seeds(envoy);
    Corpus config(out, "fuzz_config");
    Corpus rules_api(out, "fuzz_rules_api");
    config_seeds(source, config, rules_api);
    Corpus redis(out, "fuzz_redis_reply");
    redis_seeds(redis);
  } catch (const std::exception& e) {
    std::cerr << "fuzz_make_seeds: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
