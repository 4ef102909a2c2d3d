// Test helper: a backing file that records the writes and read hints it receives.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "sigilfs/core/backing_file.h"

namespace sigilfs::test {

// Records the writes and read hints a file receives, passing them on.
class RecordingBackingFile final : public core::BackingFile {
 public:
  struct Call {
    uint64_t offset, length;
  };
  explicit RecordingBackingFile(std::unique_ptr<core::BackingFile> inner)
      : inner_(std::move(inner)) {}
  Result<size_t> ReadAt(MutableByteSpan buf, uint64_t offset) override {
    return inner_->ReadAt(buf, offset);
  }
  Status WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) override {
    uint64_t length = 0;
    for (ByteSpan b : bufs) length += b.size();
    {
      std::lock_guard lock(mu_);
      writes_.push_back({offset, length});
    }
    return inner_->WriteAt(bufs, offset);
  }
  Result<uint64_t> Size() override { return inner_->Size(); }
  Status Truncate(uint64_t size) override { return inner_->Truncate(size); }
  Status Sync(bool data_only) override { return inner_->Sync(data_only); }
  Status Allocate(uint64_t offset, uint64_t length, bool punch_hole) override {
    return inner_->Allocate(offset, length, punch_hole);
  }
  Result<uint64_t> Seek(uint64_t offset, bool data) override { return inner_->Seek(offset, data); }
  void WillNeed(uint64_t offset, uint64_t length) override {
    std::lock_guard lock(mu_);
    hints_.push_back({offset, length});
  }

  std::vector<Call> writes() {
    std::lock_guard lock(mu_);
    return writes_;
  }
  std::vector<Call> hints() {
    std::lock_guard lock(mu_);
    return hints_;
  }

 private:
  std::unique_ptr<core::BackingFile> inner_;
  std::mutex mu_;
  std::vector<Call> writes_;  // GUARDED_BY(mu_)
  std::vector<Call> hints_;   // GUARDED_BY(mu_)
};

}  // namespace sigilfs::test
