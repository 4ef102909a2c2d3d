// Tests of name encryption: round trips, directory binding, long names, refusals.
#include "sigilfs/core/names.h"

#include <gtest/gtest.h>

#include "sigilfs/crypt/random.h"

namespace sigilfs::core {
namespace {

class NamesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::array<uint8_t, 64> key;
    crypt::RandomBytes(key);
    codec_ = std::move(NameCodec::Create(key)).value();
    crypt::RandomBytes(iv_);
    crypt::RandomBytes(other_iv_);
  }
  std::unique_ptr<NameCodec> codec_;
  DirIv iv_, other_iv_;
};

TEST_F(NamesTest, RoundTripsAndIsDeterministicPerDirectory) {
  for (const std::string& name : std::vector<std::string>{"a", "hello.txt", ".bashrc", "名前",
                                                          std::string(255, 'x'), "a b\tc\n"}) {
    auto c = codec_->Encrypt(iv_, name);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(
        c->find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
        std::string::npos);
    EXPECT_EQ(*codec_->Encrypt(iv_, name), *c);        // deterministic: lookups work
    EXPECT_NE(*codec_->Encrypt(other_iv_, name), *c);  // but per directory
    auto p = codec_->Decrypt(iv_, *c);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, name);
    EXPECT_EQ(codec_->Decrypt(other_iv_, *c).status().code(), Code::kAuthFailed);
  }
}

TEST_F(NamesTest, RefusesInvalidNames) {
  EXPECT_EQ(codec_->Encrypt(iv_, "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(codec_->Encrypt(iv_, ".").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(codec_->Encrypt(iv_, "..").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(codec_->Encrypt(iv_, "a/b").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(codec_->Encrypt(iv_, std::string("a\0b", 3)).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(codec_->Encrypt(iv_, std::string(256, 'x')).status().code(), Code::kNameTooLong);
}

TEST_F(NamesTest, TamperedNamesFail) {
  std::string c = *codec_->Encrypt(iv_, "secret-plan.odt");
  for (size_t i = 0; i < c.size(); ++i) {
    std::string bad = c;
    bad[i] = bad[i] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(codec_->Decrypt(iv_, bad).ok()) << i;
  }
  EXPECT_FALSE(codec_->Decrypt(iv_, c.substr(0, c.size() - 1)).ok());
  EXPECT_FALSE(codec_->Decrypt(iv_, c + "A").ok());
  EXPECT_FALSE(codec_->Decrypt(iv_, "").ok());
  EXPECT_FALSE(codec_->Decrypt(iv_, "sigilfs.diriv").ok());
}

TEST_F(NamesTest, LongNamesAreHashedWithASideFile) {
  const std::string short_cipher = *codec_->Encrypt(iv_, std::string(100, 'a'));
  EXPECT_EQ(NameCodec::StoredName(short_cipher), short_cipher);
  EXPECT_FALSE(NameCodec::IsReserved(short_cipher));

  const std::string long_cipher = *codec_->Encrypt(iv_, std::string(255, 'a'));
  ASSERT_GT(long_cipher.size(), 255u);
  const std::string stored = NameCodec::StoredName(long_cipher);
  EXPECT_LE(stored.size(), 255u);
  EXPECT_TRUE(stored.starts_with("sigilfs.long."));
  EXPECT_TRUE(NameCodec::IsLongName(stored));
  EXPECT_TRUE(NameCodec::IsReserved(stored));
  EXPECT_EQ(NameCodec::SideFileName(stored), stored + ".name");
  EXPECT_FALSE(NameCodec::IsLongName(NameCodec::SideFileName(stored)));
  EXPECT_NE(NameCodec::StoredName(*codec_->Encrypt(iv_, std::string(255, 'b'))), stored);
  EXPECT_TRUE(NameCodec::IsReserved("sigilfs.diriv"));
  EXPECT_TRUE(NameCodec::IsReserved("sigilfs.conf"));
}

}  // namespace
}  // namespace sigilfs::core

namespace sigilfs::core {
namespace {

TEST(ConflictCopyTest, SyncthingsNamesParseBackToTheirOriginal) {
  const std::string tag = "sync-conflict-20261204-051500-ABCD7EF";
  struct Case {
    std::string original, copy;
  };
  for (const Case& c : std::vector<Case>{
           {"report.txt", "report.sync-conflict-20261204-051500-ABCD7EF.txt"},
           {"a.b.tar", "a.b.sync-conflict-20261204-051500-ABCD7EF.tar"},
           {"README", "README.sync-conflict-20261204-051500-ABCD7EF"},
           {".bashrc", ".sync-conflict-20261204-051500-ABCD7EF.bashrc"},
           {"Xy-9_aBc", "Xy-9_aBc.sync-conflict-20261204-051500-ABCD7EF"},
           {"sigilfs.long.h", "sigilfs.long.sync-conflict-20261204-051500-ABCD7EF.h"},
       }) {
    EXPECT_EQ(NameCodec::ConflictCopyName(c.original, tag), c.copy);
    auto parsed = NameCodec::ParseConflictCopy(c.copy);
    ASSERT_TRUE(parsed.has_value()) << c.copy;
    EXPECT_EQ(parsed->original, c.original);
    EXPECT_EQ(parsed->tag, tag);
  }
  // Not Syncthing's shape: no copy.
  for (const char* name :
       {"report.txt", "x.sync-conflict-2026120-051500-ABCD7EF",
        "x.sync-conflict-20261204-051500-abcd7ef", "x.sync-conflict-20261204-051500-ABCD7EF.a.b",
        ".sync-conflict-20261204-051500-ABCD7EF", "x.sync-conflict-20261204-051500-ABCD7EFG"})
    EXPECT_FALSE(NameCodec::ParseConflictCopy(name).has_value()) << name;
  // A long stored name is the prefix and a hash, never a copy of one or its side file.
  const std::string hash(43, 'h');
  EXPECT_TRUE(NameCodec::IsLongName("sigilfs.long." + hash));
  EXPECT_FALSE(NameCodec::IsLongName("sigilfs.long." + hash + ".name"));
  EXPECT_FALSE(NameCodec::IsLongName(NameCodec::ConflictCopyName("sigilfs.long." + hash, tag)));
}

TEST_F(NamesTest, XattrNamesAreHashedAndValuesSealedToTheirName) {
  auto a = codec_->XattrStoredName("user.comment");
  auto b = codec_->XattrStoredName("user.comment");
  auto c = codec_->XattrStoredName("user.other");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);  // deterministic: get and remove find the stored name
  EXPECT_NE(*a, *c);
  EXPECT_EQ(a->rfind(NameCodec::kXattrPrefix, 0), 0u);
  EXPECT_EQ(a->find("comment"), std::string::npos);
  const std::string long_name = "user." + std::string(250, 'x');
  auto l = codec_->XattrStoredName(long_name);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->size(), a->size());  // any length stores in the same size
  EXPECT_FALSE(codec_->XattrStoredName("").ok());
  EXPECT_FALSE(codec_->XattrStoredName(long_name + "y").ok());

  const std::vector<uint8_t> value = {0, 1, 2, 255};
  auto sealed = codec_->SealXattr(*a, "user.comment", value);
  ASSERT_TRUE(sealed.ok());
  auto again = codec_->SealXattr(*a, "user.comment", value);
  EXPECT_NE(*sealed, *again);  // a fresh nonce each time
  auto opened = codec_->OpenXattr(*a, *sealed);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->name, "user.comment");
  EXPECT_EQ(opened->value, value);
  auto empty = codec_->SealXattr(*c, "user.other", {});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(codec_->OpenXattr(*c, *empty)->value.empty());

  EXPECT_FALSE(codec_->OpenXattr(*c, *sealed).ok());  // moved to another name
  for (size_t i = 0; i < sealed->size(); ++i) {
    auto bad = *sealed;
    bad[i] ^= 1;
    EXPECT_FALSE(codec_->OpenXattr(*a, bad).ok()) << "byte " << i;
  }
  EXPECT_FALSE(codec_->OpenXattr(*a, ByteSpan(*sealed).first(20)).ok());
}

// A target or value sealed under a given nonce (reverse mode's) is the same bytes each time and
// opens as any other; without one, each sealing differs.
TEST_F(NamesTest, TargetsAndValuesSealedUnderAGivenNonceRepeat) {
  SealNonce nonce;
  nonce.fill(0x42);
  EXPECT_EQ(*codec_->EncryptTarget("../b.txt", &nonce), *codec_->EncryptTarget("../b.txt", &nonce));
  EXPECT_NE(*codec_->EncryptTarget("../b.txt"), *codec_->EncryptTarget("../b.txt"));
  EXPECT_EQ(*codec_->DecryptTarget(*codec_->EncryptTarget("../b.txt", &nonce)), "../b.txt");
  const std::string stored = *codec_->XattrStoredName("user.a");
  const std::vector<uint8_t> value = {1, 2, 3};
  const auto a = *codec_->SealXattr(stored, "user.a", value, &nonce);
  EXPECT_EQ(a, *codec_->SealXattr(stored, "user.a", value, &nonce));
  EXPECT_NE(*codec_->SealXattr(stored, "user.a", value),
            *codec_->SealXattr(stored, "user.a", value));
  auto opened = codec_->OpenXattr(stored, a);
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ(opened->value, value);
}

}  // namespace
}  // namespace sigilfs::core
