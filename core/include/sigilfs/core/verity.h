// fs-verity (v1, SHA-256, 4096-byte blocks) Merkle trees over plaintext, and where a sealed
// cipher file keeps them. docs/format.md ("Sealed files") describes the same bytes.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sigilfs/core/format.h"
#include "sigilfs/crypt/bytes.h"
#include "sigilfs/crypt/sha256.h"
#include "sigilfs/crypt/sha256_multi.h"
#include "sigilfs/status.h"

namespace sigilfs::core::verity {

inline constexpr size_t kBlockSize = 4096;
inline constexpr size_t kDigestSize = crypt::kSha256Size;
inline constexpr size_t kHashesPerBlock = kBlockSize / kDigestSize;  // 128
inline constexpr size_t kMaxSaltSize = 32;
inline constexpr size_t kDescriptorSize = 256;
inline constexpr uint8_t kHashAlgorithmSha256 = 1;
inline constexpr uint8_t kLogBlockSize = 12;

using Digest = crypt::Sha256Digest;
using Descriptor = std::array<uint8_t, kDescriptorSize>;

// The shape of the tree over `data_size` bytes: levels counted from 0 (the hashes of the data
// blocks) upwards; stored with the top level first. A file of at most one block has no tree
// (its root hash is the hash of that block, or all zeros when empty).
class TreeLayout {
 public:
  explicit TreeLayout(uint64_t data_size);
  uint64_t data_size() const { return data_size_; }
  uint64_t data_blocks() const { return data_blocks_; }
  int levels() const { return static_cast<int>(blocks_.size()); }
  uint64_t blocks_in_level(int level) const { return blocks_[static_cast<size_t>(level)]; }
  // Stored index of the first block of `level` (the top level starts at 0).
  uint64_t level_start(int level) const { return starts_[static_cast<size_t>(level)]; }
  uint64_t total_blocks() const { return total_; }

 private:
  uint64_t data_size_;
  uint64_t data_blocks_;
  std::vector<uint64_t> blocks_;
  std::vector<uint64_t> starts_;
  uint64_t total_ = 0;
};

// SHA-256(padded salt || block) with the padded salt absorbed once; two blocks at a time where
// the CPU has SHA-NI.
// Thread-safety: safe for concurrent access (const).
class BlockHasher {
 public:
  explicit BlockHasher(ByteSpan salt);  // at most kMaxSaltSize bytes (checked by the callers)
  Digest Hash(ByteSpan block) const;    // block is kBlockSize bytes
  void Hash2(ByteSpan a, ByteSpan b, Digest& out_a, Digest& out_b) const;
  const std::vector<uint8_t>& salt() const { return salt_; }

 private:
  std::vector<uint8_t> salt_;
  crypt::Sha256Midstate midstate_;
};

// The whole tree in stored order and its root hash, from the hashes of every data block.
struct Tree {
  std::vector<uint8_t> blocks;  // total_blocks() * kBlockSize bytes
  Digest root{};
};
Tree BuildTree(const TreeLayout& layout, const BlockHasher& hasher,
               std::span<const Digest> data_hashes);

// The 256-byte fs-verity descriptor, and the file digest (its SHA-256) that `fsverity measure`
// prints.
Descriptor EncodeDescriptor(uint64_t data_size, const Digest& root, ByteSpan salt);
struct DecodedDescriptor {
  uint64_t data_size = 0;
  Digest root{};
  std::vector<uint8_t> salt;
};
// kCorrupt unless it is a v1 SHA-256 4096-byte-block descriptor without signature.
Result<DecodedDescriptor> DecodeDescriptor(ByteSpan in);
Digest FileDigest(const Descriptor& descriptor);

// Where a sealed cipher file keeps everything: the data units as in any file, then the tree
// blocks as units from the next 64 KiB boundary of the unit grid, then the record unit, then
// (in files sealed with pins) the pin blocks, then an 8-byte trailer (le64 data size) that makes
// the length tell a sealed file from an unsealed one (no unsealed length leaves 1..overhead
// bytes after the last whole unit).
struct SealedLayout {
  uint64_t data_size = 0;
  uint64_t data_pages = 0;
  uint64_t tree_first_unit = 0;  // unit index of stored tree block 0
  uint64_t tree_blocks = 0;
  uint64_t record_unit = 0;
  uint64_t pin_first_unit = 0;  // unit index of pin block 0 (record_unit + 1)
  uint64_t pin_blocks = 0;      // 0 in files sealed without pins, and for empty files
  uint64_t cipher_size = 0;
};
inline constexpr uint64_t kTreeAlignUnits = 16;  // 64 KiB of plaintext
inline constexpr size_t kTrailerSize = 8;
SealedLayout LayoutOf(const PageGeometry& geometry, uint64_t data_size, bool pinned);
// True if a cipher file of this length can only be a sealed one (or an interrupted seal).
bool LooksSealed(const PageGeometry& geometry, uint64_t cipher_size);
// The layout a sealed file's trailer (its last kTrailerSize bytes) states, with or without pins,
// whichever accounts for exactly `cipher_size` bytes; kCorrupt if neither does.
Result<SealedLayout> LayoutFromTrailer(const PageGeometry& geometry, uint64_t cipher_size,
                                       ByteSpan trailer);

// Pin blocks: the nonce of every data unit as sealed, so a read can tell the sealed version of a
// page from any other by comparing nonces (docs/design/verity.md, "Pinned nonces"). Each block's
// plaintext is the root hash (binding it to this seal's tree), then the nonces of
// PinsPerBlock() consecutive data pages, zero-padded; a hole's nonce is pinned as zeros.
inline constexpr size_t kPinBlockHeader = kDigestSize;
inline size_t PinsPerBlock(const PageGeometry& geometry) {
  return (kBlockSize - kPinBlockHeader) / geometry.nonce_size();
}
inline uint64_t PinBlockCount(const PageGeometry& geometry, uint64_t data_pages) {
  const uint64_t per = PinsPerBlock(geometry);
  return (data_pages + per - 1) / per;
}

// The record's plaintext (one full unit): the descriptor, le64 tree block count, le64 pin block
// count, le64 flags (bit 0: the data's last page is bound, UnitKind::kSealedLastPage), zeros.
inline constexpr size_t kRecordSize = kPageSize;
inline constexpr uint64_t kRecordFlagBound = 1;
std::vector<uint8_t> EncodeRecord(const Descriptor& descriptor, uint64_t tree_blocks,
                                  uint64_t pin_blocks, bool bound);
struct Record {
  Descriptor descriptor{};
  DecodedDescriptor decoded;
  uint64_t tree_blocks = 0;
  uint64_t pin_blocks = 0;  // checked against the layout by the reader, who knows the geometry
  // The data's last page was sealed again as the seal's commit point (files sealed before this
  // flag existed have it clear).
  bool bound = false;
};
Result<Record> DecodeRecord(ByteSpan in);

}  // namespace sigilfs::core::verity
