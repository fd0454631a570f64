#include "shell/envelope.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

namespace rlimit::shell {
namespace {

constexpr const char* kOld = "old-secret-0123456789abcdef";
constexpr const char* kNew = "new-secret-fedcba9876543210";

Keyring keyring(const std::string& text) {
  KeyringLoad loaded = Keyring::parse(text, "test.keys");
  EXPECT_TRUE(loaded.keyring.has_value()) << loaded.error;
  return std::move(*loaded.keyring);
}

std::uint8_t expected_key_id(const std::string& secret) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(secret.data()), secret.size(), digest);
  return digest[0];
}

TEST(EnvelopeTest, RoundTrip) {
  Keyring ring = keyring(kOld);
  for (const std::string& payload : {std::string(), std::string("x"), std::string(1363, 'p')}) {
    const std::string sealed = ring.seal(payload);
    ASSERT_EQ(sealed.size(), payload.size() + kEnvelopeOverheadBytes);
    EXPECT_EQ(sealed.substr(0, 4), "RLP1");
    EnvelopeError error{};
    const std::optional<std::string_view> opened = ring.open(sealed, error);
    ASSERT_TRUE(opened.has_value()) << envelope_error_name(error);
    EXPECT_EQ(*opened, payload);
  }
}

TEST(EnvelopeTest, LayoutMatchesAOneShotHmac) {
  // The MAC covers magic + key id + payload: recompute it independently,
  // several times in a row (the keyring re-initializes one context per key).
  Keyring ring = keyring(kOld);
  const std::string secret = kOld;
  for (const std::string payload : {"first", "second message", ""}) {
    const std::string sealed = ring.seal(payload);
    EXPECT_EQ(static_cast<std::uint8_t>(sealed[4]), expected_key_id(secret));
    const std::string covered = sealed.substr(0, 5) + payload;
    unsigned char mac[32];
    unsigned int mac_bytes = 0;
    HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
         reinterpret_cast<const unsigned char*>(covered.data()), covered.size(), mac, &mac_bytes);
    ASSERT_EQ(mac_bytes, 32u);
    EXPECT_EQ(sealed.substr(5, 32), std::string(reinterpret_cast<const char*>(mac), 32));
    EXPECT_EQ(sealed.substr(37), payload);
  }
}

TEST(EnvelopeTest, TamperingWithAnyByteIsRejected) {
  Keyring ring = keyring(kOld);
  const std::string sealed = ring.seal("a peer message of some length");
  for (std::size_t i = 0; i < sealed.size(); ++i) {
    for (const unsigned char flip : {0x01, 0x80}) {
      std::string tampered = sealed;
      tampered[i] = static_cast<char>(tampered[i] ^ flip);
      EnvelopeError error{};
      EXPECT_FALSE(ring.open(tampered, error).has_value()) << "byte " << i;
      if (i < 4) {
        EXPECT_EQ(error, EnvelopeError::kBadMagic) << "byte " << i;
      } else if (i == 4) {
        EXPECT_EQ(error, EnvelopeError::kUnknownKey) << "byte " << i;
      } else {
        EXPECT_EQ(error, EnvelopeError::kBadMac) << "byte " << i;
      }
    }
  }
  // Appending or dropping payload bytes breaks the MAC too.
  EXPECT_FALSE(ring.open(sealed + "x").has_value());
  EXPECT_FALSE(ring.open(sealed.substr(0, sealed.size() - 1)).has_value());
}

TEST(EnvelopeTest, RotationVerifiesEverySecretAndSignsWithTheFirst) {
  Keyring old_only = keyring(kOld);
  Keyring rotating = keyring(std::string(kNew) + "\n" + kOld + "\n");
  ASSERT_EQ(rotating.size(), 2u);
  ASSERT_NE(expected_key_id(kOld), expected_key_id(kNew)) << "pick secrets whose ids differ";

  // A node not yet rotated still reaches a rotated one...
  const std::string sealed_by_old = old_only.seal("hello");
  const std::optional<std::string_view> from_old = rotating.open(sealed_by_old);
  ASSERT_TRUE(from_old.has_value());
  EXPECT_EQ(*from_old, "hello");
  // ...which signs with the new secret, that the old node does not know yet.
  const std::string from_new = rotating.seal("hi");
  EXPECT_EQ(static_cast<std::uint8_t>(from_new[4]), expected_key_id(kNew));
  EXPECT_EQ(rotating.signing_key_id(), expected_key_id(kNew));
  EnvelopeError error{};
  EXPECT_FALSE(old_only.open(from_new, error).has_value());
  EXPECT_EQ(error, EnvelopeError::kUnknownKey);
  EXPECT_TRUE(rotating.open(from_new).has_value());
}

TEST(EnvelopeTest, WrongKeyIsRejected) {
  Keyring ours = keyring(kOld);
  Keyring theirs = keyring(kNew);
  EnvelopeError error{};
  EXPECT_FALSE(ours.open(theirs.seal("forged"), error).has_value());
  EXPECT_EQ(error, EnvelopeError::kUnknownKey);

  // Same key id claimed, different secret: the MAC decides.
  std::string forged = theirs.seal("forged");
  forged[4] = static_cast<char>(ours.signing_key_id());
  EXPECT_FALSE(ours.open(forged, error).has_value());
  EXPECT_EQ(error, EnvelopeError::kBadMac);
}

TEST(EnvelopeTest, ShortInputIsRejected) {
  Keyring ring = keyring(kOld);
  const std::string sealed = ring.seal("");
  for (std::size_t size = 0; size < kEnvelopeOverheadBytes; ++size) {
    EnvelopeError error{};
    EXPECT_FALSE(ring.open(sealed.substr(0, size), error).has_value());
    EXPECT_EQ(error, EnvelopeError::kTooShort) << size;
  }
  EXPECT_TRUE(ring.open(sealed).has_value());  // exactly the header: an empty payload
}

TEST(EnvelopeTest, SecretsWithTheSameKeyIdAreEachTried) {
  // Find two secrets whose SHA-256 starts with the same byte (birthday: a
  // few dozen tries).
  std::map<std::uint8_t, std::string> by_id;
  std::string first;
  std::string second;
  for (int i = 0; second.empty(); ++i) {
    const std::string secret = "collision-secret-" + std::to_string(i);
    auto [it, inserted] = by_id.emplace(expected_key_id(secret), secret);
    if (!inserted) {
      first = it->second;
      second = secret;
    }
  }
  Keyring both = keyring(first + "\n" + second);
  Keyring second_only = keyring(second);
  const std::string sealed = second_only.seal("collide");
  const std::optional<std::string_view> opened = both.open(sealed);  // a view into `sealed`
  ASSERT_TRUE(opened.has_value());
  EXPECT_EQ(*opened, "collide");
  EnvelopeError error{};
  EXPECT_FALSE(second_only.open(both.seal("back"), error).has_value());
  EXPECT_EQ(error, EnvelopeError::kBadMac);  // its id, but not its secret
}

TEST(KeyringTest, ParsesCommentsBlankLinesAndWhitespace) {
  const std::string text =
      std::string("# cluster secrets\n\n   ") + kNew + "  \r\n\t# old one:\n" + kOld + "\n\n";
  KeyringLoad loaded = Keyring::parse(text, "s.keys");
  ASSERT_TRUE(loaded.keyring.has_value()) << loaded.error;
  EXPECT_EQ(loaded.keyring->size(), 2u);
  EXPECT_EQ(loaded.keyring->signing_key_id(), expected_key_id(kNew));
  // The trimmed secret is the key: a file-based node and a test keyring agree.
  Keyring plain = keyring(kNew);
  EXPECT_TRUE(loaded.keyring->open(plain.seal("x")).has_value());
}

TEST(KeyringTest, ErrorsNameTheFileAndLine) {
  KeyringLoad short_secret = Keyring::parse(std::string("# c\n") + kOld + "\nshort\n", "s.keys");
  EXPECT_FALSE(short_secret.keyring.has_value());
  EXPECT_EQ(short_secret.error, "s.keys:3: secret is 5 bytes; at least 16 are required");
  EXPECT_EQ(short_secret.error.find("short"), std::string::npos) << "never echo a secret";

  KeyringLoad empty = Keyring::parse("# nothing\n\n", "s.keys");
  EXPECT_FALSE(empty.keyring.has_value());
  EXPECT_EQ(empty.error.rfind("s.keys: no secret", 0), 0u) << empty.error;

  KeyringLoad missing = Keyring::load_file("/nonexistent/dir/rlimit.keys");
  EXPECT_FALSE(missing.keyring.has_value());
  EXPECT_EQ(missing.error.rfind("/nonexistent/dir/rlimit.keys: cannot read", 0), 0u)
      << missing.error;
}

TEST(KeyringTest, LoadFileWarnsWhenOthersCanRead) {
  char path[] = "/tmp/rlimit-keys-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    std::ofstream out(path);
    out << kOld << "\n";
  }
  ::chmod(path, 0600);
  KeyringLoad tight = Keyring::load_file(path);
  ASSERT_TRUE(tight.keyring.has_value()) << tight.error;
  EXPECT_TRUE(tight.warnings.empty());

  ::chmod(path, 0644);
  KeyringLoad loose = Keyring::load_file(path);
  ASSERT_TRUE(loose.keyring.has_value()) << loose.error;
  ASSERT_EQ(loose.warnings.size(), 1u);
  EXPECT_NE(loose.warnings[0].find("644"), std::string::npos) << loose.warnings[0];
  std::remove(path);
}

TEST(KeyringTest, MovedKeyringStillWorks) {
  Keyring a = keyring(kOld);
  const std::string sealed = a.seal("m");
  Keyring b = std::move(a);
  EXPECT_TRUE(b.open(sealed).has_value());
  Keyring c = keyring(kNew);
  c = std::move(b);
  EXPECT_TRUE(c.open(sealed).has_value());
}

}  // namespace
}  // namespace rlimit::shell
