// BackingFile implementations: POSIX descriptor, memory, and fault injection.
#include "sigilfs/core/backing_file.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace sigilfs::core {
namespace {

size_t TotalSize(std::span<const ByteSpan> bufs) {
  size_t n = 0;
  for (ByteSpan b : bufs) n += b.size();
  return n;
}

class PosixBackingFile final : public BackingFile {
 public:
  explicit PosixBackingFile(int fd) : fd_(fd) {}
  ~PosixBackingFile() override { ::close(fd_); }

  Result<size_t> ReadAt(MutableByteSpan buf, uint64_t offset) override {
    size_t done = 0;
    while (done < buf.size()) {
      ssize_t n =
          ::pread(fd_, buf.data() + done, buf.size() - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(errno, "read cipher file");
      }
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    return done;
  }

  Status WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) override {
    // pwritev takes at most IOV_MAX segments and may write short: loop until all is written.
    std::vector<iovec> iov;
    iov.reserve(bufs.size());
    for (ByteSpan b : bufs)
      if (!b.empty()) iov.push_back({const_cast<uint8_t*>(b.data()), b.size()});
    size_t first = 0;
    while (first < iov.size()) {
      const int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
      ssize_t n = ::pwritev(fd_, iov.data() + first, count, static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(errno, "write cipher file");
      }
      offset += static_cast<uint64_t>(n);
      size_t left = static_cast<size_t>(n);
      while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
      if (left > 0) {
        iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
      }
    }
    return Status::Ok();
  }

  Result<uint64_t> Size() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Status::FromErrno(errno, "stat cipher file");
    return static_cast<uint64_t>(st.st_size);
  }

  Status Truncate(uint64_t size) override {
    while (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      if (errno != EINTR) return Status::FromErrno(errno, "truncate cipher file");
    }
    return Status::Ok();
  }

  Status Sync(bool data_only) override {
    if ((data_only ? ::fdatasync(fd_) : ::fsync(fd_)) != 0)
      return Status::FromErrno(errno, "sync cipher file");
    return Status::Ok();
  }
  Status Allocate(uint64_t offset, uint64_t length, bool punch_hole) override {
    const int mode = FALLOC_FL_KEEP_SIZE | (punch_hole ? FALLOC_FL_PUNCH_HOLE : 0);
    while (::fallocate(fd_, mode, static_cast<off_t>(offset), static_cast<off_t>(length)) != 0) {
      if (errno != EINTR) return Status::FromErrno(errno, "allocate cipher file space");
    }
    return Status::Ok();
  }

  Result<uint64_t> Seek(uint64_t offset, bool data) override {
    const off_t at = ::lseek(fd_, static_cast<off_t>(offset), data ? SEEK_DATA : SEEK_HOLE);
    if (at < 0) return Status::FromErrno(errno, "seek in cipher file");
    return static_cast<uint64_t>(at);
  }

  Result<FileStamp> Stamp() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Status::FromErrno(errno, "stat cipher file");
    return FileStamp{static_cast<uint64_t>(st.st_size), st.st_mtim, st.st_ctim};
  }

  Status Lock(FileLock kind) override {
    struct flock fl {};
    fl.l_type = kind == FileLock::kUnlocked ? F_UNLCK
                : kind == FileLock::kShared ? F_RDLCK
                                            : F_WRLCK;
    fl.l_whence = SEEK_SET;  // l_start 0, l_len 0: the whole file, however long it grows
    while (::fcntl(fd_, F_OFD_SETLKW, &fl) != 0) {
      if (errno != EINTR)
        return Status::FromErrno(
            errno, kind == FileLock::kUnlocked ? "unlock cipher file" : "lock cipher file");
    }
    return Status::Ok();
  }

  void WillNeed(uint64_t offset, uint64_t length) override {
    (void)::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(length),
                          POSIX_FADV_WILLNEED);
  }

 private:
  int fd_;
};

class MemoryBackingFile final : public BackingFile {
 public:
  explicit MemoryBackingFile(std::shared_ptr<MemoryFileData> data) : data_(std::move(data)) {}
  // Each call names the data once (`d`), so the lock checker sees the lock and the bytes it
  // guards as one object's; it cannot see through the shared pointer.

  Result<size_t> ReadAt(MutableByteSpan buf, uint64_t offset) override {
    MemoryFileData& d = *data_;
    MutexLock lock(d.mu);
    if (offset >= d.bytes.size()) return size_t{0};
    const size_t n = std::min<uint64_t>(buf.size(), d.bytes.size() - offset);
    if (n > 0) std::memcpy(buf.data(), d.bytes.data() + offset, n);
    return n;
  }

  Status WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) override {
    MemoryFileData& d = *data_;
    MutexLock lock(d.mu);
    std::vector<uint8_t>& b = d.bytes;
    ++d.changes;
    const size_t total = TotalSize(bufs);
    if (offset + total > b.size()) b.resize(offset + total, 0);
    for (ByteSpan s : bufs) {
      if (!s.empty()) std::memcpy(b.data() + offset, s.data(), s.size());
      offset += s.size();
    }
    return Status::Ok();
  }

  Result<uint64_t> Size() override {
    MemoryFileData& d = *data_;
    MutexLock lock(d.mu);
    return static_cast<uint64_t>(d.bytes.size());
  }

  Status Truncate(uint64_t size) override {
    MemoryFileData& d = *data_;
    MutexLock lock(d.mu);
    d.bytes.resize(size, 0);
    ++d.changes;
    return Status::Ok();
  }

  Status Sync(bool) override { return Status::Ok(); }

  Status Allocate(uint64_t offset, uint64_t length, bool punch_hole) override {
    MemoryFileData& d = *data_;
    MutexLock lock(d.mu);
    auto& b = d.bytes;
    if (punch_hole) ++d.changes;
    if (punch_hole && offset < b.size())
      std::memset(b.data() + offset, 0, std::min<uint64_t>(length, b.size() - offset));
    return Status::Ok();  // memory needs no reserving
  }

  Result<uint64_t> Seek(uint64_t offset, bool data) override {
    MemoryFileData& d = *data_;
    MutexLock lock(d.mu);
    const uint64_t size = d.bytes.size();
    if (offset >= size) return Status::FromErrno(ENXIO, "seek in memory file");
    constexpr uint64_t kBlock = 4096;
    for (uint64_t block = offset / kBlock; block * kBlock < size; ++block) {
      const uint64_t begin = block * kBlock;
      const uint64_t end = std::min<uint64_t>(begin + kBlock, size);
      const bool hole =
          end - begin == kBlock && std::all_of(d.bytes.begin() + static_cast<ptrdiff_t>(begin),
                                               d.bytes.begin() + static_cast<ptrdiff_t>(end),
                                               [](uint8_t x) { return x == 0; });
      if (hole != data) return std::max(offset, begin);
    }
    // Past the last data there is no more data; the end of the file is where a hole starts.
    if (data) return Status::FromErrno(ENXIO, "seek in memory file");
    return size;
  }

  Result<FileStamp> Stamp() override {
    MemoryFileData& d = *data_;
    MutexLock lock(d.mu);
    FileStamp stamp;
    stamp.size = d.bytes.size();
    stamp.ctime.tv_sec = static_cast<time_t>(d.changes);
    return stamp;
  }

  // Readers and one writer, as a whole-file OFD lock: held by this object until let go.
  Status Lock(FileLock kind) override {
    MemoryFileData& d = *data_;
    MutexLock lock(d.mu);
    if (held_ == FileLock::kShared) --d.shared_holders;
    if (held_ == FileLock::kExclusive) d.exclusive_held = false;
    if (held_ != FileLock::kUnlocked) d.lock_changed.NotifyAll();
    held_ = FileLock::kUnlocked;
    if (kind == FileLock::kShared) {
      while (d.exclusive_held) d.lock_changed.Wait(d.mu);
      ++d.shared_holders;
    } else if (kind == FileLock::kExclusive) {
      while (d.exclusive_held || d.shared_holders > 0) d.lock_changed.Wait(d.mu);
      d.exclusive_held = true;
    }
    held_ = kind;
    return Status::Ok();
  }

  ~MemoryBackingFile() override { (void)Lock(FileLock::kUnlocked); }

 private:
  std::shared_ptr<MemoryFileData> data_;
  FileLock held_ = FileLock::kUnlocked;  // changed under data_->mu only
};

}  // namespace

std::unique_ptr<BackingFile> NewPosixBackingFile(int fd) {
  return std::make_unique<PosixBackingFile>(fd);
}

std::unique_ptr<BackingFile> NewMemoryBackingFile(std::shared_ptr<MemoryFileData> data) {
  return std::make_unique<MemoryBackingFile>(std::move(data));
}

FaultyBackingFile::FaultyBackingFile(std::unique_ptr<BackingFile> inner, FaultPlan plan)
    : inner_(std::move(inner)), plan_(plan) {}

void FaultyBackingFile::set_plan(const FaultPlan& plan) {
  MutexLock lock(mu_);
  plan_ = plan;
  crashed_ = false;
}

Result<size_t> FaultyBackingFile::ReadAt(MutableByteSpan buf, uint64_t offset) {
  {
    MutexLock lock(mu_);
    if (plan_.fail_reads_at >= 0 && static_cast<uint64_t>(plan_.fail_reads_at) >= offset &&
        static_cast<uint64_t>(plan_.fail_reads_at) < offset + buf.size())
      return Status::FromErrno(EIO, "read cipher file (injected)");
  }
  return inner_->ReadAt(buf, offset);
}

Status FaultyBackingFile::WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) {
  MutexLock lock(mu_);
  if (crashed_) return Status::FromErrno(plan_.write_errno, "write cipher file (after a crash)");
  const size_t total = TotalSize(bufs);
  size_t free_part = 0;  // bytes of the write that cost no budget
  if (plan_.growth_only && plan_.write_budget >= 0) {
    SIGILFS_ASSIGN_OR_RETURN(const uint64_t size, inner_->Size());
    free_part = static_cast<size_t>(std::min<uint64_t>(total, size > offset ? size - offset : 0));
  }
  const size_t cost = total - free_part;
  if (plan_.write_budget < 0 || static_cast<uint64_t>(plan_.write_budget) >= cost) {
    if (plan_.write_budget >= 0) plan_.write_budget -= static_cast<int64_t>(cost);
    return inner_->WriteAt(bufs, offset);
  }
  if (plan_.torn_writes && free_part + static_cast<size_t>(plan_.write_budget) > 0) {
    // Store the prefix that fits, as a disk that fills up mid-write does.
    std::vector<ByteSpan> part;
    size_t left = free_part + static_cast<size_t>(plan_.write_budget);
    for (ByteSpan b : bufs) {
      if (left == 0) break;
      part.push_back(b.first(std::min(left, b.size())));
      left -= part.back().size();
    }
    SIGILFS_RETURN_IF_ERROR(inner_->WriteAt(part, offset));
  }
  plan_.write_budget = 0;
  crashed_ = plan_.crash;
  return Status::FromErrno(plan_.write_errno, "write cipher file (injected)");
}

Result<uint64_t> FaultyBackingFile::Size() { return inner_->Size(); }
Status FaultyBackingFile::Truncate(uint64_t size) {
  {
    MutexLock lock(mu_);
    if (crashed_)
      return Status::FromErrno(plan_.write_errno, "truncate cipher file (after a crash)");
  }
  return inner_->Truncate(size);
}

Status FaultyBackingFile::Allocate(uint64_t offset, uint64_t length, bool punch_hole) {
  {
    MutexLock lock(mu_);
    // Reserving space is what fails on a full disk; punching frees it.
    if (!punch_hole && plan_.write_budget == 0)
      return Status::FromErrno(plan_.write_errno, "allocate cipher file space (injected)");
  }
  return inner_->Allocate(offset, length, punch_hole);
}

Result<uint64_t> FaultyBackingFile::Seek(uint64_t offset, bool data) {
  return inner_->Seek(offset, data);
}

Result<FileStamp> FaultyBackingFile::Stamp() { return inner_->Stamp(); }
Status FaultyBackingFile::Lock(FileLock kind) { return inner_->Lock(kind); }

Status FaultyBackingFile::Sync(bool data_only) {
  {
    MutexLock lock(mu_);
    if (plan_.fail_sync) return Status::FromErrno(EIO, "sync cipher file (injected)");
  }
  return inner_->Sync(data_only);
}

}  // namespace sigilfs::core
