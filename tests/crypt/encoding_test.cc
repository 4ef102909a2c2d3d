// Hex and base64 codecs: round trips, canonical decoding, and the empty input (found by the
// fuzzers: it once passed a null buffer to libsodium).
#include "sigilfs/crypt/encoding.h"

#include <gtest/gtest.h>

namespace sigilfs::crypt {
namespace {

TEST(EncodingTest, HexRoundTripsAndRefusesBadInput) {
  const std::vector<uint8_t> bytes = {0x00, 0x01, 0xab, 0xff};
  EXPECT_EQ(HexEncode(bytes), "0001abff");
  auto back = HexDecode("0001abff");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, bytes);
  auto empty = HexDecode("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_FALSE(HexDecode("abc").ok());
  EXPECT_FALSE(HexDecode("zz").ok());
  EXPECT_FALSE(HexDecode("00 1").ok());
}

TEST(EncodingTest, Base64IsCanonicalAndHandlesEmptyInput) {
  for (auto variant : {Base64Variant::kStandard, Base64Variant::kUrlSafeUnpadded}) {
    auto empty = Base64Decode("", variant);
    ASSERT_TRUE(empty.ok());
    EXPECT_TRUE(empty->empty());
    const std::vector<uint8_t> bytes = {1, 2, 3, 4, 5};
    auto back = Base64Decode(Base64Encode(bytes, variant), variant);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, bytes);
  }
  // "AR" has non-zero padding bits: libsodium decodes it, but it is not the canonical spelling.
  EXPECT_FALSE(Base64Decode("AR", Base64Variant::kUrlSafeUnpadded).ok());
}

}  // namespace
}  // namespace sigilfs::crypt
