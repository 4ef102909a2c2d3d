// Sha256Midstate: every implementation, one stream and two, against OpenSSL's one-shot SHA-256.
#include "sigilfs/crypt/sha256_multi.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sigilfs/crypt/bytes.h"
#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/sha256.h"
#include "sigilfs/status.h"
#include "test_support/hex.h"

namespace sigilfs::crypt {

// What gtest prints of the parameter (found through argument-dependent lookup, so not in the
// unnamed namespace).
void PrintTo(Sha256Midstate::Impl impl, std::ostream* os);

namespace {

using Impl = Sha256Midstate::Impl;

// Lower-case hex, as the vectors are written.
std::string ToHex(ByteSpan bytes) { return HexEncode(bytes); }

std::vector<uint8_t> Concat(ByteSpan a, ByteSpan b) {
  std::vector<uint8_t> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Pseudo-random bytes from a fixed seed, so a failure reproduces.
std::vector<uint8_t> RandomData(size_t size, std::mt19937& rng) {
  std::vector<uint8_t> out(size);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : out) {
    b = static_cast<uint8_t>(byte(rng));
  }
  return out;
}

// Also the test-name suffix of the parameterized tests.
std::string ImplName(Impl impl) {
  switch (impl) {
    case Impl::kAuto:
      return "Auto";
    case Impl::kShaNi:
      return "ShaNi";
    case Impl::kGeneric:
      return "Generic";
  }
  return "Unknown";
}

// Around the one-block padding limit (55/56), the block edges, and whole fs-verity blocks.
constexpr size_t kSizes[] = {0, 1, 55, 56, 63, 64, 65, 119, 120, 4095, 4096, 4097, 8192};
constexpr size_t kPrefixSizes[] = {0, 64, 128};

// FIPS 180-2, Appendix B.1 "SHA-256 Example (One-Block Message)".
constexpr std::string_view kAbcDigest =
    "ba7816bf 8f01cfea 414140de 5dae2223 b00361a3 96177a9c b410ff61 f20015ad";

class Sha256MidstateTest : public testing::TestWithParam<Impl> {
 protected:
  void SetUp() override {
    if (GetParam() == Impl::kShaNi && !Sha256Midstate::ShaNiAvailable()) {
      GTEST_SKIP() << "this CPU has no SHA-NI";
    }
  }
};

TEST_P(Sha256MidstateTest, HashEqualsOneShotOfPrefixAndData) {
  std::mt19937 rng(1);
  for (size_t prefix_size : kPrefixSizes) {
    const std::vector<uint8_t> prefix = RandomData(prefix_size, rng);
    Result<Sha256Midstate> midstate = Sha256Midstate::Create(prefix);
    ASSERT_TRUE(midstate.ok()) << midstate.status().ToString();
    for (size_t size : kSizes) {
      SCOPED_TRACE("prefix " + std::to_string(prefix_size) + " data " + std::to_string(size));
      const std::vector<uint8_t> data = RandomData(size, rng);
      EXPECT_EQ(ToHex(midstate->HashWith(GetParam(), data)), ToHex(Sha256(Concat(prefix, data))));
    }
  }
}

TEST_P(Sha256MidstateTest, Hash2EqualsTwoOneShots) {
  std::mt19937 rng(2);
  for (size_t prefix_size : kPrefixSizes) {
    const std::vector<uint8_t> prefix = RandomData(prefix_size, rng);
    Result<Sha256Midstate> midstate = Sha256Midstate::Create(prefix);
    ASSERT_TRUE(midstate.ok()) << midstate.status().ToString();
    for (size_t size : kSizes) {
      SCOPED_TRACE("prefix " + std::to_string(prefix_size) + " data " + std::to_string(size));
      const std::vector<uint8_t> a = RandomData(size, rng);
      const std::vector<uint8_t> b = RandomData(size, rng);
      Sha256Digest da{};
      Sha256Digest db{};
      midstate->Hash2With(GetParam(), a, b, da, db);
      EXPECT_EQ(ToHex(da), ToHex(Sha256(Concat(prefix, a))));
      EXPECT_EQ(ToHex(db), ToHex(Sha256(Concat(prefix, b))));
      // And the same as the single-stream path of every implementation.
      for (Impl single : {Impl::kGeneric, GetParam()}) {
        EXPECT_EQ(ToHex(da), ToHex(midstate->HashWith(single, a))) << ImplName(single);
        EXPECT_EQ(ToHex(db), ToHex(midstate->HashWith(single, b))) << ImplName(single);
      }
    }
  }
}

TEST_P(Sha256MidstateTest, Hash2OfOneMessageTwiceOrOfDifferentSizes) {
  std::mt19937 rng(3);
  const std::vector<uint8_t> prefix = RandomData(64, rng);
  Result<Sha256Midstate> midstate = Sha256Midstate::Create(prefix);
  ASSERT_TRUE(midstate.ok());
  const std::vector<uint8_t> block = RandomData(4096, rng);
  const std::string expected = ToHex(Sha256(Concat(prefix, block)));

  // The same bytes as both messages: the two streams must not disturb each other.
  Sha256Digest da{};
  Sha256Digest db{};
  midstate->Hash2With(GetParam(), block, block, da, db);
  EXPECT_EQ(ToHex(da), expected);
  EXPECT_EQ(ToHex(db), expected);

  // Unequal sizes are allowed too (they are hashed one after the other).
  const ByteSpan shorter = ByteSpan(block).first(100);
  midstate->Hash2With(GetParam(), block, shorter, da, db);
  EXPECT_EQ(ToHex(da), expected);
  EXPECT_EQ(ToHex(db), ToHex(Sha256(Concat(prefix, shorter))));
}

TEST_P(Sha256MidstateTest, FipsAbcVector) {
  Result<Sha256Midstate> midstate = Sha256Midstate::Create(ByteSpan());
  ASSERT_TRUE(midstate.ok());
  const std::string expected = ToHex(test::FromHex(kAbcDigest));
  EXPECT_EQ(ToHex(midstate->HashWith(GetParam(), AsBytes("abc"))), expected);
  Sha256Digest da{};
  Sha256Digest db{};
  midstate->Hash2With(GetParam(), AsBytes("abc"), AsBytes("abc"), da, db);
  EXPECT_EQ(ToHex(da), expected);
  EXPECT_EQ(ToHex(db), expected);
}

TEST_P(Sha256MidstateTest, LongMessage) {
  // 1 MiB plus a partial block: many blocks through one call, state carried across them.
  std::mt19937 rng(4);
  const std::vector<uint8_t> prefix = RandomData(128, rng);
  Result<Sha256Midstate> midstate = Sha256Midstate::Create(prefix);
  ASSERT_TRUE(midstate.ok());
  const std::vector<uint8_t> a = RandomData((1 << 20) + 17, rng);
  const std::vector<uint8_t> b = RandomData(a.size(), rng);
  Sha256Digest da{};
  Sha256Digest db{};
  midstate->Hash2With(GetParam(), a, b, da, db);
  EXPECT_EQ(ToHex(da), ToHex(Sha256(Concat(prefix, a))));
  EXPECT_EQ(ToHex(db), ToHex(Sha256(Concat(prefix, b))));
  EXPECT_EQ(ToHex(midstate->HashWith(GetParam(), a)), ToHex(da));
}

}  // namespace

void PrintTo(Sha256Midstate::Impl impl, std::ostream* os) { *os << ImplName(impl); }

namespace {

INSTANTIATE_TEST_SUITE_P(Impls, Sha256MidstateTest,
                         testing::Values(Impl::kAuto, Impl::kShaNi, Impl::kGeneric),
                         [](const testing::TestParamInfo<Impl>& info) {
                           return ImplName(info.param);
                         });

TEST(Sha256Midstate, DefaultEntryPointsMatchOneShot) {
  std::mt19937 rng(5);
  const std::vector<uint8_t> prefix = RandomData(64, rng);
  Result<Sha256Midstate> midstate = Sha256Midstate::Create(prefix);
  ASSERT_TRUE(midstate.ok());
  const std::vector<uint8_t> a = RandomData(4096, rng);
  const std::vector<uint8_t> b = RandomData(4096, rng);
  EXPECT_EQ(ToHex(midstate->Hash(a)), ToHex(Sha256(Concat(prefix, a))));
  Sha256Digest da{};
  Sha256Digest db{};
  midstate->Hash2(a, b, da, db);
  EXPECT_EQ(ToHex(da), ToHex(Sha256(Concat(prefix, a))));
  EXPECT_EQ(ToHex(db), ToHex(Sha256(Concat(prefix, b))));
}

TEST(Sha256Midstate, MatchesSha256Prefixed) {
  // fs-verity's salt: 32 bytes zero-padded to 64, the case Sha256Prefixed already serves.
  std::mt19937 rng(6);
  std::vector<uint8_t> salt = RandomData(32, rng);
  salt.resize(64, 0);
  const Sha256Prefixed prefixed(salt);
  Result<Sha256Midstate> midstate = Sha256Midstate::Create(salt);
  ASSERT_TRUE(midstate.ok());
  const std::vector<uint8_t> block = RandomData(4096, rng);
  EXPECT_EQ(ToHex(midstate->Hash(block)), ToHex(prefixed.Digest(block)));
}

TEST(Sha256Midstate, RefusesPrefixNotAMultipleOf64) {
  for (size_t size : {size_t{1}, size_t{32}, size_t{63}, size_t{65}, size_t{100}}) {
    const std::vector<uint8_t> prefix(size, 0x36);
    Result<Sha256Midstate> midstate = Sha256Midstate::Create(prefix);
    ASSERT_FALSE(midstate.ok()) << "prefix of " << size << " bytes";
    EXPECT_EQ(midstate.status().code(), Code::kInvalidArgument);
  }
}

TEST(Sha256Midstate, ShaNiAvailabilityIsStable) {
  EXPECT_EQ(Sha256Midstate::ShaNiAvailable(), Sha256Midstate::ShaNiAvailable());
#if !defined(__x86_64__)
  EXPECT_FALSE(Sha256Midstate::ShaNiAvailable());
#endif
}

TEST(Sha256Midstate, SafeFromSeveralThreads) {
  std::mt19937 rng(7);
  const std::vector<uint8_t> prefix = RandomData(64, rng);
  Result<Sha256Midstate> created = Sha256Midstate::Create(prefix);
  ASSERT_TRUE(created.ok());
  const Sha256Midstate& midstate = *created;
  const std::vector<uint8_t> a = RandomData(4096, rng);
  const std::vector<uint8_t> b = RandomData(4096, rng);
  const Sha256Digest expected_a = Sha256(Concat(prefix, a));
  const Sha256Digest expected_b = Sha256(Concat(prefix, b));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  threads.reserve(mismatches.size());
  for (int& count : mismatches) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        Sha256Digest da{};
        Sha256Digest db{};
        midstate.Hash2(a, b, da, db);
        if (da != expected_a || db != expected_b || midstate.Hash(a) != expected_a) ++count;
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  for (int count : mismatches) {
    EXPECT_EQ(count, 0);
  }
}

}  // namespace
}  // namespace sigilfs::crypt
