// Source: where the bytes of a write come from (memory, a descriptor or pipe, an iovec).
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "sigilfs/core/backing_file.h"
#include "sigilfs/crypt/bytes.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

// A stream of write data that may deliver fewer bytes than asked (the end of a step, a fault in
// a user buffer). The page layer copies straight from it into cached pages;
// after a short copy into a page it did not read, it hands the bytes back with Unread and
// retries them as a partial write (the write_end rule of docs/design/page-layer.md).
// Thread-safety: REQUIRES external synchronization.
class Source {
 public:
  virtual ~Source() = default;
  // Copies up to dst.size() bytes into dst; 0 means nothing more is available now.
  virtual Result<size_t> Read(MutableByteSpan dst) = 0;
  // Pushes back the last `n` bytes returned by the latest Read (n <= that count).
  virtual void Unread(size_t n) = 0;
  // Up to `max` next bytes if they already lie contiguous in memory (no copy, not consumed);
  // empty if the source cannot offer that. Lets large writes seal straight from the caller's
  // buffer.
  virtual ByteSpan Peek(size_t max) {
    (void)max;
    return {};
  }
  // Consumes `n` bytes (n <= the size of the latest Peek).
  virtual void Consume(size_t n) { (void)n; }
};

// Reads from a memory buffer.
class MemorySource : public Source {
 public:
  explicit MemorySource(ByteSpan data) : data_(data) {}
  Result<size_t> Read(MutableByteSpan dst) override;
  void Unread(size_t n) override { pos_ -= n; }
  ByteSpan Peek(size_t max) override { return data_.subspan(pos_, std::min(max, remaining())); }
  void Consume(size_t n) override { pos_ += n; }
  size_t remaining() const { return data_.size() - pos_; }

 private:
  ByteSpan data_;
  size_t pos_ = 0;
};

// Reads from an iovec array (a FUSE request's buffers, a writev).
class IovecSource : public Source {
 public:
  explicit IovecSource(std::span<const iovec> iov) : iov_(iov.begin(), iov.end()) {}
  Result<size_t> Read(MutableByteSpan dst) override;
  void Unread(size_t n) override;
  ByteSpan Peek(size_t max) override;
  void Consume(size_t n) override;

 private:
  std::vector<iovec> iov_;
  size_t seg_ = 0;
  size_t off_ = 0;  // within iov_[seg_]
};

// Reads a file descriptor (a file at its current offset, a pipe) or a backing file (from its
// start) a step at a time into a buffer of its own, wiped when the source goes (it holds
// plaintext). Fill reads the next step; Read, Unread, Peek and Consume then work on what it
// read, so a writer seals whole pages straight from the buffer. Import feeds the page layer
// with it.
class StepSource : public Source {
 public:
  static constexpr size_t kDefaultStep = size_t{1} << 20;
  explicit StepSource(int fd, size_t step = kDefaultStep);
  explicit StepSource(BackingFile& file, size_t step = kDefaultStep);
  ~StepSource() override;
  StepSource(const StepSource&) = delete;
  StepSource& operator=(const StepSource&) = delete;

  // Reads the next step, dropping what is left of the one before: its size, short only at the
  // end of the data, 0 after it.
  Result<size_t> Fill();
  Result<size_t> Read(MutableByteSpan dst) override;
  void Unread(size_t n) override { pos_ -= n; }
  ByteSpan Peek(size_t max) override;
  void Consume(size_t n) override { pos_ += n; }

 private:
  int fd_ = -1;
  BackingFile* file_ = nullptr;
  uint64_t offset_ = 0;  // the file's next byte to read
  std::vector<uint8_t> buffer_;
  size_t pos_ = 0;  // the next byte to deliver
  size_t end_ = 0;  // what the latest Fill read
};

// Test source: wraps another and cuts reads short following a plan: the i-th Read delivers at
// most limits[i] bytes (then the plan repeats its last entry, or is unlimited if empty).
class FaultySource : public Source {
 public:
  FaultySource(Source& inner, std::vector<size_t> limits)
      : inner_(inner), limits_(std::move(limits)) {}
  Result<size_t> Read(MutableByteSpan dst) override;
  void Unread(size_t n) override { inner_.Unread(n); }

 private:
  Source& inner_;
  std::vector<size_t> limits_;
  size_t calls_ = 0;
};

}  // namespace sigilfs::core
