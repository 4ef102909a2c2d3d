// Space of an open file: fallocate (reserve, punch, zero) and SEEK_DATA / SEEK_HOLE.
#include <fcntl.h>
#include <linux/falloc.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <vector>

#include "file_contents_internal.h"
#include "sigilfs/core/format.h"
#include "sigilfs/core/page_layer.h"

namespace sigilfs::core {
namespace {

constexpr int kKnownModes = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE;

}  // namespace

// Writes zeros over [offset, end) through the ordinary write path (sealed zeros, not holes).
Status FileContents::WriteZeros(uint64_t offset, uint64_t end) {
  static const std::vector<uint8_t> kZeros(1 << 20, 0);
  while (offset < end) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kZeros.size(), end - offset));
    SIGILFS_ASSIGN_OR_RETURN(size_t done, Write(offset, ByteSpan(kZeros).first(n)));
    if (done == 0) return Status(Code::kInternal, label_ + ": zeroing made no progress");
    offset += done;
  }
  return Status::Ok();
}

Status FileContents::Allocate(int mode, uint64_t offset, uint64_t length) {
  Section section(*this, FileLock::kExclusive);
  SIGILFS_RETURN_IF_ERROR(section.status());
  const bool punch = (mode & FALLOC_FL_PUNCH_HOLE) != 0;
  const bool zero = (mode & FALLOC_FL_ZERO_RANGE) != 0;
  // As Linux: punching must keep the size, and punching and zeroing do not mix.
  if ((mode & ~kKnownModes) != 0 || (punch && (mode & FALLOC_FL_KEEP_SIZE) == 0) || (punch && zero))
    return Status::FromErrno(EOPNOTSUPP, label_ + ": fallocate mode not supported");
  if (length == 0) return Status::FromErrno(EINVAL, label_ + ": fallocate of no bytes");
  if (offset > kMaxFileSize || length > kMaxFileSize - offset)
    return Status::FromErrno(EFBIG, label_ + ": fallocate past the largest file size");
  {
    MutexLock wb(writeback_mu_);
    WriterLock lock(mu_);
    SIGILFS_RETURN_IF_ERROR(Frozen());
    SIGILFS_RETURN_IF_ERROR(CutStaleTailLocked());
  }
  const uint64_t end = offset + length;

  if (punch || zero) {
    // Pages wholly inside the range (of the file as it is) become holes, the rest zeros.
    const uint64_t old_size = size();
    const uint64_t stop = std::min(end, old_size);
    if (offset < stop) {
      const uint64_t last_page = PageGeometry::PageCount(old_size) - 1;
      const uint64_t first_whole = (offset + kPageSize - 1) / kPageSize;
      const uint64_t end_whole = std::min(stop / kPageSize, last_page);
      if (layer_.options_.strict_holes || first_whole >= end_whole) {
        SIGILFS_RETURN_IF_ERROR(WriteZeros(offset, stop));
      } else {
        // The whole pages first: a store that cannot punch fails a punch before anything
        // changed, and a zero-range falls back to sealed zeros.
        Status punched = PunchPages(first_whole, end_whole);
        if (!punched.ok() && punched.sys_errno() == EOPNOTSUPP && zero)
          punched = WriteZeros(first_whole * kPageSize, end_whole * kPageSize);
        SIGILFS_RETURN_IF_ERROR(punched);
        SIGILFS_RETURN_IF_ERROR(WriteZeros(offset, first_whole * kPageSize));
        SIGILFS_RETURN_IF_ERROR(WriteZeros(end_whole * kPageSize, stop));
      }
    }
    if (punch) return Status::Ok();
  }

  // Reserve the units that will hold pages [offset, end), then (without KEEP_SIZE) grow over
  // them: in this order, a full disk fails the call before the size changes.
  const PageGeometry& g = layer_.geometry_;
  const uint64_t first = offset / kPageSize;
  const uint64_t pages = PageGeometry::PageCount(end) - first;
  SIGILFS_RETURN_IF_ERROR(
      backing_->Allocate(g.UnitOffset(first), pages * g.unit_size(), false).WithContext(label_));
  if ((mode & FALLOC_FL_KEEP_SIZE) != 0) return Status::Ok();
  return Resize(end, /*only_grow=*/true);
}

Status FileContents::PunchPages(uint64_t first, uint64_t end) {
  const PageGeometry& g = layer_.geometry_;
  MutexLock wb(writeback_mu_);
  // Everything dirty goes to the disk first: the old last page is then settled (a write-back
  // never re-seals a page inside the hole afterwards), and no dirty copy of a punched page
  // outlives the punch.
  SIGILFS_RETURN_IF_ERROR(WriteBackLocked());
  {
    WriterLock lock(mu_);
    SIGILFS_RETURN_IF_ERROR(Frozen());
    // The file may have changed since the caller looked: never punch its last page, nor the
    // last page stored (a writer may have grown the file since the write-back; that page is
    // re-sealed as not-last from its stored copy).
    if (size_ == 0 || disk_size_ == 0) return Status::Ok();
    end = std::min(
        {end, PageGeometry::PageCount(size_) - 1, PageGeometry::PageCount(disk_size_) - 1});
    if (first >= end) return Status::Ok();
    DropRangeLocked(first, end);
    ++cache_epoch_;  // a read that loaded these pages before the punch must not cache them
    // A partial write into them waits for the punch: reading a page the punch is about to
    // clear and writing it back afterwards would bring the old bytes back.
    bypass_ = std::make_pair(first, end);
  }
  Status s = backing_->Allocate(g.UnitOffset(first), (end - first) * g.unit_size(), true)
                 .WithContext(label_);
  {
    WriterLock lock(mu_);
    // A read that took its snapshot after the first bump may have loaded a page before the
    // punch landed and cached it since: clean pages are dropped again; loads still running
    // must not cache what they got.
    DropCleanRangeLocked(first, end);
    ++cache_epoch_;
    bypass_.reset();
  }
  bypass_done_.NotifyAll();
  return s;
}

Result<std::optional<std::pair<uint64_t, uint64_t>>> FileContents::NextHoleRun(uint64_t from) {
  const PageGeometry& g = layer_.geometry_;
  const uint64_t last = PageGeometry::PageCount(size_) - 1;
  SIGILFS_ASSIGN_OR_RETURN(const uint64_t cipher_size, backing_->Size());
  // The first page whose unit starts at or after cipher offset `at`, and the end of the pages
  // whose units end at or before it.
  auto page_from = [&g](uint64_t at) {
    return at <= kFileHeaderSize ? 0 : (at - kFileHeaderSize + g.unit_size() - 1) / g.unit_size();
  };
  auto page_to = [&g](uint64_t at) {
    return at <= kFileHeaderSize ? 0 : (at - kFileHeaderSize) / g.unit_size();
  };
  // Units do not line up with the store's blocks: the unit across a hole's edge shares a block
  // with its neighbour's data. If it is all zeros it reads as a hole, and is one (not in strict
  // mode, where zeros are refused; never the last page).
  auto zero_unit = [&](uint64_t page) -> Result<bool> {
    if (layer_.options_.strict_holes || page >= last) return false;
    std::vector<uint8_t> unit(g.unit_size());
    SIGILFS_ASSIGN_OR_RETURN(size_t got, backing_->ReadAt(unit, g.UnitOffset(page)));
    Count(PageCounter::kBackingBytesRead, got);
    return got == unit.size() && IsAllZero(unit);
  };
  uint64_t pos = g.UnitOffset(from);
  while (pos < cipher_size) {
    auto hole = backing_->Seek(pos, /*data=*/false);
    if (!hole.ok() && hole.status().sys_errno() == ENXIO) break;
    SIGILFS_RETURN_IF_ERROR(hole.status().WithContext(label_));
    auto data = backing_->Seek(*hole, /*data=*/true);
    if (!data.ok() && data.status().sys_errno() != ENXIO) return data.status().WithContext(label_);
    const uint64_t data_at = data.ok() ? *data : cipher_size;
    uint64_t a = std::max(from, page_from(*hole));
    uint64_t b = std::min(page_to(data_at), last);  // the last page is never a hole
    // The units across the hole's start and its end (one unit when the hole is shorter).
    std::optional<bool> edge_zero;  // of page a - 1, when it is also page b
    if (a > from && a - 1 < last) {
      SIGILFS_ASSIGN_OR_RETURN(const bool zero, zero_unit(a - 1));
      if (a - 1 == b) edge_zero = zero;
      if (zero) --a;
    }
    if (b >= a && b < last) {
      bool zero = false;
      if (edge_zero.has_value()) {
        zero = *edge_zero;
      } else {
        SIGILFS_ASSIGN_OR_RETURN(zero, zero_unit(b));
      }
      if (zero) ++b;
    }
    if (a >= last) break;
    if (a < b) return std::optional(std::pair(a, b));
    if (data_at <= pos) break;  // no progress: the store answered inconsistently
    pos = data_at;
  }
  return std::optional<std::pair<uint64_t, uint64_t>>();
}

Result<uint64_t> FileContents::SeekData(uint64_t offset, bool data) {
  Section section(*this, FileLock::kShared);
  SIGILFS_RETURN_IF_ERROR(section.status());
  // Holes are read off the cipher file, so what is dirty goes there first.
  MutexLock wb(writeback_mu_);
  SIGILFS_RETURN_IF_ERROR(WriteBackLocked());
  ReaderLock lock(mu_);
  if (offset >= size_) return Status::FromErrno(ENXIO, label_ + ": seek past the end");
  const uint64_t page = offset / kPageSize;
  SIGILFS_ASSIGN_OR_RETURN(auto run, NextHoleRun(page));
  const bool in_hole = run.has_value() && run->first <= page;
  if (data) return in_hole ? run->second * kPageSize : offset;
  if (in_hole) return offset;
  return run.has_value() ? run->first * kPageSize : size_;
}

}  // namespace sigilfs::core
