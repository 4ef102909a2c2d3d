// Reverse mode's derivations: HMAC-SHA256 under the reverse subkey, each input starting with a
// label of its own (and a NUL), the one field of variable length last.
#include "sigilfs/core/reverse_keys.h"

#include <algorithm>

#include "endian.h"
#include "sigilfs/crypt/kdf.h"

namespace sigilfs::core {
namespace {

ByteSpan Label(std::string_view label_with_nul) { return AsBytes(label_with_nul); }

}  // namespace

Result<std::unique_ptr<ReverseKeys>> ReverseKeys::Derive(ByteSpan master_key) {
  if (master_key.size() != 32) return Status(Code::kInvalidArgument, "master key must be 32 bytes");
  SIGILFS_ASSIGN_OR_RETURN(crypt::SecureBytes subkey,
                           crypt::HkdfSha256(master_key, {}, AsBytes("sigilfs v1 reverse"), 32));
  return FromSubkey(subkey.span());
}

Result<std::unique_ptr<ReverseKeys>> ReverseKeys::FromSubkey(ByteSpan subkey) {
  if (subkey.size() != 32) return Status(Code::kInvalidArgument, "reverse key must be 32 bytes");
  return std::unique_ptr<ReverseKeys>(new ReverseKeys(subkey));
}

DirIv ReverseKeys::DirIvOf(std::string_view path) const {
  const crypt::Sha256Digest mac = mac_.Mac({Label(std::string_view("dir-iv\0", 7)), AsBytes(path)});
  DirIv iv;
  std::copy_n(mac.begin(), iv.size(), iv.begin());
  return iv;
}

DirIv ReverseKeys::DirIvOfEntry(const DirIv& parent, std::string_view stored) const {
  const crypt::Sha256Digest mac =
      mac_.Mac({Label(std::string_view("shared-dir-iv\0", 14)), parent, AsBytes(stored)});
  DirIv iv;
  std::copy_n(mac.begin(), iv.size(), iv.begin());
  return iv;
}

FileNonce ReverseKeys::FileNonceOf(std::string_view path) const {
  const crypt::Sha256Digest mac = mac_.Mac({Label(std::string_view("file\0", 5)), AsBytes(path)});
  FileNonce nonce;
  std::copy_n(mac.begin(), nonce.size(), nonce.begin());
  return nonce;
}

FileNonce ReverseKeys::FileNonceOfInode(uint64_t ino) const {
  uint8_t le[8];
  StoreLe64(le, ino);
  const crypt::Sha256Digest mac = mac_.Mac({Label(std::string_view("inode\0", 6)), le});
  FileNonce nonce;
  std::copy_n(mac.begin(), nonce.size(), nonce.begin());
  return nonce;
}

void ReverseKeys::UnitNonce(const FileNonce& file, uint64_t index, UnitKind kind, bool last,
                            ByteSpan plaintext, MutableByteSpan out) const {
  uint8_t place[10];
  StoreLe64(place, index);
  place[8] = static_cast<uint8_t>(kind);
  place[9] = last ? 1 : 0;
  const crypt::Sha256Digest mac =
      mac_.Mac({Label(std::string_view("unit\0", 5)), file, place, plaintext});
  std::copy_n(mac.begin(), std::min(out.size(), mac.size()), out.begin());
}

SealNonce ReverseKeys::ValueNonce(std::string_view role, std::string_view path,
                                  ByteSpan value) const {
  // Neither a role nor a path holds a NUL, so each ends where its NUL is.
  const uint8_t nul = 0;
  const crypt::Sha256Digest mac =
      mac_.Mac({Label(std::string_view("value\0", 6)), AsBytes(role), ByteSpan(&nul, 1),
                AsBytes(path), ByteSpan(&nul, 1), value});
  SealNonce nonce;
  std::copy_n(mac.begin(), nonce.size(), nonce.begin());
  return nonce;
}

}  // namespace sigilfs::core
