// Internal: the write-back engine's ordered seal-and-write protocol (page_layer.cc calls it).
//
// Guarantee: the units of a batch reach the cipher file in file order, and none after a failed
// seal or write. A crash or a full disk in the middle therefore leaves a prefix of the new
// units: only the unit being written can be torn, and a file that grew ends at the last unit
// written, never with a later unit stored and an earlier one missing (which would be a hole
// where data was, and an old last page that is no longer last). A cipher-file page that two
// pieces share is never written in part: the bytes before the next piece's start wait for it.
// docs/design/crash-and-space.md, "Crash consistency", builds on this.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sigilfs/core/backing_file.h"
#include "sigilfs/core/format.h"
#include "sigilfs/status.h"
#include "thread_pool.h"

namespace sigilfs::core {

// One page of a batch: its index, its length (kPageSize but for the file's last page) and
// its plaintext, which stays valid and unchanged until the batch is written.
struct PageToSeal {
  uint64_t index;
  size_t len;
  const uint8_t* plain;
};

// Seals pages on every thread of a pool and writes them in file order. Writing is a role, not
// a lock: a thread that sealed a piece marks it ready and becomes the writer only if nobody is
// writing; the writer writes every ready piece in order, one call per stretch of a contiguous
// run. Writes to one file serialize in the kernel anyway; this way the other thread seals
// instead of waiting on the inode lock.
// Thread-safety: one Run at a time per object (the page layer's write-back lock).
class OrderedWrite {
 public:
  OrderedWrite(const PageGeometry& geometry, const UnitCodec& codec, BackingFile& backing,
               ThreadPool& pool, const std::string& label)
      : g_(geometry), codec_(codec), backing_(backing), pool_(pool), label_(label) {}

  struct Outcome {
    Status status;  // the first failure, or Ok
    // The index of the last page whose write was begun (none if no write began).
    std::optional<uint64_t> last_begun;
    uint64_t bytes = 0;           // sealed bytes of the batch
    bool header_written = false;  // the header given was written (with the first units)
  };
  // Writes `pages` (sorted by index, any number of contiguous runs) of a file whose last page is
  // `last_index` (sealed as the last one) and whose cipher file held `stored_end` bytes before;
  // the sealed units are built in `buffer`, grown as needed and kept for the next batch.
  // `header`, if given (a new file's, when the batch begins with its first page), is written
  // at offset 0 in the same call as the first units, which follow it: a new file costs one
  // write, not two, and never has units without its header. The first write of such a batch
  // always begins at the first unit, so a batch that succeeds has written it.
  Outcome Run(std::span<const PageToSeal> pages, uint64_t last_index, uint64_t stored_end,
              std::vector<uint8_t>& buffer, ByteSpan header = {});

 private:
  const PageGeometry& g_;
  const UnitCodec& codec_;
  BackingFile& backing_;
  ThreadPool& pool_;
  const std::string& label_;
};

}  // namespace sigilfs::core
