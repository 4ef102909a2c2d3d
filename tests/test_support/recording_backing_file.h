// Test helper: a backing file that records the writes and read hints it receives.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sigilfs/mutex.h"
#include "test_support/forwarding_backing_file.h"

namespace sigilfs::test {

// Records the writes and read hints a file receives, passing the writes on.
class RecordingBackingFile final : public ForwardingBackingFile {
 public:
  struct Call {
    uint64_t offset, length;
  };
  using ForwardingBackingFile::ForwardingBackingFile;
  Status WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) override {
    uint64_t length = 0;
    for (ByteSpan b : bufs) length += b.size();
    {
      MutexLock lock(mu_);
      writes_.push_back({offset, length});
    }
    return ForwardingBackingFile::WriteAt(bufs, offset);
  }
  // Recorded, not passed on: the tests look at what was asked for.
  void WillNeed(uint64_t offset, uint64_t length) override {
    MutexLock lock(mu_);
    hints_.push_back({offset, length});
  }

  std::vector<Call> writes() {
    MutexLock lock(mu_);
    return writes_;
  }
  std::vector<Call> hints() {
    MutexLock lock(mu_);
    return hints_;
  }

 private:
  Mutex mu_;
  std::vector<Call> writes_ SIGILFS_GUARDED_BY(mu_);
  std::vector<Call> hints_ SIGILFS_GUARDED_BY(mu_);
};

}  // namespace sigilfs::test
