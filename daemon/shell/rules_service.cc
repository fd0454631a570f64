#include "shell/rules_service.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "rlimit/v1/client.pb.h"

namespace rlimit::shell {
namespace {

constexpr std::string_view kHeaderFirstLine =
    "# rlimit rules state, written by rlimitd: do not edit (rlimitctl rules apply instead)\n";

// "# key = value\n" at the front of `rest`: its value, `rest` advanced.
std::optional<std::string_view> header_value(std::string_view& rest, std::string_view key) {
  const std::string prefix = "# " + std::string(key) + " = ";
  if (rest.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::size_t end = rest.find('\n');
  if (end == std::string_view::npos) return std::nullopt;
  std::string_view value = rest.substr(prefix.size(), end - prefix.size());
  rest.remove_prefix(end + 1);
  return value;
}

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(hex.data() + i, hex.data() + i + 2, value, 16);
    if (ec != std::errc() || end != hex.data() + i + 2) return std::nullopt;
    out.push_back(static_cast<char>(value));
  }
  return out;
}

// The origin is a node id from a config file or from a peer: any bytes. In
// the header it is one line, so a line break (and the backslash that
// escapes) is written escaped: \n, \r and \\. Reading takes any other
// backslash as it is, so a file written before reads the same unless its
// origin held a backslash followed by n, r or a backslash.
std::string escape_origin(std::string_view origin) {
  std::string out;
  out.reserve(origin.size());
  for (const char c : origin) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string unescape_origin(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (text[i] == '\\' && (next == '\\' || next == 'n' || next == 'r')) {
      out.push_back(next == 'n' ? '\n' : next == 'r' ? '\r' : '\\');
      ++i;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::string errno_text(std::string_view what, const std::string& path) {
  return std::string(what) + " " + path + ": " + std::strerror(errno);
}

}  // namespace

std::string sha256(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  // EVP_Digest with SHA-256 fails only when OpenSSL itself is broken.
  if (EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    return std::string();
  }
  return std::string(reinterpret_cast<const char*>(digest), size);
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

std::string format_state_file(const RulesDocument& document) {
  std::string out(kHeaderFirstLine);
  out += "# version = " + std::to_string(document.version.version) + "\n";
  out += "# origin = " + escape_origin(document.version.origin) + "\n";
  out += "# digest = " + to_hex(document.version.digest) + "\n";
  out += document.text;
  return out;
}

std::optional<RulesDocument> parse_state_file(std::string_view contents, std::string& error) {
  std::string_view rest = contents;
  if (rest.substr(0, kHeaderFirstLine.size()) != kHeaderFirstLine) {
    error = "no rlimit rules state header";
    return std::nullopt;
  }
  rest.remove_prefix(kHeaderFirstLine.size());
  const auto version = header_value(rest, "version");
  const auto origin = header_value(rest, "origin");
  const auto digest_hex = header_value(rest, "digest");
  RulesDocument document;
  std::optional<std::string> digest;
  if (digest_hex) digest = from_hex(*digest_hex);
  if (!version || !origin || !digest ||
      std::from_chars(version->data(), version->data() + version->size(), document.version.version)
              .ec != std::errc()) {
    error = "malformed rlimit rules state header";
    return std::nullopt;
  }
  document.version.origin = unescape_origin(*origin);
  document.version.digest = std::move(*digest);
  document.text = std::string(rest);
  if (sha256(document.text) != document.version.digest) {
    error = "the rules do not match the digest in the header";
    return std::nullopt;
  }
  return document;
}

std::optional<std::string> write_file_atomically(const std::string& path,
                                                 std::string_view contents) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return errno_text("cannot create a temporary file beside", path);
  auto fail = [&](std::string_view what) {
    std::string why = errno_text(what, tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return why;
  };
  for (std::size_t done = 0; done < contents.size();) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("cannot write");
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) return fail("cannot chmod");
  if (::fsync(fd) != 0) return fail("cannot fsync");
  if (::close(fd) != 0) {
    std::string why = errno_text("cannot close", tmp);
    ::unlink(tmp.c_str());
    return why;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text("cannot rename onto", path);
    ::unlink(tmp.c_str());
    return why;
  }
  // The rename itself is durable only once the directory is synced. The
  // new file is in place now, so a failure here is not a failed write (a
  // restart would read the new rules, which the caller then installs too):
  // it is logged, and the rules may not survive a power loss.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int synced = dir_fd < 0 ? -1 : ::fsync(dir_fd);
  if (synced != 0) {
    spdlog::warn("rules: {}; {} is written but may not survive a power loss",
                 errno_text("cannot sync directory", dir), path);
  }
  if (dir_fd >= 0) ::close(dir_fd);
  return std::nullopt;
}

RulesService::RulesService(Options options, Install install, RulesCounters& counters)
    : options_(std::move(options)), install_(std::move(install)), counters_(counters) {}

void RulesService::set_config_rules(std::string text) {
  current_.version = core::RulesVersion{0, options_.node_id, sha256(text)};
  current_.text = std::move(text);
  if (changed_) changed_(current_);
}

void RulesService::load_state_file() {
  if (options_.state_file.empty()) return;
  std::ifstream file(options_.state_file, std::ios::binary);
  if (!file) {
    if (errno != ENOENT) {
      ++counters_.state_file_invalid;
      spdlog::error("rules: cannot read {}: {}; running the config file's rules",
                    options_.state_file, std::strerror(errno));
    }
    return;
  }
  std::ostringstream contents;
  contents << file.rdbuf();
  std::string error;
  std::optional<RulesDocument> document = parse_state_file(contents.str(), error);
  if (!document) {
    ++counters_.state_file_invalid;
    spdlog::error("rules: {}: {}; running the config file's rules", options_.state_file, error);
    return;
  }
  if (document->version.version == 0) return;
  config::LoadResult loaded =
      config::load_rules(document->text, options_.state_file, options_.load);
  if (!loaded.ok()) {
    ++counters_.state_file_invalid;
    for (const config::ConfigError& e : loaded.errors) spdlog::error("rules: {}", e.to_string());
    spdlog::error("rules: {} (version {}) is not valid here; running the config file's rules",
                  options_.state_file, document->version.version);
    return;
  }
  const core::RulesVersion version = document->version;
  install_(std::move(loaded.config.rules));
  current_ = std::move(*document);
  spdlog::info(
      "rules: version {} from {} (digest {}) restored from {}; it takes precedence over "
      "the config file's rules",
      version.version, version.origin, to_hex(version.digest).substr(0, 12), options_.state_file);
  if (changed_) changed_(current_);
}

RulesService::Outcome RulesService::validate(std::string_view text, std::string_view name) {
  ++counters_.validations;
  config::LoadResult loaded = config::load_rules(text, name, options_.load);
  Outcome outcome;
  if (!loaded.ok()) {
    ++counters_.applies_invalid;
    outcome.status = Status::kInvalid;
    outcome.errors = std::move(loaded.errors);
    outcome.message = "the rules document is not valid";
  }
  return outcome;
}

void RulesService::apply(std::string_view text, std::string_view name, Done done) {
  config::LoadResult loaded = config::load_rules(text, name, options_.load);
  if (!loaded.ok()) {
    ++counters_.applies_invalid;
    Outcome outcome;
    outcome.status = Status::kInvalid;
    outcome.errors = std::move(loaded.errors);
    outcome.message = "the rules document is not valid; nothing changed";
    done(std::move(outcome));
    return;
  }
  if (options_.max_text_bytes != 0 && loaded.config.rules_text.size() > options_.max_text_bytes) {
    ++counters_.applies_invalid;
    Outcome outcome;
    outcome.status = Status::kInvalid;
    outcome.message = "the rules document is " + std::to_string(loaded.config.rules_text.size()) +
                      " bytes; [cluster] max_rules_bytes is " +
                      std::to_string(options_.max_text_bytes) +
                      " (peers would refuse it); nothing changed";
    done(std::move(outcome));
    return;
  }
  // A Lamport clock: above every version this node has seen anywhere,
  // including one still being persisted here.
  std::uint64_t known = newest().version;
  if (max_version_seen_) known = std::max(known, max_version_seen_());
  RulesDocument document;
  document.text = loaded.config.rules_text;
  document.version = core::RulesVersion{known + 1, options_.node_id, sha256(document.text)};
  install(std::move(document), std::move(loaded), [this, done = std::move(done)](Outcome outcome) {
    if (outcome.status == Status::kOk) {
      ++counters_.applies;
      spdlog::info(
          "rules: applied version {} from {} here ({} kept, {} changed, {} added, {} "
          "removed)",
          current_.version.version, current_.version.origin, outcome.summary.kept,
          outcome.summary.changed, outcome.summary.added, outcome.summary.removed);
    }
    done(std::move(outcome));
  });
}

void RulesService::apply_received(const core::RulesVersion& version, std::string_view text,
                                  std::string_view from, Done done) {
  std::string name = "rules version " + std::to_string(version.version) + " from " +
                     version.origin + " (via " + std::string(from) + ")";
  Outcome outcome;
  // Overtaken meanwhile (by what is in force or being persisted): moot.
  if (!version.newer_than(newest())) return done(std::move(outcome));
  if (sha256(text) != version.digest) {
    ++counters_.received_refused;
    outcome.status = Status::kInvalid;
    outcome.message = name + ": the text does not match its digest";
    spdlog::error("rules: {}; keeping version {} from {}", outcome.message,
                  current_.version.version, current_.version.origin);
    return done(std::move(outcome));
  }
  config::LoadResult loaded = config::load_rules(text, name, options_.load);
  if (!loaded.ok()) {
    ++counters_.received_refused;
    for (const config::ConfigError& e : loaded.errors) spdlog::error("rules: {}", e.to_string());
    outcome.status = Status::kInvalid;
    outcome.errors = std::move(loaded.errors);
    outcome.message = name + " is not valid here";
    spdlog::error("rules: {}; keeping version {} from {} (this node keeps advertising it)",
                  outcome.message, current_.version.version, current_.version.origin);
    return done(std::move(outcome));
  }
  RulesDocument document{version, std::string(text)};
  install(std::move(document), std::move(loaded),
          [this, name = std::move(name), done = std::move(done)](Outcome outcome) {
            if (outcome.status == Status::kOk) {
              ++counters_.received_applied;
              spdlog::info("rules: {} applied ({} kept, {} changed, {} added, {} removed)", name,
                           outcome.summary.kept, outcome.summary.changed, outcome.summary.added,
                           outcome.summary.removed);
            }
            done(std::move(outcome));
          });
}

namespace {

// Runs an apply whose Done is called before it returns (the synchronous
// Persist).
template <typename Start>
RulesService::Outcome answered_at_once(bool synchronous, Start&& start) {
  RulesService::Outcome result;
  if (!synchronous) {
    result.status = RulesService::Status::kFailed;
    result.message =
        "rules not applied: the state file is written in the background; "
        "use the asynchronous apply";
    return result;
  }
  start([&result](RulesService::Outcome outcome) { result = std::move(outcome); });
  return result;
}

}  // namespace

RulesService::Outcome RulesService::apply(std::string_view text, std::string_view name) {
  return answered_at_once(persist_is_synchronous_,
                          [&](Done done) { apply(text, name, std::move(done)); });
}

RulesService::Outcome RulesService::apply_received(const core::RulesVersion& version,
                                                   std::string_view text, std::string_view from) {
  return answered_at_once(persist_is_synchronous_,
                          [&](Done done) { apply_received(version, text, from, std::move(done)); });
}

void RulesService::install(RulesDocument document, config::LoadResult loaded, Done done) {
  auto put_in_force = [this](RulesDocument document, core::RuleSet rules) {
    Outcome outcome;
    outcome.summary = install_(std::move(rules));
    current_ = std::move(document);
    if (changed_) changed_(current_);
    return outcome;
  };
  if (options_.state_file.empty()) {
    return done(put_in_force(std::move(document), std::move(loaded.config.rules)));
  }
  // Persisted before it is put in force: a restart never runs rules older
  // than what this node answered "applied" to. Until the file is written
  // the rules in force stay, and checks go on being answered.
  ++in_progress_;
  newest_in_progress_ = document.version;
  std::string contents = format_state_file(document);
  Persisted persisted = [this, put_in_force, document = std::move(document),
                         rules = std::move(loaded.config.rules),
                         done = std::move(done)](std::optional<std::string> failed) mutable {
    --in_progress_;
    if (failed) {
      ++counters_.persist_failures;
      Outcome outcome;
      outcome.status = Status::kFailed;
      outcome.message = "rules not applied: cannot persist them: " + *failed;
      spdlog::error("rules: {}; version {} from {} stays in force", outcome.message,
                    current_.version.version, current_.version.origin);
      return done(std::move(outcome));
    }
    // Persists finish in the order asked and each was newer than the one
    // before, so this one is newer than what is in force.
    done(put_in_force(std::move(document), std::move(rules)));
  };
  if (persist_) return persist_(std::move(contents), std::move(persisted));
  persisted(write_file_atomically(options_.state_file, contents));
}

void answer_rules_request(RulesService& rules, const v1::RulesRequest& request,
                          v1::RulesResponse& response) {
  RulesService::Outcome outcome;
  const std::string name = request.name().empty() ? "<rules>" : request.name();
  switch (request.action()) {
    case v1::RulesRequest::VALIDATE:
      outcome = rules.validate(request.text(), name);
      break;
    case v1::RulesRequest::APPLY:
      outcome = rules.apply(request.text(), name);
      break;
    default:  // SHOW, or an action from a newer client: show
      break;
  }
  fill_rules_response(rules, request, outcome, response);
}

void fill_rules_response(const RulesService& rules, const v1::RulesRequest& request,
                         const RulesService::Outcome& outcome, v1::RulesResponse& response) {
  response.Clear();
  switch (outcome.status) {
    case RulesService::Status::kOk:
      response.set_status(v1::RulesResponse::OK);
      break;
    case RulesService::Status::kInvalid:
      response.set_status(v1::RulesResponse::INVALID);
      break;
    case RulesService::Status::kFailed:
      response.set_status(v1::RulesResponse::FAILED);
      break;
  }
  const RulesDocument& current = rules.current();
  response.set_version(current.version.version);
  response.set_origin(current.version.origin);
  response.set_digest(current.version.digest);
  // Validate and apply answer with the version only: the caller has the text.
  if (request.action() != v1::RulesRequest::VALIDATE &&
      request.action() != v1::RulesRequest::APPLY) {
    response.set_text(current.text);
  }
  for (const config::ConfigError& e : outcome.errors) {
    v1::RulesError* error = response.add_errors();
    error->set_file(e.file);
    error->set_line(e.line);
    error->set_column(e.column);
    error->set_message(e.message);
  }
  response.set_message(outcome.message);
  response.set_kept(static_cast<std::uint32_t>(outcome.summary.kept));
  response.set_changed(static_cast<std::uint32_t>(outcome.summary.changed));
  response.set_added(static_cast<std::uint32_t>(outcome.summary.added));
  response.set_removed(static_cast<std::uint32_t>(outcome.summary.removed));
}

namespace {

namespace json = boost::json;

HttpAnswer json_answer(unsigned status, const json::object& body) {
  HttpAnswer answer;
  answer.status = status;
  answer.body = json::serialize(body);
  answer.body.push_back('\n');
  return answer;
}

void add_version(const RulesDocument& current, json::object& out) {
  out["version"] = current.version.version;
  out["origin"] = current.version.origin;
  out["digest"] = to_hex(current.version.digest);
}

// Constant time in the token's contents: both sides are hashed first, so
// not even their lengths leak through the comparison.
bool token_matches(std::optional<std::string_view> header, std::string_view token) {
  constexpr std::string_view kBearer = "Bearer ";
  std::string_view given;
  if (header && header->size() >= kBearer.size() &&
      std::equal(kBearer.begin(), kBearer.end(), header->begin(), [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) ==
               std::tolower(static_cast<unsigned char>(b));
      })) {
    given = header->substr(kBearer.size());
  }
  const std::string a = sha256(given);
  const std::string b = sha256(token);
  return header.has_value() && a.size() == b.size() &&
         CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

std::optional<HttpAnswer> answer_rules_http_before_apply(RulesService& rules,
                                                         RulesCounters& counters,
                                                         const HttpRequestView& request,
                                                         std::string_view token) {
  if (request.method != "GET" && request.method != "PUT") {
    HttpAnswer answer = http_error(405, "use GET to read the rules or PUT to apply a document");
    answer.headers.emplace_back("Allow", "GET, PUT");
    return answer;
  }
  if (!token.empty() && !token_matches(request.header("Authorization"), token)) {
    ++counters.http_unauthorized;
    HttpAnswer answer = http_error(401, "a valid bearer token is required");
    answer.headers.emplace_back("WWW-Authenticate", "Bearer");
    return answer;
  }
  ++counters.http_requests;
  if (request.method == "GET") {
    json::object body;
    add_version(rules.current(), body);
    body["text"] = rules.current().text;
    return json_answer(200, body);
  }
  return std::nullopt;
}

HttpAnswer answer_rules_http_applied(const RulesService& rules,
                                     const RulesService::Outcome& outcome) {
  json::object body;
  unsigned status = 200;
  switch (outcome.status) {
    case RulesService::Status::kOk:
      body["status"] = "ok";
      body["kept"] = outcome.summary.kept;
      body["changed"] = outcome.summary.changed;
      body["added"] = outcome.summary.added;
      body["removed"] = outcome.summary.removed;
      break;
    case RulesService::Status::kInvalid:
      status = 400;
      body["status"] = "invalid";
      break;
    case RulesService::Status::kFailed:
      status = 500;
      body["status"] = "failed";
      break;
  }
  add_version(rules.current(), body);
  if (!outcome.message.empty()) body["message"] = outcome.message;
  if (!outcome.errors.empty()) {
    json::array errors;
    for (const config::ConfigError& e : outcome.errors) {
      errors.push_back(json::object{{"line", e.line},
                                    {"column", e.column},
                                    {"message", e.message},
                                    {"error", e.to_string()}});
    }
    body["errors"] = std::move(errors);
  }
  return json_answer(status, body);
}

HttpAnswer answer_rules_http(RulesService& rules, RulesCounters& counters,
                             const HttpRequestView& request, std::string_view token) {
  if (std::optional<HttpAnswer> answer =
          answer_rules_http_before_apply(rules, counters, request, token)) {
    return std::move(*answer);
  }
  return answer_rules_http_applied(rules, rules.apply(request.body, "<http body>"));
}

std::optional<std::string> read_token_file(const std::string& path, std::string& error) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    error = "cannot read the rules token file " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::ostringstream contents;
  contents << file.rdbuf();
  std::string token = contents.str();
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!token.empty() && space(token.back())) token.pop_back();
  std::size_t start = 0;
  while (start < token.size() && space(token[start])) ++start;
  token.erase(0, start);
  if (token.empty()) {
    error = "the rules token file " + path + " is empty";
    return std::nullopt;
  }
  return token;
}

}  // namespace rlimit::shell
