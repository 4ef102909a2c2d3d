// The write-back engine of the page layer: flushes and syncs, the background write-back job,
// the bound on a failing backlog, and the phases of one write-back, whose ordered seal-and-write
// protocol is OrderedWrite's (ordered_write.h). Its crash-ordering rule: units reach the cipher
// file in file order, none after a failure, so a crash leaves a prefix of a batch.
#include <algorithm>
#include <array>
#include <exception>

#include "file_contents_internal.h"
#include "ordered_write.h"
#include "sigilfs/core/page_layer.h"
#include "thread_pool.h"

namespace sigilfs::core {

// A full disk must not turn the cache into an unbounded queue of pages that cannot be stored:
// once a write-back has failed, a write that would take the dirty backlog past two batches first
// stores it (a retry, which succeeds once space is back) and fails, changing nothing, if that
// fails too.
Status FileContents::LimitBacklog(size_t adding) {
  if (!writeback_failing_.load()) return Status::Ok();
  {
    ReaderLock lock(mu_);
    if (dirty_.size() + adding <= 2 * layer_.options_.writeback_pages) return Status::Ok();
  }
  (void)FinishWriteBackJob();  // its failure is superseded by the write-back below
  MutexLock wb(writeback_mu_);
  return WriteBackLocked();
}

// One job at a time per file: a writer that fills the next batch before the job is done helps
// seal it, so both cores work on write-back while the writer is inside the library and the
// worker goes on sealing and writing while the writer copies pages in. The pages are in flight
// (copy-on-write) and stay dirty until the job has stored them, so reads and eviction see the
// cache as before; every other write-back (flush, truncate, a large write) takes writeback_mu_
// and so comes after the job. Without workers (or in a forked child) the job runs here.
Status FileContents::StartWriteBackJob() {
  SIGILFS_RETURN_IF_ERROR(FinishWriteBackJob());
  {
    // Never two: the file may go once the one a waiter saw is done.
    MutexLock lock(job_mu_);
    if (job_pending_.load()) return Status::Ok();  // another writer started one meanwhile
    job_pending_ = true;
  }
  ThreadPool* pool = layer_.pool_.get();  // not this file's: the file may be gone at Wake
  auto job = [this, pool] {
    {
      // The outcome is recorded before writeback_mu_ goes, so a write-back after this one (which
      // clears a stale error when it stores everything) never sees the error arrive after it.
      MutexLock wb(writeback_mu_);
      Status s;
      try {
        s = WriteBackLocked();
      } catch (const std::exception& e) {  // on a worker nobody would catch it
        s = Status(Code::kInternal, label_ + ": write-back: " + e.what());
      }
      MutexLock lock(job_mu_);
      job_error_ = std::move(s);
      job_pending_ = false;
    }
    pool->Wake();
  };
  pool->Post(std::move(job), this);
  if (job_pending_.load()) return Status::Ok();
  MutexLock lock(job_mu_);  // it ran here: report it as a write-back of this write
  return std::exchange(job_error_, Status::Ok());
}

Status FileContents::FinishWriteBackJob() {
  if (job_pending_.load()) layer_.pool_->HelpUntil([this] { return !job_pending_.load(); }, this);
  MutexLock lock(job_mu_);
  return std::exchange(job_error_, Status::Ok());
}

Status FileContents::Flush() {
  // A failed job left its pages dirty: the write-back here stores them again or fails itself.
  (void)FinishWriteBackJob();
  MutexLock wb(writeback_mu_);
  return WriteBackLocked();
}

Status FileContents::Sync(bool data_only) {
  SIGILFS_RETURN_IF_ERROR(Flush());
  return backing_->Sync(data_only);
}

bool FileContents::DiscardUnstored() {
  (void)FinishWriteBackJob();  // its failure is the one being given up
  MutexLock wb(writeback_mu_);
  WriterLock lock(mu_);
  if (!writeback_failing_.load()) return false;
  const bool changed = !dirty_.empty() || size_ != disk_size_;
  // Reads under way that loaded pages before this must not serve them past the stored size.
  ++generation_;
  const uint64_t stored_pages = PageGeometry::PageCount(disk_size_);
  for (auto it = pages_.begin(); it != pages_.end();) {
    if (it->second.dirty() || it->first >= stored_pages)
      DropPageLocked(it++);
    else
      ++it;
  }
  size_ = disk_size_;
  SetWritebackFailing(false);
  return changed;
}

// A write-back that fails leaves its pages dirty, and bounds the backlog until one succeeds.
Status FileContents::WriteBackLocked(DirectRun* direct) {
  Status s = StoreDirtyLocked(direct);
  SetWritebackFailing(!s.ok());
  return s;
}

// One write-back: what StoreDirtyLocked snapshots under mu_ and then stores without it.
struct FileContents::WriteBackBatch {
  struct Item {
    PageToSeal seal;
    Page* page;  // the cached page it is sealed from (null: a page of the direct run)
    uint64_t version;
  };
  std::vector<Item> items;  // in page order
  std::shared_ptr<const Key> key;
  uint64_t new_size = 0;
  uint64_t old_disk_size = 0;  // for undoing a failed growth
  bool write_header = false;
};

// Phases: snapshot the dirty pages under mu_ (SnapshotDirtyLocked), then, without mu_, write the
// header of a new file and seal and write the pages in file order (OrderedWrite, together with
// a direct run if given); on failure undo a growth (UndoGrowth), on success mark the pages
// stored (MarkStoredLocked). A page changed while its snapshot was being written stays dirty
// (its version moved on). When the file grew, its old last page is re-sealed as not-last.
// Under writeback_mu_, so no truncate or other write-back changes the cipher file meanwhile.
Status FileContents::StoreDirtyLocked(DirectRun* direct) {
  WriteBackBatch batch;
  {
    WriterLock lock(mu_);
    SIGILFS_ASSIGN_OR_RETURN(bool any, SnapshotDirtyLocked(direct, batch));
    if (!any) return Status::Ok();
  }
  // However this ends, the pages are no longer in flight, and the buffers writers replaced
  // meanwhile can go (they are still read by the seals until here).
  struct EndFlight {
    FileContents& f;
    const WriteBackBatch& batch;
    bool done = false;  // MarkStoredLocked ended the flight itself
    ~EndFlight() {
      if (done) return;
      WriterLock lock(f.mu_);
      for (const WriteBackBatch::Item& it : batch.items)
        if (it.page != nullptr) it.page->in_flight = false;
      f.retired_.clear();
    }
  } end_flight{*this, batch};
  if (batch.key == nullptr) return Status(Code::kInternal, label_ + ": dirty pages without a key");
  if (direct != nullptr) {
    for (size_t i = 0; i < direct->count; ++i)
      batch.items.push_back(
          {{direct->first + i, kPageSize, direct->plain.data() + i * kPageSize}, nullptr, 0});
    std::sort(batch.items.begin(), batch.items.end(),
              [](const auto& a, const auto& b) { return a.seal.index < b.seal.index; });
  }
  // The header goes first, so a file is never units without a header: in the same write as
  // the first units where the batch begins with the first page (a new file's usual first
  // write-back), alone before them otherwise.
  std::array<uint8_t, kFileHeaderSize> header;
  ByteSpan header_with_units;
  if (batch.write_header) {
    if (!batch.items.empty() && batch.items.front().seal.index == 0) {
      EncodeFileHeader(FileHeader{kFileFormatVersion, 0, batch.key->nonce}, header);
      header_with_units = header;
    } else {
      SIGILFS_RETURN_IF_ERROR(WriteNewHeader(*batch.key));
    }
  }

  const PageGeometry& g = layer_.geometry_;
  std::vector<PageToSeal> pages;
  pages.reserve(batch.items.size());
  for (const auto& it : batch.items) pages.push_back(it.seal);
  OrderedWrite writer(g, batch.key->codec, *backing_, *layer_.pool_, label_);
  const OrderedWrite::Outcome outcome =
      writer.Run(pages, PageGeometry::PageCount(batch.new_size) - 1,
                 g.CipherSize(batch.old_disk_size), wb_cipher_, header_with_units);
  if (outcome.header_written) Count(PageCounter::kBackingBytesWritten, header.size());
  Count(PageCounter::kPagesEncrypted, pages.size());
  if (!outcome.status.ok()) {
    UndoFailedWrite(batch, direct, outcome.last_begun);
    return outcome.status;
  }
  Count(PageCounter::kBackingBytesWritten, outcome.bytes);
  Count(PageCounter::kWritebacks);
  WriterLock lock(mu_);
  MarkStoredLocked(batch);
  end_flight.done = true;
  return Status::Ok();
}

// Whether there is anything to store; if so, fills `batch` with the dirty pages, marked in
// flight, and what the write-back needs to know of the file.
Result<bool> FileContents::SnapshotDirtyLocked(DirectRun* direct, WriteBackBatch& batch) {
  auto in_direct = [direct](uint64_t index) {
    return direct != nullptr && index >= direct->first && index < direct->first + direct->count;
  };
  batch.new_size = size_;
  if (dirty_.empty() && batch.new_size == disk_size_ && direct == nullptr) return false;
  // Sealing writes back everything before it freezes the file, and nothing is dirtied after.
  if (sealed_.load() != nullptr)
    return Status(Code::kInternal, label_ + ": write-back of a sealed file");
  SIGILFS_RETURN_IF_ERROR(CutStaleTailLocked());
  batch.key = key_;
  batch.write_header = !header_on_disk_;
  batch.old_disk_size = disk_size_;
  if (disk_size_ > 0 && batch.new_size > disk_size_) {
    // The old last page was sealed as last (and maybe short): bring it into the cache and
    // re-seal it as a full, not-last page. Cached first, so a failed write-back retries
    // from its plaintext, and readers never read it from the disk while it is rewritten.
    const uint64_t old_last = PageGeometry::PageCount(disk_size_) - 1;
    if (!in_direct(old_last)) {
      SIGILFS_RETURN_IF_ERROR(EnsureCachedLocked(old_last));
      if (dirty_.count(old_last) == 0) MarkDirtyLocked(old_last, pages_.at(old_last));
    }
  }
  batch.items.reserve(dirty_.size() + (direct != nullptr ? direct->count : 0));
  // No copy of the plaintext: the dirty pages are sealed from their own buffers, marked in
  // flight so that a write to one meanwhile copies it first (WriteBegin). Copying every page
  // here, under the lock, was a tenth of a small write's time.
  // Page nodes stay put while this holds writeback_mu_: only truncates, large writes and
  // seals drop dirty pages, and they all take it first.
  for (const auto& [index, p] : dirty_) {
    if (in_direct(index)) continue;  // older than the run, which supersedes it
    const size_t len =
        static_cast<size_t>(std::min<uint64_t>(kPageSize, batch.new_size - index * kPageSize));
    p->in_flight = true;
    batch.items.push_back({{index, len, p->data.get()}, p, p->version});
  }
  return true;
}

Status FileContents::WriteNewHeader(const Key& key) {
  std::array<uint8_t, kFileHeaderSize> header;
  EncodeFileHeader(FileHeader{kFileFormatVersion, 0, key.nonce}, header);
  const ByteSpan one[] = {header};
  Status written = backing_->WriteAt(one, 0).WithContext(label_);
  if (!written.ok()) {
    (void)backing_->Truncate(0);  // a file with part of a header is no file at all
    return written;
  }
  Count(PageCounter::kBackingBytesWritten, header.size());
  return Status::Ok();
}

// Undone only if the file grew and a write reached the old last unit or went past it: the
// writes before it rewrite pages in place and leave the stored end of the file as it was.
void FileContents::UndoFailedWrite(const WriteBackBatch& batch, const DirectRun* direct,
                                   std::optional<uint64_t> last_begun) {
  const uint64_t old_last_index =
      batch.old_disk_size == 0 ? 0 : PageGeometry::PageCount(batch.old_disk_size) - 1;
  const bool reached =
      batch.old_disk_size == 0 || (last_begun.has_value() && *last_begun >= old_last_index);
  if (batch.new_size <= batch.old_disk_size || !reached) return;
  const auto old_last = std::find_if(batch.items.begin(), batch.items.end(), [&](const auto& it) {
    return it.seal.index == old_last_index;
  });
  // A page of the batch without a cached page is the direct run's.
  const uint8_t* old_plain = nullptr;
  if (old_last != batch.items.end())
    old_plain = old_last->page != nullptr ? old_last->seal.plain
                : direct != nullptr       ? direct->old_last_plain
                                          : nullptr;
  UndoGrowth(batch.old_disk_size, batch.write_header, *batch.key, old_plain);
}

// The batch is stored: its pages are clean unless written to meanwhile, and the file's stored
// state moves on.
void FileContents::MarkStoredLocked(const WriteBackBatch& batch) {
  // Items are in page order, as dirty_ is: one walk through both (pages dirtied meanwhile are
  // stepped over).
  auto d = dirty_.begin();
  for (const auto& it : batch.items) {
    if (it.page == nullptr) continue;  // a direct page: not in the cache
    it.page->in_flight = false;
    if (it.page->version != it.version) continue;  // changed meanwhile: still dirty
    it.page->clean_version = it.version;
    while (d != dirty_.end() && d->first < it.seal.index) ++d;
    if (d != dirty_.end() && d->first == it.seal.index) {
      d = dirty_.erase(d);
      layer_.dirty_pages_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  retired_.clear();
  {
    // Everything dirty when this began is stored, a failed job's pages included: its error
    // (if not yet reported) is stale now. job_mu_ is a leaf: taken under mu_, never the reverse.
    MutexLock job_lock(job_mu_);
    job_error_ = Status::Ok();
  }
  header_on_disk_ = true;
  disk_size_ = std::max(disk_size_, batch.new_size);
  EvictLocked();
}

// A write-back that grew the file failed part way (typically a full disk: the backing store took
// part of a unit and refused the rest). The units were written in file order, so only the old
// last unit and those after it can have changed: cut the cipher file back to its old length and
// seal the old last page again as the last one, in place, from `old_last_plain` (its snapshot in
// this write-back, at least as long as the old page). That needs no new space, so what was
// stored before reads back and no half-written unit is left behind. The pages stay dirty in the
// cache for a retry. Best effort: if this fails too, what remains is what a crash leaves.
void FileContents::UndoGrowth(uint64_t old_size, bool header_was_new, const Key& key,
                              const uint8_t* old_last_plain) {
  if (old_size == 0) {
    (void)backing_->Truncate(header_was_new ? 0 : kFileHeaderSize);
    return;
  }
  const PageGeometry& g = layer_.geometry_;
  if (!backing_->Truncate(g.CipherSize(old_size)).ok() || old_last_plain == nullptr) return;
  const uint64_t index = PageGeometry::PageCount(old_size) - 1;
  const size_t len = static_cast<size_t>(old_size - index * kPageSize);
  std::vector<uint8_t> unit(len + g.overhead());
  if (!key.codec.Seal(index, UnitKind::kDataPage, true, {old_last_plain, len}, unit).ok()) return;
  const ByteSpan one[] = {unit};
  (void)backing_->WriteAt(one, g.UnitOffset(index));
}

}  // namespace sigilfs::core
