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
  crypt::SecureBytes verity;   // 32 bytes: parent of per-file verity (tree and record) keys
};

Result<VolumeKeys> DeriveVolumeKeys(ByteSpan master_key);

// Per-file key for data pages: HKDF(content key, salt = file nonce, info = label).
Result<crypt::SecureBytes> DeriveFileKey(ByteSpan content_key, const FileNonce& nonce);
// Per-file key for the verity tree and record of a sealed file.
Result<crypt::SecureBytes> DeriveVerityKey(ByteSpan verity_key, const FileNonce& nonce);

}  // namespace sigilfs::core
