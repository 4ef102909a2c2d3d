// The page layer: cached plaintext pages over sealed units, with the write_begin/write_end
// rules, read-ahead and batched parallel write-back described in docs/design.md.
#include "sigilfs/core/page_layer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "sigilfs/core/keys.h"
#include "sigilfs/crypt/random.h"
#include "thread_pool.h"

namespace sigilfs::core {
namespace {

// Below this many pages a batch is sealed or opened on the calling thread: waking workers
// costs more than a few microseconds of AES-GCM.
constexpr size_t kParallelMinPages = 32;
// Largest plaintext size: keeps every cipher offset inside off_t.
constexpr uint64_t kMaxFileSize = uint64_t{1} << 62;

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

// The per-file key and the codec that seals units with it.
struct FileContents::Key {
  Key(std::unique_ptr<crypt::Aead> a, const FileNonce& n)
      : aead(std::move(a)), nonce(n), codec(*aead, nonce) {}
  std::unique_ptr<crypt::Aead> aead;
  FileNonce nonce;
  UnitCodec codec;
};

// A cached plaintext page. Bytes past the end of the file are always zero.
struct FileContents::Page {
  PageBuffer data;
  uint64_t version = 0;        // bumped by every change
  uint64_t clean_version = 0;  // the version the cipher file holds
  std::atomic<uint64_t> last_use{0};
  bool uptodate = false;  // only meaningful for the pending (not yet cached) page
  bool dirty() const { return version != clean_version; }
};

void FileContents::PageBufferDeleter::operator()(uint8_t* p) const {
  crypt::SecureWipe({p, kPageSize});
  delete[] p;
}

FileContents::PageBuffer FileContents::NewPageBuffer() {
  return PageBuffer(new uint8_t[kPageSize]);
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
}

PageLayer::~PageLayer() = default;

Result<std::unique_ptr<FileContents>> PageLayer::Open(std::unique_ptr<BackingFile> backing,
                                                      std::string label) {
  std::unique_ptr<FileContents> f(new FileContents(*this, std::move(backing), std::move(label)));
  SIGILFS_RETURN_IF_ERROR(f->Load());
  return f;
}

FileContents::FileContents(PageLayer& layer, std::unique_ptr<BackingFile> backing,
                           std::string label)
    : layer_(layer), backing_(std::move(backing)), label_(std::move(label)) {}

FileContents::~FileContents() {
  (void)Flush();  // best effort; callers that care call Flush and see the error
  std::unique_lock lock(mu_);
  layer_.cached_pages_.fetch_sub(pages_.size(), std::memory_order_relaxed);
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
  if ((header->flags & kFileFlagSealed) != 0)
    return Status(Code::kNotSupported, label_ + ": sealed (verity) files are not supported yet");
  auto plain = layer_.geometry_.PlainSize(cipher_size);
  if (!plain.ok()) return plain.status().WithContext(label_);
  SIGILFS_ASSIGN_OR_RETURN(key_, MakeKey(header->nonce));
  size_ = disk_size_ = *plain;
  header_on_disk_ = true;
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
  std::shared_lock lock(mu_);
  return size_;
}

// Fetches pages [first, first+count) as the cipher file holds them when its plaintext size is
// `disk_size`: one read for the run, then the units opened (in parallel for long runs). Pages
// past disk_size are zeros without I/O. An all-zero unit is a hole, unless strict mode is on or
// it is the last unit (which sigilfs always seals for real). On failure `out` keeps the pages
// before the first bad one, so read-ahead past a damaged page does not fail the read.
Status FileContents::LoadPages(const Key* key, uint64_t first, size_t count, uint64_t disk_size,
                               std::vector<PageBuffer>& out) {
  // Pages are built here and handed to `out` only once verified: on any failure `out` never
  // holds a page that was not decrypted and checked.
  out.clear();
  std::vector<PageBuffer> pages;
  for (size_t i = 0; i < count; ++i) pages.push_back(NewPageBuffer());
  const PageGeometry& g = layer_.geometry_;
  const uint64_t disk_pages = PageGeometry::PageCount(disk_size);
  const uint64_t disk_end = std::min<uint64_t>(first + count, disk_pages);
  const size_t on_disk = disk_end > first ? static_cast<size_t>(disk_end - first) : 0;
  for (size_t i = on_disk; i < count; ++i) std::memset(pages[i].get(), 0, kPageSize);
  if (on_disk == 0) {
    out = std::move(pages);
    return Status::Ok();
  }
  if (key == nullptr) return Status(Code::kInternal, label_ + ": no key for stored pages");

  const uint64_t start = g.UnitOffset(first);
  const uint64_t end = disk_end == disk_pages ? g.CipherSize(disk_size) : g.UnitOffset(disk_end);
  std::vector<uint8_t> cipher(end - start);
  auto got = backing_->ReadAt(cipher, start);
  if (!got.ok()) return got.status().WithContext(label_);
  Count(PageCounter::kBackingBytesRead, *got);
  if (*got < cipher.size())
    return Status(Code::kCorrupt, label_ + ": cipher file shorter than its size says");

  std::vector<Status> results(on_disk);
  std::atomic<uint64_t> holes{0};
  layer_.pool_->ParallelFor(on_disk, kParallelMinPages, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const uint64_t index = first + i;
      const bool last = index + 1 == disk_pages;
      const size_t plain_len =
          last ? static_cast<size_t>(disk_size - index * kPageSize) : kPageSize;
      ByteSpan unit(cipher.data() + i * g.unit_size(), plain_len + g.overhead());
      uint8_t* page = pages[i].get();
      if (IsAllZero(unit)) {
        if (layer_.options_.strict_holes || last) {
          results[i] = Status(Code::kCorrupt, "page is all zeros");
        } else {
          std::memset(page, 0, kPageSize);
          holes.fetch_add(1, std::memory_order_relaxed);
        }
        continue;
      }
      results[i] = key->codec.Open(index, UnitKind::kDataPage, last, unit, {page, plain_len});
      std::memset(page + plain_len, 0, kPageSize - plain_len);
    }
  });
  Count(PageCounter::kHolesRead, holes.load());
  Count(PageCounter::kPagesDecrypted, on_disk - holes.load());
  for (size_t i = 0; i < on_disk; ++i) {
    if (!results[i].ok()) {
      pages.resize(i);  // the good prefix; the rest is wiped as it is freed
      out = std::move(pages);
      return results[i].WithContext(label_ + ": page " + std::to_string(first + i));
    }
  }
  out = std::move(pages);
  return Status::Ok();
}

FileContents::Page& FileContents::InsertPageLocked(uint64_t index, PageBuffer data, bool dirty) {
  auto [it, inserted] = pages_.try_emplace(index);
  if (inserted) layer_.cached_pages_.fetch_add(1, std::memory_order_relaxed);
  Page& p = it->second;
  p.data = std::move(data);
  p.last_use.store(use_clock_.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
  if (dirty) MarkDirtyLocked(index, p);
  return p;
}

void FileContents::MarkDirtyLocked(uint64_t index, Page& page) {
  ++page.version;
  dirty_.insert(index);
}

void FileContents::DropPageLocked(std::map<uint64_t, Page>::iterator it) {
  dirty_.erase(it->first);
  pages_.erase(it);
  layer_.cached_pages_.fetch_sub(1, std::memory_order_relaxed);
}

// Keeps the cache within bounds by dropping the least recently used clean pages, a quarter at
// a time so the scan is amortized. Dirty pages stay until written back.
void FileContents::EvictLocked() {
  const PageLayerOptions& o = layer_.options_;
  const size_t global_limit = std::max<size_t>(o.cache_bytes / kPageSize, 1);
  const size_t floor = 2 * o.readahead_pages + o.writeback_pages;
  const size_t file_limit = std::max(global_limit / 4, floor);
  const bool over_global =
      layer_.cached_pages_.load(std::memory_order_relaxed) > global_limit && pages_.size() > floor;
  if (pages_.size() <= file_limit && !over_global) return;
  std::vector<std::pair<uint64_t, uint64_t>> clean;  // (last use, index)
  for (auto& [index, page] : pages_)
    if (!page.dirty()) clean.emplace_back(page.last_use.load(std::memory_order_relaxed), index);
  const size_t drop = std::min(clean.size(), pages_.size() / 4 + 1);
  if (drop == 0) return;
  std::nth_element(clean.begin(), clean.begin() + static_cast<long>(drop - 1), clean.end());
  for (size_t i = 0; i < drop; ++i) DropPageLocked(pages_.find(clean[i].second));
  ++evictions_;
}

Status FileContents::EnsureCachedLocked(uint64_t index) {
  if (pages_.count(index) != 0) return Status::Ok();
  std::vector<PageBuffer> loaded;
  SIGILFS_RETURN_IF_ERROR(LoadPages(key_.get(), index, 1, disk_size_, loaded));
  if (index * kPageSize < disk_size_) Count(PageCounter::kResealReads);
  InsertPageLocked(index, std::move(loaded[0]), false);
  return Status::Ok();
}

Result<size_t> FileContents::Read(uint64_t offset, MutableByteSpan out) {
  size_t done = 0;
  bool retried = false;
  const bool sequential = offset == next_sequential_.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t first = 0, disk_size = 0, generation = 0, evictions = 0;
    size_t count = 0, requested = 0;  // pages to fetch, and how many of them the read needs
    std::shared_ptr<const Key> key;
    {
      std::shared_lock lock(mu_);
      if (offset >= size_) return done;
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
      // Fetch the missing run of the request in one read, plus read-ahead if sequential.
      first = (offset + done) / kPageSize;
      const uint64_t request_last = (offset + total - 1) / kPageSize;
      const uint64_t limit =
          std::min(request_last + (sequential ? layer_.options_.readahead_pages : 0),
                   PageGeometry::PageCount(size_) - 1);
      count = 1;
      while (first + count <= limit && pages_.count(first + count) == 0) ++count;
      requested = static_cast<size_t>(std::min<uint64_t>(count, request_last - first + 1));
      disk_size = disk_size_;
      key = key_;
      generation = generation_;
      evictions = evictions_;
    }

    std::vector<PageBuffer> loaded;
    Status s = LoadPages(key.get(), first, count, disk_size, loaded);
    if (!s.ok() && loaded.empty() && count > requested) {
      count = requested;  // the read-ahead failed (an I/O error): it must not fail the read
      s = LoadPages(key.get(), first, count, disk_size, loaded);
    }
    if (!s.ok() && !loaded.empty()) {
      count = loaded.size();  // use the good pages; the bad one is asked for again on its own
      s = Status::Ok();
    }
    if (!s.ok()) {
      // A page read while a truncate or write-back rewrote it can read torn: wait for that to
      // finish and look once more before calling the page damaged.
      if (!retried && (s.code() == Code::kAuthFailed || s.code() == Code::kCorrupt)) {
        retried = true;
        std::lock_guard wait(writeback_mu_);
        continue;
      }
      if (done > 0) return done;
      return s;
    }
    std::unique_lock lock(mu_);
    if (generation != generation_) continue;  // truncated meanwhile: start over from the cache
    if (evictions == evictions_) {
      // Nothing was dropped since the snapshot, so an absent page has not been written since
      // either: what was loaded is current and may be cached.
      for (size_t i = 0; i < count; ++i)
        if (pages_.count(first + i) == 0) InsertPageLocked(first + i, std::move(loaded[i]), false);
      EvictLocked();
      continue;
    }
    // Pages were dropped meanwhile, so a loaded page may be older than one written and evicted
    // since: serve this read from what was loaded (it began before that write) but cache none.
    const size_t total =
        static_cast<size_t>(std::min<uint64_t>(out.size(), size_ - std::min(size_, offset)));
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

// Loads, outside the exclusive lock, the (at most two) partially written pages of a write that
// hold existing data: the read-modify-write reads. WriteBegin finds them cached.
Status FileContents::PreloadPartialPages(uint64_t offset, size_t length) {
  const uint64_t end = offset + length;
  uint64_t candidates[2] = {offset / kPageSize, (end - 1) / kPageSize};
  std::vector<uint64_t> need;
  uint64_t disk_size = 0, generation = 0, evictions = 0;
  std::shared_ptr<const Key> key;
  {
    std::shared_lock lock(mu_);
    for (int c = 0; c < 2; ++c) {
      const uint64_t index = candidates[c];
      if (c == 1 && index == candidates[0]) break;
      const uint64_t start = index * kPageSize;
      const bool full = offset <= start && end >= start + kPageSize;
      if ((full && !layer_.options_.force_rmw) || start >= disk_size_ || pages_.count(index) != 0)
        continue;
      need.push_back(index);
    }
    if (need.empty()) return Status::Ok();
    disk_size = disk_size_;
    key = key_;
    generation = generation_;
    evictions = evictions_;
  }
  std::vector<std::pair<uint64_t, PageBuffer>> loaded;
  for (uint64_t index : need) {
    std::vector<PageBuffer> one;
    SIGILFS_RETURN_IF_ERROR(LoadPages(key.get(), index, 1, disk_size, one));
    Count(PageCounter::kRmwReads);
    loaded.emplace_back(index, std::move(one[0]));
  }
  std::unique_lock lock(mu_);
  if (generation != generation_ || evictions != evictions_)
    return Status::Ok();  // WriteBegin reloads
  for (auto& [index, data] : loaded)
    if (pages_.count(index) == 0) InsertPageLocked(index, std::move(data), false);
  return Status::Ok();
}

// write_begin: the page a write of `len` bytes at `in_page` of page `index` copies into.
// A cached page is up to date. Otherwise: a page at or past the end of the stored data is zeros
// (no read); a full-page overwrite reads nothing and hands out `pending` not up to date; a partial
// write into stored data reads and decrypts the page (RMW).
Result<FileContents::Page*> FileContents::WriteBegin(uint64_t index, size_t in_page, size_t len,
                                                     Page& pending) {
  if (auto it = pages_.find(index); it != pages_.end()) return &it->second;
  if (!pending.data) pending.data = NewPageBuffer();
  const uint64_t start = index * kPageSize;
  if (start >= disk_size_) {
    std::memset(pending.data.get(), 0, kPageSize);
    pending.uptodate = true;
    return &pending;
  }
  if (in_page == 0 && len == kPageSize && !layer_.options_.force_rmw) {
    Count(PageCounter::kRmwSkipped);
    pending.uptodate = false;
    return &pending;
  }
  std::vector<PageBuffer> loaded;
  SIGILFS_RETURN_IF_ERROR(LoadPages(key_.get(), index, 1, disk_size_, loaded));
  Count(PageCounter::kRmwReads);
  pending.data = std::move(loaded[0]);
  pending.uptodate = true;
  return &pending;
}

// write_end: commits `copied` of the `len` bytes promised. A short copy into a page that was
// never read (not up to date) commits nothing and returns 0: the page holds neither the old
// bytes nor all the new ones. The caller retries those bytes as a partial write.
size_t FileContents::WriteEnd(Page* page, Page& pending, uint64_t index, size_t in_page, size_t len,
                              size_t copied) {
  if (page == &pending) {
    if (!pending.uptodate && copied < len) {
      Count(PageCounter::kShortCopies);
      return 0;
    }
    if (copied == 0) return 0;
    InsertPageLocked(index, std::move(pending.data), true);
  } else {
    if (copied == 0) return 0;
    MarkDirtyLocked(index, *page);
  }
  const uint64_t end = index * kPageSize + in_page + copied;
  if (end > size_) size_ = end;
  return copied;
}

Result<size_t> FileContents::Write(uint64_t offset, ByteSpan data) {
  MemorySource source(data);
  return Write(offset, source, data.size());
}

Result<size_t> FileContents::Write(uint64_t offset, Source& source, size_t length) {
  if (length == 0) return size_t{0};
  if (offset > kMaxFileSize || length > kMaxFileSize - offset)
    return Status::FromErrno(EFBIG, label_ + ": write past the largest file size");
  SIGILFS_RETURN_IF_ERROR(PreloadPartialPages(offset, length));

  size_t done = 0;
  bool writeback = false;
  {
    std::unique_lock lock(mu_);
    SIGILFS_ASSIGN_OR_RETURN(auto key, EnsureKeyLocked());
    (void)key;
    Page pending;
    size_t limit = kPageSize;  // after a short copy: retry only the bytes that arrived
    while (done < length) {
      const uint64_t pos = offset + done;
      const uint64_t index = pos / kPageSize;
      const size_t in_page = pos % kPageSize;
      const size_t n = std::min({length - done, kPageSize - in_page, limit});
      limit = kPageSize;
      auto page = WriteBegin(index, in_page, n, pending);
      if (!page.ok()) {
        if (done > 0) break;
        return page.status();
      }
      auto got = source.Read({(*page)->data.get() + in_page, n});
      if (!got.ok()) {
        if (done > 0) break;
        return got.status();
      }
      const size_t copied = *got;
      const size_t committed = WriteEnd(*page, pending, index, in_page, n, copied);
      if (committed == 0 && copied > 0) {
        source.Unread(copied);
        limit = copied;
        continue;
      }
      if (copied == 0) break;  // the source has nothing more
      done += committed;
    }
    writeback = dirty_.size() >= layer_.options_.writeback_pages;
    EvictLocked();
  }
  if (writeback) {
    std::lock_guard wb(writeback_mu_);
    SIGILFS_RETURN_IF_ERROR(WriteBackLocked());
  }
  return done;
}

Status FileContents::Truncate(uint64_t new_size) {
  if (new_size > kMaxFileSize) return Status::FromErrno(EFBIG, label_ + ": truncate too large");
  std::lock_guard wb(writeback_mu_);
  {
    std::unique_lock lock(mu_);
    if (new_size == size_) return Status::Ok();
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
      for (auto it = pages_.upper_bound(new_last); it != pages_.end();) DropPageLocked(it++);
      // The new last page must be re-sealed from its plaintext; read it before cutting the file.
      SIGILFS_RETURN_IF_ERROR(EnsureCachedLocked(new_last));
      if (disk_size_ > new_size) {
        SIGILFS_RETURN_IF_ERROR(backing_->Truncate(layer_.geometry_.CipherSize(new_size)));
        disk_size_ = new_size;  // its last unit is cut now; the write-back below re-seals it
      }
      Page& last = pages_.at(new_last);
      const size_t keep = new_size - new_last * kPageSize;
      std::memset(last.data.get() + keep, 0, kPageSize - keep);
      MarkDirtyLocked(new_last, last);
    } else {
      // Growing: the new last page is sealed for real (never left a hole), so a file cut back to
      // an older length is still detected; the pages in between are holes.
      SIGILFS_RETURN_IF_ERROR(EnsureCachedLocked(new_last));
      MarkDirtyLocked(new_last, pages_.at(new_last));
    }
    size_ = new_size;
  }
  return WriteBackLocked();
}

Status FileContents::Flush() {
  std::lock_guard wb(writeback_mu_);
  return WriteBackLocked();
}

Status FileContents::Sync(bool data_only) {
  SIGILFS_RETURN_IF_ERROR(Flush());
  return backing_->Sync(data_only);
}

// Snapshot the dirty pages under mu_, then seal them (in parallel) and write each contiguous
// run with one call, without mu_. A page changed while its snapshot was being written stays
// dirty (its version moved on). When the file grew, its old last page is re-sealed as not-last.
// REQUIRES writeback_mu_ (so no truncate or other write-back changes the cipher file meanwhile).
Status FileContents::WriteBackLocked() {
  struct Item {
    uint64_t index;
    size_t len;
    PageBuffer plain;
    uint64_t version;
  };
  std::vector<Item> items;
  std::shared_ptr<const Key> key;
  uint64_t new_size = 0, old_disk_size = 0;
  bool write_header = false;
  {
    std::unique_lock lock(mu_);
    new_size = size_;
    old_disk_size = disk_size_;
    if (dirty_.empty() && new_size == disk_size_) return Status::Ok();
    key = key_;
    write_header = !header_on_disk_;
    if (old_disk_size > 0 && new_size > old_disk_size) {
      // The old last page was sealed as last (and maybe short): bring it into the cache and
      // re-seal it as a full, not-last page. Cached first, so a failed write-back retries
      // from its plaintext, and readers never read it from the disk while it is rewritten.
      const uint64_t old_last = PageGeometry::PageCount(old_disk_size) - 1;
      SIGILFS_RETURN_IF_ERROR(EnsureCachedLocked(old_last));
      if (dirty_.count(old_last) == 0) MarkDirtyLocked(old_last, pages_.at(old_last));
    }
    items.reserve(dirty_.size());
    for (uint64_t index : dirty_) {
      const Page& p = pages_.at(index);
      const size_t len =
          static_cast<size_t>(std::min<uint64_t>(kPageSize, new_size - index * kPageSize));
      PageBuffer copy = NewPageBuffer();
      std::memcpy(copy.get(), p.data.get(), len);
      items.push_back({index, len, std::move(copy), p.version});
    }
  }
  if (key == nullptr) return Status(Code::kInternal, label_ + ": dirty pages without a key");
  const PageGeometry& g = layer_.geometry_;
  const uint64_t last_index = PageGeometry::PageCount(new_size) - 1;
  std::vector<size_t> offsets(items.size() + 1, 0);
  for (size_t i = 0; i < items.size(); ++i)
    offsets[i + 1] = offsets[i] + items[i].len + g.overhead();
  std::vector<uint8_t> cipher(offsets.back());
  std::vector<Status> results(items.size());
  layer_.pool_->ParallelFor(items.size(), kParallelMinPages, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const Item& it = items[i];
      results[i] = key->codec.Seal(it.index, UnitKind::kDataPage, it.index == last_index,
                                   {it.plain.get(), it.len},
                                   {cipher.data() + offsets[i], it.len + g.overhead()});
    }
  });
  for (const Status& s : results) SIGILFS_RETURN_IF_ERROR(s);
  Count(PageCounter::kPagesEncrypted, items.size());

  if (write_header) {
    std::array<uint8_t, kFileHeaderSize> header;
    EncodeFileHeader(FileHeader{kFileFormatVersion, 0, key->nonce}, header);
    const ByteSpan one[] = {header};
    SIGILFS_RETURN_IF_ERROR(backing_->WriteAt(one, 0).WithContext(label_));
    Count(PageCounter::kBackingBytesWritten, header.size());
  }
  std::vector<ByteSpan> run;
  for (size_t i = 0; i < items.size();) {
    size_t j = i + 1;
    while (j < items.size() && items[j].index == items[j - 1].index + 1) ++j;
    run.clear();
    for (size_t k = i; k < j; ++k)
      run.emplace_back(cipher.data() + offsets[k], offsets[k + 1] - offsets[k]);
    SIGILFS_RETURN_IF_ERROR(
        backing_->WriteAt(run, g.UnitOffset(items[i].index)).WithContext(label_));
    Count(PageCounter::kBackingBytesWritten, offsets[j] - offsets[i]);
    i = j;
  }
  Count(PageCounter::kWritebacks);

  std::unique_lock lock(mu_);
  for (const Item& it : items) {
    auto p = pages_.find(it.index);
    if (p == pages_.end()) continue;
    if (p->second.version == it.version) {
      p->second.clean_version = it.version;
      dirty_.erase(it.index);
    }
  }
  header_on_disk_ = true;
  disk_size_ = std::max(disk_size_, new_size);
  EvictLocked();
  return Status::Ok();
}

}  // namespace sigilfs::core
