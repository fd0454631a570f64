// The authenticated envelope around every peer message (a UDP datagram in
// gossip mode, a frame's payload in mesh mode):
//
//   "RLP1" (4 bytes) | key id (1 byte) | HMAC-SHA256 (32 bytes) | payload
//
// The MAC covers magic, key id and payload (everything but itself), under a
// secret shared by the cluster. The key id is the first byte of SHA-256 of
// the signing secret, so a receiver holding several secrets (a rotation in
// progress) picks the right one without trying them all; only secrets whose
// ids collide are each tried. The envelope authenticates; it does not encrypt
// (counters and membership are not secret, forging them is the threat).
//
// A Keyring comes from the secret file: one secret per line, the first signs,
// every line verifies. Rotation: add the new secret as a second line on every
// node, then move it first, then drop the old one.
//
// No Asio, no I/O besides Keyring::load_file. A Keyring is not thread-safe
// (it reuses its MAC contexts across calls), like the event loop that uses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlimit::shell {

inline constexpr std::string_view kEnvelopeMagic = "RLP1";
inline constexpr std::size_t kEnvelopeMacBytes = 32;
inline constexpr std::size_t kEnvelopeOverheadBytes = 4 + 1 + kEnvelopeMacBytes;
static_assert(kEnvelopeOverheadBytes == 37);
// Shorter secrets are refused: an HMAC key is only as strong as its entropy.
inline constexpr std::size_t kMinSecretBytes = 16;

enum class EnvelopeError {
  kTooShort,    // fewer bytes than the envelope's header
  kBadMagic,    // not an rlimit peer envelope (or another version of it)
  kUnknownKey,  // signed with a secret this keyring does not hold
  kBadMac,      // the key id is known but the MAC does not match: forged or damaged
};
const char* envelope_error_name(EnvelopeError error);

struct KeyringLoad;

class Keyring {
 public:
  // Parses the secret file's text: one secret per line, surrounding
  // whitespace trimmed; empty lines and lines starting with '#' skipped; at
  // least one secret, each at least kMinSecretBytes long. `file_name` only
  // names the file in messages.
  static KeyringLoad parse(std::string_view text, std::string_view file_name);
  // Reads and parses `path`; warns when the file is readable by group or
  // others.
  static KeyringLoad load_file(const std::string& path);

  ~Keyring();
  Keyring(Keyring&& other) noexcept;
  Keyring& operator=(Keyring&& other) noexcept;
  Keyring(const Keyring&) = delete;
  Keyring& operator=(const Keyring&) = delete;

  // Appends the envelope of `payload`, signed with the first secret, to `out`.
  void seal_into(std::string_view payload, std::string& out);
  std::string seal(std::string_view payload);

  // The payload inside `envelope` (a view into it) if its MAC verifies under
  // one of the secrets; otherwise nullopt and `error` says why.
  std::optional<std::string_view> open(std::string_view envelope, EnvelopeError& error);
  std::optional<std::string_view> open(std::string_view envelope);

  std::size_t size() const;
  // The key id the first secret signs with (for logs; not secret).
  std::uint8_t signing_key_id() const;

 private:
  struct Key;
  explicit Keyring(std::vector<std::unique_ptr<Key>> keys);
  // The MAC of magic + key's id + payload under `key`; false if OpenSSL
  // failed (out of memory).
  static bool mac(Key& key, std::string_view payload, unsigned char (&out)[kEnvelopeMacBytes]);

  std::vector<std::unique_ptr<Key>> keys_;  // [0] signs
};

struct KeyringLoad {
  std::optional<Keyring> keyring;     // set on success
  std::string error;                  // "file:line: why", when keyring is unset
  std::vector<std::string> warnings;  // loaded, but worth a log line
};

}  // namespace rlimit::shell
