// Test helper: a backing file that passes every call on to another, for wrappers that change
// one or two of them (recording writes, holding writes at a gate).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "sigilfs/core/backing_file.h"

namespace sigilfs::test {

class ForwardingBackingFile : public core::BackingFile {
 public:
  explicit ForwardingBackingFile(std::unique_ptr<core::BackingFile> inner)
      : inner_(std::move(inner)) {}
  Result<size_t> ReadAt(MutableByteSpan buf, uint64_t offset) override {
    return inner_->ReadAt(buf, offset);
  }
  Status WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) override {
    return inner_->WriteAt(bufs, offset);
  }
  Result<uint64_t> Size() override { return inner_->Size(); }
  Status Truncate(uint64_t size) override { return inner_->Truncate(size); }
  Status Sync(bool data_only) override { return inner_->Sync(data_only); }
  Status Allocate(uint64_t offset, uint64_t length, bool punch_hole) override {
    return inner_->Allocate(offset, length, punch_hole);
  }
  Result<uint64_t> Seek(uint64_t offset, bool data) override { return inner_->Seek(offset, data); }
  Result<core::FileStamp> Stamp() override { return inner_->Stamp(); }
  Status Lock(core::FileLock kind) override { return inner_->Lock(kind); }
  void WillNeed(uint64_t offset, uint64_t length) override { inner_->WillNeed(offset, length); }

 private:
  std::unique_ptr<core::BackingFile> inner_;
};

}  // namespace sigilfs::test
