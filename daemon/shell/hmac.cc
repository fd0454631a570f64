#include "shell/hmac.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <utility>

namespace rlimit::shell {

std::optional<HmacSha256> HmacSha256::keyed(std::string_view secret) {
  EVP_MAC* hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (hmac == nullptr) return std::nullopt;
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(hmac);
  EVP_MAC_free(hmac);  // the context keeps its own reference
  if (ctx == nullptr) return std::nullopt;
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end(),
  };
  if (EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(secret.data()), secret.size(),
                   params) != 1) {
    EVP_MAC_CTX_free(ctx);
    return std::nullopt;
  }
  return HmacSha256(ctx);
}

HmacSha256::~HmacSha256() { EVP_MAC_CTX_free(ctx_); }

HmacSha256::HmacSha256(HmacSha256&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}

HmacSha256& HmacSha256::operator=(HmacSha256&& other) noexcept {
  if (this != &other) {
    EVP_MAC_CTX_free(ctx_);
    ctx_ = std::exchange(other.ctx_, nullptr);
  }
  return *this;
}

bool HmacSha256::sign(std::initializer_list<std::string_view> parts,
                      unsigned char (&out)[kBytes]) {
  // Re-initializing with no key keeps the key set by keyed().
  if (EVP_MAC_init(ctx_, nullptr, 0, nullptr) != 1) return false;
  for (const std::string_view part : parts) {
    if (EVP_MAC_update(ctx_, reinterpret_cast<const unsigned char*>(part.data()), part.size()) !=
        1) {
      return false;
    }
  }
  std::size_t written = 0;
  return EVP_MAC_final(ctx_, out, &written, sizeof out) == 1 && written == sizeof out;
}

}  // namespace rlimit::shell
