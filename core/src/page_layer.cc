// The page layer's cache: plaintext pages over sealed units, the read path with its read-ahead
// and direct (uncached) large reads, and size changes, of docs/design/page-layer.md. Writes are
// page_layer_write.cc's, write-back write_back.cc's, sealed files verity/sealed_file.cc's, holes
// page_layer_space.cc's.
#include "sigilfs/core/page_layer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "file_contents_internal.h"
#include "page_pieces.h"
#include "sigilfs/core/keys.h"
#include "sigilfs/crypt/random.h"
#include "thread_pool.h"

namespace sigilfs::core {
namespace {

// Recycles page buffers: one malloc/free per cached page was a tenth of the write path, and
// then the pool's own mutex was (four round trips per 4 KiB write), so each thread keeps a few
// buffers of its own in front of the shared list. Buffers are wiped before they are pooled.
class PageBufferPool {
 public:
  static PageBufferPool& Get() {
    static PageBufferPool pool;
    return pool;
  }
  uint8_t* Take() {
    ThreadCache& local = Local();
    if (!local.free.empty()) {
      uint8_t* p = local.free.back();
      local.free.pop_back();
      return p;
    }
    {
      MutexLock lock(mu_);
      if (!free_.empty()) {
        uint8_t* p = free_.back();
        free_.pop_back();
        return p;
      }
    }
    return new uint8_t[kPageSize];
  }
  void Give(uint8_t* p) { GiveMany({&p, 1}); }
  // Wipes the buffers and keeps them: in the thread's own list, then the shared one (its lock
  // taken once for all of them: an eviction gives back a quarter of a file's pages, and a lock
  // per page was 6% of a small write), and frees the rest.
  void GiveMany(std::span<uint8_t* const> pages) {
    for (uint8_t* p : pages) crypt::SecureWipe({p, kPageSize});
    ThreadCache& local = Local();
    size_t i = 0;
    for (; i < pages.size() && local.free.size() < kPerThread; ++i) local.free.push_back(pages[i]);
    if (i == pages.size()) return;
    MutexLock lock(mu_);
    for (; i < pages.size() && free_.size() < kMaxPooled; ++i) free_.push_back(pages[i]);
    for (; i < pages.size(); ++i) delete[] pages[i];
  }
  ~PageBufferPool() {
    for (uint8_t* p : free_) delete[] p;
  }

 private:
  static constexpr size_t kMaxPooled = 2048;  // 8 MiB shared
  static constexpr size_t kPerThread = 64;    // 256 KiB per thread
  struct ThreadCache {
    std::vector<uint8_t*> free;  // already wiped
    ~ThreadCache() {
      for (uint8_t* p : free) delete[] p;
    }
  };
  static ThreadCache& Local() {
    thread_local ThreadCache cache;
    return cache;
  }
  Mutex mu_;
  std::vector<uint8_t*> free_ SIGILFS_GUARDED_BY(mu_);
};

// Gives evicted buffers back to the pool. Wiping them is a pass over memory long out of the CPU's
// caches (an eviction drops a quarter of the cache at once, the pages used least recently): a
// tenth of a cached 4 KiB overwrite's time when the writer did it under the file lock. A large
// batch goes to a crypto worker, which is idle while the writer copies pages in.
void GiveBack(ThreadPool& pool, std::vector<uint8_t*> buffers) {
  constexpr size_t kInlineMax = 64;
  if (buffers.size() <= kInlineMax) {
    PageBufferPool::Get().GiveMany(buffers);
    return;
  }
  pool.Post([buffers = std::move(buffers)] { PageBufferPool::Get().GiveMany(buffers); });
}

}  // namespace

std::string_view PageCounterName(PageCounter c) {
  switch (c) {
    case PageCounter::kRmwReads:
      return "rmw_reads";
    case PageCounter::kRmwSkipped:
      return "rmw_skipped";
    case PageCounter::kShortCopies:
      return "short_copies";
    case PageCounter::kPagesEncrypted:
      return "pages_encrypted";
    case PageCounter::kPagesDecrypted:
      return "pages_decrypted";
    case PageCounter::kHolesRead:
      return "holes_read";
    case PageCounter::kResealReads:
      return "reseal_reads";
    case PageCounter::kBackingBytesRead:
      return "backing_bytes_read";
    case PageCounter::kBackingBytesWritten:
      return "backing_bytes_written";
    case PageCounter::kWritebacks:
      return "writebacks";
    case PageCounter::kVerityPagesVerified:
      return "verity_pages_verified";
    case PageCounter::kVerityTreeBlocksRead:
      return "verity_tree_blocks_read";
    case PageCounter::kVerityPinBlocksRead:
      return "verity_pin_blocks_read";
    case PageCounter::kLastPageChecks:
      return "last_page_checks";
    case PageCounter::kCount:
      break;
  }
  return "unknown";
}

PageStats PageCounters::Snapshot() const {
  PageStats s;
  for (size_t i = 0; i < s.size(); ++i) s[i] = v_[i].load(std::memory_order_relaxed);
  return s;
}

void FileContents::PageBufferDeleter::operator()(uint8_t* p) const {
  PageBufferPool::Get().Give(p);
}

FileContents::PageBuffer FileContents::NewPageBuffer() {
  return PageBuffer(PageBufferPool::Get().Take());
}

PageLayer::PageLayer(crypt::AeadAlgorithm algorithm, ByteSpan content_key, PageLayerOptions options)
    : algorithm_(algorithm),
      content_key_(crypt::SecureBytes::CopyOf(content_key)),
      options_(options),
      geometry_(crypt::AeadNonceSize(algorithm)) {
  const unsigned threads = options_.crypto_threads != 0
                               ? options_.crypto_threads
                               : std::max(1u, std::thread::hardware_concurrency());
  pool_ = std::make_unique<ThreadPool>(threads - 1);  // the calling thread is one of them
  // Shared mode keeps no page past the call that read it: pages read ahead would be dropped.
  if (options_.shared) options_.readahead_pages = 0;
}

PageLayer::~PageLayer() = default;

Result<std::unique_ptr<FileContents>> PageLayer::Open(std::unique_ptr<BackingFile> backing,
                                                      std::string label,
                                                      std::optional<uint64_t> cipher_size) {
  std::unique_ptr<FileContents> f(new FileContents(*this, std::move(backing), std::move(label)));
  if (options_.shared) {
    // Loaded under the cipher file's lock, which keeps out a writer in another process.
    FileContents::Section section(*f, FileLock::kShared);
    SIGILFS_RETURN_IF_ERROR(section.status());
  } else if (!cipher_size || *cipher_size != 0) {  // empty: Load would find no header, no data
    WriterLock lock(f->mu_);  // nobody else has it yet; held so the checker sees Load's rules
    SIGILFS_RETURN_IF_ERROR(f->Load());
  }
  return f;
}

FileContents::FileContents(PageLayer& layer, std::unique_ptr<BackingFile> backing,
                           std::string label)
    : layer_(layer), backing_(std::move(backing)), label_(std::move(label)) {}

FileContents::~FileContents() {
  // Best effort; callers that care call Flush and see the error. It also waits for a
  // write-back job, which refers to this file.
  (void)Flush();
  WriterLock lock(mu_);
  layer_.cached_pages_.fetch_sub(pages_.size(), std::memory_order_relaxed);
  layer_.dirty_pages_.fetch_sub(dirty_.size(), std::memory_order_relaxed);
  SetWritebackFailing(false);  // what it could not store goes with it
}

void FileContents::Count(PageCounter c, uint64_t n) {
  counters_.Add(c, n);
  layer_.counters_.Add(c, n);
}

Result<std::shared_ptr<const FileContents::Key>> FileContents::MakeKey(
    const FileNonce& nonce) const {
  SIGILFS_ASSIGN_OR_RETURN(crypt::SecureBytes file_key,
                           DeriveFileKey(layer_.content_key_.span(), nonce));
  SIGILFS_ASSIGN_OR_RETURN(auto aead, crypt::Aead::Create(layer_.algorithm_, file_key.span()));
  return std::make_shared<const Key>(std::move(aead), nonce);
}

Status FileContents::Load() {
  SIGILFS_ASSIGN_OR_RETURN(uint64_t cipher_size, backing_->Size());
  if (cipher_size == 0) return Status::Ok();  // a new, empty file: no header until data comes
  std::array<uint8_t, kFileHeaderSize> raw;
  SIGILFS_ASSIGN_OR_RETURN(size_t got, backing_->ReadAt(raw, 0));
  auto header = DecodeFileHeader(ByteSpan(raw).first(got));
  if (!header.ok()) return header.status().WithContext(label_);
  if ((header->flags & kFileFlagSealed) != 0) return LoadSealed(*header, cipher_size);
  if (verity::LooksSealed(layer_.geometry_, cipher_size)) {
    SIGILFS_ASSIGN_OR_RETURN(bool seal, LoadUnflaggedSeal(*header, cipher_size));
    if (seal) return Status::Ok();
    // Not a seal: a torn tail whose remainder is 8 bytes, opened like any other below.
  }
  const PageGeometry& g = layer_.geometry_;
  auto plain = g.PlainSize(cipher_size);
  if (!plain.ok()) return plain.status().WithContext(label_);
  SIGILFS_ASSIGN_OR_RETURN(key_, MakeKey(header->nonce));
  size_ = disk_size_ = *plain;
  header_on_disk_ = true;
  // An unsealed file must not end in a bound seal's last page: that is a sealed file whose
  // header flag and side data were taken away. Its last whole unit tells (the last page, or,
  // before a torn tail, the page before it); the last page, opened anyway, stays cached.
  const uint64_t pages = PageGeometry::PageCount(*plain);
  const bool torn = g.TornTail(cipher_size);
  if (pages == 0 || (torn && pages == 1)) return Status::Ok();
  const uint64_t index = torn ? pages - 2 : pages - 1;
  const uint64_t data_size = torn ? (pages - 1) * kPageSize : *plain;
  SIGILFS_ASSIGN_OR_RETURN(LastPage last, ProbeLastPage(*key_, index, data_size, !torn));
  if (last.kind == LastPage::kBound)
    return Status(Code::kCorrupt,
                  label_ + ": a sealed file whose seal was removed (its last page is bound)");
  if (last.kind == LastPage::kUnsealed) InsertPageLocked(index, std::move(last.plain), false);
  return Status::Ok();
}

// Reads data unit `index` as the last page of a file of `data_size` bytes and tells how it
// opens: as an unsealed file's last page (only tried if `try_unsealed`; the plaintext comes
// back), as a bound seal's, or neither (damaged or torn: left for reads to report).
Result<FileContents::LastPage> FileContents::ProbeLastPage(const Key& key, uint64_t index,
                                                           uint64_t data_size, bool try_unsealed) {
  const PageGeometry& g = layer_.geometry_;
  const size_t plain_len =
      static_cast<size_t>(std::min<uint64_t>(kPageSize, data_size - index * kPageSize));
  std::vector<uint8_t> unit(plain_len + g.overhead());
  SIGILFS_ASSIGN_OR_RETURN(size_t got, backing_->ReadAt(unit, g.UnitOffset(index)));
  Count(PageCounter::kBackingBytesRead, got);
  Count(PageCounter::kLastPageChecks);
  LastPage out;
  if (got != unit.size() || IsAllZero(unit)) return out;
  out.plain = NewPageBuffer();
  std::memset(out.plain.get(), 0, kPageSize);
  const MutableByteSpan plain(out.plain.get(), plain_len);
  if (try_unsealed && key.codec.Open(index, UnitKind::kDataPage, true, unit, plain).ok()) {
    out.kind = LastPage::kUnsealed;
    return out;
  }
  if (key.codec.Open(index, UnitKind::kSealedLastPage, true, unit, plain).ok())
    out.kind = LastPage::kBound;
  out.plain.reset();
  return out;
}

// A cipher file longer than its data (what a seal interrupted before its commit point leaves)
// is cut back to its data before the first change; opening it changed nothing.
Status FileContents::CutStaleTailLocked() {
  if (!stale_tail_) return Status::Ok();
  SIGILFS_RETURN_IF_ERROR(
      backing_->Truncate(layer_.geometry_.CipherSize(disk_size_)).WithContext(label_));
  stale_tail_ = false;
  return Status::Ok();
}

Result<std::shared_ptr<const FileContents::Key>> FileContents::EnsureKeyLocked() {
  if (key_) return key_;
  // A new file (or one truncated to zero) gets a fresh nonce, hence a fresh key.
  FileNonce nonce;
  crypt::RandomBytes(nonce);
  SIGILFS_ASSIGN_OR_RETURN(key_, MakeKey(nonce));
  return key_;
}

uint64_t FileContents::size() const {
  // Shared mode: the size the cipher file has now. A section that fails leaves the last one.
  Section section(*this, FileLock::kShared);
  ReaderLock lock(mu_);
  return size_;
}

// Fetches pages [first, first+count) into dest[i] (kPageSize bytes each) as the cipher file
// holds them when its plaintext size is `disk_size`: one read for the run, then the units opened
// (pieces read and opened in parallel for long runs). Pages past disk_size are zeros without I/O.
// An all-zero unit is a hole, unless strict mode is on or it is the last unit (which sigilfs always
// seals for real). `good` tells how many leading pages were verified: on failure the rest must not
// be used, and read-ahead past a damaged page does not fail the pages before it.
Status FileContents::LoadPages(const Key* key, uint64_t first, size_t count, uint64_t disk_size,
                               std::span<uint8_t* const> dest, size_t& good,
                               MutableByteSpan nonces) {
  good = 0;
  const PageGeometry& g = layer_.geometry_;
  const uint64_t disk_pages = PageGeometry::PageCount(disk_size);
  const uint64_t disk_end = std::min<uint64_t>(first + count, disk_pages);
  size_t on_disk = disk_end > first ? static_cast<size_t>(disk_end - first) : 0;
  for (size_t i = on_disk; i < count; ++i) std::memset(dest[i], 0, kPageSize);
  if (on_disk == 0) {
    good = count;
    return Status::Ok();
  }
  if (key == nullptr) return Status(Code::kInternal, label_ + ": no key for stored pages");

  // A sealed file's pages are checked against the tree: the level-0 blocks that cover them come
  // first, read together (nearly all tree I/O is level 0 at 128 hashes per block) and each
  // checked up to the root. Then each page: in a file sealed with pins, its unit must carry the
  // nonce pinned for it (the pins begin with the root hash); in one sealed without, the hash of
  // its plaintext must be its level-0 entry.
  // A damaged side block after the first one needed only shortens the load: the pages before
  // the ones it covers still read (the partial-read rule), and the first page it covers fails.
  const Sealed* sealed = sealed_.load(std::memory_order_acquire);
  const bool pinned = sealed != nullptr && sealed->pinned();
  std::vector<TreeBlock> level0, pins;
  Status cut;  // why the load stops at page first + on_disk, if it does
  auto shorten = [&](const Status& failure, size_t blocks, uint64_t per_block) {
    if (failure.ok()) return;
    const size_t covered = static_cast<size_t>((first / per_block + blocks) * per_block - first);
    if (covered < on_disk) {
      on_disk = covered;
      cut = failure;
    }
  };
  if (sealed) {
    Status later;
    auto blocks = Level0Blocks(*sealed, *key, first, on_disk, later);
    if (!blocks.ok()) return blocks.status();
    level0 = std::move(blocks).value();
    shorten(later, level0.size(), verity::kHashesPerBlock);
  }
  if (pinned) {
    Status later;
    auto blocks = PinBlocks(*sealed, *key, first, on_disk, later);
    if (!blocks.ok()) return blocks.status();
    pins = std::move(blocks).value();
    shorten(later, pins.size(), verity::PinsPerBlock(g));
  }

  const uint64_t load_end = first + on_disk;
  const uint64_t start = g.UnitOffset(first);
  const uint64_t end = load_end == disk_pages ? g.CipherSize(disk_size) : g.UnitOffset(load_end);
  // A per-thread buffer that only grows: allocating (and zero-filling) one per load cost more
  // than reading into it. It holds ciphertext only.
  thread_local std::vector<uint8_t> read_buffer;
  const size_t cipher_size = static_cast<size_t>(end - start);
  if (read_buffer.size() < cipher_size) read_buffer.resize(cipher_size);
  const MutableByteSpan cipher(read_buffer.data(), cipher_size);
  std::vector<Status> results(on_disk);
  std::atomic<uint64_t> holes{0}, bytes{0};
  const EvenPieces pieces = CutEvenly(on_disk);
  layer_.pool_->ForEachDynamic(pieces.count, [&](size_t piece) {
    const size_t b = piece * pieces.size, e = std::min(on_disk, b + pieces.size);
    const size_t from = b * g.unit_size();
    const size_t to = e == on_disk ? cipher.size() : e * g.unit_size();
    auto got = backing_->ReadAt(cipher.subspan(from, to - from), start + from);
    Status fail;
    size_t stored = 0;  // bytes of the piece the cipher file holds
    if (!got.ok()) {
      fail = got.status();
    } else {
      bytes.fetch_add(*got, std::memory_order_relaxed);
      stored = from + *got;
    }
    for (size_t i = b; i < e; ++i) {
      if (!fail.ok()) {
        results[i] = fail;
        continue;
      }
      const uint64_t index = first + i;
      const bool last = index + 1 == disk_pages;
      const size_t plain_len =
          last ? static_cast<size_t>(disk_size - index * kPageSize) : kPageSize;
      if (i * g.unit_size() + plain_len + g.overhead() > stored) {
        // A torn tail (or a file cut while being read): this page fails, whole pages before
        // it still read.
        results[i] = Status(Code::kCorrupt, "torn: the cipher file ends inside this page");
        continue;
      }
      ByteSpan unit(cipher.data() + i * g.unit_size(), plain_len + g.overhead());
      uint8_t* page = dest[i];
      if (!nonces.empty())
        std::memcpy(nonces.data() + i * g.nonce_size(), unit.data(), g.nonce_size());
      // Before anything else: a hole is pinned as a zero nonce, so zeros where the seal saw
      // data (or data where it saw a hole) fail here too.
      if (pinned && !PinMatches(pins, first, i, unit)) {
        results[i] = Status(Code::kAuthFailed, "not the version of the page that was sealed");
        continue;
      }
      if (IsAllZero(unit)) {
        if (layer_.options_.strict_holes || last) {
          results[i] = Status(Code::kCorrupt, "page is all zeros");
        } else {
          std::memset(page, 0, kPageSize);
          holes.fetch_add(1, std::memory_order_relaxed);
        }
        continue;
      }
      // The last page of a bound seal was sealed again as its own kind (the commit point).
      const UnitKind kind =
          last && sealed && sealed->record.bound ? UnitKind::kSealedLastPage : UnitKind::kDataPage;
      results[i] = key->codec.Open(index, kind, last, unit, {page, plain_len});
      std::memset(page + plain_len, 0, kPageSize - plain_len);
    }
    if (sealed && !pinned) CheckPages(*sealed, level0, first, b, e, dest, results);
  });
  if (sealed) Count(PageCounter::kVerityPagesVerified, on_disk);
  Count(PageCounter::kBackingBytesRead, bytes.load());
  Count(PageCounter::kHolesRead, holes.load());
  Count(PageCounter::kPagesDecrypted, on_disk - holes.load());
  for (size_t i = 0; i < on_disk; ++i) {
    if (!results[i].ok()) {
      good = i;
      return results[i].WithContext(label_ + ": page " + std::to_string(first + i));
    }
  }
  if (!cut.ok()) {
    good = on_disk;
    return cut.WithContext(label_ + ": page " + std::to_string(first + on_disk));
  }
  good = count;
  return Status::Ok();
}

// LoadPages into fresh page buffers; `out` keeps only the verified prefix.
Status FileContents::LoadPageBuffers(const Key* key, uint64_t first, size_t count,
                                     uint64_t disk_size, std::vector<PageBuffer>& out) {
  out.clear();
  std::vector<uint8_t*> dest;
  for (size_t i = 0; i < count; ++i) {
    out.push_back(NewPageBuffer());
    dest.push_back(out.back().get());
  }
  size_t good = 0;
  Status s = LoadPages(key, first, count, disk_size, dest, good);
  out.resize(good);  // unverified buffers are wiped as they return to the pool
  return s;
}

FileContents::Page& FileContents::InsertPageLocked(uint64_t index, PageBuffer data, bool dirty) {
  // A sequential writer adds past the last cached page: insert there without a search.
  const bool last = pages_.empty() || pages_.rbegin()->first < index;
  const size_t before = pages_.size();
  auto it = last ? pages_.try_emplace(pages_.end(), index) : pages_.try_emplace(index).first;
  const bool inserted = pages_.size() != before;
  if (inserted) layer_.cached_pages_.fetch_add(1, std::memory_order_relaxed);
  Page& p = it->second;
  if (p.in_flight) {
    retired_.push_back(std::move(p.data));  // a write-back is sealing from it: free it after
    p.in_flight = false;
  }
  p.data = std::move(data);
  p.last_use.store(use_clock_.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
  if (dirty) MarkDirtyLocked(index, p);
  return p;
}

void FileContents::MarkDirtyLocked(uint64_t index, Page& page) {
  ++page.version;
  if (dirty_.try_emplace(index, &page).second)
    layer_.dirty_pages_.fetch_add(1, std::memory_order_relaxed);
}

void FileContents::ForgetDirtyLocked(uint64_t index) {
  layer_.dirty_pages_.fetch_sub(dirty_.erase(index), std::memory_order_relaxed);
}

void FileContents::SetWritebackFailing(bool failing) {
  if (writeback_failing_.exchange(failing) == failing) return;
  if (failing)
    layer_.failing_files_.fetch_add(1, std::memory_order_relaxed);
  else
    layer_.failing_files_.fetch_sub(1, std::memory_order_relaxed);
}

void FileContents::DropPageLocked(std::pmr::map<uint64_t, Page>::iterator it) {
  if (it->second.dirty()) ForgetDirtyLocked(it->first);
  pages_.erase(it);
  layer_.cached_pages_.fetch_sub(1, std::memory_order_relaxed);
}

void FileContents::DropRangeLocked(uint64_t first, uint64_t end) {
  for (auto it = pages_.lower_bound(first); it != pages_.end() && it->first < end;)
    DropPageLocked(it++);
}

void FileContents::DropCleanRangeLocked(uint64_t first, uint64_t end) {
  for (auto it = pages_.lower_bound(first); it != pages_.end() && it->first < end;) {
    if (it->second.dirty())
      ++it;
    else
      DropPageLocked(it++);
  }
}

// Keeps the cache within bounds by dropping the least recently used clean pages, a quarter at
// a time. The scan runs only when the cache has grown past the mark set by the previous one,
// so a cache full of dirty pages is not rescanned on every write.
void FileContents::EvictLocked() {
  if (pages_.size() < evict_scan_at_) return;
  const PageLayerOptions& o = layer_.options_;
  const size_t global_limit = std::max<size_t>(o.cache_bytes / kPageSize, 1);
  const size_t floor = 2 * o.readahead_pages + o.writeback_pages;
  const size_t file_limit = std::max(global_limit / 4, floor);
  const bool over_global =
      layer_.cached_pages_.load(std::memory_order_relaxed) > global_limit && pages_.size() > floor;
  if (pages_.size() <= file_limit && !over_global) {
    evict_scan_at_ = pages_.size() + 1 + floor / 4;
    return;
  }
  using Entry = std::pair<uint64_t, decltype(pages_)::iterator>;  // (last use, page)
  std::vector<Entry> clean;
  clean.reserve(pages_.size());
  for (auto it = pages_.begin(); it != pages_.end(); ++it)
    if (!it->second.dirty())
      clean.emplace_back(it->second.last_use.load(std::memory_order_relaxed), it);
  const size_t drop = std::min(clean.size(), pages_.size() / 4 + 1);
  if (drop > 0) {
    std::nth_element(clean.begin(), clean.begin() + static_cast<long>(drop - 1), clean.end(),
                     [](const Entry& a, const Entry& b) { return a.first < b.first; });
    std::vector<uint8_t*> buffers(drop);
    for (size_t i = 0; i < drop; ++i) {
      buffers[i] = clean[i].second->second.data.release();
      DropPageLocked(clean[i].second);
    }
    GiveBack(*layer_.pool_, std::move(buffers));
    ++cache_epoch_;
  }
  evict_scan_at_ = pages_.size() + 1 + floor / 4;
}

Status FileContents::EnsureCachedLocked(uint64_t index) {
  if (pages_.count(index) != 0) return Status::Ok();
  std::vector<PageBuffer> loaded;
  SIGILFS_RETURN_IF_ERROR(LoadPageBuffers(key_.get(), index, 1, disk_size_, loaded));
  if (index * kPageSize < disk_size_) Count(PageCounter::kResealReads);
  InsertPageLocked(index, std::move(loaded[0]), false);
  return Status::Ok();
}

Result<size_t> FileContents::Read(uint64_t offset, MutableByteSpan out) {
  Section section(*this, FileLock::kShared);
  SIGILFS_RETURN_IF_ERROR(section.status());
  size_t done = 0;
  bool retried = false;
  const bool sequential = offset == next_sequential_.load(std::memory_order_relaxed);
  // A page read while a truncate or write-back rewrote it can read torn: wait for that to
  // finish and look once more before calling the page damaged.
  auto RetryOnce = [&](const Status& s) {
    if (retried || (s.code() != Code::kAuthFailed && s.code() != Code::kCorrupt)) return false;
    retried = true;
    MutexLock wait(writeback_mu_);
    return true;
  };
  for (;;) {
    uint64_t first = 0, disk_size = 0, size = 0, generation = 0, epoch = 0;
    size_t count = 0, requested = 0;  // pages to fetch, and how many of them the read needs
    bool direct = false;
    std::shared_ptr<const Key> key;
    {
      ReaderLock lock(mu_);
      // A truncate may have cut the file below what this read already returned: what exists
      // (perhaps nothing) is the answer, short.
      if (offset + done >= size_) return done;
      const size_t total = static_cast<size_t>(std::min<uint64_t>(out.size(), size_ - offset));
      while (done < total) {
        const uint64_t pos = offset + done;
        const uint64_t index = pos / kPageSize;
        const size_t in_page = pos % kPageSize;
        const size_t len = std::min(total - done, kPageSize - in_page);
        auto it = pages_.find(index);
        if (it == pages_.end()) break;
        std::memcpy(out.data() + done, it->second.data.get() + in_page, len);
        it->second.last_use.store(use_clock_.fetch_add(1, std::memory_order_relaxed),
                                  std::memory_order_relaxed);
        done += len;
      }
      if (done == total) {
        next_sequential_.store(offset + total, std::memory_order_relaxed);
        return total;
      }
      first = (offset + done) / kPageSize;
      const uint64_t request_last = (offset + total - 1) / kPageSize;
      // A long aligned stretch of uncached whole pages is opened straight into `out`.
      if ((offset + done) % kPageSize == 0) {
        const uint64_t whole_end = (offset + total) / kPageSize;  // pages wholly inside the read
        while (first + count < whole_end && pages_.count(first + count) == 0) ++count;
        direct = count >= kDirectMinPages;
      }
      if (!direct) {
        // Otherwise fetch the missing run in one read (plus read-ahead if sequential) into the
        // cache.
        const uint64_t limit =
            std::min(request_last + (sequential ? layer_.options_.readahead_pages : 0),
                     PageGeometry::PageCount(size_) - 1);
        count = 1;
        while (first + count <= limit && pages_.count(first + count) == 0) ++count;
      }
      requested = static_cast<size_t>(std::min<uint64_t>(count, request_last - first + 1));
      disk_size = disk_size_;
      size = size_;
      key = key_;
      generation = generation_;
      epoch = cache_epoch_;
    }

    if (direct) {
      std::vector<uint8_t*> dest(count);
      for (size_t i = 0; i < count; ++i) dest[i] = out.data() + done + i * kPageSize;
      size_t good = 0;
      Status s = LoadPages(key.get(), first, count, disk_size, dest, good);
      bool stale;
      {
        ReaderLock lock(mu_);
        stale = generation != generation_;
      }
      if (stale) continue;  // truncated meanwhile: read again under the new size
      done += good * kPageSize;
      if (!s.ok()) {
        if (RetryOnce(s)) continue;
        if (done > 0) return done;
        return s;
      }
      continue;
    }

    std::vector<PageBuffer> loaded;
    Status s = LoadPageBuffers(key.get(), first, count, disk_size, loaded);
    if (!s.ok() && loaded.empty() && count > requested) {
      count = requested;  // the read-ahead failed (an I/O error): it must not fail the read
      s = LoadPageBuffers(key.get(), first, count, disk_size, loaded);
    }
    if (!s.ok() && !loaded.empty()) {
      count = loaded.size();  // use the good pages; the bad one is asked for again on its own
      s = Status::Ok();
    }
    if (!s.ok()) {
      if (RetryOnce(s)) continue;
      if (done > 0) return done;
      return s;
    }
    WriterLock lock(mu_);
    if (generation != generation_) continue;  // truncated meanwhile: start over from the cache
    if (epoch == cache_epoch_) {
      // The cache lost no page and nothing was written past it since the snapshot, so an
      // absent page has not changed either: what was loaded is current and may be cached.
      for (size_t i = 0; i < count; ++i)
        if (pages_.count(first + i) == 0) InsertPageLocked(first + i, std::move(loaded[i]), false);
      EvictLocked();
      continue;
    }
    // A loaded page may be older than a write made since: serve this read from it (the read
    // began before that write) but cache none of it. Only up to the size it was loaded at: past
    // that, the old page holds zeros where the write (an append, say) has put data since, and
    // the next round reads that part afresh.
    const size_t total =
        static_cast<size_t>(std::min<uint64_t>(out.size(), size - std::min(size, offset)));
    while (done < total) {
      const uint64_t pos = offset + done;
      const uint64_t index = pos / kPageSize;
      if (index >= first + count) break;
      const size_t in_page = pos % kPageSize;
      const size_t len = std::min(total - done, kPageSize - in_page);
      auto it = pages_.find(index);
      const uint8_t* src = it != pages_.end() ? it->second.data.get() : loaded[index - first].get();
      std::memcpy(out.data() + done, src + in_page, len);
      done += len;
    }
  }
}

Status FileContents::Truncate(uint64_t new_size) { return Resize(new_size, false); }

Status FileContents::Resize(uint64_t new_size, bool only_grow) {
  Section section(*this, FileLock::kExclusive);
  SIGILFS_RETURN_IF_ERROR(section.status());
  if (new_size > kMaxFileSize) return Status::FromErrno(EFBIG, label_ + ": truncate too large");
  if (layer_.options_.strict_holes) {
    // As for a write past the end: growing seals zeros instead of leaving holes.
    const uint64_t old_size = size();
    if (new_size > old_size) return WriteZeros(old_size, new_size);
  }
  (void)FinishWriteBackJob();  // help it rather than wait; its pages are written below if need be
  MutexLock wb(writeback_mu_);
  {
    WriterLock lock(mu_);
    SIGILFS_RETURN_IF_ERROR(Frozen());
    if (new_size == size_ || (only_grow && new_size < size_)) return Status::Ok();
    SIGILFS_RETURN_IF_ERROR(CutStaleTailLocked());
    ++generation_;
    if (new_size == 0) {
      SIGILFS_RETURN_IF_ERROR(backing_->Truncate(0));
      while (!pages_.empty()) DropPageLocked(pages_.begin());
      size_ = disk_size_ = 0;
      header_on_disk_ = false;
      key_.reset();  // the next write starts a new file: new nonce, new key
      return Status::Ok();
    }
    SIGILFS_RETURN_IF_ERROR(EnsureKeyLocked().status());
    const uint64_t new_last = PageGeometry::PageCount(new_size) - 1;
    if (new_size < size_) {
      // The new last page must be re-sealed from its plaintext; read it before cutting the file.
      SIGILFS_RETURN_IF_ERROR(EnsureCachedLocked(new_last));
      const size_t keep = new_size - new_last * kPageSize;
      if (disk_size_ > new_size) SIGILFS_RETURN_IF_ERROR(CutStoredLocked(new_size));
      // Only now that the cipher file holds the new size: what lies past it goes.
      for (auto it = pages_.upper_bound(new_last); it != pages_.end();) DropPageLocked(it++);
      Page& last = pages_.at(new_last);
      std::memset(last.data.get() + keep, 0, kPageSize - keep);
      MarkDirtyLocked(new_last, last);
    } else {
      // Growing: the new last page is sealed for real (never left a hole), so a file cut back to
      // an older length is still detected; the pages in between are holes. The old last page is
      // re-sealed as not-last by the write-back: read first, a damaged one (a torn tail) fails
      // the truncate before the size changes.
      if (disk_size_ > 0)
        SIGILFS_RETURN_IF_ERROR(EnsureCachedLocked(PageGeometry::PageCount(disk_size_) - 1));
      SIGILFS_RETURN_IF_ERROR(EnsureCachedLocked(new_last));
      MarkDirtyLocked(new_last, pages_.at(new_last));
    }
    size_ = new_size;
  }
  return WriteBackLocked();
}

// Cuts the cipher file to a plaintext size of `new_size` (below disk_size_) without a moment at
// which a failure loses stored bytes: the new last page (cached) is sealed short and flagged last
// and written in place first, then the file is cut; if either step fails, the unit that was
// there is written back as it was, and the file reads as before (the caller has dropped nothing
// yet). A crash between the two steps leaves that one page unreadable, as a crash inside any
// page write does.
// The new last page is cached.
Status FileContents::CutStoredLocked(uint64_t new_size) {
  const PageGeometry& g = layer_.geometry_;
  const uint64_t last = PageGeometry::PageCount(new_size) - 1;
  const size_t keep = static_cast<size_t>(new_size - last * kPageSize);
  const bool was_last = PageGeometry::PageCount(disk_size_) - 1 == last;
  const size_t old_len = was_last ? static_cast<size_t>(disk_size_ - last * kPageSize) : kPageSize;
  std::vector<uint8_t> old_unit(old_len + g.overhead());
  SIGILFS_ASSIGN_OR_RETURN(size_t got, backing_->ReadAt(old_unit, g.UnitOffset(last)));
  old_unit.resize(got);  // a torn tail: put back what there was
  std::vector<uint8_t> unit(keep + g.overhead());
  SIGILFS_RETURN_IF_ERROR(
      key_->codec.Seal(last, UnitKind::kDataPage, true, {pages_.at(last).data.get(), keep}, unit));
  Count(PageCounter::kPagesEncrypted);
  const ByteSpan u[] = {unit};
  Status s = backing_->WriteAt(u, g.UnitOffset(last));
  if (s.ok()) s = backing_->Truncate(g.CipherSize(new_size));
  if (!s.ok()) {
    const ByteSpan o[] = {old_unit};
    if (Status undo = backing_->WriteAt(o, g.UnitOffset(last)); !undo.ok())
      return s.WithContext(label_ + ": truncate, and putting page " + std::to_string(last) +
                           " back (" + undo.ToString() + ")");
    return s.WithContext(label_ + ": truncate");
  }
  Count(PageCounter::kBackingBytesWritten, unit.size());
  disk_size_ = new_size;
  return Status::Ok();
}

}  // namespace sigilfs::core
