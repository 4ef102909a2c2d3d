// Tamper tests for crypt/: any change to a sealed unit, its nonce, AD or key must fail to open.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sigilfs/crypt/aead.h"
#include "sigilfs/crypt/bytes.h"
#include "sigilfs/crypt/random.h"
#include "sigilfs/crypt/siv.h"
#include "sigilfs/status.h"
#include "test_support/hex.h"
#include "test_support/param_names.h"

namespace sigilfs::crypt {
namespace {

using test::FromHex;

std::vector<uint8_t> RandomVector(size_t size) {
  std::vector<uint8_t> out(size);
  RandomBytes(out);
  return out;
}

void FlipBit(std::vector<uint8_t>& bytes, size_t bit) {
  bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
}

// ---------------------------------------------------------------------------------------------
// AEAD (both algorithms)
// ---------------------------------------------------------------------------------------------

constexpr size_t kAdSize = 26;
constexpr size_t kPlaintextSize = 4096;

class AeadTamperTest : public testing::TestWithParam<AeadAlgorithm> {
 protected:
  void SetUp() override {
    key_ = RandomVector(kAeadKeySize);
    Result<std::unique_ptr<Aead>> aead = Aead::Create(GetParam(), key_);
    ASSERT_TRUE(aead.ok()) << aead.status().ToString();
    aead_ = std::move(aead).value();
    nonce_ = RandomVector(aead_->nonce_size());
    ad_ = RandomVector(kAdSize);
    plaintext_ = RandomVector(kPlaintextSize);
    ciphertext_.resize(plaintext_.size());
    tag_.resize(kAeadTagSize);
    const Status sealed = aead_->Seal(nonce_, ad_, plaintext_, ciphertext_, tag_);
    ASSERT_TRUE(sealed.ok()) << sealed.ToString();
    ASSERT_NE(ciphertext_, plaintext_);
    // The untouched unit opens: every failure below is caused by the one change it makes.
    ASSERT_EQ(OpenCode(nonce_, ad_, ciphertext_, tag_), Code::kOk);
  }

  // Opens with the test's Aead and returns the status code (the plaintext is discarded).
  Code OpenCode(ByteSpan nonce, ByteSpan ad, ByteSpan ciphertext, ByteSpan tag) const {
    return OpenCodeWith(*aead_, nonce, ad, ciphertext, tag);
  }

  static Code OpenCodeWith(const Aead& aead, ByteSpan nonce, ByteSpan ad, ByteSpan ciphertext,
                           ByteSpan tag) {
    std::vector<uint8_t> out(ciphertext.size());
    return aead.Open(nonce, ad, ciphertext, tag, out).code();
  }

  std::vector<uint8_t> key_;
  std::unique_ptr<Aead> aead_;
  std::vector<uint8_t> nonce_;
  std::vector<uint8_t> ad_;
  std::vector<uint8_t> plaintext_;
  std::vector<uint8_t> ciphertext_;
  std::vector<uint8_t> tag_;
};

TEST_P(AeadTamperTest, EveryNonceBitFlipFails) {
  for (size_t bit = 0; bit < nonce_.size() * 8; ++bit) {
    std::vector<uint8_t> nonce = nonce_;
    FlipBit(nonce, bit);
    EXPECT_EQ(OpenCode(nonce, ad_, ciphertext_, tag_), Code::kAuthFailed) << "nonce bit " << bit;
  }
}

TEST_P(AeadTamperTest, EveryAdBitFlipFails) {
  for (size_t bit = 0; bit < ad_.size() * 8; ++bit) {
    std::vector<uint8_t> ad = ad_;
    FlipBit(ad, bit);
    EXPECT_EQ(OpenCode(nonce_, ad, ciphertext_, tag_), Code::kAuthFailed) << "AD bit " << bit;
  }
}

TEST_P(AeadTamperTest, EveryTagBitFlipFails) {
  for (size_t bit = 0; bit < tag_.size() * 8; ++bit) {
    std::vector<uint8_t> tag = tag_;
    FlipBit(tag, bit);
    EXPECT_EQ(OpenCode(nonce_, ad_, ciphertext_, tag), Code::kAuthFailed) << "tag bit " << bit;
  }
}

TEST_P(AeadTamperTest, CiphertextBitFlipsFail) {
  constexpr size_t kEdgeBits = size_t{16} * 8;
  constexpr size_t kTotalBits = kPlaintextSize * 8;
  std::vector<size_t> bits;
  // Every bit of the first and last 16 bytes...
  for (size_t bit = 0; bit < kEdgeBits; ++bit) {
    bits.push_back(bit);
  }
  for (size_t bit = kTotalBits - kEdgeBits; bit < kTotalBits; ++bit) {
    bits.push_back(bit);
  }
  // ...and a spread of bits in between: a stride coprime to 8 visits every bit position.
  for (size_t bit = kEdgeBits; bit < kTotalBits - kEdgeBits; bit += 61) {
    bits.push_back(bit);
  }
  ASSERT_GT(bits.size(), 700u);
  for (size_t bit : bits) {
    std::vector<uint8_t> ciphertext = ciphertext_;
    FlipBit(ciphertext, bit);
    EXPECT_EQ(OpenCode(nonce_, ad_, ciphertext, tag_), Code::kAuthFailed)
        << "ciphertext bit " << bit;
  }
}

TEST_P(AeadTamperTest, WrongKeyFails) {
  Result<std::unique_ptr<Aead>> other = Aead::Create(GetParam(), RandomVector(kAeadKeySize));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(OpenCodeWith(**other, nonce_, ad_, ciphertext_, tag_), Code::kAuthFailed);

  // Keys one bit away from the right one.
  for (size_t bit : {size_t{0}, size_t{7}, size_t{128}, size_t{255}}) {
    std::vector<uint8_t> key = key_;
    FlipBit(key, bit);
    Result<std::unique_ptr<Aead>> near = Aead::Create(GetParam(), key);
    ASSERT_TRUE(near.ok()) << near.status().ToString();
    EXPECT_EQ(OpenCodeWith(**near, nonce_, ad_, ciphertext_, tag_), Code::kAuthFailed)
        << "key bit " << bit;
  }

  // A fresh object with the right key opens it (the failures above were the key's doing).
  Result<std::unique_ptr<Aead>> same = Aead::Create(GetParam(), key_);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(OpenCodeWith(**same, nonce_, ad_, ciphertext_, tag_), Code::kOk);
}

TEST_P(AeadTamperTest, ChangedAdLengthFails) {
  const ByteSpan ad(ad_);
  EXPECT_EQ(OpenCode(nonce_, ad.first(kAdSize - 1), ciphertext_, tag_), Code::kAuthFailed);
  EXPECT_EQ(OpenCode(nonce_, ad.last(kAdSize - 1), ciphertext_, tag_), Code::kAuthFailed);
  EXPECT_EQ(OpenCode(nonce_, ByteSpan(), ciphertext_, tag_), Code::kAuthFailed);
  std::vector<uint8_t> longer = ad_;
  longer.push_back(0);
  EXPECT_EQ(OpenCode(nonce_, longer, ciphertext_, tag_), Code::kAuthFailed);
}

TEST_P(AeadTamperTest, TruncatedOrSplicedCiphertextFails) {
  const ByteSpan ct(ciphertext_);
  EXPECT_EQ(OpenCode(nonce_, ad_, ct.first(kPlaintextSize - 1), tag_), Code::kAuthFailed);
  EXPECT_EQ(OpenCode(nonce_, ad_, ct.last(kPlaintextSize - 1), tag_), Code::kAuthFailed);
  EXPECT_EQ(OpenCode(nonce_, ad_, ByteSpan(), tag_), Code::kAuthFailed);

  // The tag of another unit sealed under the same key does not open this one.
  const std::vector<uint8_t> other_nonce = RandomVector(aead_->nonce_size());
  std::vector<uint8_t> other_ct(kPlaintextSize);
  std::vector<uint8_t> other_tag(kAeadTagSize);
  ASSERT_TRUE(aead_->Seal(other_nonce, ad_, plaintext_, other_ct, other_tag).ok());
  EXPECT_EQ(OpenCode(nonce_, ad_, ciphertext_, other_tag), Code::kAuthFailed);
  EXPECT_EQ(OpenCode(nonce_, ad_, other_ct, tag_), Code::kAuthFailed);
  EXPECT_EQ(OpenCode(other_nonce, ad_, other_ct, other_tag), Code::kOk);
  // Same plaintext, different nonce: different ciphertext.
  EXPECT_NE(other_ct, ciphertext_);
}

TEST_P(AeadTamperTest, RoundTripsAtBoundarySizes) {
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{4095}, size_t{4096}}) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::vector<uint8_t> nonce = RandomVector(aead_->nonce_size());
    const std::vector<uint8_t> plaintext = RandomVector(size);
    std::vector<uint8_t> ciphertext(size);
    std::vector<uint8_t> tag(kAeadTagSize);
    const Status sealed = aead_->Seal(nonce, ad_, plaintext, ciphertext, tag);
    ASSERT_TRUE(sealed.ok()) << sealed.ToString();
    if (size >= 16) {
      EXPECT_NE(ciphertext, plaintext);
    }
    std::vector<uint8_t> opened(size);
    const Status open = aead_->Open(nonce, ad_, ciphertext, tag, opened);
    ASSERT_TRUE(open.ok()) << open.ToString();
    EXPECT_EQ(opened, plaintext);
    // With no AD at all, too.
    ASSERT_TRUE(aead_->Seal(nonce, ByteSpan(), plaintext, ciphertext, tag).ok());
    ASSERT_TRUE(aead_->Open(nonce, ByteSpan(), ciphertext, tag, opened).ok());
    EXPECT_EQ(opened, plaintext);
    // A flipped tag fails at every size, even for an empty unit.
    std::vector<uint8_t> bad_tag = tag;
    bad_tag[0] ^= 0x01;
    EXPECT_EQ(OpenCode(nonce, ByteSpan(), ciphertext, bad_tag), Code::kAuthFailed);
  }
}

TEST_P(AeadTamperTest, InPlaceSealAndOpen) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{17}, size_t{4096}}) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::vector<uint8_t> nonce = RandomVector(aead_->nonce_size());
    const std::vector<uint8_t> plaintext = RandomVector(size);
    // Out of place, for reference.
    std::vector<uint8_t> expected_ct(size);
    std::vector<uint8_t> expected_tag(kAeadTagSize);
    ASSERT_TRUE(aead_->Seal(nonce, ad_, plaintext, expected_ct, expected_tag).ok());

    std::vector<uint8_t> buf = plaintext;
    std::vector<uint8_t> tag(kAeadTagSize);
    const Status sealed = aead_->Seal(nonce, ad_, buf, buf, tag);
    ASSERT_TRUE(sealed.ok()) << sealed.ToString();
    EXPECT_EQ(buf, expected_ct);
    EXPECT_EQ(tag, expected_tag);

    const Status open = aead_->Open(nonce, ad_, buf, tag, buf);
    ASSERT_TRUE(open.ok()) << open.ToString();
    EXPECT_EQ(buf, plaintext);
  }
}

std::string AlgorithmTestName(const testing::TestParamInfo<AeadAlgorithm>& info) {
  return AeadName(info.param);
}

INSTANTIATE_TEST_SUITE_P(BothAlgorithms, AeadTamperTest,
                         testing::Values(AeadAlgorithm::kAes256Gcm,
                                         AeadAlgorithm::kXChaCha20Poly1305),
                         AlgorithmTestName);

// ---------------------------------------------------------------------------------------------
// AES-SIV
// ---------------------------------------------------------------------------------------------

class SivTamperTest : public testing::Test {
 protected:
  void SetUp() override {
    key_ = RandomVector(64);  // AES-256-SIV, as sigilfs uses for names
    Result<std::unique_ptr<AesSiv>> siv = AesSiv::Create(key_);
    ASSERT_TRUE(siv.ok()) << siv.status().ToString();
    siv_ = std::move(siv).value();
    ad1_ = FromHex("6469722d6964 00 0102030405060708090a0b0c0d0e0f");  // "dir-id\0" + 15 bytes
    ad2_ = RandomVector(16);
    const std::string_view name = "a file name.txt";
    plaintext_.assign(name.begin(), name.end());
    Result<std::vector<uint8_t>> sealed = siv_->Seal(Ads(), plaintext_);
    ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
    sealed_ = std::move(sealed).value();
    ASSERT_EQ(sealed_.size(), kSivTagSize + plaintext_.size());
    Result<std::vector<uint8_t>> opened = siv_->Open(Ads(), sealed_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    ASSERT_EQ(*opened, plaintext_);
  }

  std::array<ByteSpan, 2> Ads() const { return {ad1_, ad2_}; }

  Code OpenCode(std::span<const ByteSpan> ad, ByteSpan sealed) const {
    return siv_->Open(ad, sealed).status().code();
  }

  std::vector<uint8_t> key_;
  std::unique_ptr<AesSiv> siv_;
  std::vector<uint8_t> ad1_;
  std::vector<uint8_t> ad2_;
  std::vector<uint8_t> plaintext_;
  std::vector<uint8_t> sealed_;
};

TEST_F(SivTamperTest, EverySealedBitFlipFails) {
  for (size_t bit = 0; bit < sealed_.size() * 8; ++bit) {
    std::vector<uint8_t> sealed = sealed_;
    FlipBit(sealed, bit);
    EXPECT_EQ(OpenCode(Ads(), sealed), Code::kAuthFailed) << "sealed bit " << bit;
  }
}

TEST_F(SivTamperTest, EveryAdBitFlipFails) {
  for (size_t component = 0; component < 2; ++component) {
    const std::vector<uint8_t>& original = component == 0 ? ad1_ : ad2_;
    for (size_t bit = 0; bit < original.size() * 8; ++bit) {
      std::vector<uint8_t> changed = original;
      FlipBit(changed, bit);
      const std::array<ByteSpan, 2> ads = component == 0 ? std::array<ByteSpan, 2>{changed, ad2_}
                                                         : std::array<ByteSpan, 2>{ad1_, changed};
      EXPECT_EQ(OpenCode(ads, sealed_), Code::kAuthFailed)
          << "AD component " << component << " bit " << bit;
    }
  }
}

TEST_F(SivTamperTest, AdComponentOrderAndCountMatter) {
  const std::array<ByteSpan, 2> swapped = {ad2_, ad1_};
  EXPECT_EQ(OpenCode(swapped, sealed_), Code::kAuthFailed);
  // Dropping a component, or joining two into one, is not the same S2V input either.
  const std::array<ByteSpan, 1> only_first = {ad1_};
  EXPECT_EQ(OpenCode(only_first, sealed_), Code::kAuthFailed);
  EXPECT_EQ(OpenCode({}, sealed_), Code::kAuthFailed);
  std::vector<uint8_t> joined = ad1_;
  joined.insert(joined.end(), ad2_.begin(), ad2_.end());
  const std::array<ByteSpan, 1> one_joined = {joined};
  EXPECT_EQ(OpenCode(one_joined, sealed_), Code::kAuthFailed);
}

TEST_F(SivTamperTest, TruncatedOrWrongKeyFails) {
  const ByteSpan sealed(sealed_);
  EXPECT_EQ(OpenCode(Ads(), sealed.first(sealed.size() - 1)), Code::kAuthFailed);
  EXPECT_EQ(OpenCode(Ads(), sealed.first(kSivTagSize)), Code::kAuthFailed);
  // Shorter than a SIV: not a sealed value at all (some error, whichever code).
  EXPECT_FALSE(siv_->Open(Ads(), sealed.first(kSivTagSize - 1)).ok());
  EXPECT_FALSE(siv_->Open(Ads(), ByteSpan()).ok());

  std::vector<uint8_t> other_key = key_;
  FlipBit(other_key, 0);
  Result<std::unique_ptr<AesSiv>> other = AesSiv::Create(other_key);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ((*other)->Open(Ads(), sealed_).status().code(), Code::kAuthFailed);
}

TEST_F(SivTamperTest, SealIsDeterministic) {
  Result<std::vector<uint8_t>> again = siv_->Seal(Ads(), plaintext_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, sealed_);
  // A separate object with the same key agrees.
  Result<std::unique_ptr<AesSiv>> twin = AesSiv::Create(key_);
  ASSERT_TRUE(twin.ok()) << twin.status().ToString();
  Result<std::vector<uint8_t>> from_twin = (*twin)->Seal(Ads(), plaintext_);
  ASSERT_TRUE(from_twin.ok()) << from_twin.status().ToString();
  EXPECT_EQ(*from_twin, sealed_);
}

TEST_F(SivTamperTest, DifferentInputsGiveDifferentOutputs) {
  std::vector<uint8_t> other_ad = ad2_;
  other_ad.back() ^= 0x01;
  const std::array<ByteSpan, 2> ads = {ad1_, other_ad};
  Result<std::vector<uint8_t>> with_other_ad = siv_->Seal(ads, plaintext_);
  ASSERT_TRUE(with_other_ad.ok()) << with_other_ad.status().ToString();
  EXPECT_NE(*with_other_ad, sealed_);

  std::vector<uint8_t> other_plaintext = plaintext_;
  other_plaintext.back() ^= 0x01;
  Result<std::vector<uint8_t>> with_other_pt = siv_->Seal(Ads(), other_plaintext);
  ASSERT_TRUE(with_other_pt.ok()) << with_other_pt.status().ToString();
  EXPECT_NE(*with_other_pt, sealed_);
  // The SIV, not just the ciphertext, changes: a one-byte change re-randomises the whole output.
  EXPECT_NE(std::vector<uint8_t>(with_other_pt->begin(), with_other_pt->begin() + kSivTagSize),
            std::vector<uint8_t>(sealed_.begin(), sealed_.begin() + kSivTagSize));
}

TEST_F(SivTamperTest, RoundTripsShortAndLongPlaintexts) {
  for (size_t size : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{255}, size_t{1000}}) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::vector<uint8_t> plaintext = RandomVector(size);
    Result<std::vector<uint8_t>> sealed = siv_->Seal(Ads(), plaintext);
    ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
    EXPECT_EQ(sealed->size(), kSivTagSize + size);
    Result<std::vector<uint8_t>> opened = siv_->Open(Ads(), *sealed);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_EQ(*opened, plaintext);
    std::vector<uint8_t> bad = *sealed;
    bad[0] ^= 0x80;
    EXPECT_EQ(OpenCode(Ads(), bad), Code::kAuthFailed);
  }
}

// RFC 5297 defines SIV for an empty plaintext, but OpenSSL 3.0 cannot compute it; siv.h documents
// that Seal refuses an empty message with kInvalidArgument (names are never empty). It must be a
// clean refusal, never an output that opens.
TEST_F(SivTamperTest, EmptyPlaintextIsRefused) {
  Result<std::vector<uint8_t>> sealed = siv_->Seal(Ads(), ByteSpan());
  ASSERT_FALSE(sealed.ok());
  EXPECT_EQ(sealed.status().code(), Code::kInvalidArgument);
  // A bare SIV (what an empty message would seal to) does not open either.
  EXPECT_FALSE(siv_->Open(Ads(), ByteSpan(sealed_).first(kSivTagSize)).ok());
}

}  // namespace
}  // namespace sigilfs::crypt
