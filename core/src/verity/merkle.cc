// fs-verity Merkle tree arithmetic, building, descriptor and the sealed-file layout.
#include <algorithm>
#include <cstring>

#include "endian.h"
#include "sigilfs/core/verity.h"

namespace sigilfs::core::verity {
namespace {

// The salt as fs-verity hashes it: zero-padded to a multiple of SHA-256's 64-byte block.
std::vector<uint8_t> PaddedSalt(ByteSpan salt) {
  std::vector<uint8_t> padded(salt.begin(), salt.end());
  padded.resize((salt.size() + 63) / 64 * 64, 0);
  return padded;
}

}  // namespace

TreeLayout::TreeLayout(uint64_t data_size)
    : data_size_(data_size), data_blocks_((data_size + kBlockSize - 1) / kBlockSize) {
  // Level L has ceil(blocks below / 128) blocks; stop when a level fits in one block.
  uint64_t below = data_blocks_;
  while (below > 1) {
    const uint64_t n = (below + kHashesPerBlock - 1) / kHashesPerBlock;
    blocks_.push_back(n);
    below = n;
  }
  starts_.resize(blocks_.size());
  uint64_t at = 0;
  for (size_t level = blocks_.size(); level-- > 0;) {  // top level first
    starts_[level] = at;
    at += blocks_[level];
  }
  total_ = at;
}

BlockHasher::BlockHasher(ByteSpan salt)
    : salt_(salt.begin(), salt.end()),
      // A padded salt is whole 64-byte blocks by construction, so Create cannot fail.
      midstate_(crypt::Sha256Midstate::Create(PaddedSalt(salt)).value()) {}

Digest BlockHasher::Hash(ByteSpan block) const { return midstate_.Hash(block); }

void BlockHasher::Hash2(ByteSpan a, ByteSpan b, Digest& out_a, Digest& out_b) const {
  midstate_.Hash2(a, b, out_a, out_b);
}

Tree BuildTree(const TreeLayout& layout, const BlockHasher& hasher,
               std::span<const Digest> data_hashes) {
  Tree tree;
  tree.blocks.assign(layout.total_blocks() * kBlockSize, 0);
  if (layout.data_blocks() == 0) return tree;  // empty file: root all zeros
  if (layout.levels() == 0) {
    tree.root = data_hashes[0];
    return tree;
  }
  std::span<const Digest> below = data_hashes;
  std::vector<Digest> next;
  for (int level = 0; level < layout.levels(); ++level) {
    uint8_t* base = tree.blocks.data() + layout.level_start(level) * kBlockSize;
    for (size_t i = 0; i < below.size(); ++i)
      std::memcpy(base + i * kDigestSize, below[i].data(), kDigestSize);
    std::vector<Digest> hashes(layout.blocks_in_level(level));
    for (uint64_t b = 0; b < hashes.size(); ++b)
      hashes[b] = hasher.Hash(ByteSpan(base + b * kBlockSize, kBlockSize));
    next = std::move(hashes);
    below = next;
  }
  tree.root = next[0];
  return tree;
}

Descriptor EncodeDescriptor(uint64_t data_size, const Digest& root, ByteSpan salt) {
  Descriptor d{};
  d[0] = 1;  // version
  d[1] = kHashAlgorithmSha256;
  d[2] = kLogBlockSize;
  d[3] = static_cast<uint8_t>(salt.size());
  // [4, 8): signature size, 0
  StoreLe64(d.data() + 8, data_size);
  std::memcpy(d.data() + 16, root.data(), kDigestSize);  // root_hash[64], zero past the digest
  if (!salt.empty())  // an empty span's data() may be null, which memcpy must not get
    std::memcpy(d.data() + 80, salt.data(), std::min(salt.size(), kMaxSaltSize));  // salt[32]
  return d;  // reserved[144] stays zero
}

Result<DecodedDescriptor> DecodeDescriptor(ByteSpan in) {
  if (in.size() != kDescriptorSize) return Status(Code::kCorrupt, "verity descriptor size");
  if (in[0] != 1 || in[1] != kHashAlgorithmSha256 || in[2] != kLogBlockSize ||
      in[3] > kMaxSaltSize || LoadLe32(in.data() + 4) != 0)
    return Status(Code::kCorrupt, "verity descriptor: unsupported parameters");
  if (!IsAllZero(in.subspan(16 + kDigestSize, 64 - kDigestSize)) ||
      !IsAllZero(in.subspan(80 + in[3], kMaxSaltSize - in[3])) || !IsAllZero(in.subspan(112)))
    return Status(Code::kCorrupt, "verity descriptor: non-zero padding");
  DecodedDescriptor out;
  out.data_size = LoadLe64(in.data() + 8);
  std::memcpy(out.root.data(), in.data() + 16, kDigestSize);
  out.salt.assign(in.begin() + 80, in.begin() + 80 + in[3]);
  return out;
}

Digest FileDigest(const Descriptor& descriptor) { return crypt::Sha256(descriptor); }

SealedLayout LayoutOf(const PageGeometry& geometry, uint64_t data_size, bool pinned) {
  SealedLayout l;
  l.data_size = data_size;
  l.data_pages = PageGeometry::PageCount(data_size);
  l.tree_first_unit = (l.data_pages + kTreeAlignUnits - 1) / kTreeAlignUnits * kTreeAlignUnits;
  l.tree_blocks = TreeLayout(data_size).total_blocks();
  l.record_unit = l.tree_first_unit + l.tree_blocks;
  l.pin_first_unit = l.record_unit + 1;
  l.pin_blocks = pinned ? PinBlockCount(geometry, l.data_pages) : 0;
  l.cipher_size = geometry.UnitOffset(l.pin_first_unit + l.pin_blocks) + kTrailerSize;
  return l;
}

bool LooksSealed(const PageGeometry& geometry, uint64_t cipher_size) {
  return cipher_size >= geometry.UnitOffset(1) + kTrailerSize &&
         (cipher_size - kFileHeaderSize) % geometry.unit_size() == kTrailerSize;
}

Result<SealedLayout> LayoutFromTrailer(const PageGeometry& geometry, uint64_t cipher_size,
                                       ByteSpan trailer) {
  if (trailer.size() != kTrailerSize) return Status(Code::kCorrupt, "verity trailer truncated");
  const uint64_t data_size = LoadLe64(trailer.data());
  if (data_size > cipher_size) return Status(Code::kCorrupt, "verity trailer out of range");
  for (bool pinned : {true, false}) {
    const SealedLayout layout = LayoutOf(geometry, data_size, pinned);
    if (layout.cipher_size == cipher_size) return layout;
  }
  return Status(Code::kCorrupt, "verity trailer does not match the file's length");
}

std::vector<uint8_t> EncodeRecord(const Descriptor& descriptor, uint64_t tree_blocks,
                                  uint64_t pin_blocks, bool bound) {
  std::vector<uint8_t> r(kRecordSize, 0);
  std::memcpy(r.data(), descriptor.data(), kDescriptorSize);
  StoreLe64(r.data() + kDescriptorSize, tree_blocks);
  StoreLe64(r.data() + kDescriptorSize + 8, pin_blocks);
  StoreLe64(r.data() + kDescriptorSize + 16, bound ? kRecordFlagBound : 0);
  return r;
}

Result<Record> DecodeRecord(ByteSpan in) {
  if (in.size() != kRecordSize) return Status(Code::kCorrupt, "verity record size");
  Record r;
  std::memcpy(r.descriptor.data(), in.data(), kDescriptorSize);
  SIGILFS_ASSIGN_OR_RETURN(r.decoded, DecodeDescriptor(r.descriptor));
  r.tree_blocks = LoadLe64(in.data() + kDescriptorSize);
  r.pin_blocks = LoadLe64(in.data() + kDescriptorSize + 8);
  const uint64_t flags = LoadLe64(in.data() + kDescriptorSize + 16);
  r.bound = (flags & kRecordFlagBound) != 0;
  // At most one pin block per data page (the fewest pins a block holds is 169); an empty file
  // has no page to bind.
  if (r.tree_blocks != TreeLayout(r.decoded.data_size).total_blocks() ||
      r.pin_blocks > PageGeometry::PageCount(r.decoded.data_size) ||
      (flags & ~kRecordFlagBound) != 0 || (r.bound && r.decoded.data_size == 0) ||
      !IsAllZero(in.subspan(kDescriptorSize + 24)))
    return Status(Code::kCorrupt, "verity record does not match its descriptor");
  return r;
}

}  // namespace sigilfs::core::verity
