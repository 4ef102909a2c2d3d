// The page layer: encrypted file contents in 4 KiB pages, with a bounded plaintext cache,
// no read-modify-write on full-page overwrites, short-copy detection, read-ahead and batched,
// parallel write-back. docs/design/page-layer.md explains the rules and the lock order.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sigilfs/core/backing_file.h"
#include "sigilfs/core/format.h"
#include "sigilfs/core/progress.h"
#include "sigilfs/core/source.h"
#include "sigilfs/core/verity.h"
#include "sigilfs/crypt/aead.h"
#include "sigilfs/crypt/secure_bytes.h"
#include "sigilfs/mutex.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

// Largest plaintext size: keeps every cipher offset inside off_t.
inline constexpr uint64_t kMaxFileSize = uint64_t{1} << 62;

class ThreadPool;

struct PageLayerOptions {
  size_t cache_bytes = 64 << 20;  // plaintext cache budget for all open files together
  size_t readahead_pages = 32;    // pages fetched ahead of a sequential read (one pread)
  size_t writeback_pages = 512;   // dirty pages that trigger write-back inside a write
  bool strict_holes = false;      // refuse all-zero pages (EIO) instead of reading zeros
  bool force_rmw = false;         // benchmark/test switch: always read before writing a page
  // Sealing pins every data unit's nonce, so reads of the sealed file compare nonces instead of
  // hashing pages (docs/design/verity.md, "Pinned nonces"). Off: seal as sigilfs did before pins,
  // with reads checked against the tree (for tests of such files, and to measure the difference).
  bool verity_pins = true;
  // Sealing binds the data's last page as its commit point, so the file cannot pass for an
  // unsealed one again (docs/design/verity.md, "Binding the seal"). Off only to make files as
  // builds before binding sealed them, for tests that such files still read.
  bool verity_bind = true;
  unsigned crypto_threads = 0;  // workers for large batches; 0 = one per core
  // Other processes (other mounts, on this host or others) change the cipher files too
  // (docs/design/shared.md, "Files"): every call on a file is one section under the cipher
  // file's lock (BackingFile::Lock: shared for reads, exclusive for changes), which first takes
  // in what others changed and ends with everything stored and nothing cached. Writes are
  // stored before they return; reads decrypt what the cipher file holds at the time.
  bool shared = false;
};

// What the page layer did, for tests, benchmarks and the daemon's stats file.
enum class PageCounter : int {
  kRmwReads,     // partial writes into existing data that read and decrypted the page
  kRmwSkipped,   // full-page overwrites of existing data that read nothing
  kShortCopies,  // short copies at write_end into a page that was not read: not committed
  kPagesEncrypted,
  kPagesDecrypted,
  kHolesRead,    // all-zero units read as zeros
  kResealReads,  // old last pages read back to re-seal them when the file grew
  kBackingBytesRead,
  kBackingBytesWritten,
  kWritebacks,            // write-back batches
  kVerityPagesVerified,   // data pages of sealed files checked (pins, or the Merkle tree)
  kVerityTreeBlocksRead,  // tree blocks read, opened and checked (then cached)
  kVerityPinBlocksRead,   // pin blocks read, opened and checked (then cached)
  // Opens of unsealed files that read and opened their last page, to tell them from a sealed
  // file stripped of its seal (the page then stays cached); not counted as decrypted pages.
  kLastPageChecks,
  kCount,
};
std::string_view PageCounterName(PageCounter c);

using PageStats = std::array<uint64_t, static_cast<size_t>(PageCounter::kCount)>;

// Atomic counters; a file's are also added to its volume's.
class PageCounters {
 public:
  void Add(PageCounter c, uint64_t n) {
    v_[static_cast<size_t>(c)].fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t Get(PageCounter c) const {
    return v_[static_cast<size_t>(c)].load(std::memory_order_relaxed);
  }
  PageStats Snapshot() const;

 private:
  std::array<std::atomic<uint64_t>, static_cast<size_t>(PageCounter::kCount)> v_{};
};

class FileContents;

// Per-volume state shared by all open files: content key, options, counters, cache budget and
// the worker threads for batch encryption.
// Thread-safety: safe for concurrent access without external synchronization.
class PageLayer {
 public:
  PageLayer(crypt::AeadAlgorithm algorithm, ByteSpan content_key, PageLayerOptions options = {});
  ~PageLayer();
  PageLayer(const PageLayer&) = delete;
  PageLayer& operator=(const PageLayer&) = delete;

  // Opens the contents of one cipher file. `label` names it in error messages. `cipher_size`:
  // the file's size as its caller just read it (a file it made): an empty file, where no other
  // writer shares the store, is not read again.
  Result<std::unique_ptr<FileContents>> Open(std::unique_ptr<BackingFile> backing,
                                             std::string label,
                                             std::optional<uint64_t> cipher_size = std::nullopt);

  const PageLayerOptions& options() const { return options_; }
  const PageCounters& counters() const { return counters_; }
  crypt::AeadAlgorithm algorithm() const { return algorithm_; }
  const PageGeometry& geometry() const { return geometry_; }
  // The pages of all open files together, for the daemon's stats: cached, and of those the dirty
  // ones (changed, not yet stored).
  size_t cached_pages() const { return cached_pages_.load(std::memory_order_relaxed); }
  size_t dirty_pages() const { return dirty_pages_.load(std::memory_order_relaxed); }
  // Open files whose last write-back failed (a full disk), their changes not yet stored: each
  // reports the error at its next flush, or gives its changes up (DiscardUnstored).
  size_t failing_files() const { return failing_files_.load(std::memory_order_relaxed); }

 private:
  friend class FileContents;
  crypt::AeadAlgorithm algorithm_;
  crypt::SecureBytes content_key_;
  PageLayerOptions options_;
  PageGeometry geometry_;
  PageCounters counters_;
  std::atomic<size_t> cached_pages_{0};
  std::atomic<size_t> dirty_pages_{0};
  std::atomic<size_t> failing_files_{0};
  std::unique_ptr<ThreadPool> pool_;
};

// The plaintext contents of one open file. One object per file, shared by all its openers.
// Thread-safety: safe for concurrent access without external synchronization.
//
// Lock order: writeback_mu_ before mu_. writeback_mu_ serializes write-back and truncate (the
// operations that change the cipher file); mu_ (shared for reads, exclusive for changes)
// guards size, key and the page map, and is never held across encryption or a large I/O.
class FileContents {
 public:
  ~FileContents();  // writes back what is dirty (best effort: call Flush to see errors)
  FileContents(const FileContents&) = delete;
  FileContents& operator=(const FileContents&) = delete;

  uint64_t size() const;
  // Reads up to out.size() bytes at `offset`. Fewer at end of file, or when a page after the
  // first cannot be read: the pages before it are returned and a read starting at the bad page
  // reports its error (the POSIX partial-read rule).
  Result<size_t> Read(uint64_t offset, MutableByteSpan out);
  // Writes up to `length` bytes from `source` at `offset`; returns how many were committed
  // (fewer only if the source ran dry). Past EOF, the gap reads as zeros.
  Result<size_t> Write(uint64_t offset, Source& source, size_t length);
  Result<size_t> Write(uint64_t offset, ByteSpan data);
  // Writes at the end of the file, wherever that is when the write starts (O_APPEND): in shared
  // mode, the end as the cipher file holds it under the lock, whoever wrote last.
  Result<size_t> Append(Source& source, size_t length);
  // Changes the size; the new last page is re-sealed, and everything is written back.
  Status Truncate(uint64_t size);
  // fallocate(2), `mode` as there (FALLOC_FL_KEEP_SIZE, _PUNCH_HOLE with _KEEP_SIZE,
  // _ZERO_RANGE; others are EOPNOTSUPP). Reserving claims the cipher file's space for the
  // range and, without KEEP_SIZE, grows the file over it (reading as zeros). Punching and
  // zeroing make the range read as zeros: whole pages become holes and give their space back,
  // except the file's last page (always sealed, so a cut stays detectable) and in strict-holes
  // mode (where a hole is an error), which are sealed zeros; partial pages are written as zeros.
  // Not ordered against a concurrent Truncate (the mount serializes the two, as the kernel does).
  Status Allocate(int mode, uint64_t offset, uint64_t length);
  // lseek(2) SEEK_DATA (`data`) or SEEK_HOLE in plaintext offsets, at page granularity: a hole
  // is a page stored as a hole; the end of the file counts as a hole. ENXIO at or past the end.
  Result<uint64_t> SeekData(uint64_t offset, bool data);
  // Writes back every dirty page (encrypting in parallel, one pwritev per contiguous run).
  Status Flush();
  // Flush, then fsync/fdatasync the cipher file.
  Status Sync(bool data_only);
  // After a write-back failed (and a Flush or Sync reported it): gives up what could not be
  // stored, so the file is again what its cipher file holds (shorter, or with the pages it had
  // before), as a reopen would find it. True if that changed the size or any byte; false, and
  // nothing dropped, while no write-back is failing.
  bool DiscardUnstored();

  // fs-verity. Seals the file: hashes its contents into an fs-verity Merkle tree (salt of at most
  // 32 bytes), stores the tree and a record after the data, and from then on refuses changes
  // (kPermissionDenied, errno EPERM) and checks every page it reads against the tree (a
  // mismatch is kAuthFailed). Returns the file digest, as `fsverity measure` prints it.
  // kExists if already sealed.
  // `progress` hears of the data as it is hashed.
  Result<verity::Digest> EnableVerity(ByteSpan salt, const ByteProgress& progress = {});
  bool sealed() const;
  // Sealed, though its header's flags say otherwise: a seal stopped after its commit point, or
  // flags cleared by someone else. It reads (and refuses changes) as sealed; fsck reports it.
  bool seal_unflagged() const { return seal_unflagged_; }
  // The sealed file's fs-verity descriptor (its SHA-256 is the file digest); kNotFound with
  // errno ENODATA when the file is not sealed.
  Result<verity::Descriptor> VerityDescriptor() const;
  // Reads and checks every tree block and every data page of a sealed file (for fsck and
  // `sigilfs verity verify`); the first failure, naming the block or page. `progress` hears of
  // the data as it is checked.
  Status VerifyAll(const ByteProgress& progress = {});

  const PageCounters& counters() const { return counters_; }
  const std::string& label() const { return label_; }
  // Shared mode: how many times a call found the cipher file changed by another process (its
  // stamp moved) since this object opened it. A front end that caches the plaintext itself (the
  // kernel's page cache of a mount) drops that cache when this moves.
  uint64_t outside_changes() const { return outside_changes_.load(std::memory_order_relaxed); }

 private:
  friend class PageLayer;
  // One call's section in shared mode (file_contents_internal.h); a no-op otherwise, and in a
  // call made inside another of the same thread.
  class Section;
  // Shared mode: the cipher file re-read where another process changed it (its length or
  // header differ from what this object last left): state dropped and loaded again.
  Status TakeInOutsideChanges(bool first) SIGILFS_REQUIRES(section_mu_);
  // Shared mode, the end of a section: nothing left cached or unstored; after a change
  // (`changed`), the file's new stamp and header noted as this object's own.
  void EndSection(bool changed) SIGILFS_REQUIRES(section_mu_);
  struct Key;
  struct Sealed;
  struct PageBufferDeleter {
    void operator()(uint8_t* p) const;  // wipes the plaintext, then frees it
  };
  using PageBuffer = std::unique_ptr<uint8_t[], PageBufferDeleter>;
  // A cached plaintext page. Bytes past the end of the file are always zero.
  struct Page {
    PageBuffer data;
    uint64_t version = 0;        // bumped by every change
    uint64_t clean_version = 0;  // the version the cipher file holds
    std::atomic<uint64_t> last_use{0};
    bool uptodate = false;   // only meaningful for the pending (not yet cached) page
    bool in_flight = false;  // a write-back is sealing from `data`: copy before changing it
    bool dirty() const { return version != clean_version; }
  };
  static PageBuffer NewPageBuffer();
  FileContents(PageLayer& layer, std::unique_ptr<BackingFile> backing, std::string label);
  // Opening, before the object is shared: under mu_ all the same, so the checker sees it.
  Status Load() SIGILFS_REQUIRES(mu_);
  Status LoadSealed(const FileHeader& header, uint64_t cipher_size) SIGILFS_REQUIRES(mu_);
  // A file whose length is a sealed file's but whose header is not flagged: true if it was
  // loaded (as the sealed file it is, or as the unsealed file an interrupted seal left, its tail
  // to be cut at the first change); false if its length only looks sealed (a torn tail).
  Result<bool> LoadUnflaggedSeal(const FileHeader& header, uint64_t cipher_size)
      SIGILFS_REQUIRES(mu_);
  void AdoptSeal(const verity::SealedLayout& layout, const verity::Record& record,
                 std::shared_ptr<const Key> key) SIGILFS_REQUIRES(mu_);
  void AdoptUnsealedData(uint64_t data_size, std::shared_ptr<const Key> key) SIGILFS_REQUIRES(mu_);
  // EnableVerity's phases (verity/sealed_file.cc): the file's data hashed, the side units
  // (tree, record, pins, bound last page) sealed, written in the order that makes a crash
  // safe, or undone in the reverse order. `SealProgress` records how far the seal got on disk.
  struct SealProgress;
  struct SealUnits;
  Status HashDataPages(SealProgress& seal, const verity::BlockHasher& hasher,
                       std::vector<verity::Digest>& hashes, std::vector<uint8_t>& nonces)
      SIGILFS_REQUIRES(writeback_mu_);
  Status BuildSealUnits(SealProgress& seal, ByteSpan salt, const verity::BlockHasher& hasher,
                        const std::vector<verity::Digest>& hashes, std::vector<uint8_t>& nonces,
                        SealUnits& out) SIGILFS_REQUIRES(writeback_mu_);
  Status WriteSeal(SealProgress& seal, const SealUnits& units) SIGILFS_REQUIRES(writeback_mu_);
  Status UndoSeal(const SealProgress& seal, const Status& failure) SIGILFS_REQUIRES(writeback_mu_);
  // How a file's last data unit opens (Load's check that an unsealed file is not a stripped one).
  struct LastPage {
    enum Kind { kNeither, kUnsealed, kBound } kind = kNeither;
    PageBuffer plain;  // the page, when it opened as an unsealed file's last page
  };
  Result<LastPage> ProbeLastPage(const Key& key, uint64_t index, uint64_t data_size,
                                 bool try_unsealed);
  Status CutStaleTailLocked() SIGILFS_REQUIRES(writeback_mu_, mu_);
  Result<verity::Record> ReadRecord(const Key& key, const verity::SealedLayout& layout);
  // Verified tree blocks for the data pages [first, first + count) of a sealed file, one per
  // level-0 block (read together), with their ancestors checked up to the root. If a block after
  // the first fails, the blocks before it come back and `later` says why the rest did not.
  using TreeBlock = std::shared_ptr<const std::array<uint8_t, verity::kBlockSize>>;
  Result<std::vector<TreeBlock>> Level0Blocks(const Sealed& sealed, const Key& key, uint64_t first,
                                              size_t count, Status& later);
  // Verified pin blocks for the data pages [first, first + count) of a file sealed with pins
  // (`later` as for Level0Blocks).
  Result<std::vector<TreeBlock>> PinBlocks(const Sealed& sealed, const Key& key, uint64_t first,
                                           size_t count, Status& later);
  // Blocks [b0, b1] of a run of side units (level-0 tree blocks or pin blocks): the cached ones,
  // the others read with one call (with the next ones) and opened by `open`, which caches them.
  // A failure of block b0 is the result; of a later block, `later`, with the blocks before it.
  struct SideRun {
    uint64_t cache_start;  // cache key of the run's block 0 (Sealed::verified)
    uint64_t first_unit;   // unit index of its block 0
    uint64_t count;        // blocks in the run
  };
  Result<std::vector<TreeBlock>> SideBlocks(
      const Sealed& sealed, const SideRun& run, uint64_t b0, uint64_t b1,
      const std::function<Result<TreeBlock>(uint64_t, ByteSpan)>& open, Status& later);
  // Caches a verified side block under `key` (Sealed::verified) and returns it.
  static TreeBlock Keep(const Sealed& sealed, uint64_t key, TreeBlock block);
  Result<TreeBlock> OpenPinBlock(const Sealed& sealed, const Key& key, uint64_t index,
                                 ByteSpan unit);
  // True if `unit`, data page first + i, carries the nonce pinned for it in `pins`.
  bool PinMatches(std::span<const TreeBlock> pins, uint64_t first, size_t i, ByteSpan unit) const;
  // Opens tree block `index` of `level` from its sealed unit and checks it against its parent.
  Result<TreeBlock> OpenTreeBlock(const Sealed& sealed, const Key& key, int level, uint64_t index,
                                  ByteSpan unit);
  Result<TreeBlock> VerifiedTreeBlock(const Sealed& sealed, const Key& key, int level,
                                      uint64_t index);
  // Checks the loaded pages dest[begin, end) (page first + i in dest[i]) whose results are
  // still ok against the tree; a mismatch turns the page's result into kAuthFailed.
  void CheckPages(const Sealed& sealed, std::span<const TreeBlock> level0, uint64_t first,
                  size_t begin, size_t end, std::span<uint8_t* const> dest,
                  std::span<Status> results) const;
  // kPermissionDenied once sealing starts.
  Status Frozen() const SIGILFS_REQUIRES_SHARED(mu_);

  void Count(PageCounter c, uint64_t n = 1);
  // A run of whole pages written straight from the caller's buffer, bypassing the cache.
  struct DirectRun {
    uint64_t first;
    size_t count;
    ByteSpan plain;  // count * kPageSize bytes
    // The stored last page's plaintext when the run covers it and grows the file: what a
    // failed write-back seals back in its place.
    const uint8_t* old_last_plain = nullptr;
  };

  Result<std::shared_ptr<const Key>> MakeKey(const FileNonce& nonce) const;
  Result<std::shared_ptr<const Key>> EnsureKeyLocked() SIGILFS_REQUIRES(mu_);
  // `nonces`, when given, receives each stored page's nonce (nonce_size() bytes per page).
  Status LoadPages(const Key* key, uint64_t first, size_t count, uint64_t disk_size,
                   std::span<uint8_t* const> dest, size_t& good, MutableByteSpan nonces = {});
  Status LoadPageBuffers(const Key* key, uint64_t first, size_t count, uint64_t disk_size,
                         std::vector<PageBuffer>& out);
  Status EnsureCachedLocked(uint64_t index) SIGILFS_REQUIRES(mu_);
  // Write's work, at `offset` (Write and Append hold the section).
  Result<size_t> WriteAnywhere(uint64_t offset, Source& source, size_t length);
  Result<size_t> Stored(const Section& section, Result<size_t> written);
  Result<size_t> WriteCached(uint64_t offset, Source& source, size_t length);
  // A failure after part of the run was stored returns that part's length with `*failed` set.
  Result<size_t> WriteDirect(uint64_t first, size_t count, Source& source, bool* failed);
  // Waits while page `index` is being changed past the cache (a large write or a punch in
  // flight), so a partial write comes after it, never between its read of the old page and the
  // new one landing. Returns whether it waited.
  bool WaitForBypassLocked(uint64_t index) SIGILFS_REQUIRES(mu_);
  // With write-backs failing, stores the dirty backlog before a write that would pass its bound
  // adds to it, and fails (the write then changes nothing) if that fails too.
  Status LimitBacklog(size_t adding);
  Result<Page*> WriteBegin(uint64_t index, size_t in_page, size_t len, Page& pending)
      SIGILFS_REQUIRES(mu_);
  size_t WriteEnd(Page* page, Page& pending, uint64_t index, size_t in_page, size_t len,
                  size_t copied) SIGILFS_REQUIRES(mu_);
  Status PreloadPartialPages(uint64_t offset, size_t length);
  Page& InsertPageLocked(uint64_t index, PageBuffer data, bool dirty) SIGILFS_REQUIRES(mu_);
  void MarkDirtyLocked(uint64_t index, Page& page) SIGILFS_REQUIRES(mu_);
  // Page `index` is stored or gone: out of dirty_ (the layer's count follows).
  void ForgetDirtyLocked(uint64_t index) SIGILFS_REQUIRES(mu_);
  // writeback_failing_ set to `failing`; the layer's count of failing files follows.
  void SetWritebackFailing(bool failing);
  void DropPageLocked(std::pmr::map<uint64_t, Page>::iterator it) SIGILFS_REQUIRES(mu_);
  // Pages [first, end), dirty or not.
  void DropRangeLocked(uint64_t first, uint64_t end) SIGILFS_REQUIRES(mu_);
  void DropCleanRangeLocked(uint64_t first, uint64_t end)
      SIGILFS_REQUIRES(mu_);  // only the clean ones
  // Truncate, or with `only_grow` a size that is only ever raised (fallocate beside writers).
  Status Resize(uint64_t new_size, bool only_grow);
  Status CutStoredLocked(uint64_t new_size) SIGILFS_REQUIRES(writeback_mu_, mu_);
  // Sealed zeros over [offset, end), through the ordinary write path: no holes.
  Status WriteZeros(uint64_t offset, uint64_t end);
  // Whole pages [first, end), none of them the last, become holes (Allocate's punch).
  Status PunchPages(uint64_t first, uint64_t end);
  // The first run of hole pages at or after `from`, before the last page: [first, end).
  Result<std::optional<std::pair<uint64_t, uint64_t>>> NextHoleRun(uint64_t from)
      SIGILFS_REQUIRES_SHARED(mu_);
  void EvictLocked() SIGILFS_REQUIRES(mu_);
  Status WriteBackLocked(DirectRun* direct = nullptr) SIGILFS_REQUIRES(writeback_mu_);
  Status StoreDirtyLocked(DirectRun* direct) SIGILFS_REQUIRES(writeback_mu_);
  // StoreDirtyLocked's phases (page_layer.cc).
  struct WriteBackBatch;
  Result<bool> SnapshotDirtyLocked(DirectRun* direct, WriteBackBatch& batch)
      SIGILFS_REQUIRES(writeback_mu_, mu_);
  Status WriteNewHeader(const Key& key) SIGILFS_REQUIRES(writeback_mu_);
  void UndoFailedWrite(const WriteBackBatch& batch, const DirectRun* direct,
                       std::optional<uint64_t> last_begun) SIGILFS_REQUIRES(writeback_mu_);
  void MarkStoredLocked(const WriteBackBatch& batch) SIGILFS_REQUIRES(writeback_mu_, mu_);
  // The write-back a write triggers runs as a job on a crypto worker while the writer goes on
  // (docs/design/page-layer.md, "Write-back jobs"). Starting one first finishes the one before and
  // returns its failure, as a write-back the write ran itself would have.
  Status StartWriteBackJob();
  // Helps with the pending job (its batch of seals) until it is done; returns its failure.
  Status FinishWriteBackJob();
  void UndoGrowth(uint64_t old_size, bool header_was_new, const Key& key,
                  const uint8_t* old_last_plain) SIGILFS_REQUIRES(writeback_mu_);

  PageLayer& layer_;
  std::unique_ptr<BackingFile> backing_;
  const std::string label_;
  PageCounters counters_;

  // Shared mode: one section at a time in this process, since the store's lock belongs to the
  // open file and so cannot keep this process's own threads apart. The owner's nested calls
  // pass (section_owner_).
  Mutex section_mu_ SIGILFS_ACQUIRED_BEFORE(writeback_mu_);
  std::atomic<std::thread::id> section_owner_{};
  // The cipher file as this object's last section left it (none: not loaded under the lock yet).
  std::optional<FileStamp> seen_stamp_ SIGILFS_GUARDED_BY(section_mu_);
  std::array<uint8_t, kFileHeaderSize> seen_header_ SIGILFS_GUARDED_BY(section_mu_){};
  std::atomic<uint64_t> outside_changes_{0};

  Mutex writeback_mu_ SIGILFS_ACQUIRED_BEFORE(mu_);
  Mutex job_mu_;
  // A write-back job is posted and not finished. Set and cleared under job_mu_; read without
  // it to decide whether to wait.
  std::atomic<bool> job_pending_{false};
  Status job_error_ SIGILFS_GUARDED_BY(job_mu_);  // the last job's failure, not yet reported
  // The last write-back failed and none has stored everything since: the dirty backlog is
  // bounded (LimitBacklog).
  std::atomic<bool> writeback_failing_{false};
  std::vector<uint8_t> wb_cipher_ SIGILFS_GUARDED_BY(writeback_mu_);  // their sealed units
  mutable SharedMutex mu_;
  uint64_t size_ SIGILFS_GUARDED_BY(mu_) = 0;       // plaintext size as seen by users
  uint64_t disk_size_ SIGILFS_GUARDED_BY(mu_) = 0;  // plaintext size the cipher file holds
  bool header_on_disk_ SIGILFS_GUARDED_BY(mu_) = false;
  // Null until the first write of a new file.
  std::shared_ptr<const Key> key_ SIGILFS_GUARDED_BY(mu_);
  // Set once, when the file is sealed, and never cleared: readable without mu_ (page loads run
  // under it as well as outside).
  std::unique_ptr<const Sealed> sealed_owner_ SIGILFS_GUARDED_BY(mu_);
  std::atomic<const Sealed*> sealed_{nullptr};
  bool frozen_ SIGILFS_GUARDED_BY(mu_) = false;  // sealed or being sealed
  // The cipher file holds more than its data: what a seal interrupted before its commit point
  // (or undone without its last cut) leaves; cut before the first change.
  bool stale_tail_ SIGILFS_GUARDED_BY(mu_) = false;
  bool seal_unflagged_ = false;  // set by the open only
  // Nodes of pages_ and dirty_ come from a pool of the file's own: a malloc and a free per
  // node were a tenth of a small write's time. All changes to either happen under mu_ held
  // exclusively, so the pool needs no lock of its own.
  std::pmr::unsynchronized_pool_resource nodes_ SIGILFS_GUARDED_BY(mu_);
  std::pmr::map<uint64_t, Page> pages_ SIGILFS_GUARDED_BY(mu_){&nodes_};
  std::pmr::map<uint64_t, Page*> dirty_ SIGILFS_GUARDED_BY(mu_){&nodes_};  // into pages_
  // Replaced while in flight, freed after.
  std::vector<PageBuffer> retired_ SIGILFS_GUARDED_BY(mu_);
  uint64_t generation_ SIGILFS_GUARDED_BY(mu_) = 0;  // bumped by truncate
  // Pages [first, end) a large write or a punch is changing past the cache; partial writes into
  // them wait on bypass_done_ (WaitForBypassLocked).
  std::optional<std::pair<uint64_t, uint64_t>> bypass_ SIGILFS_GUARDED_BY(mu_);
  SharedCondVar bypass_done_;
  // Bumped whenever the cache stops being the newest copy of a page it lacks (clean pages
  // evicted, pages written past the cache): a page loaded before a change of epoch may be stale
  // and is not cached.
  uint64_t cache_epoch_ SIGILFS_GUARDED_BY(mu_) = 0;
  size_t evict_scan_at_ SIGILFS_GUARDED_BY(mu_) = 0;  // cache size that triggers the next scan
  std::atomic<uint64_t> use_clock_{0};
  std::atomic<uint64_t> next_sequential_{0};  // where a sequential reader will read next
};

}  // namespace sigilfs::core
