// sigilfs.conf: JSON encoding, validation and the canonical associated data of the key wrap.
#include "sigilfs/core/config.h"

#include <nlohmann/json.hpp>
#include <set>

#include "endian.h"
#include "sigilfs/core/format.h"
#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/sha256.h"

namespace sigilfs::core {
namespace {

using crypt::Base64Variant;
using nlohmann::json;

constexpr char kFormatName[] = "sigilfs-vault";
constexpr char kWrapAlgorithm[] = "aes-256-gcm";

std::string ChecksumHex(const VaultConfig& c) {
  crypt::Sha256Hasher h;
  const std::vector<uint8_t> ad = ConfigAssociatedData(c);
  h.Update(ad);
  h.Update(c.wrap_nonce);
  h.Update(c.wrapped_key);
  return crypt::HexEncode(h.Final());
}

Status Damaged(const std::string& what) {
  return Status(Code::kCorrupt, "config damaged: " + what);
}

// Reads a required field of one JSON type, naming it when absent or mistyped.
Result<const json*> Field(const json& obj, const char* name, json::value_t type) {
  auto it = obj.find(name);
  if (it == obj.end()) return Damaged(std::string("missing field '") + name + "'");
  const bool ok =
      type == json::value_t::number_unsigned ? it->is_number_unsigned() : it->type() == type;
  if (!ok) return Damaged(std::string("field '") + name + "' has the wrong type");
  return &*it;
}

Status OnlyKnownFields(const json& obj, std::initializer_list<const char*> known,
                       const char* where) {
  std::set<std::string> names(known.begin(), known.end());
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!names.contains(it.key()))
      return Damaged(std::string("unknown field '") + it.key() + "' in " + where);
  return Status::Ok();
}

Result<std::vector<uint8_t>> Base64Field(const json& obj, const char* name) {
  SIGILFS_ASSIGN_OR_RETURN(const json* f, Field(obj, name, json::value_t::string));
  auto bytes = crypt::Base64Decode(f->get<std::string>(), Base64Variant::kStandard);
  if (!bytes.ok()) return Damaged(std::string("field '") + name + "' is not valid base64");
  return bytes;
}

}  // namespace

std::vector<uint8_t> ConfigAssociatedData(const VaultConfig& c) {
  // "sigilfs-config" NUL, le32 version, cipher name NUL, le32 page size,
  // "argon2id" NUL, le64 opslimit, le64 memlimit, 16-byte salt, wrap algorithm name NUL.
  std::vector<uint8_t> ad;
  auto put_str = [&](std::string_view s) {
    ad.insert(ad.end(), s.begin(), s.end());
    ad.push_back(0);
  };
  auto put_int = [&](uint64_t v, int bytes) {
    uint8_t b[8];
    StoreLe64(b, v);
    ad.insert(ad.end(), b, b + bytes);
  };
  put_str("sigilfs-config");
  put_int(static_cast<uint32_t>(c.version), 4);
  put_str(crypt::AeadAlgorithmName(c.cipher));
  put_int(c.page_size, 4);
  put_str("argon2id");
  put_int(c.kdf.opslimit, 8);
  put_int(c.kdf.memlimit, 8);
  ad.insert(ad.end(), c.kdf_salt.begin(), c.kdf_salt.end());
  put_str(kWrapAlgorithm);
  return ad;
}

std::string SerializeConfig(const VaultConfig& c) {
  json j;
  j["format"] = kFormatName;
  j["version"] = c.version;
  j["cipher"] = std::string(crypt::AeadAlgorithmName(c.cipher));
  j["page_size"] = c.page_size;
  j["kdf"] = {{"algorithm", "argon2id"},
              {"opslimit", c.kdf.opslimit},
              {"memlimit", c.kdf.memlimit},
              {"salt", crypt::Base64Encode(c.kdf_salt, Base64Variant::kStandard)}};
  j["master_key"] = {{"wrap", kWrapAlgorithm},
                     {"nonce", crypt::Base64Encode(c.wrap_nonce, Base64Variant::kStandard)},
                     {"ciphertext", crypt::Base64Encode(c.wrapped_key, Base64Variant::kStandard)}};
  j["checksum"] = "sha256:" + ChecksumHex(c);
  return j.dump(2) + "\n";
}

Result<VaultConfig> ParseConfig(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Damaged(text.empty() ? "the file is empty" : "not valid JSON (truncated or edited?)");
  }
  if (!j.is_object()) return Damaged("not a JSON object");

  SIGILFS_ASSIGN_OR_RETURN(const json* format, Field(j, "format", json::value_t::string));
  if (format->get<std::string>() != kFormatName)
    return Damaged("not a sigilfs vault config (format '" + format->get<std::string>() + "')");
  // The version is checked before anything else it may change the meaning of.
  SIGILFS_ASSIGN_OR_RETURN(const json* version,
                           Field(j, "version", json::value_t::number_unsigned));
  VaultConfig c;
  if (version->get<uint64_t>() != kVaultFormatVersion)
    return Status(Code::kNotSupported, "vault format version " +
                                           std::to_string(version->get<uint64_t>()) +
                                           " is not supported (this sigilfs reads version " +
                                           std::to_string(kVaultFormatVersion) + ")");
  c.version = kVaultFormatVersion;
  SIGILFS_RETURN_IF_ERROR(OnlyKnownFields(
      j, {"format", "version", "cipher", "page_size", "kdf", "master_key", "checksum"}, "config"));

  SIGILFS_ASSIGN_OR_RETURN(const json* cipher, Field(j, "cipher", json::value_t::string));
  SIGILFS_ASSIGN_OR_RETURN(c.cipher, crypt::ParseAeadAlgorithm(cipher->get<std::string>()));

  SIGILFS_ASSIGN_OR_RETURN(const json* page, Field(j, "page_size", json::value_t::number_unsigned));
  if (page->get<uint64_t>() != kPageSize)
    return Status(Code::kNotSupported, "page size " + std::to_string(page->get<uint64_t>()) +
                                           " (only 4096 is supported)");
  c.page_size = kPageSize;

  SIGILFS_ASSIGN_OR_RETURN(const json* kdf, Field(j, "kdf", json::value_t::object));
  SIGILFS_RETURN_IF_ERROR(
      OnlyKnownFields(*kdf, {"algorithm", "opslimit", "memlimit", "salt"}, "kdf"));
  SIGILFS_ASSIGN_OR_RETURN(const json* alg, Field(*kdf, "algorithm", json::value_t::string));
  if (alg->get<std::string>() != "argon2id")
    return Status(Code::kNotSupported, "KDF '" + alg->get<std::string>() + "'");
  SIGILFS_ASSIGN_OR_RETURN(const json* ops,
                           Field(*kdf, "opslimit", json::value_t::number_unsigned));
  SIGILFS_ASSIGN_OR_RETURN(const json* mem,
                           Field(*kdf, "memlimit", json::value_t::number_unsigned));
  c.kdf = {ops->get<uint64_t>(), mem->get<uint64_t>()};
  if (Status s = crypt::ValidateArgon2Params(c.kdf); !s.ok()) return Damaged(s.message());
  SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> salt, Base64Field(*kdf, "salt"));
  if (salt.size() != c.kdf_salt.size()) return Damaged("KDF salt has the wrong length");
  std::copy(salt.begin(), salt.end(), c.kdf_salt.begin());

  SIGILFS_ASSIGN_OR_RETURN(const json* mk, Field(j, "master_key", json::value_t::object));
  SIGILFS_RETURN_IF_ERROR(OnlyKnownFields(*mk, {"wrap", "nonce", "ciphertext"}, "master_key"));
  SIGILFS_ASSIGN_OR_RETURN(const json* wrap, Field(*mk, "wrap", json::value_t::string));
  if (wrap->get<std::string>() != kWrapAlgorithm)
    return Status(Code::kNotSupported, "key wrap '" + wrap->get<std::string>() + "'");
  SIGILFS_ASSIGN_OR_RETURN(c.wrap_nonce, Base64Field(*mk, "nonce"));
  SIGILFS_ASSIGN_OR_RETURN(c.wrapped_key, Base64Field(*mk, "ciphertext"));
  if (c.wrap_nonce.size() != crypt::AeadNonceSize(crypt::AeadAlgorithm::kAes256Gcm))
    return Damaged("master key nonce has the wrong length");
  if (c.wrapped_key.size() != kMasterKeySize + crypt::kAeadTagSize)
    return Damaged("wrapped master key has the wrong length");

  SIGILFS_ASSIGN_OR_RETURN(const json* sum, Field(j, "checksum", json::value_t::string));
  if (sum->get<std::string>() != "sha256:" + ChecksumHex(c))
    return Damaged("checksum mismatch (the file was changed or corrupted)");
  return c;
}

}  // namespace sigilfs::core
