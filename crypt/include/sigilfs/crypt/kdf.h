// Key derivation: Argon2id for passphrases, HKDF-SHA256 for subkeys and per-file keys.
#pragma once

#include <cstdint>
#include <string_view>

#include "sigilfs/crypt/bytes.h"
#include "sigilfs/crypt/secure_bytes.h"
#include "sigilfs/status.h"

namespace sigilfs::crypt {

// Argon2id cost, as stored in a vault config.
struct Argon2Params {
  uint64_t opslimit = 0;  // passes over memory (libsodium's opslimit)
  uint64_t memlimit = 0;  // bytes of memory
};

// Named cost presets. kTest is the cheapest libsodium allows: for tests only.
enum class KdfPreset { kInteractive, kModerate, kSensitive, kTest };
Argon2Params Argon2ParamsFor(KdfPreset preset);
Result<KdfPreset> ParseKdfPreset(std::string_view name);
// Rejects costs outside what libsodium accepts and what a config may sensibly ask for (so a
// damaged config cannot make us allocate terabytes before the tag check refuses it).
Status ValidateArgon2Params(const Argon2Params& params);

inline constexpr size_t kArgon2SaltSize = 16;

// Derives `out_size` bytes from a passphrase with Argon2id v1.3 (libsodium crypto_pwhash).
Result<SecureBytes> Argon2id(ByteSpan passphrase, ByteSpan salt, const Argon2Params& params,
                             size_t out_size);

// HKDF-SHA256 (RFC 5869): extract with `salt` (may be empty), expand with `info` to `out_size`.
Result<SecureBytes> HkdfSha256(ByteSpan ikm, ByteSpan salt, ByteSpan info, size_t out_size);

}  // namespace sigilfs::crypt
