// Sealed (fs-verity) files in the page layer: sealing a file, loading a sealed one, and the tree
// and pin blocks that every page read is checked against.
#include <cerrno>
#include <cstring>
#include <optional>
#include <shared_mutex>

#include "endian.h"
#include "file_contents_internal.h"
#include "sigilfs/crypt/secure_bytes.h"
#include "thread_pool.h"

namespace sigilfs::core {
namespace {

// Sealing reads and hashes 4 MiB of plaintext per step (the kernel reads the next step's
// ciphertext meanwhile), in pieces of 128 KiB that each core reads, opens and hashes alone.
constexpr size_t kSealChunkPages = 1024;
constexpr size_t kSealPiecePages = 32;
// Level-0 tree blocks (each covers 512 KiB of data) or pin blocks (1.3 MiB with AES-GCM's
// nonces) read together when a read needs one.
constexpr uint64_t kSideReadAheadBlocks = 32;

Status NotSealed(const std::string& label) {
  return Status(Code::kNotFound, label + ": not a verity file", ENODATA);
}

Result<verity::SealedLayout> ReadTrailer(BackingFile& backing, const PageGeometry& g,
                                         uint64_t cipher_size) {
  std::array<uint8_t, verity::kTrailerSize> trailer{};
  SIGILFS_ASSIGN_OR_RETURN(size_t got, backing.ReadAt(trailer, cipher_size - trailer.size()));
  return verity::LayoutFromTrailer(g, cipher_size, ByteSpan(trailer).first(got));
}

}  // namespace

Status FileContents::Frozen() const {
  if (!frozen_) return Status::Ok();
  return Status(Code::kPermissionDenied, label_ + ": sealed (verity) file", EPERM);
}

bool FileContents::sealed() const { return sealed_.load(std::memory_order_acquire) != nullptr; }

Result<verity::Descriptor> FileContents::VerityDescriptor() const {
  Section section(*this, FileLock::kShared);
  SIGILFS_RETURN_IF_ERROR(section.status());
  const Sealed* sealed = sealed_.load(std::memory_order_acquire);
  if (sealed == nullptr) return NotSealed(label_);
  return sealed->record.descriptor;
}

Result<verity::Record> FileContents::ReadRecord(const Key& key,
                                                const verity::SealedLayout& layout) {
  const PageGeometry& g = layer_.geometry_;
  std::vector<uint8_t> unit(verity::kRecordSize + g.overhead());
  SIGILFS_ASSIGN_OR_RETURN(size_t got, backing_->ReadAt(unit, g.UnitOffset(layout.record_unit)));
  if (got != unit.size()) return Status(Code::kCorrupt, label_ + ": verity record truncated");
  std::vector<uint8_t> plain(verity::kRecordSize);
  Status s = key.codec.Open(0, UnitKind::kSealedRecord, true, unit, plain);
  if (!s.ok()) return s.WithContext(label_ + ": verity record");
  auto record = verity::DecodeRecord(plain);
  if (!record.ok()) return record.status().WithContext(label_);
  if (record->decoded.data_size != layout.data_size)
    return Status(Code::kCorrupt, label_ + ": verity record and trailer disagree on the size");
  // The record is authenticated, the length is not: a table of pins cut off (or added) fails.
  if (record->pin_blocks != layout.pin_blocks)
    return Status(Code::kCorrupt, label_ + ": verity record and length disagree on the pins");
  return record;
}

Status FileContents::LoadSealed(const FileHeader& header, uint64_t cipher_size) {
  const PageGeometry& g = layer_.geometry_;
  if (!verity::LooksSealed(g, cipher_size))
    return Status(Code::kCorrupt, label_ + ": sealed file of a length no sealed file has");
  auto layout = ReadTrailer(*backing_, g, cipher_size);
  if (!layout.ok()) return layout.status().WithContext(label_);
  if (((header.flags & kFileFlagPinned) != 0) != (layout->pin_blocks > 0))
    return Status(Code::kCorrupt,
                  label_ + ": sealed file whose header and length disagree on pins");
  SIGILFS_ASSIGN_OR_RETURN(auto key, MakeKey(header.nonce));
  SIGILFS_ASSIGN_OR_RETURN(verity::Record record, ReadRecord(*key, *layout));
  if (((header.flags & kFileFlagBound) != 0) != record.bound)
    return Status(Code::kCorrupt,
                  label_ + ": sealed file whose header and record disagree on its last page");
  AdoptSeal(*layout, record, std::move(key));
  return Status::Ok();
}

void FileContents::AdoptSeal(const verity::SealedLayout& layout, const verity::Record& record,
                             std::shared_ptr<const Key> key) {
  key_ = std::move(key);
  sealed_owner_ = std::make_unique<const Sealed>(layout, record);
  sealed_.store(sealed_owner_.get(), std::memory_order_release);
  frozen_ = true;
  size_ = disk_size_ = layout.data_size;
  header_on_disk_ = true;
}

void FileContents::AdoptUnsealedData(uint64_t data_size, std::shared_ptr<const Key> key) {
  size_ = disk_size_ = data_size;
  stale_tail_ = true;          // cut at the first change, not by this open
  if (data_size == 0) return;  // the cut leaves nothing: the next write starts a new file
  header_on_disk_ = true;
  key_ = std::move(key);
}

// Sealing writes the trailer, then the tree, record and pins past the data, then (the commit
// point) the data's last page sealed again as a bound last page, and last the header's flags
// (docs/format.md, "Sealing order"). A file whose header is not sealed but whose length is a
// sealed file's is one of:
// - a seal interrupted before its commit point: its data is as it was, and it opens as the
//   unsealed file it still is, the tail past its data cut at the first change (never by an
//   open, which may only be reading);
// - a seal interrupted after its commit point, or a sealed file whose flags were cleared: it
//   opens sealed, every read checked as in any sealed file;
// - a torn tail whose remainder happens to be the trailer's 8 bytes (false: opened as such).
// The bound last page decides, because only a seal that reached its commit point writes one and
// nobody without the key can make one: a record that authenticates and binds, over a last page
// that opens as an unsealed one, is a seal that never committed. Files sealed before binding
// (the record does not bind) whose record authenticates open sealed (finished, not undone), so
// clearing their flag changes nothing either. The trailer, which is not authenticated, never
// decides on its own.
Result<bool> FileContents::LoadUnflaggedSeal(const FileHeader& header, uint64_t cipher_size) {
  const PageGeometry& g = layer_.geometry_;
  // Damage (bytes that do not decode or authenticate) means "not a seal"; a failing read is
  // an error of its own.
  auto damaged = [](const Status& s) {
    return s.code() == Code::kCorrupt || s.code() == Code::kAuthFailed;
  };
  auto layout = ReadTrailer(*backing_, g, cipher_size);
  if (!layout.ok()) {
    if (!damaged(layout.status())) return layout.status().WithContext(label_);
    return false;  // no trailer accounts for this length: a torn tail
  }
  SIGILFS_ASSIGN_OR_RETURN(auto key, MakeKey(header.nonce));
  const uint64_t data_size = layout->data_size;
  const uint64_t last_index = PageGeometry::PageCount(data_size) - 1;  // when data_size > 0
  auto record = ReadRecord(*key, *layout);
  if (record.ok()) {
    if (record->bound) {
      SIGILFS_ASSIGN_OR_RETURN(LastPage last, ProbeLastPage(*key, last_index, data_size, true));
      if (last.kind == LastPage::kUnsealed) {
        AdoptUnsealedData(data_size, std::move(key));
        InsertPageLocked(last_index, std::move(last.plain), false);
        return true;
      }
      // Committed (a bound last page), or a last page that opens as neither: sealed either way,
      // and reads of that page fail.
    }
    AdoptSeal(*layout, *record, std::move(key));
    seal_unflagged_ = true;
    return true;
  }
  if (!damaged(record.status())) return record.status();
  // No record that authenticates: the seal was interrupted before writing it, or the record was
  // damaged. The data alone must show which.
  if (data_size == 0) {
    // An empty file has no data page to vouch for its trailer. Before its record is written,
    // all that precedes the trailer is the header and the hole where the record goes.
    std::vector<uint8_t> unit(g.unit_size());
    SIGILFS_ASSIGN_OR_RETURN(size_t got, backing_->ReadAt(unit, g.UnitOffset(0)));
    if (got != unit.size() || !IsAllZero(unit)) return false;
    AdoptUnsealedData(0, std::move(key));
    return true;
  }
  SIGILFS_ASSIGN_OR_RETURN(LastPage last, ProbeLastPage(*key, last_index, data_size, true));
  switch (last.kind) {
    case LastPage::kUnsealed:
      AdoptUnsealedData(data_size, std::move(key));
      InsertPageLocked(last_index, std::move(last.plain), false);
      return true;
    case LastPage::kBound:
      return Status(Code::kCorrupt, label_ + ": a sealed file whose verity record is damaged");
    case LastPage::kNeither:
      break;
  }
  return false;
}

Result<FileContents::TreeBlock> FileContents::OpenTreeBlock(const Sealed& sealed, const Key& key,
                                                            int level, uint64_t index,
                                                            ByteSpan unit) {
  const uint64_t stored = sealed.tree.level_start(level) + index;
  const std::string where = label_ + ": verity tree block " + std::to_string(stored);
  if (unit.size() != layer_.geometry_.unit_size())
    return Status(Code::kCorrupt, where + " truncated");
  auto block = std::make_shared<std::array<uint8_t, verity::kBlockSize>>();
  Status s = key.codec.Open(stored, UnitKind::kTreeBlock, stored + 1 == sealed.tree.total_blocks(),
                            unit, *block);
  if (!s.ok()) return s.WithContext(where);
  // Its hash is in the block above it (verified first, recursively), or is the root.
  const uint8_t* expect = sealed.record.decoded.root.data();
  TreeBlock parent;
  if (level + 1 < sealed.tree.levels()) {
    SIGILFS_ASSIGN_OR_RETURN(
        parent, VerifiedTreeBlock(sealed, key, level + 1, index / verity::kHashesPerBlock));
    expect = parent->data() + (index % verity::kHashesPerBlock) * verity::kDigestSize;
  }
  const verity::Digest hash = sealed.hasher.Hash(*block);
  if (std::memcmp(hash.data(), expect, verity::kDigestSize) != 0)
    return Status(Code::kAuthFailed, where + " does not match the tree above it");
  Count(PageCounter::kVerityTreeBlocksRead);
  return Keep(sealed, stored, std::move(block));
}

Result<FileContents::TreeBlock> FileContents::OpenPinBlock(const Sealed& sealed, const Key& key,
                                                           uint64_t index, ByteSpan unit) {
  const std::string where = label_ + ": verity pin block " + std::to_string(index);
  if (unit.size() != layer_.geometry_.unit_size())
    return Status(Code::kCorrupt, where + " truncated");
  auto block = std::make_shared<std::array<uint8_t, verity::kBlockSize>>();
  Status s = key.codec.Open(index, UnitKind::kPinBlock, index + 1 == sealed.layout.pin_blocks, unit,
                            *block);
  if (!s.ok()) return s.WithContext(where);
  // Pins of an earlier, interrupted seal of this file (same key, other data) carry another root.
  if (std::memcmp(block->data(), sealed.record.decoded.root.data(), verity::kPinBlockHeader) != 0)
    return Status(Code::kAuthFailed, where + " belongs to another seal");
  Count(PageCounter::kVerityPinBlocksRead);
  return Keep(sealed, sealed.tree.total_blocks() + index, std::move(block));
}

bool FileContents::PinMatches(std::span<const TreeBlock> pins, uint64_t first, size_t i,
                              ByteSpan unit) const {
  const PageGeometry& g = layer_.geometry_;
  const uint64_t per = verity::PinsPerBlock(g);
  const uint64_t index = first + i;
  const uint8_t* pin = pins[index / per - first / per]->data() + verity::kPinBlockHeader +
                       (index % per) * g.nonce_size();
  return std::memcmp(pin, unit.data(), g.nonce_size()) == 0;
}

Result<FileContents::TreeBlock> FileContents::VerifiedTreeBlock(const Sealed& sealed,
                                                                const Key& key, int level,
                                                                uint64_t index) {
  const uint64_t stored = sealed.tree.level_start(level) + index;
  {
    MutexLock lock(sealed.mu);
    if (auto it = sealed.verified.find(stored); it != sealed.verified.end()) return it->second;
  }
  const PageGeometry& g = layer_.geometry_;
  std::vector<uint8_t> unit(g.unit_size());
  SIGILFS_ASSIGN_OR_RETURN(
      size_t got, backing_->ReadAt(unit, g.UnitOffset(sealed.layout.tree_first_unit + stored)));
  Count(PageCounter::kBackingBytesRead, got);
  return OpenTreeBlock(sealed, key, level, index, ByteSpan(unit).first(got));
}

Result<std::vector<FileContents::TreeBlock>> FileContents::Level0Blocks(
    const Sealed& sealed, const Key& key, uint64_t first, size_t count, Status& later) {
  if (sealed.tree.levels() == 0 || count == 0) return std::vector<TreeBlock>{};  // the root
  const uint64_t start = sealed.tree.level_start(0);
  const SideRun run{start, sealed.layout.tree_first_unit + start, sealed.tree.blocks_in_level(0)};
  return SideBlocks(
      sealed, run, first / verity::kHashesPerBlock, (first + count - 1) / verity::kHashesPerBlock,
      [&](uint64_t b, ByteSpan unit) { return OpenTreeBlock(sealed, key, 0, b, unit); }, later);
}

Result<std::vector<FileContents::TreeBlock>> FileContents::PinBlocks(const Sealed& sealed,
                                                                     const Key& key, uint64_t first,
                                                                     size_t count, Status& later) {
  if (count == 0) return std::vector<TreeBlock>{};
  const uint64_t per = verity::PinsPerBlock(layer_.geometry_);
  const SideRun run{sealed.tree.total_blocks(), sealed.layout.pin_first_unit,
                    sealed.layout.pin_blocks};
  return SideBlocks(
      sealed, run, first / per, (first + count - 1) / per,
      [&](uint64_t b, ByteSpan unit) { return OpenPinBlock(sealed, key, b, unit); }, later);
}

Result<std::vector<FileContents::TreeBlock>> FileContents::SideBlocks(
    const Sealed& sealed, const SideRun& run, uint64_t b0, uint64_t b1,
    const std::function<Result<TreeBlock>(uint64_t, ByteSpan)>& open, Status& later) {
  std::vector<TreeBlock> out(static_cast<size_t>(b1 - b0 + 1));
  uint64_t lo = UINT64_MAX, hi = 0;
  bool sequential = true;  // a read from the start, or whose first missing block follows a kept one
  {
    MutexLock lock(sealed.mu);
    for (uint64_t b = b0; b <= b1; ++b) {
      if (auto it = sealed.verified.find(run.cache_start + b); it != sealed.verified.end()) {
        out[b - b0] = it->second;
      } else {
        lo = std::min(lo, b);
        hi = b;
      }
    }
    if (lo != UINT64_MAX && lo > 0)
      sequential = sealed.verified.count(run.cache_start + lo - 1) != 0;
  }
  if (lo == UINT64_MAX) return out;
  // The missing blocks are adjacent on disk: one read for all of them, and for the next ones
  // too. They sit far from the data, so a sequential reader fetching one block per 512 KiB of
  // data (a level-0 block; a pin block covers more) would add a seek that often; this way it
  // is one per 32 blocks.
  hi = std::max(hi, std::min(lo + kSideReadAheadBlocks, run.count) - 1);
  const PageGeometry& g = layer_.geometry_;
  const size_t unit = g.unit_size();
  // A sequential reader will want the chunk after this one once it has read as far: ask for it
  // now, so that the backing filesystem reads it in the background and the reader does not
  // wait for a seek. (A random reader does not ask.)
  if (sequential && hi + 1 < run.count) {
    const uint64_t next_end = std::min(hi + 1 + kSideReadAheadBlocks, run.count);
    backing_->WillNeed(g.UnitOffset(run.first_unit + hi + 1), (next_end - hi - 1) * unit);
  }
  std::vector<uint8_t> units(static_cast<size_t>(hi - lo + 1) * unit);
  SIGILFS_ASSIGN_OR_RETURN(size_t got, backing_->ReadAt(units, g.UnitOffset(run.first_unit + lo)));
  Count(PageCounter::kBackingBytesRead, got);
  // Read-ahead blocks already verified and kept are not opened again.
  auto cached = [&](uint64_t b) {
    MutexLock lock(sealed.mu);
    return sealed.verified.count(run.cache_start + b) != 0;
  };
  for (uint64_t b = lo; b <= hi; ++b) {
    const bool needed = b <= b1;
    if (needed ? out[b - b0] != nullptr : cached(b)) continue;
    const size_t at = static_cast<size_t>(b - lo) * unit;
    const ByteSpan piece = ByteSpan(units).first(got).subspan(std::min(at, got));
    auto block = open(b, piece.first(std::min(unit, piece.size())));
    if (!needed) {
      if (!block.ok()) break;  // read ahead only: a damaged block fails the read that needs it
      continue;
    }
    if (!block.ok()) {
      if (b == b0) return block.status();
      later = block.status();
      out.resize(static_cast<size_t>(b - b0));
      return out;
    }
    out[b - b0] = std::move(block).value();
  }
  return out;
}

FileContents::TreeBlock FileContents::Keep(const Sealed& sealed, uint64_t key, TreeBlock block) {
  MutexLock lock(sealed.mu);
  if (sealed.verified.size() >= Sealed::kMaxCachedBlocks) sealed.verified.clear();
  sealed.verified.emplace(key, block);
  return block;
}

void FileContents::CheckPages(const Sealed& sealed, std::span<const TreeBlock> level0,
                              uint64_t first, size_t begin, size_t end,
                              std::span<uint8_t* const> dest, std::span<Status> results) const {
  auto check = [&](size_t i, const verity::Digest& hash) {
    const uint64_t index = first + i;
    const uint8_t* expect = sealed.record.decoded.root.data();
    if (sealed.tree.levels() > 0) {
      const uint64_t b = index / verity::kHashesPerBlock - first / verity::kHashesPerBlock;
      expect = level0[b]->data() + (index % verity::kHashesPerBlock) * verity::kDigestSize;
    }
    if (std::memcmp(hash.data(), expect, verity::kDigestSize) != 0)
      results[i] = Status(Code::kAuthFailed, "does not match the verity tree");
  };
  // Two pages at a time: the interleaved SHA-256 hashes a pair in about two thirds of the
  // time of two single hashes.
  size_t pending = SIZE_MAX;
  for (size_t i = begin; i < end; ++i) {
    if (!results[i].ok()) continue;  // holes are checked too: zeros must have been sealed
    if (pending == SIZE_MAX) {
      pending = i;
      continue;
    }
    verity::Digest a, b;
    sealed.hasher.Hash2({dest[pending], verity::kBlockSize}, {dest[i], verity::kBlockSize}, a, b);
    check(pending, a);
    check(i, b);
    pending = SIZE_MAX;
  }
  if (pending != SIZE_MAX) check(pending, sealed.hasher.Hash({dest[pending], verity::kBlockSize}));
}

// How far a seal got, for undoing it: the data it covers, the cipher file's length before,
// whether the bound last page (the commit point) and the flagged header were written.
struct FileContents::SealProgress {
  std::shared_ptr<const Key> key;
  uint64_t data_size = 0;
  bool had_header = false;
  std::optional<uint64_t> original_length;
  bool last_rewritten = false;
  bool header_flagged = false;
  crypt::SecureBytes last_plain{kPageSize};  // the data's last page, to bind and to unbind
  size_t last_len = 0;
  const ByteProgress* progress = nullptr;  // told of the data as it is hashed
};

// What a seal writes besides the data: tree blocks, the record and pin blocks sealed back to
// back, the bound last page, and what the file is once sealed.
struct FileContents::SealUnits {
  std::vector<uint8_t> units;
  std::vector<uint8_t> bound_unit;  // empty: the last page is not bound
  verity::Descriptor descriptor;
  verity::SealedLayout layout;
  verity::Record record;
};

Result<verity::Digest> FileContents::EnableVerity(ByteSpan salt, const ByteProgress& progress) {
  Section section(*this, FileLock::kExclusive);
  SIGILFS_RETURN_IF_ERROR(section.status());
  if (salt.size() > verity::kMaxSaltSize)
    return Status(Code::kInvalidArgument, label_ + ": verity salt over 32 bytes");
  MutexLock wb(writeback_mu_);
  {
    WriterLock lock(mu_);
    if (sealed_owner_) return Status(Code::kExists, label_ + ": already a verity file");
    frozen_ = true;  // from here on writes and truncates fail; the ones before are written back
  }
  SealProgress seal;
  if (progress) seal.progress = &progress;
  auto attempt = [&]() -> Result<verity::Digest> {
    writeback_mu_.AssertHeld();  // `wb`, above
    SIGILFS_RETURN_IF_ERROR(WriteBackLocked());
    {
      WriterLock lock(mu_);
      SIGILFS_RETURN_IF_ERROR(CutStaleTailLocked());
      seal.data_size = size_;
      SIGILFS_ASSIGN_OR_RETURN(seal.key, EnsureKeyLocked());
      seal.had_header = header_on_disk_;
    }
    SIGILFS_ASSIGN_OR_RETURN(seal.original_length, backing_->Size());
    const verity::BlockHasher hasher(salt);
    std::vector<verity::Digest> hashes;
    std::vector<uint8_t> nonces;  // of every data unit hashed, to pin in the pin blocks
    SIGILFS_RETURN_IF_ERROR(HashDataPages(seal, hasher, hashes, nonces));
    SealUnits units;
    SIGILFS_RETURN_IF_ERROR(BuildSealUnits(seal, salt, hasher, hashes, nonces, units));
    SIGILFS_RETURN_IF_ERROR(WriteSeal(seal, units));
    WriterLock lock(mu_);
    AdoptSeal(units.layout, units.record, seal.key);
    return verity::FileDigest(units.descriptor);
  };
  auto digest = attempt();
  if (digest.ok()) return digest;
  return UndoSeal(seal, digest.status());
}

// Hashes every data page: a chunk at a time, the kernel reading the next chunk ahead while this
// one's pieces are each read, opened and hashed by whichever core is free (one hand-off per
// piece, not one per phase). Keeps each page's nonce (with pins) and the last page's plaintext.
Status FileContents::HashDataPages(SealProgress& seal, const verity::BlockHasher& hasher,
                                   std::vector<verity::Digest>& hashes,
                                   std::vector<uint8_t>& nonces) {
  const PageGeometry& g = layer_.geometry_;
  const uint64_t pages = verity::TreeLayout(seal.data_size).data_blocks();
  hashes.assign(static_cast<size_t>(pages), {});
  const bool pinned = layer_.options_.verity_pins;
  const size_t ns = g.nonce_size();
  nonces.assign(pinned ? static_cast<size_t>(pages) * ns : 0, 0);
  std::vector<uint8_t> chunk(kSealChunkPages * kPageSize);
  std::vector<uint8_t*> dest(kSealChunkPages);
  for (size_t i = 0; i < dest.size(); ++i) dest[i] = chunk.data() + i * kPageSize;
  backing_->WillNeed(g.UnitOffset(0), std::min<uint64_t>(pages, kSealChunkPages) * g.unit_size());
  Status hashed = Status::Ok();
  for (uint64_t first = 0; first < pages && hashed.ok(); first += kSealChunkPages) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kSealChunkPages, pages - first));
    if (first + n < pages)
      backing_->WillNeed(g.UnitOffset(first + n),
                         std::min<uint64_t>(kSealChunkPages, pages - first - n) * g.unit_size());
    const size_t pieces = (n + kSealPiecePages - 1) / kSealPiecePages;
    std::vector<Status> results(pieces);
    layer_.pool_->ForEachDynamic(pieces, [&](size_t piece) {
      const size_t b = piece * kSealPiecePages, e = std::min(n, b + kSealPiecePages);
      size_t good = 0;
      const MutableByteSpan piece_nonces =
          pinned
              ? MutableByteSpan(nonces).subspan(static_cast<size_t>(first + b) * ns, (e - b) * ns)
              : MutableByteSpan();
      results[piece] = LoadPages(seal.key.get(), first + b, e - b, seal.data_size,
                                 std::span(dest).subspan(b, e - b), good, piece_nonces);
      if (!results[piece].ok()) return;
      size_t i = b;
      for (; i + 1 < e; i += 2)
        hasher.Hash2({dest[i], kPageSize}, {dest[i + 1], kPageSize},
                     hashes[static_cast<size_t>(first + i)],
                     hashes[static_cast<size_t>(first + i + 1)]);
      if (i < e) hashes[static_cast<size_t>(first + i)] = hasher.Hash({dest[i], kPageSize});
    });
    for (Status& r : results)
      if (!r.ok() && hashed.ok()) hashed = std::move(r);
    if (hashed.ok() && first + n == pages) {
      seal.last_len = static_cast<size_t>(seal.data_size - (pages - 1) * kPageSize);
      std::memcpy(seal.last_plain.data(), dest[n - 1], seal.last_len);
    }
    if (hashed.ok() && seal.progress != nullptr)
      (*seal.progress)(std::min<uint64_t>(n * kPageSize, seal.data_size - first * kPageSize));
  }
  crypt::SecureWipe(chunk);
  return hashed;
}

// The tree over `hashes`, its descriptor and record, the pin blocks (the root, then the nonces
// of the pages each covers) and the bound last page, each sealed with the file's key under its
// own unit kind.
Status FileContents::BuildSealUnits(SealProgress& seal, ByteSpan salt,
                                    const verity::BlockHasher& hasher,
                                    const std::vector<verity::Digest>& hashes,
                                    std::vector<uint8_t>& nonces, SealUnits& out) {
  const PageGeometry& g = layer_.geometry_;
  const Key& key = *seal.key;
  const verity::TreeLayout tree_layout(seal.data_size);
  const uint64_t pages = tree_layout.data_blocks();
  const bool pinned = layer_.options_.verity_pins;
  const size_t ns = g.nonce_size();
  const verity::Tree tree = verity::BuildTree(tree_layout, hasher, hashes);
  out.descriptor = verity::EncodeDescriptor(seal.data_size, tree.root, salt);
  out.layout = verity::LayoutOf(g, seal.data_size, pinned);
  // The data's last page, sealed again (a fresh nonce) as a bound last page: written last of
  // all the seal's units, it is the commit point, and from then on the file cannot be opened
  // as an unsealed one. Its new nonce is the one pinned.
  const bool bound = pages > 0 && layer_.options_.verity_bind;
  out.bound_unit.assign(bound ? seal.last_len + g.overhead() : 0, 0);
  if (bound) {
    SIGILFS_RETURN_IF_ERROR(key.codec.Seal(pages - 1, UnitKind::kSealedLastPage, true,
                                           seal.last_plain.span().first(seal.last_len),
                                           out.bound_unit));
    if (pinned)
      std::memcpy(nonces.data() + static_cast<size_t>(pages - 1) * ns, out.bound_unit.data(), ns);
  }
  const std::vector<uint8_t> record_plain =
      verity::EncodeRecord(out.descriptor, out.layout.tree_blocks, out.layout.pin_blocks, bound);
  SIGILFS_ASSIGN_OR_RETURN(out.record, verity::DecodeRecord(record_plain));

  const size_t tree_n = static_cast<size_t>(out.layout.tree_blocks);
  const size_t pin_n = static_cast<size_t>(out.layout.pin_blocks);
  const size_t per = verity::PinsPerBlock(g);
  std::vector<uint8_t> pins(pin_n * kPageSize, 0);
  for (size_t j = 0; j < pin_n; ++j) {
    uint8_t* block = pins.data() + j * kPageSize;
    std::memcpy(block, tree.root.data(), verity::kPinBlockHeader);
    const size_t from = j * per * ns;
    std::memcpy(block + verity::kPinBlockHeader, nonces.data() + from,
                std::min(per * ns, nonces.size() - from));
  }
  // Tree blocks, the record and the pin blocks, back to back.
  const size_t unit = g.unit_size();
  out.units.assign((tree_n + 1 + pin_n) * unit, 0);
  auto unit_at = [&](size_t k) { return MutableByteSpan(out.units).subspan(k * unit, unit); };
  std::vector<Status> sealed_ok(tree_n + pin_n);
  layer_.pool_->ParallelFor(sealed_ok.size(), 32, [&](size_t b, size_t e) {
    for (size_t k = b; k < e; ++k) {
      if (k < tree_n) {
        sealed_ok[k] =
            key.codec.Seal(k, UnitKind::kTreeBlock, k + 1 == tree_n,
                           ByteSpan(tree.blocks).subspan(k * kPageSize, kPageSize), unit_at(k));
      } else {
        const size_t j = k - tree_n;
        sealed_ok[k] = key.codec.Seal(j, UnitKind::kPinBlock, j + 1 == pin_n,
                                      ByteSpan(pins).subspan(j * kPageSize, kPageSize),
                                      unit_at(tree_n + 1 + j));
      }
    }
  });
  for (const Status& s : sealed_ok) SIGILFS_RETURN_IF_ERROR(s);
  return key.codec.Seal(0, UnitKind::kSealedRecord, true, record_plain, unit_at(tree_n));
}

// Order matters for crash safety: the trailer first (the file takes its sealed length, so an
// interrupted seal is recognized on open), then tree, record and pins, then the bound last page
// (the commit point), then the header's flags, each step on disk before the next.
Status FileContents::WriteSeal(SealProgress& seal, const SealUnits& units) {
  const PageGeometry& g = layer_.geometry_;
  const Key& key = *seal.key;
  std::array<uint8_t, kFileHeaderSize> header{};
  if (!seal.had_header) {
    EncodeFileHeader(FileHeader{kFileFormatVersion, 0, key.nonce}, header);
    const ByteSpan h[] = {header};
    SIGILFS_RETURN_IF_ERROR(backing_->WriteAt(h, 0));
  }
  std::array<uint8_t, verity::kTrailerSize> trailer{};
  StoreLe64(trailer.data(), seal.data_size);
  const ByteSpan t[] = {trailer};
  SIGILFS_RETURN_IF_ERROR(backing_->WriteAt(t, units.layout.cipher_size - trailer.size()));
  const ByteSpan u[] = {units.units};
  SIGILFS_RETURN_IF_ERROR(backing_->WriteAt(u, g.UnitOffset(units.layout.tree_first_unit)));
  SIGILFS_RETURN_IF_ERROR(backing_->Sync(true));
  const bool bound = !units.bound_unit.empty();
  if (bound) {
    seal.last_rewritten = true;  // from the first byte on: a torn write is undone as well
    const ByteSpan b[] = {units.bound_unit};
    const uint64_t last = PageGeometry::PageCount(seal.data_size) - 1;
    SIGILFS_RETURN_IF_ERROR(backing_->WriteAt(b, g.UnitOffset(last)));
    SIGILFS_RETURN_IF_ERROR(backing_->Sync(true));
  }
  const uint16_t flags = kFileFlagSealed | (units.layout.pin_blocks > 0 ? kFileFlagPinned : 0) |
                         (bound ? kFileFlagBound : 0);
  EncodeFileHeader(FileHeader{kFileFormatVersion, flags, key.nonce}, header);
  const ByteSpan h[] = {header};
  seal.header_flagged = true;
  SIGILFS_RETURN_IF_ERROR(backing_->WriteAt(h, 0));
  SIGILFS_RETURN_IF_ERROR(backing_->Sync(true));
  Count(PageCounter::kBackingBytesWritten,
        units.units.size() + trailer.size() + header.size() + units.bound_unit.size());

  return Status::Ok();
}

// Leaves the file as it was after a failed seal: unsealed, its data intact, nothing past it.
// The steps go back in the reverse order of sealing, and each leaves a file that opens with its
// data (sealed, or unsealed with a tail an open leaves alone), so an undo that fails half way is
// safe too: it stops there and says so. Returns `failure` with what the undo did.
Status FileContents::UndoSeal(const SealProgress& seal, const Status& failure) {
  const PageGeometry& g = layer_.geometry_;
  Status undo = Status::Ok();
  if (seal.header_flagged) {
    std::array<uint8_t, kFileHeaderSize> header{};
    EncodeFileHeader(FileHeader{kFileFormatVersion, 0, seal.key->nonce}, header);
    const ByteSpan h[] = {header};
    undo = backing_->WriteAt(h, 0);
    if (undo.ok()) undo = backing_->Sync(true);
  }
  if (undo.ok() && seal.last_rewritten) {
    std::vector<uint8_t> unit(seal.last_len + g.overhead());
    const uint64_t last = PageGeometry::PageCount(seal.data_size) - 1;
    undo = seal.key->codec.Seal(last, UnitKind::kDataPage, true,
                                seal.last_plain.span().first(seal.last_len), unit);
    const ByteSpan u[] = {unit};
    if (undo.ok()) undo = backing_->WriteAt(u, g.UnitOffset(last));
    if (undo.ok()) undo = backing_->Sync(true);
  }
  bool cut = false;
  if (undo.ok() && seal.original_length) {
    undo = backing_->Truncate(*seal.original_length);  // a torn tail's length included
    cut = undo.ok();
  }
  WriterLock lock(mu_);
  if (!undo.ok() && seal.last_rewritten) {
    // The bound last page may be on disk: the file opens sealed from now on (or, were the
    // unbound page written back, unsealed), so it must not take writes as if nothing happened.
    return failure.WithContext(label_ + ": sealing failed, and so did undoing it (" +
                               undo.ToString() + "); the file reads as before but may stay sealed");
  }
  frozen_ = false;
  if (seal.original_length && !cut) stale_tail_ = true;  // the next change cuts it first
  if (!undo.ok()) return failure.WithContext("sealing (and undoing it: " + undo.ToString() + ")");
  return failure.WithContext("sealing");
}

Status FileContents::VerifyAll(const ByteProgress& progress) {
  Section section(*this, FileLock::kShared);
  SIGILFS_RETURN_IF_ERROR(section.status());
  const Sealed* sealed = sealed_.load(std::memory_order_acquire);
  if (sealed == nullptr) return NotSealed(label_);
  std::shared_ptr<const Key> key;
  {
    ReaderLock lock(mu_);
    key = key_;
  }
  // Every tree block, each checked against the block above it (top down).
  for (int level = sealed->tree.levels() - 1; level >= 0; --level)
    for (uint64_t i = 0; i < sealed->tree.blocks_in_level(level); ++i)
      SIGILFS_RETURN_IF_ERROR(VerifiedTreeBlock(*sealed, *key, level, i).status());
  // Every data page, each checked against the tree (and its pin: reads of a file sealed with
  // pins check only those, so this is where the tree itself is checked against the data).
  const uint64_t pages = sealed->tree.data_blocks();
  std::vector<uint8_t> chunk(kSealChunkPages * kPageSize);
  std::vector<uint8_t*> dest(kSealChunkPages);
  for (size_t i = 0; i < dest.size(); ++i) dest[i] = chunk.data() + i * kPageSize;
  Status s = Status::Ok();
  for (uint64_t first = 0; first < pages && s.ok(); first += kSealChunkPages) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kSealChunkPages, pages - first));
    size_t good = 0;
    s = LoadPages(key.get(), first, n, sealed->layout.data_size, std::span(dest).first(n), good);
    const uint64_t bytes =
        std::min<uint64_t>(n * kPageSize, sealed->layout.data_size - first * kPageSize);
    if (s.ok() && !sealed->pinned() && progress) progress(bytes);
    if (!s.ok() || !sealed->pinned()) continue;
    Status later;
    auto level0 = Level0Blocks(*sealed, *key, first, n, later);
    if (!level0.ok() || !later.ok()) {
      s = level0.ok() ? later : level0.status();
      continue;
    }
    std::vector<Status> results(n);
    CheckPages(*sealed, *level0, first, 0, n, dest, results);
    for (size_t i = 0; i < n && s.ok(); ++i)
      if (!results[i].ok())
        s = results[i].WithContext(label_ + ": page " + std::to_string(first + i));
    if (s.ok() && progress) progress(bytes);
  }
  crypt::SecureWipe(chunk);
  return s;
}

}  // namespace sigilfs::core
