// Tests of the vault config: JSON round trip, associated data, and every kind of damage.
#include "sigilfs/core/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sigilfs/crypt/random.h"

namespace sigilfs::core {
namespace {

VaultConfig SampleConfig() {
  VaultConfig c;
  c.cipher = crypt::AeadAlgorithm::kXChaCha20Poly1305;
  c.kdf = crypt::Argon2ParamsFor(crypt::KdfPreset::kTest);
  crypt::RandomBytes(c.kdf_salt);
  c.wrap_nonce.resize(12);
  crypt::RandomBytes(c.wrap_nonce);
  c.wrapped_key.resize(48);
  crypt::RandomBytes(c.wrapped_key);
  return c;
}

TEST(ConfigTest, RoundTrips) {
  const VaultConfig c = SampleConfig();
  auto back = ParseConfig(SerializeConfig(c));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->cipher, c.cipher);
  EXPECT_EQ(back->kdf.opslimit, c.kdf.opslimit);
  EXPECT_EQ(back->kdf.memlimit, c.kdf.memlimit);
  EXPECT_EQ(back->kdf_salt, c.kdf_salt);
  EXPECT_EQ(back->wrap_nonce, c.wrap_nonce);
  EXPECT_EQ(back->wrapped_key, c.wrapped_key);
  EXPECT_EQ(ConfigAssociatedData(*back), ConfigAssociatedData(c));
}

TEST(ConfigTest, AssociatedDataCoversEveryParameter) {
  const VaultConfig base = SampleConfig();
  const auto ad = ConfigAssociatedData(base);
  VaultConfig c = base;
  c.cipher = crypt::AeadAlgorithm::kAes256Gcm;
  EXPECT_NE(ConfigAssociatedData(c), ad);
  c = base;
  c.kdf.opslimit += 1;
  EXPECT_NE(ConfigAssociatedData(c), ad);
  c = base;
  c.kdf.memlimit *= 2;
  EXPECT_NE(ConfigAssociatedData(c), ad);
  c = base;
  c.kdf_salt[3] ^= 1;
  EXPECT_NE(ConfigAssociatedData(c), ad);
  c = base;
  c.version = 2;
  EXPECT_NE(ConfigAssociatedData(c), ad);
}

Status ParseEdited(void (*edit)(nlohmann::json&)) {
  nlohmann::json j = nlohmann::json::parse(SerializeConfig(SampleConfig()));
  edit(j);
  return ParseConfig(j.dump()).status();
}

TEST(ConfigTest, NamesEachProblem) {
  EXPECT_NE(ParseConfig("").status().message().find("empty"), std::string::npos);
  const std::string text = SerializeConfig(SampleConfig());
  Status truncated = ParseConfig(text.substr(0, text.size() / 2)).status();
  EXPECT_EQ(truncated.code(), Code::kCorrupt);
  EXPECT_NE(truncated.message().find("not valid JSON"), std::string::npos);
  EXPECT_EQ(ParseConfig("[1,2]").status().code(), Code::kCorrupt);

  Status missing = ParseEdited([](nlohmann::json& j) { j.erase("cipher"); });
  EXPECT_EQ(missing.code(), Code::kCorrupt);
  EXPECT_NE(missing.message().find("missing field 'cipher'"), std::string::npos);

  Status mistyped = ParseEdited([](nlohmann::json& j) { j["page_size"] = "4096"; });
  EXPECT_NE(mistyped.message().find("'page_size' has the wrong type"), std::string::npos);

  Status unknown = ParseEdited([](nlohmann::json& j) { j["extra"] = 1; });
  EXPECT_NE(unknown.message().find("unknown field 'extra'"), std::string::npos);

  Status version = ParseEdited([](nlohmann::json& j) { j["version"] = 7; });
  EXPECT_EQ(version.code(), Code::kNotSupported);
  EXPECT_NE(version.message().find("version 7"), std::string::npos);

  Status cipher = ParseEdited([](nlohmann::json& j) { j["cipher"] = "rot13"; });
  EXPECT_EQ(cipher.code(), Code::kNotSupported);

  Status page = ParseEdited([](nlohmann::json& j) { j["page_size"] = 8192; });
  EXPECT_EQ(page.code(), Code::kNotSupported);

  Status huge = ParseEdited([](nlohmann::json& j) { j["kdf"]["memlimit"] = 1ull << 40; });
  EXPECT_EQ(huge.code(), Code::kCorrupt);

  Status b64 = ParseEdited([](nlohmann::json& j) { j["kdf"]["salt"] = "!!!"; });
  EXPECT_NE(b64.message().find("base64"), std::string::npos);
}

TEST(ConfigTest, ChecksumCatchesAnEditedValue) {
  // A change that keeps the JSON well-formed and every value in range is caught by the checksum
  // (and, if the checksum were recomputed, by the key wrap's associated data: see vault_test).
  Status s = ParseEdited([](nlohmann::json& j) { j["kdf"]["opslimit"] = 2; });
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("checksum"), std::string::npos);
}

}  // namespace
}  // namespace sigilfs::core
