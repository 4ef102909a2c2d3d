// The key hierarchy: master key -> volume subkeys -> per-file keys, all by HKDF-SHA256.
#pragma once

#include "sigilfs/core/format.h"
#include "sigilfs/crypt/secure_bytes.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

// Subkeys of one vault, each for one purpose (distinct HKDF labels keep them independent).
struct VolumeKeys {
  crypt::SecureBytes content;  // 32 bytes: parent of per-file page keys
  crypt::SecureBytes names;    // 64 bytes: AES-256-SIV key for file names
  crypt::SecureBytes reverse;  // 32 bytes: reverse mode's derivations (ReverseKeys)
};

Result<VolumeKeys> DeriveVolumeKeys(ByteSpan master_key);

// Per-file key: HKDF(content key, salt = file nonce, info = label). It seals every unit of the
// file — data pages, verity tree blocks and the verity record — each kind bound into its unit's
// associated data.
Result<crypt::SecureBytes> DeriveFileKey(ByteSpan content_key, const FileNonce& nonce);

}  // namespace sigilfs::core
