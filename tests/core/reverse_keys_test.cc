// Reverse mode's derivations: deterministic, separated by purpose and place, different per
// vault, and pinned (a change would make every incremental backup copy everything again).
#include "sigilfs/core/reverse_keys.h"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <vector>

#include "sigilfs/crypt/aead.h"
#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/random.h"

namespace sigilfs::core {
namespace {

std::vector<uint8_t> Key(uint8_t fill) { return std::vector<uint8_t>(32, fill); }

TEST(ReverseKeysTest, TheSameInputsGiveTheSameValuesAndAnythingElseOthers) {
  auto keys = std::move(ReverseKeys::Derive(Key(1))).value();
  auto again = std::move(ReverseKeys::Derive(Key(1))).value();
  auto other = std::move(ReverseKeys::Derive(Key(2))).value();
  EXPECT_EQ(keys->DirIvOf("docs"), again->DirIvOf("docs"));
  EXPECT_NE(keys->DirIvOf("docs"), other->DirIvOf("docs"));
  EXPECT_NE(keys->DirIvOf("docs"), keys->DirIvOf("docs/"));
  EXPECT_NE(keys->DirIvOf(""), keys->DirIvOf("docs"));
  EXPECT_EQ(keys->FileNonceOf("docs/a"), again->FileNonceOf("docs/a"));
  // Purposes do not collide: a directory's IV is not a file's nonce at the same path.
  const DirIv iv = keys->DirIvOf("docs/a");
  const FileNonce nonce = keys->FileNonceOf("docs/a");
  EXPECT_FALSE(std::equal(iv.begin(), iv.end(), nonce.begin()));

  std::vector<uint8_t> page(4096, 'p');
  std::set<std::vector<uint8_t>> seen;
  auto unit_nonce = [&](const FileNonce& file, uint64_t index, UnitKind kind, bool last,
                        ByteSpan plain) {
    std::vector<uint8_t> out(12);
    keys->UnitNonce(file, index, kind, last, plain, out);
    return out;
  };
  const auto base = unit_nonce(nonce, 0, UnitKind::kDataPage, false, page);
  EXPECT_EQ(base, unit_nonce(nonce, 0, UnitKind::kDataPage, false, page));
  seen.insert(base);
  seen.insert(unit_nonce(keys->FileNonceOf("docs/b"), 0, UnitKind::kDataPage, false, page));
  seen.insert(unit_nonce(nonce, 1, UnitKind::kDataPage, false, page));
  seen.insert(unit_nonce(nonce, 0, UnitKind::kTreeBlock, false, page));
  seen.insert(unit_nonce(nonce, 0, UnitKind::kDataPage, true, page));
  page[4095] ^= 1;
  seen.insert(unit_nonce(nonce, 0, UnitKind::kDataPage, false, page));
  EXPECT_EQ(seen.size(), 6u);  // each change of file, place, kind, flag or byte: a new nonce

  const SealNonce target = keys->ValueNonce("target", "a/link", AsBytes("../b.txt"));
  EXPECT_EQ(target, again->ValueNonce("target", "a/link", AsBytes("../b.txt")));
  EXPECT_NE(target, keys->ValueNonce("target", "a/link2", AsBytes("../b.txt")));
  EXPECT_NE(target, keys->ValueNonce("target", "a/link", AsBytes("../c.txt")));
  EXPECT_NE(target, keys->ValueNonce("user.sigilfs.x", "a/link", AsBytes("../b.txt")));
  // The NULs keep the fields apart: "a" + "b/c" is not "a/b" + "c".
  EXPECT_NE(keys->ValueNonce("r", "ab", AsBytes("c")), keys->ValueNonce("r", "a", AsBytes("bc")));
}

// The values for one key, pinned: a vault's reverse view must give the same bytes across
// versions, or every backup taken through it would be copied again in full. Computed apart
// from this code (Python's hmac and hashlib: HKDF-SHA256 of 32 bytes of 7 with the label
// "sigilfs v1 reverse", then HMAC-SHA256 of "dir-iv\0", of "file\0a/b.txt", and of "unit\0",
// the file nonce, le64 5, kind 1, last 1 and "hello", of "value\0target\0a/link\0../b.txt" and
// of "inode\0" and le64 1234567, each truncated).
TEST(ReverseKeysTest, ThePinnedValues) {
  auto keys = std::move(ReverseKeys::Derive(Key(7))).value();
  const DirIv iv = keys->DirIvOf("");
  const FileNonce nonce = keys->FileNonceOf("a/b.txt");
  std::vector<uint8_t> unit(12);
  keys->UnitNonce(nonce, 5, UnitKind::kDataPage, true, AsBytes("hello"), unit);
  EXPECT_EQ(crypt::HexEncode(iv), "84e8c0568ecafc1676bc60b95ec25ea9");
  EXPECT_EQ(crypt::HexEncode(nonce), "240f188c56320645f1926279a4a96247");
  EXPECT_EQ(crypt::HexEncode(unit), "1dd3afbc6f4e3dde43ff2612");
  EXPECT_EQ(crypt::HexEncode(keys->ValueNonce("target", "a/link", AsBytes("../b.txt"))),
            "02a4fe67e15a570e78b10487b56f6718");
  EXPECT_EQ(crypt::HexEncode(keys->FileNonceOfInode(1234567)), "8b4be7fc1868edd591e0a5635b354bef");
}

// A page sealed under its synthetic nonce twice is the same unit, and the forward reader opens
// it.
TEST(ReverseKeysTest, AUnitSealedUnderItsSyntheticNonceIsTheSameBytesAndOpens) {
  auto keys = std::move(ReverseKeys::Derive(Key(3))).value();
  std::array<uint8_t, 32> file_key;
  crypt::RandomBytes(file_key);
  for (auto algorithm :
       {crypt::AeadAlgorithm::kAes256Gcm, crypt::AeadAlgorithm::kXChaCha20Poly1305}) {
    auto aead = std::move(crypt::Aead::Create(algorithm, file_key)).value();
    const FileNonce file = keys->FileNonceOf("f");
    UnitCodec codec(*aead, file);
    const std::vector<uint8_t> page(3000, 'x');
    std::vector<uint8_t> nonce(codec.geometry().nonce_size());
    std::vector<uint8_t> a(page.size() + codec.geometry().overhead()), b(a.size());
    keys->UnitNonce(file, 2, UnitKind::kDataPage, true, page, nonce);
    ASSERT_TRUE(codec.SealUnder(nonce, 2, UnitKind::kDataPage, true, page, a).ok());
    keys->UnitNonce(file, 2, UnitKind::kDataPage, true, page, nonce);
    ASSERT_TRUE(codec.SealUnder(nonce, 2, UnitKind::kDataPage, true, page, b).ok());
    EXPECT_EQ(a, b);
    std::vector<uint8_t> out(page.size());
    ASSERT_TRUE(codec.Open(2, UnitKind::kDataPage, true, a, out).ok());
    EXPECT_EQ(out, page);
  }
}

}  // namespace
}  // namespace sigilfs::core
