// The vault config file: parameters, and the master key wrapped under the passphrase.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sigilfs/crypt/aead.h"
#include "sigilfs/crypt/kdf.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

inline constexpr char kConfigFileName[] = "sigilfs.conf";
// Reverse mode's config, in the plain directory whose encrypted view it opens: the same
// contents as a vault's, shown in the view as its kConfigFileName.
inline constexpr char kReverseConfigFileName[] = ".sigilfs-reverse.conf";
inline constexpr int kVaultFormatVersion = 1;
inline constexpr size_t kMasterKeySize = 32;

// Everything sigilfs.conf holds. Every field except the wrapped key itself and the checksum is
// associated data of the key wrap, so changing any of them makes the vault refuse to open.
struct VaultConfig {
  int version = kVaultFormatVersion;
  crypt::AeadAlgorithm cipher = crypt::AeadAlgorithm::kAes256Gcm;
  uint32_t page_size = 4096;
  crypt::Argon2Params kdf;
  std::array<uint8_t, crypt::kArgon2SaltSize> kdf_salt{};
  // AES-256-GCM nonce and (master key || tag) of the wrapped master key.
  std::vector<uint8_t> wrap_nonce;
  std::vector<uint8_t> wrapped_key;
};

// The exact bytes bound as associated data of the key wrap (docs/format.md spells them out).
std::vector<uint8_t> ConfigAssociatedData(const VaultConfig& config);

// Pretty-printed JSON, with a checksum that tells accidental damage from a wrong passphrase.
std::string SerializeConfig(const VaultConfig& config);

// Parses and checks the JSON: kCorrupt naming the problem (not JSON, missing or mistyped
// field, unknown field, bad checksum), kNotSupported for an unknown version, cipher or page size.
Result<VaultConfig> ParseConfig(std::string_view json);

}  // namespace sigilfs::core
