// BackingFile: the one interface through which the page layer reaches a cipher file.
#pragma once

#include <sys/uio.h>
#include <time.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "sigilfs/crypt/bytes.h"
#include "sigilfs/mutex.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

// What tells one stored version of a file from another for a process that does not hold it
// open alone (shared mode): its length and its change times. Times are as fine as the store
// keeps them, so two changes close together may leave equal stamps; callers use a stamp to find
// changes, never to prove there were none.
struct FileStamp {
  uint64_t size = 0;
  struct timespec mtime {};
  struct timespec ctime {};
  bool operator==(const FileStamp& o) const {
    return size == o.size && mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec &&
           ctime.tv_sec == o.ctime.tv_sec && ctime.tv_nsec == o.ctime.tv_nsec;
  }
};

// A lock on a whole file that every process (and, on a network store, every host) reaching it
// sees: shared for readers, exclusive for a writer.
enum class FileLock { kUnlocked, kShared, kExclusive };

// An open cipher file. Implementations: POSIX file descriptor (the default), memory (tests),
// and a fault injector wrapping another (tests of errors).
// Thread-safety: implementations are safe for concurrent access.
class BackingFile {
 public:
  virtual ~BackingFile() = default;
  // Reads up to buf.size() bytes at `offset`; fewer only at end of file.
  virtual Result<size_t> ReadAt(MutableByteSpan buf, uint64_t offset) = 0;
  // Writes all of `bufs` contiguously at `offset` (one pwritev where possible), or fails.
  virtual Status WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) = 0;
  virtual Result<uint64_t> Size() = 0;
  virtual Status Truncate(uint64_t size) = 0;
  virtual Status Sync(bool data_only) = 0;
  // Space of the cipher file, never its length: reserves [offset, offset + length) (fallocate
  // with FALLOC_FL_KEEP_SIZE), or with `punch_hole` frees it so it reads as zeros.
  virtual Status Allocate(uint64_t offset, uint64_t length, bool punch_hole) = 0;
  // lseek(SEEK_DATA) (`data`) or lseek(SEEK_HOLE) from `offset`: where the next stretch of data
  // or hole starts, at the store's block granularity; errno ENXIO at or past the end.
  virtual Result<uint64_t> Seek(uint64_t offset, bool data) = 0;
  // Its length and change times (FileStamp).
  virtual Result<FileStamp> Stamp() = 0;
  // Takes `kind` on the whole file, waiting for it, or (kUnlocked) lets it go. The lock belongs
  // to this object, not to a thread: its callers keep their own threads apart. POSIX: an
  // open-file-description lock (fcntl F_OFD_SETLKW), which NFS takes on its server and a FUSE
  // store without locking of its own (sshfs) keeps in the client's kernel; a store that has
  // none fails (ENOLCK, EINVAL), and so does one that lost it (NFS after a server restart
  // that did not give it back): never ignored.
  virtual Status Lock(FileLock kind) = 0;
  // A hint that [offset, offset + length) will be read soon (the kernel may start reading it).
  virtual void WillNeed(uint64_t offset, uint64_t length) {
    (void)offset;
    (void)length;
  }
};

// Takes ownership of `fd` (closed on destruction).
std::unique_ptr<BackingFile> NewPosixBackingFile(int fd);

// Bytes of a memory "file", shareable so a test can reopen the same file. Like a sparse file on
// a filesystem with 4 KiB blocks, its holes are the aligned 4 KiB blocks of zeros.
struct MemoryFileData {
  Mutex mu;
  std::vector<uint8_t> bytes SIGILFS_GUARDED_BY(mu);
  uint64_t changes SIGILFS_GUARDED_BY(mu) = 0;  // bumped by every change: the stamp's ctime
  // BackingFile::Lock across the files opened on these bytes.
  CondVar lock_changed;
  size_t shared_holders SIGILFS_GUARDED_BY(mu) = 0;
  bool exclusive_held SIGILFS_GUARDED_BY(mu) = false;
};
std::unique_ptr<BackingFile> NewMemoryBackingFile(std::shared_ptr<MemoryFileData> data);

// What a fault-injecting backing file does wrong. Counters are in bytes of the wrapped file.
struct FaultPlan {
  int64_t write_budget = -1;  // bytes written before writes fail with write_errno (-1: never)
  int write_errno = 28;       // ENOSPC
  bool torn_writes = false;   // the failing write stores the part that fits the budget
  // The budget is the disk's free space: rewriting bytes inside the file's size is free (their
  // blocks exist), only bytes that grow the file spend it.
  bool growth_only = false;
  // A crash rather than a full disk: once a write has failed, nothing more reaches the file
  // (truncates included), as when the machine stops there.
  bool crash = false;
  int64_t fail_reads_at = -1;  // a read covering this offset fails with EIO (-1: never)
  bool fail_sync = false;
};
// Wraps `inner`; `plan` may be changed by the test between operations (under its own mutex).
class FaultyBackingFile : public BackingFile {
 public:
  FaultyBackingFile(std::unique_ptr<BackingFile> inner, FaultPlan plan);
  void set_plan(const FaultPlan& plan);
  Result<size_t> ReadAt(MutableByteSpan buf, uint64_t offset) override;
  Status WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) override;
  Result<uint64_t> Size() override;
  Status Truncate(uint64_t size) override;
  Status Sync(bool data_only) override;
  Status Allocate(uint64_t offset, uint64_t length, bool punch_hole) override;
  Result<uint64_t> Seek(uint64_t offset, bool data) override;
  Result<FileStamp> Stamp() override;
  Status Lock(FileLock kind) override;

 private:
  std::unique_ptr<BackingFile> inner_;
  Mutex mu_;
  FaultPlan plan_ SIGILFS_GUARDED_BY(mu_);
  bool crashed_ SIGILFS_GUARDED_BY(mu_) = false;  // a write failed under plan_.crash
};

}  // namespace sigilfs::core
