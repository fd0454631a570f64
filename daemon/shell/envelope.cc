#include "shell/envelope.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "shell/hmac.h"

namespace rlimit::shell {

static_assert(kEnvelopeMacBytes == HmacSha256::kBytes);

// One secret with its key id and an HMAC already keyed with it.
struct Keyring::Key {
  std::string secret;
  std::uint8_t id = 0;
  std::optional<HmacSha256> hmac;

  Key() = default;
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;
  ~Key() {
    // The secret should not outlive its use in freed heap memory.
    if (!secret.empty()) OPENSSL_cleanse(secret.data(), secret.size());
  }
};

namespace {

constexpr std::size_t kMagicBytes = kEnvelopeMagic.size();
constexpr std::size_t kKeyIdOffset = kMagicBytes;
constexpr std::size_t kMacOffset = kKeyIdOffset + 1;

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  const std::size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  const std::size_t end = text.find_last_not_of(kSpace);
  return text.substr(begin, end - begin + 1);
}

// First byte of SHA-256(secret): tells receivers which secret signed without
// revealing anything useful about it.
std::optional<std::uint8_t> key_id_of(std::string_view secret) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_bytes = 0;
  if (EVP_Digest(secret.data(), secret.size(), digest, &digest_bytes, EVP_sha256(), nullptr) != 1 ||
      digest_bytes == 0) {
    return std::nullopt;
  }
  return static_cast<std::uint8_t>(digest[0]);
}

}  // namespace

const char* envelope_error_name(EnvelopeError error) {
  switch (error) {
    case EnvelopeError::kTooShort:
      return "too short";
    case EnvelopeError::kBadMagic:
      return "bad magic";
    case EnvelopeError::kUnknownKey:
      return "unknown key";
    case EnvelopeError::kBadMac:
      return "bad mac";
  }
  return "unknown";
}

KeyringLoad Keyring::parse(std::string_view text, std::string_view file_name) {
  KeyringLoad result;
  const std::string name(file_name);
  std::vector<std::unique_ptr<Key>> keys;
  std::uint32_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const std::size_t newline = text.find('\n');
    const std::string_view raw = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = name + ":" + std::to_string(line_number) + ": ";
    if (line.size() < kMinSecretBytes) {
      // Never echo the secret itself, not even a short one.
      result.error = where + "secret is " + std::to_string(line.size()) + " bytes; at least " +
                     std::to_string(kMinSecretBytes) + " are required";
      return result;
    }
    auto key = std::make_unique<Key>();
    key->secret.assign(line);
    const std::optional<std::uint8_t> id = key_id_of(line);
    key->hmac = HmacSha256::keyed(line);
    if (!id || !key->hmac) {
      result.error = where + "OpenSSL could not set up HMAC-SHA256 with this secret";
      return result;
    }
    key->id = *id;
    for (const auto& earlier : keys) {
      if (earlier->secret == key->secret) {
        result.warnings.push_back(where + "the same secret appears on an earlier line");
      }
    }
    keys.push_back(std::move(key));
  }
  if (keys.empty()) {
    result.error = name + ": no secret (one per line, at least " + std::to_string(kMinSecretBytes) +
                   " bytes; '#' starts a comment)";
    return result;
  }
  result.keyring.emplace(Keyring(std::move(keys)));
  return result;
}

KeyringLoad Keyring::load_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    KeyringLoad result;
    result.error = path + ": cannot read the secret file: " + std::strerror(errno);
    return result;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    KeyringLoad result;
    result.error = path + ": cannot read the secret file: " + std::strerror(errno);
    return result;
  }
  std::string contents = std::move(text).str();
  KeyringLoad result = parse(contents, path);
  OPENSSL_cleanse(contents.data(), contents.size());
  struct stat info {};
  if (result.keyring && ::stat(path.c_str(), &info) == 0 && (info.st_mode & 077) != 0) {
    result.warnings.push_back(path + ": the secret file is readable by group or others (mode " +
                              std::to_string((info.st_mode >> 6) & 7) +
                              std::to_string((info.st_mode >> 3) & 7) +
                              std::to_string(info.st_mode & 7) + "); chmod 600 is advised");
  }
  return result;
}

Keyring::Keyring(std::vector<std::unique_ptr<Key>> keys) : keys_(std::move(keys)) {}
Keyring::~Keyring() = default;
Keyring::Keyring(Keyring&& other) noexcept = default;
Keyring& Keyring::operator=(Keyring&& other) noexcept = default;

std::size_t Keyring::size() const { return keys_.size(); }

std::uint8_t Keyring::signing_key_id() const { return keys_.front()->id; }

bool Keyring::mac(Key& key, std::string_view payload, unsigned char (&out)[kEnvelopeMacBytes]) {
  const char id = static_cast<char>(key.id);
  return key.hmac->sign({kEnvelopeMagic, std::string_view(&id, 1), payload}, out);
}

void Keyring::seal_into(std::string_view payload, std::string& out) {
  Key& key = *keys_.front();
  unsigned char tag[kEnvelopeMacBytes];
  if (!mac(key, payload, tag)) throw std::runtime_error("HMAC-SHA256 failed (out of memory?)");
  out.reserve(out.size() + kEnvelopeOverheadBytes + payload.size());
  out.append(kEnvelopeMagic);
  out.push_back(static_cast<char>(key.id));
  out.append(reinterpret_cast<const char*>(tag), sizeof tag);
  out.append(payload);
}

std::string Keyring::seal(std::string_view payload) {
  std::string out;
  seal_into(payload, out);
  return out;
}

std::optional<std::string_view> Keyring::open(std::string_view envelope, EnvelopeError& error) {
  if (envelope.size() < kEnvelopeOverheadBytes) {
    error = EnvelopeError::kTooShort;
    return std::nullopt;
  }
  if (envelope.substr(0, kMagicBytes) != kEnvelopeMagic) {
    error = EnvelopeError::kBadMagic;
    return std::nullopt;
  }
  const auto id = static_cast<std::uint8_t>(envelope[kKeyIdOffset]);
  const std::string_view received = envelope.substr(kMacOffset, kEnvelopeMacBytes);
  const std::string_view payload = envelope.substr(kEnvelopeOverheadBytes);
  bool known = false;
  // Usually one secret has this id; ids of a rotation's secrets may collide
  // (1 in 256), and then each is tried.
  for (const auto& key : keys_) {
    if (key->id != id) continue;
    known = true;
    unsigned char expected[kEnvelopeMacBytes];
    if (!mac(*key, payload, expected)) continue;
    if (CRYPTO_memcmp(expected, received.data(), kEnvelopeMacBytes) == 0) return payload;
  }
  error = known ? EnvelopeError::kBadMac : EnvelopeError::kUnknownKey;
  return std::nullopt;
}

std::optional<std::string_view> Keyring::open(std::string_view envelope) {
  EnvelopeError ignored;
  return open(envelope, ignored);
}

}  // namespace rlimit::shell
