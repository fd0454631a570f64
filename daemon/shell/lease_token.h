// Concurrency leases as clients hold them (RuleResult.lease): the key's
// bytes, the lease id (8 bytes, big-endian) and a tag, HMAC-SHA256 of key and
// id under a secret of this daemon process, truncated to 16 bytes. A release
// needs nothing else, and only this process can make a token: a client that
// alters another's token, guesses an id or writes one for a key it knows gets
// a token whose tag does not verify, answered as a lease never issued. Tokens
// of an earlier process (its secret is gone) fail the same way; its leases
// went with it. Release stays idempotent: a replayed token names a lease that
// is released already.
//
// One per daemon, owned by the server and lent to the Dispatcher; not
// thread-safe (the HMAC context is reused across calls).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "shell/hmac.h"

namespace rlimit::shell {

class LeaseTokens {
 public:
  static constexpr std::size_t kIdBytes = 8;
  static constexpr std::size_t kTagBytes = 16;  // 128 bits: no guessing
  static constexpr std::size_t kSecretBytes = 32;

  // A new random secret from OpenSSL's generator (the kernel's entropy);
  // throws std::runtime_error if none can be had.
  static LeaseTokens with_random_secret();
  // `secret` of any length (tests use fixed ones); throws std::runtime_error
  // if OpenSSL cannot set up HMAC-SHA256.
  explicit LeaseTokens(std::string_view secret);

  // The bytes a token of a `key_bytes`-byte key takes.
  static std::size_t token_bytes(std::size_t key_bytes) { return key_bytes + kIdBytes + kTagBytes; }

  // Appends the token of lease `id` of `key` to `out`.
  void append(std::string& out, std::string_view key, std::uint64_t id);

  enum class Decoded {
    kOk,
    kMalformed,  // too short to hold a key, an id and a tag
    kForged,     // well-formed, but this process did not issue it
  };
  // Reads `token`; `key` (a view into `token`) and `id` are set when kOk.
  Decoded decode(std::string_view token, std::string_view& key, std::uint64_t& id);

 private:
  // The tag of `key` followed by the id bytes `id_be`.
  void tag(std::string_view key, const unsigned char* id_be, unsigned char* out);

  std::optional<HmacSha256> hmac_;  // always set
};

}  // namespace rlimit::shell
