// A vault: a cipher directory with its config; creating one, unlocking it, changing its passphrase.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "sigilfs/core/config.h"
#include "sigilfs/core/keys.h"
#include "sigilfs/crypt/bytes.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

struct VaultCreateOptions {
  crypt::AeadAlgorithm cipher = crypt::AeadAlgorithm::kAes256Gcm;
  crypt::Argon2Params kdf = crypt::Argon2ParamsFor(crypt::KdfPreset::kModerate);
};

// An unlocked vault: its config and the subkeys derived from the master key (the master key
// itself is wiped once they are derived).
// Thread-safety: immutable after Unlock; safe for concurrent access.
class Vault {
 public:
  // Creates a vault in `dir` (made if absent; refused with kNotEmpty if it has any entry):
  // a random master key, wrapped under an Argon2id key of `passphrase`, written atomically.
  static Status Create(const std::string& dir, ByteSpan passphrase, const VaultCreateOptions& opts);

  // Reads and checks `dir`/sigilfs.conf without a passphrase (for `sigilfs info`).
  static Result<VaultConfig> LoadConfig(const std::string& dir);

  // Unwraps the master key: kWrongPassphrase if it does not open (or any bound field changed).
  static Result<std::unique_ptr<Vault>> Unlock(const std::string& dir, ByteSpan passphrase);

  // Re-wraps the master key under `new_passphrase` (with `new_kdf` cost if given, and always a
  // fresh salt and nonce). The data is untouched; the config is replaced atomically.
  static Status ChangePassphrase(const std::string& dir, ByteSpan old_passphrase,
                                 ByteSpan new_passphrase,
                                 std::optional<crypt::Argon2Params> new_kdf = std::nullopt);

  const std::string& dir() const { return dir_; }
  const VaultConfig& config() const { return config_; }
  const VolumeKeys& keys() const { return keys_; }

 private:
  Vault(std::string dir, VaultConfig config, VolumeKeys keys)
      : dir_(std::move(dir)), config_(std::move(config)), keys_(std::move(keys)) {}

  std::string dir_;
  VaultConfig config_;
  VolumeKeys keys_;
};

}  // namespace sigilfs::core
