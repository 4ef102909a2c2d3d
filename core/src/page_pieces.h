// Internal: how the page layer cuts batches of pages into pieces for its worker threads, and
// the backing filesystem's page size the cuts respect (page_layer.cc, ordered_write.cc).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace sigilfs::core {

// Large batches are cut into pieces of this many pages, each read-and-opened or
// sealed-and-written by whichever thread is free, so one core's AES overlaps the other's
// copy into or out of the kernel.
inline constexpr size_t kPiecePages = 32;

// `count` pages cut into even pieces of at least kPiecePages (one piece below that), the size
// counted from the number of pieces: rounding the size up can leave fewer pieces than asked for,
// never an empty one or one past the end (1089 pages: 33 pieces of 33, not 34 with the last one
// empty; 1187 pages: 36 of 33, not 37 with the last one past the end).
struct EvenPieces {
  size_t size;   // pages per piece (the last may have fewer)
  size_t count;  // pieces
};
inline EvenPieces CutEvenly(size_t count) {
  const size_t asked = std::max<size_t>(1, count / kPiecePages);
  const size_t size = (count + asked - 1) / asked;
  return {size, (count + size - 1) / size};
}

// Reads of at least this many whole pages go past the cache, opened straight into the caller's
// buffer; smaller or partial reads use it. (A write-back run this long also asks for the page
// where the next one will end.)
inline constexpr size_t kDirectMinPages = 16;

// The backing filesystem's page: a write that covers only part of one that is not in its page
// cache makes it read the page from disk first, synchronously.
inline constexpr uint64_t kCipherPage = 4096;

}  // namespace sigilfs::core
