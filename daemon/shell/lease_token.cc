#include "shell/lease_token.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
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
  EVP_MAC* hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (hmac != nullptr) ctx_ = EVP_MAC_CTX_new(hmac);
  EVP_MAC_free(hmac);  // the context keeps its own reference
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end(),
  };
  if (ctx_ == nullptr || EVP_MAC_init(ctx_, reinterpret_cast<const unsigned char*>(secret.data()),
                                      secret.size(), params) != 1) {
    EVP_MAC_CTX_free(ctx_);
    throw std::runtime_error("OpenSSL could not set up HMAC-SHA256 for lease tokens");
  }
}

LeaseTokens::~LeaseTokens() { EVP_MAC_CTX_free(ctx_); }

LeaseTokens::LeaseTokens(LeaseTokens&& other) noexcept : ctx_(other.ctx_) { other.ctx_ = nullptr; }

void LeaseTokens::tag(std::string_view key, const unsigned char* id_be, unsigned char* out) {
  unsigned char full[EVP_MAX_MD_SIZE];
  std::size_t written = 0;
  if (EVP_MAC_init(ctx_, nullptr, 0, nullptr) != 1 ||
      EVP_MAC_update(ctx_, reinterpret_cast<const unsigned char*>(key.data()), key.size()) != 1 ||
      EVP_MAC_update(ctx_, id_be, kIdBytes) != 1 ||
      EVP_MAC_final(ctx_, full, &written, sizeof full) != 1 || written < kTagBytes) {
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
