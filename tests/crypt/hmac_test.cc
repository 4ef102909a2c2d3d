// HMAC-SHA256 against RFC 4231's vectors, and against OpenSSL's one-shot HMAC for keys and
// messages of every length around the block size.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <random>
#include <string>
#include <vector>

#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/sha256.h"

namespace sigilfs::crypt {
namespace {

ByteSpan Text(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string Mac(const std::vector<uint8_t>& key, std::initializer_list<ByteSpan> parts) {
  return HexEncode(HmacSha256(key).Mac(parts));
}

// RFC 4231, test cases 1, 2, 4 and 6 (the last with a key longer than the block, hashed first).
TEST(HmacSha256Test, Rfc4231Vectors) {
  EXPECT_EQ(Mac(std::vector<uint8_t>(20, 0x0b), {Text("Hi There")}),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(Mac({'J', 'e', 'f', 'e'}, {Text("what do ya want for nothing?")}),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  std::vector<uint8_t> key4;
  for (uint8_t b = 1; b <= 25; ++b) key4.push_back(b);
  const std::vector<uint8_t> data4(50, 0xcd);
  EXPECT_EQ(Mac(key4, {data4}), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  EXPECT_EQ(Mac(std::vector<uint8_t>(131, 0xaa),
                {Text("Test Using Larger Than Block-Size Key - Hash Key First")}),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

// Keys of 0 to 130 bytes, messages of 0 to 200 split anywhere: equal to OpenSSL's HMAC of the
// whole message.
TEST(HmacSha256Test, EqualsOpenSslForEveryKeyLengthAndSplit) {
  std::mt19937 rng(7);
  for (size_t key_size = 0; key_size <= 130; key_size += 13) {
    std::vector<uint8_t> key(key_size);
    for (auto& b : key) b = static_cast<uint8_t>(rng());
    const HmacSha256 hmac(key);
    for (size_t size : {0, 1, 55, 56, 63, 64, 65, 119, 128, 200}) {
      std::vector<uint8_t> msg(size);
      for (auto& b : msg) b = static_cast<uint8_t>(rng());
      uint8_t want[EVP_MAX_MD_SIZE];
      unsigned int want_size = 0;
      static const uint8_t kNothing = 0;  // OpenSSL refuses a null key, even an empty one
      ASSERT_NE(HMAC(EVP_sha256(), key.empty() ? &kNothing : key.data(),
                     static_cast<int>(key.size()), msg.data(), msg.size(), want, &want_size),
                nullptr);
      ASSERT_EQ(want_size, kSha256Size);
      const size_t cut = size / 3;
      const Sha256Digest got =
          hmac.Mac({ByteSpan(msg).first(cut), ByteSpan(msg).subspan(cut), ByteSpan()});
      EXPECT_EQ(HexEncode(got), HexEncode(ByteSpan(want, want_size)))
          << "key " << key_size << ", message " << size;
    }
  }
}

}  // namespace
}  // namespace sigilfs::crypt
