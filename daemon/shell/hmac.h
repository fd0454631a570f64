// HMAC-SHA256 keyed once (OpenSSL's EVP_MAC): each message costs a re-init
// of the keyed context, not a key schedule. What the peer envelope and the
// lease tokens sign with. Movable, not copyable; not thread-safe (the
// context is reused across calls).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string_view>

typedef struct evp_mac_ctx_st EVP_MAC_CTX;

namespace rlimit::shell {

class HmacSha256 {
 public:
  static constexpr std::size_t kBytes = 32;

  // Keyed with `secret`; nullopt if OpenSSL cannot set it up.
  static std::optional<HmacSha256> keyed(std::string_view secret);
  ~HmacSha256();
  HmacSha256(HmacSha256&& other) noexcept;
  HmacSha256& operator=(HmacSha256&& other) noexcept;
  HmacSha256(const HmacSha256&) = delete;
  HmacSha256& operator=(const HmacSha256&) = delete;

  // The tag of `parts`, one after another; false if OpenSSL fails.
  bool sign(std::initializer_list<std::string_view> parts, unsigned char (&out)[kBytes]);

 private:
  explicit HmacSha256(EVP_MAC_CTX* ctx) : ctx_(ctx) {}
  EVP_MAC_CTX* ctx_ = nullptr;
};

}  // namespace rlimit::shell
