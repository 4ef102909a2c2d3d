// Shared mode of the page layer: each call on a file is a section under the cipher file's lock,
// so several processes (mounts on several hosts) can use one cipher file (docs/design/shared.md,
// "Files").
#include <cstring>
#include <limits>

#include "file_contents_internal.h"

namespace sigilfs::core {

// The thread analysis cannot follow a lock taken only in shared mode and let go by the
// destructor; the rules are those of the members' annotations all the same.
FileContents::Section::Section(const FileContents& file,
                               FileLock kind) SIGILFS_NO_THREAD_SAFETY_ANALYSIS {
  auto& f = const_cast<FileContents&>(file);  // sections change what is cached, not the contents
  if (!f.layer_.options_.shared) return;
  if (f.section_owner_.load(std::memory_order_relaxed) == std::this_thread::get_id()) return;
  f.section_mu_.Lock();
  f.section_owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  file_ = &f;
  kind_ = kind;
  status_ = f.backing_->Lock(kind);
  if (!status_.ok()) {
    status_ = status_.WithContext(f.label_);
    return;
  }
  locked_ = true;
  status_ = f.TakeInOutsideChanges(!f.seen_stamp_.has_value());
}

FileContents::Section::~Section() SIGILFS_NO_THREAD_SAFETY_ANALYSIS {
  if (file_ == nullptr) return;
  FileContents& f = *file_;
  f.EndSection(locked_ && kind_ == FileLock::kExclusive);
  // A lock that cannot be let go (a store that lost it) is gone with it.
  if (locked_) (void)f.backing_->Lock(FileLock::kUnlocked);
  f.section_owner_.store(std::thread::id(), std::memory_order_relaxed);
  f.section_mu_.Unlock();
}

Status FileContents::TakeInOutsideChanges(bool first) {
  auto got = backing_->Stamp();
  if (!got.ok()) return got.status().WithContext(label_);
  const FileStamp stamp = *got;
  std::array<uint8_t, kFileHeaderSize> header{};
  if (stamp.size > 0) {
    auto read = backing_->ReadAt(header, 0);
    if (!read.ok()) return read.status().WithContext(label_);
  }
  if (!first && !(stamp == *seen_stamp_)) outside_changes_.fetch_add(1, std::memory_order_relaxed);
  // What a section keeps from the one before, the size, the key and the seal, follows from the
  // length and the header alone; everything else was dropped at its end.
  if (!first && stamp.size == seen_stamp_->size && header == seen_header_) {
    seen_stamp_ = stamp;
    return Status::Ok();
  }
  (void)FinishWriteBackJob();
  MutexLock wb(writeback_mu_);
  WriterLock lock(mu_);
  if (sealed_owner_ != nullptr) {
    // No change of a sealed file is legitimate, and none is taken in; its reads check every page.
    if (!first)
      return Status(Code::kCorrupt, label_ + ": the sealed file was changed by another process",
                    EIO);
    seen_stamp_ = stamp;
    seen_header_ = header;
    return Status::Ok();
  }
  seen_stamp_.reset();
  DropRangeLocked(0, std::numeric_limits<uint64_t>::max());
  ++generation_;
  ++cache_epoch_;
  key_.reset();
  size_ = disk_size_ = 0;
  header_on_disk_ = false;
  stale_tail_ = false;
  frozen_ = false;
  SetWritebackFailing(false);
  SIGILFS_RETURN_IF_ERROR(Load());
  seen_stamp_ = stamp;
  seen_header_ = header;
  return Status::Ok();
}

void FileContents::EndSection(bool changed) {
  (void)FinishWriteBackJob();
  {
    MutexLock wb(writeback_mu_);
    WriterLock lock(mu_);
    // What a failed call could not store is given up: the next section starts from the cipher
    // file, which others may change meanwhile.
    if (!dirty_.empty() || size_ != disk_size_) {
      if (changed) seen_stamp_.reset();  // loaded again from the file by the next section
      size_ = disk_size_;
      SetWritebackFailing(false);
    }
    DropRangeLocked(0, std::numeric_limits<uint64_t>::max());
    ++cache_epoch_;
  }
  if (!changed || !seen_stamp_) return;
  auto stamp = backing_->Stamp();
  std::array<uint8_t, kFileHeaderSize> header{};
  if (!stamp.ok() || (stamp->size > 0 && !backing_->ReadAt(header, 0).ok())) {
    seen_stamp_.reset();  // not known: loaded again by the next section
    return;
  }
  seen_stamp_ = *stamp;
  seen_header_ = header;
}

}  // namespace sigilfs::core
