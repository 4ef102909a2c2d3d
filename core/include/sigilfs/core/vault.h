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

  // Reverse mode (sigilfs/core/reverse.h): a config for the encrypted view of plain directory
  // `plain_dir` (which may hold anything), written there as kReverseConfigFileName (kExists if
  // one is there already).
  static Status CreateReverse(const std::string& plain_dir, ByteSpan passphrase,
                              const VaultCreateOptions& opts);

  // Reads and checks `dir`/sigilfs.conf (or `config_name`) without a passphrase.
  static Result<VaultConfig> LoadConfig(const std::string& dir,
                                        const std::string& config_name = kConfigFileName);

  // Unwraps the master key: kWrongPassphrase if it does not open (or any bound field changed).
  // `config_name`: kReverseConfigFileName for a reverse view's plain directory.
  static Result<std::unique_ptr<Vault>> Unlock(const std::string& dir, ByteSpan passphrase,
                                               const std::string& config_name = kConfigFileName);

  // Re-wraps the master key under `new_passphrase` (with `new_kdf` cost if given, and always a
  // fresh salt and nonce). The data is untouched; the config is replaced atomically.
  static Status ChangePassphrase(const std::string& dir, ByteSpan old_passphrase,
                                 ByteSpan new_passphrase,
                                 std::optional<crypt::Argon2Params> new_kdf = std::nullopt,
                                 const std::string& config_name = kConfigFileName);

  const std::string& dir() const { return dir_; }
  // A reverse view's keys, unlocked from the plain directory's kReverseConfigFileName: its
  // volume reads the plain tree through the view, and writes nothing there.
  bool reverse() const { return reverse_; }
  const VaultConfig& config() const { return config_; }
  const VolumeKeys& keys() const { return keys_; }

 private:
  Vault(std::string dir, bool reverse, VaultConfig config, VolumeKeys keys)
      : dir_(std::move(dir)),
        reverse_(reverse),
        config_(std::move(config)),
        keys_(std::move(keys)) {}

  std::string dir_;
  bool reverse_;
  VaultConfig config_;
  VolumeKeys keys_;
};

}  // namespace sigilfs::core
