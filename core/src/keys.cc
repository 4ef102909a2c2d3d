// HKDF labels and derivations of the key hierarchy (docs/format.md, "Keys").
#include "sigilfs/core/keys.h"

#include "sigilfs/crypt/kdf.h"

namespace sigilfs::core {

Result<VolumeKeys> DeriveVolumeKeys(ByteSpan master_key) {
  if (master_key.size() != 32) return Status(Code::kInvalidArgument, "master key must be 32 bytes");
  VolumeKeys keys;
  SIGILFS_ASSIGN_OR_RETURN(keys.content,
                           crypt::HkdfSha256(master_key, {}, AsBytes("sigilfs v1 content"), 32));
  SIGILFS_ASSIGN_OR_RETURN(keys.names,
                           crypt::HkdfSha256(master_key, {}, AsBytes("sigilfs v1 names"), 64));
  SIGILFS_ASSIGN_OR_RETURN(keys.reverse,
                           crypt::HkdfSha256(master_key, {}, AsBytes("sigilfs v1 reverse"), 32));
  return keys;
}

Result<crypt::SecureBytes> DeriveFileKey(ByteSpan content_key, const FileNonce& nonce) {
  return crypt::HkdfSha256(content_key, nonce, AsBytes("sigilfs v1 file"), 32);
}

}  // namespace sigilfs::core
