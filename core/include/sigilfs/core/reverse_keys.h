// Reverse mode's derivations: what the forward format draws at random (directory IVs, file
// nonces, unit nonces) derived instead from a subkey of the master key, the entry's place and,
// for what seals data, the data itself, so that the same plain tree gives the same vault bytes
// every time. Readers need none of it: a vault written this way opens as any other. Shared
// mounts draw their new directories' IVs from it as well (DirIvOfEntry).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "sigilfs/core/format.h"
#include "sigilfs/core/names.h"
#include "sigilfs/crypt/sha256.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

// Thread-safety: safe for concurrent access (every call is const).
class ReverseKeys {
 public:
  // From a vault's 32-byte master key (HKDF label "sigilfs v1 reverse").
  static Result<std::unique_ptr<ReverseKeys>> Derive(ByteSpan master_key);
  // From the subkey itself (VolumeKeys::reverse, derived with that label).
  static Result<std::unique_ptr<ReverseKeys>> FromSubkey(ByteSpan subkey);

  // A directory's IV, from its plain path below the tree's root ("" for the root).
  DirIv DirIvOf(std::string_view path) const;
  // The IV of a new directory made by a shared mount (`mount --shared`), from its parent's IV
  // and its stored name: two hosts that make the same directory before they sync write the same
  // IV, so a synchronizer never has two of one directory's IV (docs/design/shared.md, "Names").
  DirIv DirIvOfEntry(const DirIv& parent, std::string_view stored) const;
  // A regular file's header nonce, from its plain path: the same file keeps its nonce (and so
  // its unchanged pages their bytes) while it changes.
  FileNonce FileNonceOf(std::string_view path) const;
  // The header nonce of a file with several names (hard links), from its inode number: every
  // name shows the same bytes, as a copy that keeps the links needs.
  FileNonce FileNonceOfInode(uint64_t ino) const;
  // A unit's nonce, `out.size()` bytes (the AEAD's nonce size, at most 32): a synthetic nonce
  // over the unit's file, place, kind and plaintext. It repeats only where all of them do, and
  // then the unit sealed under it is the same bytes.
  void UnitNonce(const FileNonce& file, uint64_t index, UnitKind kind, bool last,
                 ByteSpan plaintext, MutableByteSpan out) const;
  // The nonce of a symlink target (`role` "target") or an attribute value (`role` the stored
  // attribute name) of the entry at plain path `path`, over the plaintext `value`.
  SealNonce ValueNonce(std::string_view role, std::string_view path, ByteSpan value) const;

 private:
  explicit ReverseKeys(ByteSpan subkey) : mac_(subkey) {}
  crypt::HmacSha256 mac_;
};

}  // namespace sigilfs::core
