// Tests of the cipher-file format: header codec, size arithmetic, unit sealing and binding.
#include "sigilfs/core/format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sigilfs/crypt/random.h"
#include "test_support/param_names.h"

namespace sigilfs::core {
namespace {

using crypt::AeadAlgorithm;

FileNonce RandomNonce() {
  FileNonce n;
  crypt::RandomBytes(n);
  return n;
}

TEST(FileHeaderTest, RoundTripsAndIsExactlyLaidOut) {
  FileHeader h;
  h.flags = kFileFlagSealed;
  for (size_t i = 0; i < h.nonce.size(); ++i) h.nonce[i] = static_cast<uint8_t>(0xa0 + i);
  std::array<uint8_t, kFileHeaderSize> buf;
  EncodeFileHeader(h, buf);
  const std::array<uint8_t, 16> expect_prefix = {'S', 'I', 'G', 'I', 'L', 'F', 'S', 0,
                                                 1,   0,   1,   0,   0,   0,   0,   0};
  EXPECT_TRUE(std::equal(expect_prefix.begin(), expect_prefix.end(), buf.begin()));
  EXPECT_EQ(buf[16], 0xa0);
  EXPECT_EQ(buf[31], 0xaf);
  auto d = DecodeFileHeader(buf);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->version, 1);
  EXPECT_EQ(d->flags, kFileFlagSealed);
  EXPECT_EQ(d->nonce, h.nonce);
}

TEST(FileHeaderTest, RejectsDamage) {
  std::array<uint8_t, kFileHeaderSize> good;
  EncodeFileHeader(FileHeader{}, good);

  EXPECT_EQ(DecodeFileHeader(ByteSpan(good).first(31)).status().code(), Code::kCorrupt);
  auto bad = good;
  bad[0] ^= 1;
  EXPECT_EQ(DecodeFileHeader(bad).status().code(), Code::kCorrupt);
  bad = good;
  bad[8] = 2;  // version 2
  auto r = DecodeFileHeader(bad);
  EXPECT_EQ(r.status().code(), Code::kNotSupported);
  EXPECT_NE(r.status().message().find("version 2"), std::string::npos);
  bad = good;
  bad[11] = 0x80;  // unknown flag
  EXPECT_EQ(DecodeFileHeader(bad).status().code(), Code::kNotSupported);
  bad = good;
  bad[10] = kFileFlagPinned;  // pins belong to a sealed file only
  EXPECT_EQ(DecodeFileHeader(bad).status().code(), Code::kCorrupt);
  bad[10] = kFileFlagsSeal;
  EXPECT_TRUE(DecodeFileHeader(bad).ok());
  bad = good;
  bad[13] = 1;  // reserved
  EXPECT_EQ(DecodeFileHeader(bad).status().code(), Code::kCorrupt);
}

TEST(PageGeometryTest, SizesRoundTripForBothCiphers) {
  for (size_t nonce : {size_t{12}, size_t{24}}) {
    PageGeometry g(nonce);
    EXPECT_EQ(g.unit_size(), 4096 + nonce + 16);
    EXPECT_EQ(g.CipherSize(0), 0u);
    EXPECT_EQ(g.CipherSize(1), 32 + 1 + nonce + 16);
    EXPECT_EQ(g.CipherSize(4096), 32 + g.unit_size());
    EXPECT_EQ(g.CipherSize(4097), 32 + g.unit_size() + 1 + nonce + 16);
    for (uint64_t size : {0ull, 1ull, 4095ull, 4096ull, 4097ull, 8192ull, 123456789ull}) {
      auto back = g.PlainSize(g.CipherSize(size));
      ASSERT_TRUE(back.ok());
      EXPECT_EQ(*back, size);
    }
    EXPECT_EQ(*g.PlainSize(kFileHeaderSize), 0u);  // header written, no data yet
    // A torn header.
    EXPECT_EQ(g.PlainSize(10).status().code(), Code::kCorrupt);
    EXPECT_FALSE(g.TornTail(10));
    // A last unit with no room for a byte after nonce and tag comes from no size: a torn tail,
    // one byte of a last page that cannot be opened.
    for (uint64_t rest : {uint64_t{1}, uint64_t{8}, uint64_t{nonce + 16}}) {
      EXPECT_TRUE(g.TornTail(32 + g.unit_size() + rest));
      EXPECT_EQ(*g.PlainSize(32 + g.unit_size() + rest), 4096u + 1);
      EXPECT_EQ(*g.PlainSize(32 + rest), 1u);
    }
    EXPECT_FALSE(g.TornTail(32 + g.unit_size() + nonce + 17));
    EXPECT_EQ(*g.PlainSize(32 + g.unit_size() + nonce + 17), 4096u + 1);
    EXPECT_FALSE(g.TornTail(32 + g.unit_size()));
    EXPECT_FALSE(g.TornTail(32));
  }
  EXPECT_EQ(PageGeometry::PageCount(0), 0u);
  EXPECT_EQ(PageGeometry::PageCount(1), 1u);
  EXPECT_EQ(PageGeometry::PageCount(4096), 1u);
  EXPECT_EQ(PageGeometry::PageCount(4097), 2u);
}

TEST(UnitAssociatedDataTest, IsExactlyLaidOut) {
  FileNonce n{};
  n[0] = 0x11;
  n[15] = 0x22;
  auto ad = UnitAssociatedData(n, 0x0102030405060708ull, UnitKind::kTreeBlock, true);
  ASSERT_EQ(ad.size(), 26u);
  EXPECT_EQ(ad[0], 0x11);
  EXPECT_EQ(ad[15], 0x22);
  EXPECT_EQ(ad[16], 0x08);  // little-endian index
  EXPECT_EQ(ad[23], 0x01);
  EXPECT_EQ(ad[24], 2);  // kind
  EXPECT_EQ(ad[25], 1);  // last
}

class UnitCodecTest : public ::testing::TestWithParam<AeadAlgorithm> {
 protected:
  void SetUp() override {
    std::array<uint8_t, 32> key;
    crypt::RandomBytes(key);
    aead_ = std::move(crypt::Aead::Create(GetParam(), key)).value();
  }
  std::unique_ptr<crypt::Aead> aead_;
};

TEST_P(UnitCodecTest, SealOpenRoundTripAndBindings) {
  const FileNonce nonce = RandomNonce();
  UnitCodec codec(*aead_, nonce);
  std::vector<uint8_t> page(kPageSize);
  crypt::RandomBytes(page);
  std::vector<uint8_t> unit(page.size() + codec.geometry().overhead());
  ASSERT_TRUE(codec.Seal(7, UnitKind::kDataPage, false, page, unit).ok());
  std::vector<uint8_t> out(page.size());
  ASSERT_TRUE(codec.Open(7, UnitKind::kDataPage, false, unit, out).ok());
  EXPECT_EQ(out, page);

  // Each bound field, changed, fails authentication.
  EXPECT_EQ(codec.Open(8, UnitKind::kDataPage, false, unit, out).code(), Code::kAuthFailed);
  EXPECT_EQ(codec.Open(7, UnitKind::kTreeBlock, false, unit, out).code(), Code::kAuthFailed);
  EXPECT_EQ(codec.Open(7, UnitKind::kDataPage, true, unit, out).code(), Code::kAuthFailed);
  UnitCodec other_file(*aead_, RandomNonce());
  EXPECT_EQ(other_file.Open(7, UnitKind::kDataPage, false, unit, out).code(), Code::kAuthFailed);

  // Two seals of the same page differ (fresh nonce each time).
  std::vector<uint8_t> unit2(unit.size());
  ASSERT_TRUE(codec.Seal(7, UnitKind::kDataPage, false, page, unit2).ok());
  EXPECT_NE(unit, unit2);
}

TEST_P(UnitCodecTest, ShortTailPage) {
  UnitCodec codec(*aead_, RandomNonce());
  std::vector<uint8_t> tail = {1, 2, 3};
  std::vector<uint8_t> unit(tail.size() + codec.geometry().overhead());
  ASSERT_TRUE(codec.Seal(0, UnitKind::kDataPage, true, tail, unit).ok());
  std::vector<uint8_t> out(3);
  ASSERT_TRUE(codec.Open(0, UnitKind::kDataPage, true, unit, out).ok());
  EXPECT_EQ(out, tail);
  std::vector<uint8_t> wrong(unit.size() + 1);
  EXPECT_EQ(codec.Seal(0, UnitKind::kDataPage, true, tail, wrong).code(), Code::kInvalidArgument);
}

// A unit sealed under a given nonce is the same bytes each time, and opens as any other unit;
// the nonce is not all the binding: moved, it still fails.
TEST_P(UnitCodecTest, SealUnderAGivenNonceIsRepeatableAndOpensAsUsual) {
  UnitCodec codec(*aead_, RandomNonce());
  std::vector<uint8_t> page(1000);
  crypt::RandomBytes(page);
  std::vector<uint8_t> nonce(codec.geometry().nonce_size(), 0x5a);
  std::vector<uint8_t> a(page.size() + codec.geometry().overhead()), b(a.size());
  ASSERT_TRUE(codec.SealUnder(nonce, 3, UnitKind::kDataPage, true, page, a).ok());
  ASSERT_TRUE(codec.SealUnder(nonce, 3, UnitKind::kDataPage, true, page, b).ok());
  EXPECT_EQ(a, b);
  EXPECT_TRUE(std::equal(nonce.begin(), nonce.end(), a.begin()));
  std::vector<uint8_t> out(page.size());
  ASSERT_TRUE(codec.Open(3, UnitKind::kDataPage, true, a, out).ok());
  EXPECT_EQ(out, page);
  EXPECT_EQ(codec.Open(4, UnitKind::kDataPage, true, a, out).code(), Code::kAuthFailed);
  EXPECT_EQ(codec.Open(3, UnitKind::kDataPage, false, a, out).code(), Code::kAuthFailed);
  nonce.pop_back();
  EXPECT_EQ(codec.SealUnder(nonce, 3, UnitKind::kDataPage, true, page, a).code(),
            Code::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Ciphers, UnitCodecTest,
                         ::testing::Values(AeadAlgorithm::kAes256Gcm,
                                           AeadAlgorithm::kXChaCha20Poly1305),
                         [](const auto& info) { return crypt::AeadName(info.param); });

TEST(IsAllZeroTest, FindsAnyNonZeroByte) {
  std::vector<uint8_t> buf(4124, 0);
  EXPECT_TRUE(IsAllZero(buf));
  EXPECT_TRUE(IsAllZero({}));
  // Every position: inside the 64-byte blocks, at their edges and in the tail after them.
  for (size_t pos = 0; pos < buf.size(); ++pos) {
    buf[pos] = 0x40;
    ASSERT_FALSE(IsAllZero(buf)) << pos;
    ASSERT_FALSE(IsAllZero(ByteSpan(buf).subspan(pos))) << pos;
    ASSERT_TRUE(IsAllZero(ByteSpan(buf).first(pos))) << pos;
    buf[pos] = 0;
  }
}

}  // namespace
}  // namespace sigilfs::core
