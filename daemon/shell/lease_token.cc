#include "shell/lease_token.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>

namespace rlimit::shell {

LeaseTokens LeaseTokens::with_random_secret() {
  unsigned char secret[kSecretBytes];
  if (RAND_bytes(secret, sizeof secret) != 1) {
    throw std::runtime_error("no random bytes for the lease secret (OpenSSL RAND_bytes failed)");
  }
  LeaseTokens tokens(std::string_view(reinterpret_cast<const char*>(secret), sizeof secret));
  OPENSSL_cleanse(secret, sizeof secret);
  return tokens;
}

LeaseTokens::LeaseTokens(std::string_view secret) {
  std::optional<HmacSha256> hmac = HmacSha256::keyed(secret);
  if (!hmac) throw std::runtime_error("OpenSSL could not set up HMAC-SHA256 for lease tokens");
  hmac_.emplace(std::move(*hmac));
}

void LeaseTokens::tag(std::string_view key, const unsigned char* id_be, unsigned char* out) {
  unsigned char full[HmacSha256::kBytes];
  const std::string_view id(reinterpret_cast<const char*>(id_be), kIdBytes);
  if (!hmac_->sign({key, id}, full)) {
    throw std::runtime_error("HMAC-SHA256 failed (out of memory?)");
  }
  std::copy(full, full + kTagBytes, out);
}

void LeaseTokens::append(std::string& out, std::string_view key, std::uint64_t id) {
  unsigned char id_be[kIdBytes];
  for (std::size_t i = 0; i < kIdBytes; ++i) {
    id_be[i] = static_cast<unsigned char>(id >> (8 * (kIdBytes - 1 - i)));
  }
  unsigned char tag_bytes[kTagBytes];
  tag(key, id_be, tag_bytes);
  out.append(key);
  out.append(reinterpret_cast<const char*>(id_be), kIdBytes);
  out.append(reinterpret_cast<const char*>(tag_bytes), kTagBytes);
}

LeaseTokens::Decoded LeaseTokens::decode(std::string_view token, std::string_view& key,
                                         std::uint64_t& id) {
  if (token.size() <= kIdBytes + kTagBytes) return Decoded::kMalformed;
  const std::size_t key_bytes = token.size() - kIdBytes - kTagBytes;
  const auto* id_be = reinterpret_cast<const unsigned char*>(token.data() + key_bytes);
  unsigned char expected[kTagBytes];
  tag(token.substr(0, key_bytes), id_be, expected);
  // Constant time: how much of a guess matched must not show in the timing.
  if (CRYPTO_memcmp(expected, token.data() + key_bytes + kIdBytes, kTagBytes) != 0) {
    return Decoded::kForged;
  }
  key = token.substr(0, key_bytes);
  id = 0;
  for (std::size_t i = 0; i < kIdBytes; ++i) id = (id << 8) | id_be[i];
  return Decoded::kOk;
}

}  // namespace rlimit::shell
