// Tests of vault creation, unlocking, passphrase change and refusal of bad input.
#include "sigilfs/core/vault.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sigilfs/core/config.h"
#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/sha256.h"
#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

namespace fs = std::filesystem;

VaultCreateOptions Cheap() {
  VaultCreateOptions o;
  o.kdf = crypt::Argon2ParamsFor(crypt::KdfPreset::kTest);
  return o;
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(VaultTest, CreateUnlockAndDeriveDistinctKeys) {
  test::TempDir tmp;
  const std::string dir = tmp.path() / "vault";
  ASSERT_TRUE(Vault::Create(dir, AsBytes("correct horse"), Cheap()).ok());
  EXPECT_TRUE(fs::exists(fs::path(dir) / kConfigFileName));
  EXPECT_EQ(fs::status(fs::path(dir) / kConfigFileName).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);

  auto v = Vault::Unlock(dir, AsBytes("correct horse"));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  const VolumeKeys& k = (*v)->keys();
  EXPECT_EQ(k.content.size(), 32u);
  EXPECT_EQ(k.names.size(), 64u);

  // The same passphrase unlocks to the same keys; the config holds no key material in clear.
  auto again = Vault::Unlock(dir, AsBytes("correct horse"));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(crypt::ConstantTimeEqual((*again)->keys().content.span(), k.content.span()));
  const std::string text = Slurp(fs::path(dir) / kConfigFileName);
  EXPECT_EQ(text.find(crypt::Base64Encode(k.content.span(), crypt::Base64Variant::kStandard)),
            std::string::npos);
}

TEST(VaultTest, WrongPassphraseIsRefusedAndNothingIsWritten) {
  test::TempDir tmp;
  const std::string dir = tmp.path() / "vault";
  ASSERT_TRUE(Vault::Create(dir, AsBytes("right"), Cheap()).ok());
  const std::string before = Slurp(fs::path(dir) / kConfigFileName);
  auto v = Vault::Unlock(dir, AsBytes("wrong"));
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Code::kWrongPassphrase);
  EXPECT_EQ(v.status().message(), "wrong passphrase");
  EXPECT_EQ(Vault::ChangePassphrase(dir, AsBytes("wrong"), AsBytes("new")).code(),
            Code::kWrongPassphrase);
  EXPECT_EQ(Slurp(fs::path(dir) / kConfigFileName), before);
}

TEST(VaultTest, CreateRefusesNonEmptyDirectoryAndExistingVault) {
  test::TempDir tmp;
  const fs::path dir = tmp.path() / "vault";
  fs::create_directory(dir);
  std::ofstream(dir / "stray") << "x";
  EXPECT_EQ(Vault::Create(dir, AsBytes("p"), Cheap()).code(), Code::kNotEmpty);
  EXPECT_FALSE(fs::exists(dir / kConfigFileName));
  fs::remove(dir / "stray");
  ASSERT_TRUE(Vault::Create(dir, AsBytes("p"), Cheap()).ok());
  EXPECT_EQ(Vault::Create(dir, AsBytes("p"), Cheap()).code(), Code::kNotEmpty);
}

TEST(VaultTest, ChangePassphraseKeepsTheMasterKey) {
  test::TempDir tmp;
  const std::string dir = tmp.path() / "vault";
  ASSERT_TRUE(Vault::Create(dir, AsBytes("old"), Cheap()).ok());
  auto before = Vault::Unlock(dir, AsBytes("old"));
  ASSERT_TRUE(before.ok());
  crypt::Argon2Params stronger = crypt::Argon2ParamsFor(crypt::KdfPreset::kTest);
  stronger.opslimit = 2;
  ASSERT_TRUE(Vault::ChangePassphrase(dir, AsBytes("old"), AsBytes("new"), stronger).ok());
  EXPECT_EQ(Vault::Unlock(dir, AsBytes("old")).status().code(), Code::kWrongPassphrase);
  auto after = Vault::Unlock(dir, AsBytes("new"));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)->config().kdf.opslimit, 2u);
  EXPECT_TRUE(
      crypt::ConstantTimeEqual((*after)->keys().content.span(), (*before)->keys().content.span()));
  EXPECT_FALSE(fs::exists(fs::path(dir) / ".sigilfs.conf.tmp"));
}

TEST(VaultTest, MissingConfigIsNamed) {
  test::TempDir tmp;
  auto v = Vault::Unlock(tmp.path(), AsBytes("p"));
  EXPECT_EQ(v.status().code(), Code::kNotFound);
  EXPECT_NE(v.status().message().find("sigilfs.conf"), std::string::npos);
}

TEST(VaultTest, DowngradedParameterWithRecomputedChecksumIsRefused) {
  // An attacker who lowers the KDF cost and fixes up the checksum still cannot get the vault
  // opened: the cost is associated data of the key wrap.
  test::TempDir tmp;
  const fs::path dir = tmp.path() / "vault";
  crypt::Argon2Params p = crypt::Argon2ParamsFor(crypt::KdfPreset::kTest);
  p.opslimit = 2;
  VaultCreateOptions o;
  o.kdf = p;
  ASSERT_TRUE(Vault::Create(dir, AsBytes("pw"), o).ok());
  auto config = Vault::LoadConfig(dir);
  ASSERT_TRUE(config.ok());
  VaultConfig downgraded = *config;
  downgraded.kdf.opslimit = 1;
  std::ofstream(dir / kConfigFileName, std::ios::trunc) << SerializeConfig(downgraded);
  EXPECT_EQ(Vault::Unlock(dir, AsBytes("pw")).status().code(), Code::kWrongPassphrase);
}

// The wrapped key edited and the checksum recomputed to match passes every check of the config
// itself; the key wrap then fails its tag, which is all a wrong passphrase looks like, and
// nothing is written.
TEST(VaultTest, AnEditedWrappedKeyWithARecomputedChecksumIsAWrongPassphrase) {
  test::TempDir tmp;
  const fs::path dir = tmp.path() / "vault";
  const fs::path file = dir / kConfigFileName;
  ASSERT_TRUE(Vault::Create(dir, AsBytes("pw"), Cheap()).ok());
  const std::string original = Slurp(file);
  auto config = Vault::LoadConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->wrapped_key.size(), 48u);
  // The first and last bytes of the encrypted key, and of the tag after it.
  for (size_t at : {size_t{0}, size_t{31}, size_t{32}, size_t{47}}) {
    SCOPED_TRACE(at);
    VaultConfig edited = *config;
    edited.wrapped_key[at] ^= 0x01;
    const std::string text = SerializeConfig(edited);
    ASSERT_TRUE(ParseConfig(text).ok()) << "the checksum matches the edit";
    std::ofstream(file, std::ios::trunc) << text;
    auto v = Vault::Unlock(dir, AsBytes("pw"));
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), Code::kWrongPassphrase);
    EXPECT_EQ(v.status().message(), "wrong passphrase");
    EXPECT_EQ(Vault::ChangePassphrase(dir, AsBytes("pw"), AsBytes("new")).code(),
              Code::kWrongPassphrase);
    EXPECT_EQ(Slurp(file), text) << "the config was written";
    EXPECT_FALSE(fs::exists(dir / ".sigilfs.conf.tmp"));
  }
  // Put back, the config opens with the same passphrase: the refusals were the edits' doing.
  std::ofstream(file, std::ios::trunc) << original;
  EXPECT_TRUE(Vault::Unlock(dir, AsBytes("pw")).ok());
}

}  // namespace
}  // namespace sigilfs::core
