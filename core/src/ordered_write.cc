// OrderedWrite: seal a batch of pages in parallel and write the units in file order.
#include "ordered_write.h"

#include <utility>

#include "page_pieces.h"
#include "sigilfs/mutex.h"

namespace sigilfs::core {

OrderedWrite::Outcome OrderedWrite::Run(std::span<const PageToSeal> pages, uint64_t last_index,
                                        uint64_t stored_end, std::vector<uint8_t>& buffer,
                                        ByteSpan header) {
  // Where each sealed unit lies in `buffer`: the units of a run back to back.
  std::vector<size_t> offsets(pages.size() + 1, 0);
  for (size_t i = 0; i < pages.size(); ++i)
    offsets[i + 1] = offsets[i] + pages[i].len + g_.overhead();
  if (buffer.size() < offsets.back()) buffer.resize(offsets.back());
  uint8_t* const cipher = buffer.data();

  // Pieces: each contiguous run cut into even pieces of at least kPiecePages pages, each sealed
  // by one thread.
  // Units are not page-sized, so a run's ends fall inside pages of the cipher file, and a write
  // that covers part of a page the backing filesystem has not cached makes it read that page
  // first, synchronously. Where such a page holds stored bytes, ask for it now, so it is read
  // while the run is sealed; and, for a long run (a large write, or a batch of sequential
  // small ones), ask for the page where a run of the same length would end next, so that a
  // sequential writer's next write-back finds its edge read already. (Uncached overwrites
  // through the mount ran at 0.75x the first write's speed, paying a disk read per request;
  // about 1.0x with this and the carry below.)
  auto prefetch_edge = [&](uint64_t offset) {
    if (offset % kCipherPage != 0 && offset < stored_end)
      backing_.WillNeed(offset - offset % kCipherPage, kCipherPage);
  };
  std::vector<std::pair<size_t, size_t>> pieces;  // [begin, end) into pages
  for (size_t i = 0; i < pages.size();) {
    size_t j = i + 1;
    while (j < pages.size() && pages[j].index == pages[j - 1].index + 1) ++j;
    const size_t per_piece = CutEvenly(j - i).size;
    for (size_t b = i; b < j; b += per_piece) pieces.emplace_back(b, std::min(j, b + per_piece));
    const uint64_t begin = g_.UnitOffset(pages[i].index);
    const uint64_t end = g_.UnitOffset(pages[j - 1].index) + pages[j - 1].len + g_.overhead();
    prefetch_edge(begin);
    prefetch_edge(end);
    if (j - i >= kDirectMinPages) prefetch_edge(end + (end - begin));
    i = j;
  }
  // A piece continues the one before it in the cipher file (the same contiguous run).
  auto continues = [&](size_t p) {
    return p > 0 && pages[pieces[p].first].index == pages[pieces[p - 1].second - 1].index + 1;
  };
  // The file offset of any byte of a run's units is its buffer offset plus the run's delta.
  auto delta_of = [&](size_t p) {
    return g_.UnitOffset(pages[pieces[p].first].index) - offsets[pieces[p].first];
  };

  // The header goes with the first write, which starts right after it (the caller passes one
  // only where the batch begins with the file's first page). Only the writer, one at a time,
  // writes, so this needs no lock of its own.
  bool header_pending = !header.empty();
  auto write = [&](ByteSpan bytes, uint64_t offset) {
    if (header_pending && offset == header.size()) {
      header_pending = false;
      const ByteSpan both[] = {header, bytes};
      return backing_.WriteAt(both, 0).WithContext(label_);
    }
    const ByteSpan one[] = {bytes};
    return backing_.WriteAt(one, offset).WithContext(label_);
  };

  // While the next piece of a run is still being sealed, the writer stops at the last whole
  // cipher-file page and carries the rest over to that piece's write.
  std::vector<Status> results(pieces.size());
  struct Queue {
    Mutex mu;
    std::vector<bool> ready SIGILFS_GUARDED_BY(mu);  // sealed pieces
    size_t next_write SIGILFS_GUARDED_BY(mu) = 0;    // pieces written or begun
    size_t carry_begin SIGILFS_GUARDED_BY(mu) = 0;   // first byte of `cipher` not yet written ...
    size_t carry_end SIGILFS_GUARDED_BY(mu) = 0;     // ... up to here, of pieces before next_write
    bool writing SIGILFS_GUARDED_BY(mu) = false;
    bool failed SIGILFS_GUARDED_BY(mu) = false;
  } q;
  {
    MutexLock lock(q.mu);
    q.ready.assign(pieces.size(), false);
  }
  pool_.ForEachDynamic(pieces.size(), [&](size_t p) {
    const auto [b, e] = pieces[p];
    for (size_t i = b; i < e && results[p].ok(); ++i) {
      const PageToSeal& it = pages[i];
      MutableByteSpan unit(cipher + offsets[i], it.len + g_.overhead());
      results[p] = codec_.Seal(it.index, UnitKind::kDataPage, it.index == last_index,
                               {it.plain, it.len}, unit);
    }
    MutexLock lock(q.mu);
    if (results[p].ok())
      q.ready[p] = true;
    else
      q.failed = true;
    if (q.writing) return;
    q.writing = true;
    while (!q.failed && q.next_write < pieces.size() && q.ready[q.next_write]) {
      const size_t from = q.next_write;
      size_t to = from + 1;
      while (to < pieces.size() && q.ready[to] && continues(to)) ++to;
      q.next_write = to;
      const uint64_t delta = delta_of(from);
      const size_t begin =
          q.carry_end > q.carry_begin ? q.carry_begin : offsets[pieces[from].first];
      size_t end = offsets[pieces[to - 1].second];
      q.carry_begin = q.carry_end = 0;
      if (to < pieces.size() && continues(to)) {
        const size_t aligned =
            static_cast<size_t>((delta + end) / kCipherPage * kCipherPage - delta);
        if (aligned > begin) {
          q.carry_begin = aligned;
          q.carry_end = end;
          end = aligned;
        } else {
          q.carry_begin = begin;  // less than a page so far: all of it goes with the next piece
          q.carry_end = end;
          continue;
        }
      }
      lock.Unlock();
      Status written = write({cipher + begin, end - begin}, delta + begin);
      lock.Lock();
      if (!written.ok()) q.failed = true;
      for (size_t w = from; w < to; ++w) results[w] = written;
    }
    q.writing = false;
  });

  Outcome out;
  out.bytes = offsets.back();
  out.header_written = !header.empty() && !header_pending;
  MutexLock lock(q.mu);  // every piece is done: uncontended
  // A piece whose seal failed stopped the writer before the bytes carried over from the one
  // before it: write them, so every piece reported written is whole.
  if (q.carry_end > q.carry_begin) {
    const size_t p = q.next_write - 1;
    Status written =
        write({cipher + q.carry_begin, q.carry_end - q.carry_begin}, delta_of(p) + q.carry_begin);
    if (!written.ok()) results[p] = std::move(written);
  }
  if (q.next_write > 0) out.last_begun = pages[pieces[q.next_write - 1].second - 1].index;
  for (Status& s : results) {
    if (!s.ok()) {
      out.status = std::move(s);
      break;
    }
  }
  return out;
}

}  // namespace sigilfs::core
