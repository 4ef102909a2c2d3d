// Tests of the page layer: RMW avoidance, short copies, sizes and holes, tampering, faults,
// concurrency, and a randomized comparison against a plain in-memory model.
#include "sigilfs/core/page_layer.h"

#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "sigilfs/crypt/random.h"
#include "test_support/backends.h"
#include "test_support/contents.h"
#include "test_support/forwarding_backing_file.h"
#include "test_support/param_names.h"
#include "test_support/pattern.h"
#include "test_support/recording_backing_file.h"

namespace sigilfs::core {
namespace {

using test::BackendKind;
using test::TestBackend;

using test::Pattern;
using test::ReadAll;
using test::RecordingBackingFile;
using test::WriteAll;

class PageLayerTest
    : public ::testing::TestWithParam<std::tuple<BackendKind, crypt::AeadAlgorithm>> {
 protected:
  PageLayerTest() : backend_(std::get<0>(GetParam())) {
    crypt::RandomBytes(key_);
    layer_ = std::make_unique<PageLayer>(std::get<1>(GetParam()), key_, options_);
  }

  void Reconfigure(PageLayerOptions o) {
    options_ = o;
    layer_ = std::make_unique<PageLayer>(std::get<1>(GetParam()), key_, options_);
  }

  // A cache of 16 pages, written back every 4 dirty pages: most partial writes read their page
  // back from the cipher file.
  void UseSmallCache() {
    PageLayerOptions o;
    o.cache_bytes = 16 * 4096;
    o.writeback_pages = 4;
    Reconfigure(o);
  }

  std::unique_ptr<FileContents> Open(const std::string& name) {
    auto f = layer_->Open(backend_.Open(name), name);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(f).value() : nullptr;
  }

  Result<std::unique_ptr<FileContents>> TryOpen(const std::string& name) {
    return layer_->Open(backend_.Open(name), name);
  }

  uint64_t Counter(const FileContents& f, PageCounter c) { return f.counters().Get(c); }

  // Closes `f` (its last write-back) and checks what a fresh open of `name` reads.
  void ExpectStoredAfterClose(std::unique_ptr<FileContents>& f, const std::string& name,
                              const std::vector<uint8_t>& want) {
    f.reset();
    auto g = Open(name);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(ReadAll(*g), want) << "after reopening";
  }

  std::array<uint8_t, 32> key_;
  PageLayerOptions options_;
  TestBackend backend_;
  std::unique_ptr<PageLayer> layer_;
};

TEST_P(PageLayerTest, EmptyFileHasNoHeaderAndReadsNothing) {
  auto f = Open("a");
  EXPECT_EQ(f->size(), 0u);
  std::vector<uint8_t> buf(10);
  EXPECT_EQ(*f->Read(0, buf), 0u);
  ASSERT_TRUE(f->Flush().ok());
  EXPECT_TRUE(backend_.Raw("a").empty());
}

TEST_P(PageLayerTest, SizesRoundTripThroughReopen) {
  for (size_t size : {size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{8192},
                      size_t{3 * 4096 + 17}, size_t{1 << 20}}) {
    const std::string name = "f" + std::to_string(size);
    const auto data = Pattern(size, static_cast<uint32_t>(size));
    {
      auto f = Open(name);
      WriteAll(*f, 0, data);
      EXPECT_EQ(ReadAll(*f), data);  // from the cache
      ASSERT_TRUE(f->Flush().ok());
    }
    EXPECT_EQ(backend_.Raw(name).size(), layer_->geometry().CipherSize(size));
    auto g = Open(name);
    EXPECT_EQ(g->size(), size);
    EXPECT_EQ(ReadAll(*g), data) << size;  // decrypted from the cipher file
  }
}

// A file its caller just made and knows empty is opened without reading it; its first
// write-back stores the header and the first units in one write, and the file reads back.
TEST_P(PageLayerTest, ANewFileKnownEmptyIsStoredWithItsHeaderInOneWrite) {
  const auto data = Pattern(5000, 3);
  {
    auto recording = std::make_unique<RecordingBackingFile>(backend_.Open("a"));
    RecordingBackingFile* rec = recording.get();
    auto opened = layer_->Open(std::move(recording), "a", /*cipher_size=*/0);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    auto f = std::move(opened).value();
    EXPECT_EQ(f->size(), 0u);
    WriteAll(*f, 0, data);
    ASSERT_TRUE(f->Flush().ok());
    const auto writes = rec->writes();
    ASSERT_EQ(writes.size(), 1u) << "the header with the units";
    EXPECT_EQ(writes[0].offset, 0u);
    EXPECT_EQ(writes[0].length, layer_->geometry().CipherSize(data.size()));
  }
  auto known = layer_->Open(backend_.Open("a"), "a", layer_->geometry().CipherSize(data.size()));
  ASSERT_TRUE(known.ok()) << known.status().ToString();
  EXPECT_EQ(ReadAll(**known), data) << "a size that is not zero is read as before";
  EXPECT_EQ(ReadAll(*Open("a")), data);
}

TEST_P(PageLayerTest, CipherTextHidesPlaintext) {
  std::vector<uint8_t> data(3 * 4096, 'Q');
  {
    auto f = Open("a");
    WriteAll(*f, 0, data);
  }
  const auto raw = backend_.Raw("a");
  const std::string text(raw.begin(), raw.end());
  EXPECT_EQ(text.find("QQQQQQQQ"), std::string::npos);
}

TEST_P(PageLayerTest, FullPageOverwritesNeverReadAndPartialWritesReadOnce) {
  constexpr size_t kPages = 160;  // a whole-file write of this many goes past the cache
  const auto original = Pattern(kPages * 4096, 1);
  {
    auto f = Open("a");
    WriteAll(*f, 0, original);
  }
  auto f = Open("a");  // nothing cached but the last page, which the open checked
  EXPECT_EQ(Counter(*f, PageCounter::kLastPageChecks), 1u);
  auto replacement = Pattern(kPages * 4096, 2);
  for (size_t off = 0; off < replacement.size(); off += 4096)
    WriteAll(*f, off,
             std::vector<uint8_t>(replacement.begin() + off, replacement.begin() + off + 4096));
  EXPECT_EQ(Counter(*f, PageCounter::kRmwReads), 0u);
  EXPECT_EQ(Counter(*f, PageCounter::kRmwSkipped), kPages - 1);  // the last one was cached
  EXPECT_EQ(Counter(*f, PageCounter::kPagesDecrypted), 0u);
  // One large aligned write is the same: no reads.
  WriteAll(*f, 0, original);
  EXPECT_EQ(Counter(*f, PageCounter::kRmwReads), 0u);
  ASSERT_TRUE(f->Flush().ok());
  f.reset();

  auto g = Open("a");
  WriteAll(*g, 5000, {0xAB});  // one byte inside page 1
  EXPECT_EQ(Counter(*g, PageCounter::kRmwReads), 1u);
  EXPECT_EQ(Counter(*g, PageCounter::kPagesDecrypted), 1u);
  WriteAll(*g, 5001, {0xCD});  // same page, now cached: no second read
  EXPECT_EQ(Counter(*g, PageCounter::kRmwReads), 1u);
  auto expect = original;
  expect[5000] = 0xAB;
  expect[5001] = 0xCD;
  EXPECT_EQ(ReadAll(*g), expect);
  // The layer's counters add up every file's (the whole-file overwrite went past the cache:
  // as many pages again written without a read).
  EXPECT_EQ(layer_->counters().Get(PageCounter::kRmwSkipped), 2 * kPages - 1);
  EXPECT_EQ(layer_->counters().Get(PageCounter::kRmwReads), 1u);
}

// A write that covers part of a cipher-file page the backing filesystem has not cached makes it
// read that page from disk first. A large overwrite is sealed in pieces on several threads, but
// written so that only the two ends of the run can cover part of a page, and the pages holding
// those ends (and the end of a next run of the same length) are asked for before sealing.
TEST_P(PageLayerTest, LargeOverwritesWriteWholeCipherPagesExceptAtTheEnds) {
  const PageGeometry g(crypt::AeadNonceSize(std::get<1>(GetParam())));
  const auto original = Pattern(1024 * 4096, 1);
  {
    auto f = Open("a");
    WriteAll(*f, 0, original);
  }
  auto recording = std::make_unique<RecordingBackingFile>(backend_.Open("a"));
  RecordingBackingFile* rec = recording.get();
  auto opened = layer_->Open(std::move(recording), "a");
  ASSERT_TRUE(opened.ok());
  auto f = std::move(opened).value();
  const uint64_t first = 100, count = 256;  // one 1 MiB write: several pieces
  const auto replacement = Pattern(count * 4096, 2);
  WriteAll(*f, first * 4096, replacement);

  const auto writes = rec->writes();
  ASSERT_FALSE(writes.empty());
  const uint64_t run_begin = g.UnitOffset(first), run_end = g.UnitOffset(first + count);
  uint64_t at = run_begin;
  for (size_t i = 0; i < writes.size(); ++i) {
    EXPECT_EQ(writes[i].offset, at) << "write " << i << " out of file order";
    at = writes[i].offset + writes[i].length;
    if (i + 1 < writes.size()) {
      EXPECT_EQ(at % 4096, 0u) << "write " << i << " ends inside a page";
    }
  }
  EXPECT_EQ(at, run_end);
  auto hinted = [&](uint64_t offset) {
    for (const auto& h : rec->hints())
      if (h.offset <= offset && offset < h.offset + h.length) return true;
    return false;
  };
  EXPECT_TRUE(hinted(run_begin));
  EXPECT_TRUE(hinted(run_end));
  EXPECT_TRUE(hinted(run_end + (run_end - run_begin)));
  // A short run (random small writes) asks for its own ends only: guessing where a next one
  // would end would cost a disk read per write-back for nothing.
  const uint64_t lone = 700;
  WriteAll(*f, lone * 4096, Pattern(4096, 3));
  ASSERT_TRUE(f->Flush().ok());
  const uint64_t lone_end = g.UnitOffset(lone + 1);
  EXPECT_TRUE(hinted(lone_end));
  EXPECT_FALSE(hinted(lone_end + g.unit_size()));
  auto expect = original;
  std::copy(replacement.begin(), replacement.end(), expect.begin() + first * 4096);
  const auto lone_page = Pattern(4096, 3);
  std::copy(lone_page.begin(), lone_page.end(), expect.begin() + lone * 4096);
  EXPECT_EQ(ReadAll(*f), expect);
}

TEST_P(PageLayerTest, ForcedRmwReadsEveryOverwrittenPage) {
  PageLayerOptions o;
  o.force_rmw = true;
  Reconfigure(o);
  {
    auto f = Open("a");
    WriteAll(*f, 0, Pattern(16 * 4096, 1));
  }
  auto f = Open("a");
  WriteAll(*f, 0, Pattern(16 * 4096, 2));
  // Every page but the last, which the open read (and checked) already.
  EXPECT_EQ(Counter(*f, PageCounter::kRmwReads), 15u);
}

TEST_P(PageLayerTest, ShortCopyIntoUnreadPageCommitsNothingThenRetriesAsPartialWrite) {
  const auto original = Pattern(3 * 4096, 7);
  {
    auto f = Open("a");
    WriteAll(*f, 0, original);
  }
  for (size_t delivered : {size_t{0}, size_t{1}, size_t{4095}}) {
    auto f = Open("a");
    const auto incoming = Pattern(4096, 100 + static_cast<uint32_t>(delivered));
    // The source delivers `delivered` bytes, then nothing: the write stops short.
    MemorySource mem(ByteSpan(incoming).first(delivered));
    FaultySource source(mem, {delivered});
    auto n = f->Write(4096, source, 4096);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, delivered);
    auto expect = original;
    std::copy(incoming.begin(), incoming.begin() + static_cast<long>(delivered),
              expect.begin() + 4096);
    EXPECT_EQ(ReadAll(*f), expect) << delivered;
    ASSERT_TRUE(f->Flush().ok());
    auto g = Open("a");
    EXPECT_EQ(ReadAll(*g), expect) << delivered;  // and so it was stored
    if (delivered > 0) {
      EXPECT_EQ(Counter(*f, PageCounter::kShortCopies), 1u);
      EXPECT_EQ(Counter(*f, PageCounter::kRmwReads), 1u);  // the retry read the old page
    }
    // Restore for the next round.
    WriteAll(*g, 0, original);
  }
}

TEST_P(PageLayerTest, ShortCopiesInTheMiddleOfALongWriteAreRetriedUntilComplete) {
  const auto original = Pattern(8 * 4096, 3);
  {
    auto f = Open("a");
    WriteAll(*f, 0, original);
  }
  auto f = Open("a");
  const auto incoming = Pattern(8 * 4096, 4);
  MemorySource mem(incoming);
  // Every read is cut short at odd sizes; all bytes must arrive in the end.
  FaultySource source(mem, {4095, 1, 3000, 4096, 17, 4096});
  auto n = f->Write(0, source, incoming.size());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, incoming.size());
  EXPECT_EQ(ReadAll(*f), incoming);
  EXPECT_GT(Counter(*f, PageCounter::kShortCopies), 0u);
}

TEST_P(PageLayerTest, WritesPastEndLeaveZeroGapsAndStaySparse) {
  {
    auto f = Open("a");
    WriteAll(*f, 0, {1, 2, 3});
    WriteAll(*f, 10 * 4096 + 5, {9});
    EXPECT_EQ(f->size(), 10u * 4096 + 6);
  }
  auto f = Open("a");
  auto got = ReadAll(*f);
  std::vector<uint8_t> expect(10 * 4096 + 6, 0);
  expect[0] = 1, expect[1] = 2, expect[2] = 3, expect[10 * 4096 + 5] = 9;
  EXPECT_EQ(got, expect);
  EXPECT_EQ(Counter(*f, PageCounter::kHolesRead), 9u);  // pages 1..9 were never written
}

TEST_P(PageLayerTest, AppendingReSealsTheOldLastPage) {
  {
    auto f = Open("a");
    WriteAll(*f, 0, Pattern(4096, 1));
  }
  {
    auto f = Open("a");
    // The old last page, read by the open to check it, is cached: re-sealed without a read.
    WriteAll(*f, 4096, Pattern(100, 2));
    ASSERT_TRUE(f->Flush().ok());
    EXPECT_EQ(Counter(*f, PageCounter::kLastPageChecks), 1u);
    EXPECT_EQ(Counter(*f, PageCounter::kResealReads), 0u);
    EXPECT_EQ(Counter(*f, PageCounter::kRmwReads), 0u);
  }
  auto f = Open("a");
  auto expect = Pattern(4096, 1);
  auto tail = Pattern(100, 2);
  expect.insert(expect.end(), tail.begin(), tail.end());
  EXPECT_EQ(ReadAll(*f), expect);
}

TEST_P(PageLayerTest, TruncateDownAndUp) {
  const auto data = Pattern(5 * 4096 + 100, 9);
  for (uint64_t to : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, uint64_t{4097},
                      uint64_t{3 * 4096 + 5}, uint64_t{5 * 4096 + 100}, uint64_t{7 * 4096 + 3}}) {
    const std::string name = "t" + std::to_string(to);
    {
      auto f = Open(name);
      WriteAll(*f, 0, data);
      ASSERT_TRUE(f->Flush().ok());
    }
    auto expect = data;
    expect.resize(to, 0);
    {
      auto f = Open(name);
      ASSERT_TRUE(f->Truncate(to).ok());
      EXPECT_EQ(f->size(), to);
      EXPECT_EQ(ReadAll(*f), expect);
    }
    EXPECT_EQ(backend_.Raw(name).size(), layer_->geometry().CipherSize(to)) << to;
    auto g = Open(name);
    EXPECT_EQ(ReadAll(*g), expect) << to;
    // Growing again after a shrink shows zeros, not the old bytes.
    ASSERT_TRUE(g->Truncate(to + 5000).ok());
    expect.resize(to + 5000, 0);
    EXPECT_EQ(ReadAll(*g), expect) << to;
    auto h = Open(name);
    EXPECT_EQ(ReadAll(*h), expect) << to;
  }
}

TEST_P(PageLayerTest, TruncateToZeroStartsANewFileKey) {
  {
    auto f = Open("a");
    WriteAll(*f, 0, Pattern(100, 1));
  }
  const auto before = backend_.Raw("a");
  {
    auto f = Open("a");
    ASSERT_TRUE(f->Truncate(0).ok());
    EXPECT_TRUE(backend_.Raw("a").empty());
    WriteAll(*f, 0, Pattern(100, 1));
  }
  const auto after = backend_.Raw("a");
  ASSERT_EQ(after.size(), before.size());
  EXPECT_FALSE(std::equal(after.begin() + 16, after.begin() + 32, before.begin() + 16));  // nonce
}

TEST_P(PageLayerTest, StrictModeRefusesHoles) {
  {
    auto f = Open("a");
    WriteAll(*f, 0, {1});
    WriteAll(*f, 3 * 4096, {2});
  }
  PageLayerOptions o;
  o.strict_holes = true;
  Reconfigure(o);
  auto f = Open("a");
  std::vector<uint8_t> buf(4096);
  EXPECT_EQ(f->Read(4096, buf).status().code(), Code::kCorrupt);
  EXPECT_TRUE(f->Read(0, std::span(buf).first(1)).ok());
}

// In strict mode sigilfs makes no holes of its own: a write past the end, a truncate up and a
// growing fallocate leave sealed zeros, which read back (also after reopening); a page zeroed in
// the cipher file is still refused.
TEST_P(PageLayerTest, StrictModeAcceptsTheGapsItMakesItselfAndRefusesHoles) {
  PageLayerOptions o;
  o.strict_holes = true;
  Reconfigure(o);
  std::vector<uint8_t> want(14 * 4096, 0);
  {
    auto f = Open("a");
    const auto page0 = Pattern(4096, 40), tail = Pattern(100, 41);
    WriteAll(*f, 0, page0);
    WriteAll(*f, 3 * 4096, tail);  // pages 1 and 2: a gap
    std::copy(page0.begin(), page0.end(), want.begin());
    std::copy(tail.begin(), tail.end(), want.begin() + 3 * 4096);
    ASSERT_TRUE(f->Truncate(10 * 4096 + 5).ok());
    ASSERT_TRUE(f->Allocate(0, 12 * 4096, 2 * 4096).ok());  // grows to 14 pages
    ASSERT_TRUE(f->Allocate(FALLOC_FL_ZERO_RANGE, 13 * 4096, 4096).ok());
    EXPECT_EQ(ReadAll(*f), want);
  }
  auto f = Open("a");
  EXPECT_EQ(ReadAll(*f), want) << "after reopening";
  f.reset();
  auto raw = backend_.Raw("a");
  const auto at = static_cast<long>(layer_->geometry().UnitOffset(2));
  std::fill(raw.begin() + at, raw.begin() + at + static_cast<long>(layer_->geometry().unit_size()),
            0);
  backend_.SetRaw("a", raw);
  auto g = Open("a");
  std::vector<uint8_t> buf(4096);
  EXPECT_EQ(g->Read(2 * 4096, buf).status().code(), Code::kCorrupt);
}

// --- Tampering: every change gives an error on read, never different data. ---

class TamperTest : public PageLayerTest {
 protected:
  void SetUp() override {
    for (const char* name : {"a", "b"}) {
      auto f = Open(name);
      WriteAll(*f, 0, Pattern(4 * 4096, name[0]));
    }
    unit_ = layer_->geometry().unit_size();
  }
  size_t PageOffset(uint64_t i) const { return kFileHeaderSize + i * unit_; }
  // Reads page `i` of "a" alone; returns the error code (kOk if it read, which must then match).
  Code ReadPage(uint64_t i) {
    auto f = TryOpen("a");
    if (!f.ok()) return f.status().code();
    std::vector<uint8_t> buf(4096);
    auto n = (*f)->Read(i * 4096, buf);
    if (!n.ok()) return n.status().code();
    const auto expect = Pattern(4 * 4096, 'a');
    EXPECT_TRUE(std::equal(buf.begin(), buf.begin() + static_cast<long>(*n),
                           expect.begin() + static_cast<long>(i * 4096)))
        << "wrong plaintext returned";
    return Code::kOk;
  }
  size_t unit_ = 0;
};

TEST_P(TamperTest, FlippingAnyByteOfAPageFailsThatPageOnly) {
  const auto good = backend_.Raw("a");
  for (size_t pos = PageOffset(1); pos < PageOffset(2); pos += 97) {
    auto bad = good;
    bad[pos] ^= 0x20;
    backend_.SetRaw("a", bad);
    EXPECT_EQ(ReadPage(1), Code::kAuthFailed) << pos;
    EXPECT_EQ(ReadPage(0), Code::kOk);
    EXPECT_EQ(ReadPage(2), Code::kOk);
  }
  for (size_t pos = 0; pos < kFileHeaderSize; ++pos) {  // header bytes: refused or other key
    auto bad = good;
    bad[pos] ^= 0x01;
    backend_.SetRaw("a", bad);
    EXPECT_NE(ReadPage(0), Code::kOk) << pos;
  }
}

TEST_P(TamperTest, SwappedPagesFail) {
  auto bad = backend_.Raw("a");
  std::swap_ranges(bad.begin() + static_cast<long>(PageOffset(0)),
                   bad.begin() + static_cast<long>(PageOffset(1)),
                   bad.begin() + static_cast<long>(PageOffset(2)));
  backend_.SetRaw("a", bad);
  EXPECT_EQ(ReadPage(0), Code::kAuthFailed);
  EXPECT_EQ(ReadPage(2), Code::kAuthFailed);
  EXPECT_EQ(ReadPage(1), Code::kOk);
}

TEST_P(TamperTest, PagesFromAnotherFileFail) {
  auto bad = backend_.Raw("a");
  const auto other = backend_.Raw("b");
  std::copy(other.begin() + static_cast<long>(PageOffset(1)),
            other.begin() + static_cast<long>(PageOffset(2)),
            bad.begin() + static_cast<long>(PageOffset(1)));
  backend_.SetRaw("a", bad);
  EXPECT_EQ(ReadPage(1), Code::kAuthFailed);
  // Even with the other file's header (and so its key), a's own pages fail.
  std::copy(other.begin(), other.begin() + kFileHeaderSize, bad.begin());
  backend_.SetRaw("a", bad);
  EXPECT_EQ(ReadPage(0), Code::kAuthFailed);
}

TEST_P(TamperTest, CuttingAtAPageBoundaryIsDetected) {
  auto bad = backend_.Raw("a");
  bad.resize(PageOffset(3));  // drop the last page: page 2 was sealed as not-last
  backend_.SetRaw("a", bad);
  EXPECT_EQ(ReadPage(2), Code::kAuthFailed);
  // A cut inside a unit leaves a torn tail: that page fails, and so does no other
  // (tests/core/torn_tail_test.cc cuts everywhere).
  bad.resize(PageOffset(2) + 10);
  backend_.SetRaw("a", bad);
  EXPECT_EQ(ReadPage(2), Code::kCorrupt);
  EXPECT_EQ(ReadPage(1), Code::kOk);
  EXPECT_EQ(ReadPage(0), Code::kOk);
}

TEST_P(TamperTest, ZeroedLastPageIsCorruptNotAHole) {
  auto bad = backend_.Raw("a");
  std::fill(bad.begin() + static_cast<long>(PageOffset(3)), bad.end(), 0);
  backend_.SetRaw("a", bad);
  EXPECT_EQ(ReadPage(3), Code::kCorrupt);
}

// The documented exception: an all-zero unit is how a hole is stored, so zeroing a page other
// than the last is not caught outside strict mode (and sealed files); it reads as zeros.
TEST_P(TamperTest, ZeroedPageOtherThanTheLastReadsAsAHole) {
  auto bad = backend_.Raw("a");
  std::fill(bad.begin() + static_cast<long>(PageOffset(1)),
            bad.begin() + static_cast<long>(PageOffset(2)), 0);
  backend_.SetRaw("a", bad);
  auto f = Open("a");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->size(), 4u * 4096);
  auto want = Pattern(4 * 4096, 'a');
  std::fill(want.begin() + 4096, want.begin() + 2 * 4096, 0);
  EXPECT_EQ(ReadAll(*f), want);
  EXPECT_EQ(Counter(*f, PageCounter::kHolesRead), 1u);
}

// A page's earlier ciphertext has the same key, index and flags as its current one: put back,
// it opens, and reads as the older page, with no error (only sealed files catch this).
TEST_P(TamperTest, APageRolledBackToAnOlderCiphertextOfItselfReadsAsTheOlderPage) {
  const auto older = backend_.Raw("a");
  const auto newer_page = Pattern(4096, 'n');
  {
    auto f = Open("a");
    WriteAll(*f, 4096, newer_page);
  }
  auto raw = backend_.Raw("a");
  ASSERT_EQ(raw.size(), older.size());
  // The write changed unit 1 alone (the header, and with it the file key, stayed).
  ASSERT_FALSE(std::equal(raw.begin() + static_cast<long>(PageOffset(1)),
                          raw.begin() + static_cast<long>(PageOffset(2)),
                          older.begin() + static_cast<long>(PageOffset(1))));
  ASSERT_TRUE(
      std::equal(raw.begin(), raw.begin() + static_cast<long>(PageOffset(1)), older.begin()));
  {
    auto f = Open("a");
    std::vector<uint8_t> buf(4096);
    ASSERT_TRUE(f->Read(4096, buf).ok());
    ASSERT_EQ(buf, newer_page);
  }
  std::copy(older.begin() + static_cast<long>(PageOffset(1)),
            older.begin() + static_cast<long>(PageOffset(2)),
            raw.begin() + static_cast<long>(PageOffset(1)));
  backend_.SetRaw("a", raw);
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(ReadPage(i), Code::kOk) << "page " << i;  // page 1: the older plaintext
  }
}

// --- Faults of the backing store. ---

TEST_P(PageLayerTest, NoSpaceReachesTheWriterAndKeepsEarlierData) {
  const auto first = Pattern(8 * 4096, 1);
  {
    auto f = Open("a");
    WriteAll(*f, 0, first);
  }
  auto faulty = std::make_unique<FaultyBackingFile>(backend_.Open("a"), FaultPlan{});
  FaultyBackingFile* fault = faulty.get();
  auto opened = layer_->Open(std::move(faulty), "a");
  ASSERT_TRUE(opened.ok());
  auto& f = *opened;
  FaultPlan plan;
  plan.write_budget = 3 * 4096;  // the disk fills up partway through the next write-back
  plan.torn_writes = true;
  fault->set_plan(plan);
  // A small write is cached: the error comes with the flush.
  auto second = Pattern(3 * 4096, 2);
  ASSERT_TRUE(f->Write(8 * 4096, second).ok());
  EXPECT_EQ(f->Flush().code(), Code::kNoSpace);
  // A large write goes straight to the cipher file: the writer sees the error itself, and the
  // write changes nothing (the cached pages before it fail first, so none of it is stored).
  fault->set_plan(plan);
  auto third = Pattern(128 * 4096, 3);
  EXPECT_EQ(f->Write(11 * 4096, third).status().code(), Code::kNoSpace);
  auto expect = first;
  expect.insert(expect.end(), second.begin(), second.end());
  EXPECT_EQ(f->size(), expect.size());
  EXPECT_EQ(ReadAll(*f), expect);
  fault->set_plan(FaultPlan{});
  EXPECT_TRUE(f->Flush().ok());  // room again: the retry writes what was taken
  f.reset();
  auto g = Open("a");
  EXPECT_EQ(ReadAll(*g), expect);
}

// A disk that fills up while a file grows takes part of a unit and refuses the rest. Whatever
// the point, the file must keep what it stored before: the old last page (re-sealed as not-last
// when the file grows, and longer if it was short) must not be left half-written, and no torn
// unit may stay behind. For every point of a growth by appending through the cache and by a
// large write going straight to the cipher file, both over a short and over a full last page;
// the same for a device error (EIO) there. And from an empty file, whose first write-back stores
// its header with its first units in one write: refused at any point, the file is empty again.
TEST_P(PageLayerTest, WriteErrorsWhileGrowingLeaveTheStoredFileAsItWas) {
  const std::pair<int, Code> errors[] = {{ENOSPC, Code::kNoSpace}, {EIO, Code::kIoError}};
  for (const auto& [error, code] : errors)
    for (const size_t old_size : {size_t{10000}, size_t{8192}, size_t{0}}) {
      for (const size_t added : {size_t{3 * 4096 + 5}, size_t{130 * 4096}}) {
        const auto before = Pattern(old_size, 1);
        const auto more = Pattern(added, 2);
        {
          auto f = Open("a");
          WriteAll(*f, 0, before);
        }
        // Bytes the growth needs beyond the file's present end; the last budget tried suffices.
        const size_t needed = layer_->geometry().CipherSize(old_size + added) -
                              layer_->geometry().CipherSize(old_size);
        const size_t step = (added > 4 * 4096 ? 769 : 13) * (error == EIO ? 3 : 1);
        for (size_t budget = 0; budget < needed + step; budget += step) {
          FaultPlan plan;
          plan.write_budget = static_cast<int64_t>(budget);
          plan.torn_writes = true;
          plan.growth_only = true;
          plan.write_errno = error;
          auto opened =
              layer_->Open(std::make_unique<FaultyBackingFile>(backend_.Open("a"), plan), "a");
          ASSERT_TRUE(opened.ok());
          auto write = (*opened)->Write(old_size, more);
          Status flushed = write.ok() ? (*opened)->Flush() : write.status();
          ASSERT_EQ(flushed.ok(), budget >= needed) << "budget " << budget << " of " << needed;
          opened->reset();  // its last flush fails too: the budget is spent
          auto g = Open("a");
          const auto got = ReadAll(*g);
          auto expect = before;
          expect.insert(expect.end(), more.begin(), more.end());
          if (flushed.ok()) {
            ASSERT_EQ(got, expect) << "budget " << budget;
          } else {
            // The old contents, and of the new only write-backs that completed (a large write
            // stores its whole pages before the rest is flushed).
            ASSERT_EQ(flushed.code(), code) << flushed.ToString();
            ASSERT_GE(got.size(), old_size);
            ASSERT_TRUE(std::equal(got.begin(), got.end(), expect.begin()))
                << "old " << old_size << ", adding " << added << ", budget " << budget << ", got "
                << got.size();
          }
          ASSERT_TRUE(g->Truncate(old_size).ok());  // back to the old contents for the next budget
        }
      }
    }
}

TEST_P(PageLayerTest, ReadErrorsAreReported) {
  {
    auto f = Open("a");
    WriteAll(*f, 0, Pattern(4 * 4096, 1));
  }
  FaultPlan plan;
  plan.fail_reads_at =
      static_cast<int64_t>(kFileHeaderSize + 2 * layer_->geometry().unit_size() + 5);
  auto f = layer_->Open(std::make_unique<FaultyBackingFile>(backend_.Open("a"), plan), "a");
  ASSERT_TRUE(f.ok());
  // Page 0 reads (its read-ahead over page 2 fails, which must not fail it or leave garbage);
  // page 2 itself reports the error; page 3 after it still reads.
  std::vector<uint8_t> buf(4096);
  const auto data = Pattern(4 * 4096, 1);
  ASSERT_TRUE((*f)->Read(0, buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), data.begin()));
  EXPECT_EQ((*f)->Read(2 * 4096, buf).status().code(), Code::kIoError);
  ASSERT_TRUE((*f)->Read(3 * 4096, buf).ok());
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), data.begin() + 3 * 4096));
}

// --- Concurrency (also run under TSan). ---

TEST_P(PageLayerTest, ConcurrentReadersAndWritersOfOneFile) {
  constexpr size_t kPages = 64;
  auto f = Open("a");
  WriteAll(*f, 0, std::vector<uint8_t>(kPages * 4096, 0));
  ASSERT_TRUE(f->Flush().ok());
  // Each writer owns a stripe of pages and fills them with its id; readers check that every
  // page they see is uniformly one writer's id or zero (a page is never torn inside itself).
  std::vector<std::thread> threads;
  std::atomic<bool> bad{false};
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 1; round <= 20; ++round) {
        for (size_t p = static_cast<size_t>(w); p < kPages; p += 4) {
          std::vector<uint8_t> page(4096, static_cast<uint8_t>(w * 32 + round));
          if (!f->Write(p * 4096, page).ok()) bad = true;
        }
        if (round % 5 == 0 && !f->Flush().ok()) bad = true;
      }
    });
  }
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::vector<uint8_t> buf(4096);
      for (int i = 0; i < 400; ++i) {
        const size_t p = static_cast<size_t>(i * 7 + r) % kPages;
        auto n = f->Read(p * 4096, buf);
        if (!n.ok() || *n != 4096)
          bad = true;
        else if (std::any_of(buf.begin(), buf.end(), [&](uint8_t b) { return b != buf[0]; }))
          bad = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(bad);
  ASSERT_TRUE(f->Flush().ok());
  f.reset();
  auto g = Open("a");
  auto all = ReadAll(*g);
  for (size_t p = 0; p < kPages; ++p)
    EXPECT_EQ(all[p * 4096], static_cast<uint8_t>((p % 4) * 32 + 20)) << p;
}

TEST_P(PageLayerTest, ConcurrentLargeWritesAndReadsPastTheCache) {
  constexpr size_t kRun = 24;  // pages per write: above the direct-I/O threshold
  auto f = Open("a");
  WriteAll(*f, 0, std::vector<uint8_t>(4 * kRun * 4096, 0));
  std::vector<std::thread> threads;
  std::atomic<bool> bad{false};
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 1; round <= 15; ++round) {
        for (size_t r = static_cast<size_t>(w); r < 4; r += 2) {
          std::vector<uint8_t> run(kRun * 4096, static_cast<uint8_t>(w * 64 + round));
          if (!f->Write(r * kRun * 4096, run).ok()) bad = true;
        }
      }
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<uint8_t> buf(kRun * 4096);
      for (int i = 0; i < 60; ++i) {
        auto n = f->Read(static_cast<size_t>((i + r) % 4) * kRun * 4096, buf);
        if (!n.ok() || *n != buf.size()) {
          bad = true;
          continue;
        }
        for (size_t p = 0; p < kRun; ++p)  // every page is one write's, never torn
          if (std::any_of(buf.begin() + p * 4096, buf.begin() + (p + 1) * 4096,
                          [&](uint8_t b) { return b != buf[p * 4096]; }))
            bad = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(bad);
  ASSERT_TRUE(f->Flush().ok());
  f.reset();
  auto g = Open("a");
  auto all = ReadAll(*g);
  for (size_t r = 0; r < 4; ++r)
    EXPECT_EQ(all[r * kRun * 4096], static_cast<uint8_t>((r % 2) * 64 + 15)) << r;
}

// Failures seen by several threads: how many, and the first one's text.
struct Failures {
  std::mutex mu;
  int count = 0;
  std::string first;
  void Add(const std::string& what) {
    std::lock_guard lock(mu);
    if (count++ == 0) first = what;
  }
};

// Partial writes into one file from `writers` threads at once, each owning every writers-th
// page and writing pieces of its pages further out as it goes, so the file grows under the
// others, with gaps, and old last pages are re-sealed while others read theirs for their own
// partial writes; flushes between. `wrote(writer, offset, piece)` sees every write that
// succeeded; `beside` runs in one more thread meanwhile.
void StripedGrowingWrites(
    FileContents& f, size_t writers, size_t pages, Failures& failures,
    const std::function<void(size_t, uint64_t, const std::vector<uint8_t>&)>& wrote,
    const std::function<void()>& beside) {
  std::vector<std::thread> threads;
  for (size_t w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937 rng(static_cast<uint32_t>(w) * 7919 + 1);
      for (int i = 0; i < 1500; ++i) {
        const size_t page =
            w + writers * (rng() % (1 + std::min<size_t>(pages / writers - 1,
                                                         static_cast<size_t>(i) / 40)));
        const size_t from = rng() % 4096, len = 1 + rng() % (4096 - from);
        std::vector<uint8_t> piece(len, static_cast<uint8_t>(1 + (w * 60 + i) % 250));
        auto n = f.Write(page * 4096 + from, piece);
        if (!n.ok() || *n != len)
          failures.Add("write: " + (n.ok() ? std::string("short") : n.status().ToString()));
        else
          wrote(w, page * 4096 + from, piece);
        if (i % 37 == 0 && !f.Flush().ok()) failures.Add("flush");
      }
    });
  }
  if (beside) threads.emplace_back(beside);
  for (auto& t : threads) t.join();
}

// Writes as a writeback cache sends them, several at once into one file, under a small cache. The
// result is known: no write may fail and the file reads back as written, also after reopening.
// One read of many uncached pages is cut into pieces read and opened in parallel. For some
// counts rounding the piece size up left the last piece empty (1089 pages) or past the end of
// the read (1187 pages: a read of negative length, inside the file, past the read buffer).
TEST_P(PageLayerTest, OneLargeReadOfAnyPageCountReadsBack) {
  const auto data = Pattern(1400 * 4096, 7);
  {
    auto f = Open("a");
    WriteAll(*f, 0, data);
  }
  for (size_t pages : {size_t{289}, size_t{1089}, size_t{1090}, size_t{1187}, size_t{1399}}) {
    SCOPED_TRACE(std::to_string(pages) + " pages");
    // Nothing cached but the last page (checked by the open, past the read): the read goes to
    // the cipher file in one call.
    auto f = Open("a");
    const uint64_t at_open = Counter(*f, PageCounter::kBackingBytesRead);
    std::vector<uint8_t> out(pages * 4096);
    auto n = f->Read(0, out);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_EQ(*n, out.size());
    EXPECT_TRUE(std::equal(out.begin(), out.end(), data.begin()));
    // Exactly the read's units, once: no piece read past them.
    EXPECT_EQ(Counter(*f, PageCounter::kBackingBytesRead) - at_open,
              pages * layer_->geometry().unit_size());
  }
}

// A gate the calls of a backing file wait at, once armed, until the test opens it.
class Gate {
 public:
  void Arm() {
    MutexLock lock(mu_);
    armed_ = true;
  }
  // Until at least one call waits at the gate.
  void WaitForHeld() {
    MutexLock lock(mu_);
    while (held_ == 0) cv_.Wait(mu_);
  }
  void Open() {
    MutexLock lock(mu_);
    armed_ = false;
    cv_.NotifyAll();
  }

 protected:
  // Waits while armed; with `first_only`, only the first call to come (later ones pass).
  void Hold(bool first_only) {
    MutexLock lock(mu_);
    if (!armed_ || (first_only && held_ > 0)) return;
    ++held_;
    cv_.NotifyAll();
    while (armed_) cv_.Wait(mu_);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool armed_ SIGILFS_GUARDED_BY(mu_) = false;
  int held_ SIGILFS_GUARDED_BY(mu_) = 0;  // calls that waited
};

// A backing file whose writes, once armed, wait at a gate until the test opens it: a write-back
// can be held with its pages in flight.
class GatedBackingFile final : public test::ForwardingBackingFile, public Gate {
 public:
  using ForwardingBackingFile::ForwardingBackingFile;
  Status WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) override {
    Hold(false);
    return ForwardingBackingFile::WriteAt(bufs, offset);
  }
};

// A write-back seals dirty pages straight from their cached buffers. A write to a page while it
// is in flight must go to a copy (the seal may still be reading it), read back at once, and
// reach the cipher file with the next write-back; the pages the write-back held are stored.
// (Under TSan this also shows that no write touches a buffer a seal reads.)
TEST_P(PageLayerTest, ConcurrentWritesToPagesInFlightGoToACopyAndAreStoredNext) {
  constexpr size_t kPages = 64;  // two pieces of 32
  // One thread seals the pieces in order and writes the first before sealing the second, so
  // while the gate holds that write, pages 32-63 are in flight and not yet sealed.
  PageLayerOptions o;
  o.crypto_threads = 1;
  Reconfigure(o);
  {
    auto f = Open("a");
    WriteAll(*f, 0, Pattern(kPages * 4096, 1));
  }
  auto gated = std::make_unique<GatedBackingFile>(backend_.Open("a"));
  GatedBackingFile* gate = gated.get();
  auto opened = layer_->Open(std::move(gated), "a");
  ASSERT_TRUE(opened.ok());
  auto f = std::move(opened).value();
  auto want = Pattern(kPages * 4096, 2);
  for (size_t p = 0; p < kPages; ++p)  // page-sized writes: cached, dirty
    ASSERT_EQ(*f->Write(p * 4096, ByteSpan(want).subspan(p * 4096, 4096)), 4096u);

  gate->Arm();
  Status flushed;
  std::thread flusher([&] { flushed = f->Flush(); });
  gate->WaitForHeld();
  // Pages early and late in the write-back, partly and wholly rewritten while it is held.
  for (size_t p : {size_t{1}, kPages / 2, kPages - 2}) {
    const auto partial = Pattern(100, static_cast<uint32_t>(10 + p));
    ASSERT_EQ(*f->Write(p * 4096 + 7, partial), partial.size());
    std::copy(partial.begin(), partial.end(), want.begin() + static_cast<long>(p * 4096 + 7));
  }
  const auto whole = Pattern(4096, 99);
  ASSERT_EQ(*f->Write((kPages - 1) * 4096, whole), 4096u);
  std::copy(whole.begin(), whole.end(), want.begin() + static_cast<long>((kPages - 1) * 4096));
  EXPECT_EQ(ReadAll(*f), want) << "while the write-back is held";
  gate->Open();
  flusher.join();
  ASSERT_TRUE(flushed.ok()) << flushed.ToString();
  {
    // The cipher file holds what was in flight, not the writes made meanwhile (they went to
    // copies), and not zeros (the buffers sealed from were not freed early).
    auto other = Open("a");
    EXPECT_EQ(ReadAll(*other), Pattern(kPages * 4096, 2)) << "what the held write-back stored";
  }
  const uint64_t sealed_before = Counter(*f, PageCounter::kPagesEncrypted);
  ASSERT_TRUE(f->Flush().ok());
  EXPECT_EQ(Counter(*f, PageCounter::kPagesEncrypted) - sealed_before, 4u)
      << "the four pages written while in flight, and only they, are still dirty";
  EXPECT_EQ(ReadAll(*f), want);
  ExpectStoredAfterClose(f, "a", want);
}

// The write-back a write triggers runs on a crypto worker: the writer goes on while it is held
// in the backing store, reads see the newest bytes, and everything reaches the cipher file.
TEST_P(PageLayerTest, TriggeredWriteBackRunsBesideTheWriter) {
  PageLayerOptions o;
  o.writeback_pages = 8;
  o.crypto_threads = 2;  // a worker, whatever the machine
  Reconfigure(o);
  auto gated = std::make_unique<GatedBackingFile>(backend_.Open("a"));
  GatedBackingFile* gate = gated.get();
  auto opened = layer_->Open(std::move(gated), "a");
  ASSERT_TRUE(opened.ok());
  auto f = std::move(opened).value();
  auto want = Pattern(13 * 4096, 3);
  gate->Arm();
  // If the eighth write waited for its write-back, it would wait for the gate forever.
  auto writer = std::async(std::launch::async, [&] {
    for (size_t p = 0; p < 8; ++p)
      if (!f->Write(p * 4096, ByteSpan(want).subspan(p * 4096, 4096)).ok()) return false;
    return true;
  });
  if (writer.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    gate->Open();
    writer.wait();
    FAIL() << "the write that triggered the write-back waited for it";
  }
  ASSERT_TRUE(writer.get());
  gate->WaitForHeld();  // the job is held in its write
  // More pages (fewer than the next batch) and a change to a page in flight, while held.
  for (size_t p = 8; p < 13; ++p)
    ASSERT_EQ(*f->Write(p * 4096, ByteSpan(want).subspan(p * 4096, 4096)), 4096u);
  const auto partial = Pattern(300, 9);
  ASSERT_EQ(*f->Write(3 * 4096 + 50, partial), partial.size());
  std::copy(partial.begin(), partial.end(), want.begin() + 3 * 4096 + 50);
  EXPECT_EQ(ReadAll(*f), want) << "while the write-back is held";
  gate->Open();
  ASSERT_TRUE(f->Flush().ok());
  EXPECT_GE(Counter(*f, PageCounter::kWritebacks), 2u);
  ExpectStoredAfterClose(f, "a", want);
}

// Several writers starting a write-back job with every write on one file, which is closed as
// soon as they are done: everything is stored, and (under ASan and TSan) no job touches the
// file after it is gone or races another.
TEST_P(PageLayerTest, WritersStartingWriteBacksThenClosingLeaveNoJobBehind) {
  PageLayerOptions o;
  o.writeback_pages = 1;
  o.crypto_threads = 2;
  Reconfigure(o);
  for (int round = 0; round < 30; ++round) {
    const std::string name = "r" + std::to_string(round);
    auto f = Open(name);
    ASSERT_NE(f, nullptr);
    std::vector<std::thread> writers;
    for (int t = 0; t < 4; ++t)
      writers.emplace_back([&, t] {
        const auto page = Pattern(4096, static_cast<uint32_t>(t));
        for (size_t p = 0; p < 16; ++p)
          EXPECT_TRUE(f->Write((p * 4 + static_cast<size_t>(t)) * 4096, page).ok());
      });
    for (auto& w : writers) w.join();
    f.reset();
    auto g = Open(name);
    const auto got = ReadAll(*g);
    ASSERT_EQ(got.size(), 64u * 4096) << "round " << round;
    for (size_t p = 0; p < 64; ++p)
      ASSERT_TRUE(std::equal(got.begin() + static_cast<long>(p * 4096),
                             got.begin() + static_cast<long>((p + 1) * 4096),
                             Pattern(4096, static_cast<uint32_t>(p % 4)).begin()))
          << "round " << round << ", page " << p;
  }
}

// A triggered write-back that fails in the background (a full disk) fails a later write of the
// writer (the one that would start the next; or the triggering one, if the job was done before
// it returned), by the batch after at the latest; the pages stay dirty, and a flush once there
// is room stores them.
// A write whose bytes are cached succeeds; a write-back that fails behind it keeps its pages
// dirty and is reported by the next flush. Writes go on into the cache until the backlog reaches
// two batches; then a write first retries the write-back, and fails, changing nothing, when the
// retry fails too. Once there is room, everything taken is stored.
TEST_P(PageLayerTest, AFailedBackgroundWriteBackBoundsTheBacklogAndIsRetried) {
  for (unsigned threads : {1u, 2u}) {  // without a worker the write that fills a batch runs it
    SCOPED_TRACE(::testing::Message() << threads << " crypto threads");
    PageLayerOptions o;
    o.writeback_pages = 8;
    o.crypto_threads = threads;
    Reconfigure(o);
    const std::string name = "t" + std::to_string(threads);
    auto faulty = std::make_unique<FaultyBackingFile>(backend_.Open(name), FaultPlan{});
    FaultyBackingFile* fault = faulty.get();
    auto opened = layer_->Open(std::move(faulty), name);
    ASSERT_TRUE(opened.ok());
    auto f = std::move(opened).value();
    FaultPlan full;
    full.write_budget = 0;
    fault->set_plan(full);
    const auto want = Pattern(40 * 4096, 4);
    size_t failed_at = 0;
    for (size_t p = 0; p < 40 && failed_at == 0; ++p) {
      auto w = f->Write(p * 4096, ByteSpan(want).subspan(p * 4096, 4096));
      if (!w.ok()) {
        EXPECT_EQ(w.status().code(), Code::kNoSpace) << w.status().ToString();
        failed_at = p + 1;
      }
    }
    EXPECT_EQ(failed_at, 2 * o.writeback_pages + 1) << "the write past two batches";
    const std::vector<uint8_t> taken(want.begin(),
                                     want.begin() + static_cast<long>((failed_at - 1) * 4096));
    EXPECT_EQ(f->size(), taken.size()) << "the failed write changed the size";
    EXPECT_EQ(ReadAll(*f), taken);
    EXPECT_EQ(f->Flush().code(), Code::kNoSpace);
    fault->set_plan(FaultPlan{});
    // The writes taken so far are stored by the retry.
    ASSERT_TRUE(f->Flush().ok());
    ExpectStoredAfterClose(f, name, taken);
  }
}

// The layer's gauges for the daemon's stats: pages cached and dirty across open files, and the
// files whose write-back is failing, each back to zero once stored, given up or closed.
TEST_P(PageLayerTest, CountsCachedAndDirtyPagesAndFilesWhoseWriteBackFails) {
  PageLayerOptions o;
  o.writeback_pages = 64;  // no write-back inside the writes below
  o.crypto_threads = 1;
  Reconfigure(o);
  auto faulty = std::make_unique<FaultyBackingFile>(backend_.Open("a"), FaultPlan{});
  FaultyBackingFile* fault = faulty.get();
  auto opened = layer_->Open(std::move(faulty), "a");
  ASSERT_TRUE(opened.ok());
  auto a = std::move(opened).value();
  auto b = Open("b");
  WriteAll(*a, 0, Pattern(3 * 4096, 1));
  WriteAll(*b, 0, Pattern(2 * 4096, 2));
  EXPECT_EQ(layer_->cached_pages(), 5u);
  EXPECT_EQ(layer_->dirty_pages(), 5u);
  EXPECT_EQ(layer_->failing_files(), 0u);
  ASSERT_TRUE(b->Flush().ok());
  EXPECT_EQ(layer_->dirty_pages(), 3u);
  EXPECT_EQ(layer_->cached_pages(), 5u);  // stored, still cached
  FaultPlan full;
  full.write_budget = 0;
  fault->set_plan(full);
  EXPECT_EQ(a->Flush().code(), Code::kNoSpace);
  EXPECT_EQ(layer_->failing_files(), 1u);
  EXPECT_EQ(layer_->dirty_pages(), 3u);  // kept for a retry
  EXPECT_TRUE(a->DiscardUnstored());
  EXPECT_EQ(layer_->failing_files(), 0u);
  EXPECT_EQ(layer_->dirty_pages(), 0u);
  WriteAll(*a, 0, Pattern(4096, 3));
  EXPECT_EQ(a->Flush().code(), Code::kNoSpace);
  EXPECT_EQ(layer_->failing_files(), 1u);
  a.reset();  // its last write-back fails too: what it held goes with it
  b.reset();
  EXPECT_EQ(layer_->failing_files(), 0u);
  EXPECT_EQ(layer_->dirty_pages(), 0u);
  EXPECT_EQ(layer_->cached_pages(), 0u);
}

TEST_P(PageLayerTest, ConcurrentPartialWritesThatGrowTheFile) {
  constexpr size_t kWriters = 4, kPages = 96;
  UseSmallCache();
  auto f = Open("a");
  std::vector<std::vector<uint8_t>> models(kWriters, std::vector<uint8_t>(kPages * 4096, 0));
  std::vector<size_t> ends(kWriters, 0);
  Failures failures;
  StripedGrowingWrites(
      *f, kWriters, kPages, failures,
      [&](size_t w, uint64_t at, const std::vector<uint8_t>& piece) {
        std::copy(piece.begin(), piece.end(), models[w].begin() + static_cast<long>(at));
        ends[w] = std::max(ends[w], static_cast<size_t>(at + piece.size()));
      },
      nullptr);
  EXPECT_EQ(failures.count, 0) << failures.first;
  ASSERT_TRUE(f->Flush().ok());
  const size_t size = *std::max_element(ends.begin(), ends.end());
  std::vector<uint8_t> want(size, 0);
  for (size_t p = 0; p * 4096 < size; ++p)
    std::copy_n(models[p % kWriters].begin() + static_cast<long>(p * 4096),
                std::min<size_t>(4096, size - p * 4096),
                want.begin() + static_cast<long>(p * 4096));
  EXPECT_EQ(f->size(), size);
  EXPECT_TRUE(ReadAll(*f) == want);
  f.reset();
  auto g = Open("a");
  EXPECT_TRUE(ReadAll(*g) == want) << "after reopening";
}

// The same writes with truncates and reads beside them. A write's read-modify-write read could
// meet a truncate cutting the cipher file and fail as damaged ("the cipher file ends inside
// this page"): nothing may fail, and the file reads back whole after reopening.
TEST_P(PageLayerTest, ConcurrentTruncatesReadsAndPartialWritesNeverFail) {
  constexpr size_t kWriters = 4, kPages = 96;
  UseSmallCache();
  auto f = Open("a");
  Failures failures;
  StripedGrowingWrites(
      *f, kWriters, kPages, failures, [](size_t, uint64_t, const std::vector<uint8_t>&) {},
      [&] {
        std::mt19937 rng(99);
        std::vector<uint8_t> buf(8192);
        for (int i = 0; i < 200; ++i) {
          if (Status s = f->Truncate(rng() % (kPages * 4096)); !s.ok())
            failures.Add("truncate: " + s.ToString());
          auto r = f->Read(rng() % (kPages * 4096), buf);
          if (!r.ok()) failures.Add("read: " + r.status().ToString());
        }
      });
  EXPECT_EQ(failures.count, 0) << failures.first;
  ASSERT_TRUE(f->Flush().ok());
  const auto all = ReadAll(*f);
  EXPECT_EQ(all.size(), f->size());
  f.reset();
  auto g = Open("a");
  EXPECT_TRUE(ReadAll(*g) == all) << "after reopening";
}

// A backing file whose first read once armed waits at a gate until the test opens it (later
// reads pass): a read can be held between its look at the size and its look at the cache. With
// `after_reading`, it waits with the bytes read, so what it returns is the file as it was.
class ReadGatedBackingFile final : public test::ForwardingBackingFile, public Gate {
 public:
  explicit ReadGatedBackingFile(std::unique_ptr<BackingFile> inner, bool after_reading = false)
      : ForwardingBackingFile(std::move(inner)), after_reading_(after_reading) {}
  Result<size_t> ReadAt(MutableByteSpan buf, uint64_t offset) override {
    if (!after_reading_) Hold(true);
    auto got = ForwardingBackingFile::ReadAt(buf, offset);
    if (after_reading_) Hold(true);
    return got;
  }

 private:
  const bool after_reading_;
};

// A read that has already copied the first pages from the cache, and then meets a truncate below
// them while it fetches the rest, returns what it read (the file as it was when the read began),
// short: it neither spins nor fails. Through the mount this was a daemon thread at 100% CPU and
// a truncating process waiting forever for the page its read-ahead held.
TEST_P(PageLayerTest, AReadOvertakenByAShrinkingTruncateReturnsShort) {
  {
    auto f = Open("a");
    WriteAll(*f, 0, Pattern(8 * 4096, 1));
  }
  auto gated = std::make_unique<ReadGatedBackingFile>(backend_.Open("a"));
  ReadGatedBackingFile* gate = gated.get();
  auto opened = layer_->Open(std::move(gated), "a");
  ASSERT_TRUE(opened.ok());
  auto f = std::move(opened).value();
  // Page 0 cached, the rest not: a read that does not start at 0 is not taken for a
  // sequential one, so nothing is read ahead.
  std::vector<uint8_t> first(4095);
  ASSERT_EQ(*f->Read(1, first), 4095u);
  gate->Arm();
  auto reader = std::async(std::launch::async, [&]() -> Result<size_t> {
    std::vector<uint8_t> out(8 * 4096);
    return f->Read(0, out);
  });
  gate->WaitForHeld();  // page 0 copied, pages 1-7 being fetched
  ASSERT_TRUE(f->Truncate(100).ok());
  gate->Open();
  if (reader.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "the read never returned after the truncate";
    std::_Exit(1);  // it spins holding the file: nothing else can end cleanly
  }
  auto got = reader.get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, 4096u) << "the page read before the truncate, and no more";
  EXPECT_EQ(ReadAll(*f), Pattern(100, 1));
}

// A read that loads the file's partial last page from the disk while an append fills it, is
// written back and leaves the cache returns what the file held when the read began, then the
// record: never the zeros the old page had past its end. It used to serve the old page up to
// the new size: through the mount, a follower of an appended log read whole records as zeros.
TEST_P(PageLayerTest, AReadOvertakenByAnAppendReturnsNoBytesThatWereNeverWritten) {
  PageLayerOptions o;  // a cache of a page or so: each load evicts the least recently used
  o.cache_bytes = 4 * 4096;
  o.readahead_pages = 0;
  o.writeback_pages = 1;
  Reconfigure(o);
  const auto old_data = Pattern(6144, 1);  // a page and a half
  const auto record = Pattern(1237, 2);
  {
    auto f = Open("a");
    WriteAll(*f, 0, old_data);
  }
  auto gated = std::make_unique<ReadGatedBackingFile>(backend_.Open("a"), true);
  ReadGatedBackingFile* gate = gated.get();
  auto opened = layer_->Open(std::move(gated), "a");
  ASSERT_TRUE(opened.ok());
  auto f = std::move(opened).value();
  std::vector<uint8_t> page(4096);
  ASSERT_EQ(*f->Read(0, page), 4096u);  // page 0 in, the last page (cached by the open) out

  gate->Arm();
  auto reader = std::async(std::launch::async, [&]() -> Result<std::vector<uint8_t>> {
    std::vector<uint8_t> out(2 * 4096);
    SIGILFS_ASSIGN_OR_RETURN(size_t n, f->Read(4096, out));
    out.resize(n);
    return out;
  });
  gate->WaitForHeld();  // the last page fetched as it was, 6,144 bytes into the file
  auto wrote = f->Write(old_data.size(), record);
  ASSERT_TRUE(wrote.ok()) << wrote.status().ToString();
  ASSERT_EQ(*wrote, record.size());
  ASSERT_TRUE(f->Flush().ok());
  ASSERT_EQ(*f->Read(0, page), 4096u);  // loads page 0 again: the last page leaves the cache
  gate->Open();
  auto got = reader.get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();

  std::vector<uint8_t> want(old_data.begin() + 4096, old_data.end());
  ASSERT_GE(got->size(), want.size()) << "at least what the file held when the read began";
  want.insert(want.end(), record.begin(), record.end());
  ASSERT_LE(got->size(), want.size());
  for (size_t i = 0; i < got->size(); ++i)
    ASSERT_EQ((*got)[i], want[i]) << "byte " << 4096 + i << " of the file (the record starts at "
                                  << old_data.size()
                                  << "): neither what the file held nor the record";
}

// A backing file whose first large write (64 KiB or more) or punch, once armed, waits at a gate
// until the test opens it: a change past the cache can be held while it is under way.
class WriteGatedBackingFile final : public test::ForwardingBackingFile, public Gate {
 public:
  using ForwardingBackingFile::ForwardingBackingFile;
  Status WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) override {
    size_t total = 0;
    for (ByteSpan b : bufs) total += b.size();
    if (total >= (64u << 10)) Hold(true);
    return ForwardingBackingFile::WriteAt(bufs, offset);
  }
  Status Allocate(uint64_t offset, uint64_t length, bool punch_hole) override {
    if (punch_hole) Hold(true);
    return ForwardingBackingFile::Allocate(offset, length, punch_hole);
  }
};

// A partial write into a page that a large write (past the cache) or a punch is changing at that
// moment ends as one of the two serial orders. It used to read the old page from the disk, and
// its dirty copy was written back over the new data: the old page plus the one new byte.
TEST_P(PageLayerTest, ASmallWriteBesideALargeWriteOrAPunchEndsInASerialOrder) {
  const auto old_data = Pattern(200 * 4096, 1);
  const std::vector<uint8_t> x = {'x'};
  for (const bool punch : {false, true}) {
    SCOPED_TRACE(punch ? "punch" : "large write");
    const std::string name = punch ? "p" : "w";
    {
      auto f = Open(name);
      WriteAll(*f, 0, old_data);
    }
    auto gated = std::make_unique<WriteGatedBackingFile>(backend_.Open(name));
    WriteGatedBackingFile* gate = gated.get();
    auto opened = layer_->Open(std::move(gated), name);
    ASSERT_TRUE(opened.ok());
    auto f = std::move(opened).value();
    const auto new_data = Pattern(200 * 4096, 2);
    gate->Arm();
    auto big = std::async(std::launch::async, [&]() -> Status {
      if (punch) return f->Allocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 100 * 4096);
      return f->Write(0, new_data).status();
    });
    gate->WaitForHeld();
    auto small = std::async(std::launch::async, [&] { return f->Write(10 * 4096 + 5, x); });
    // Long enough for the small write to read the page and copy its byte, had it not waited.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    gate->Open();
    ASSERT_TRUE(big.get().ok());
    auto wrote = small.get();
    ASSERT_TRUE(wrote.ok()) << wrote.status().ToString();
    ASSERT_TRUE(f->Flush().ok());
    f.reset();
    auto g = Open(name);
    const auto got = ReadAll(*g);
    // The big change alone (the small write first) or with the byte on top (after it).
    auto alone = punch ? old_data : new_data;
    if (punch) std::fill(alone.begin(), alone.begin() + 100 * 4096, 0);
    auto after = alone;
    after[10 * 4096 + 5] = 'x';
    ASSERT_EQ(got.size(), alone.size());
    EXPECT_TRUE(got == alone || got == after)
        << "page 10 holds "
        << (std::equal(got.begin() + 10 * 4096 + 6, got.begin() + 11 * 4096,
                       old_data.begin() + 10 * 4096 + 6)
                ? "the old data"
                : "something else");
  }
}

// A large write (past the cache) that fails part way returns the length of the prefix it
// stored, and nothing past it changes: not the size, not the data. A full disk (only growth
// spends space) stops it where it grows the file: the pages it overwrote in place are the
// prefix, and the old last page is put back as it was. A device error inside the stored data
// stops it inside a page: that one page is put back from the cache if the cache holds it, and
// otherwise fails to read, as after a crash there (docs/design/page-layer.md, "Rules").
TEST_P(PageLayerTest, ALargeWriteThatFailsStoresAPrefixAndChangesNothingAfterIt) {
  const auto old_data = Pattern(32 * 4096 - 100, 1);
  const auto new_data = Pattern(200 * 4096, 2);
  struct Case {
    const char* what;
    FaultPlan plan;
    bool cached;
    size_t prefix;  // pages stored
    bool torn;      // the page after them fails to read
  };
  const uint64_t unit = layer_->geometry().unit_size();
  FaultPlan full;
  full.write_budget = 0;
  full.growth_only = true;
  full.torn_writes = true;
  FaultPlan eio;
  eio.write_budget = static_cast<int64_t>(10 * unit + 100);
  eio.write_errno = EIO;
  eio.torn_writes = true;
  const Case cases[] = {{"full disk", full, false, 31, false},
                        {"device error, page cached", eio, true, 10, false},
                        {"device error, page not cached", eio, false, 10, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string name = std::string("f") + c.what;
    {
      auto f = Open(name);
      WriteAll(*f, 0, old_data);
    }
    auto faulty = std::make_unique<FaultyBackingFile>(backend_.Open(name), FaultPlan{});
    FaultyBackingFile* fault = faulty.get();
    auto opened = layer_->Open(std::move(faulty), name);
    ASSERT_TRUE(opened.ok());
    auto f = std::move(opened).value();
    if (c.cached) {  // page by page: a large read goes past the cache
      std::vector<uint8_t> page(4096);
      for (size_t p = 0; p * 4096 < old_data.size(); ++p) ASSERT_TRUE(f->Read(p * 4096, page).ok());
    }
    fault->set_plan(c.plan);
    auto wrote = f->Write(0, new_data);
    ASSERT_TRUE(wrote.ok()) << wrote.status().ToString();
    EXPECT_EQ(*wrote, c.prefix * 4096) << "the stored prefix";
    fault->set_plan(FaultPlan{});
    EXPECT_EQ(f->size(), old_data.size()) << "the failed write changed the size";
    auto expect = old_data;
    std::copy_n(new_data.begin(), c.prefix * 4096, expect.begin());
    ASSERT_TRUE(f->Flush().ok());
    f.reset();
    auto g = Open(name);
    ASSERT_EQ(g->size(), expect.size());
    for (size_t p = 0; p * 4096 < expect.size(); ++p) {
      std::vector<uint8_t> page(4096);
      auto n = g->Read(p * 4096, page);
      if (c.torn && p == c.prefix) {
        EXPECT_FALSE(n.ok()) << "page " << p;
        continue;
      }
      ASSERT_TRUE(n.ok()) << "page " << p << ": " << n.status().ToString();
      page.resize(*n);
      EXPECT_TRUE(std::equal(page.begin(), page.end(), expect.begin() + p * 4096))
          << "page " << p << " changed";
    }
  }
}

// A backing file whose writes or truncates fail with EIO while armed (a failing write stores
// nothing).
class ArmedFailureBackingFile final : public test::ForwardingBackingFile {
 public:
  using ForwardingBackingFile::ForwardingBackingFile;
  Status WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) override {
    if (fail_writes) return Status::FromErrno(EIO, "injected");
    return ForwardingBackingFile::WriteAt(bufs, offset);
  }
  Status Truncate(uint64_t size) override {
    if (fail_truncates) return Status::FromErrno(EIO, "injected");
    return ForwardingBackingFile::Truncate(size);
  }
  std::atomic<bool> fail_writes{false}, fail_truncates{false};
};

// A shrinking truncate whose write or cut fails leaves every byte as it was: the stored pages
// (the new last page included) and the dirty ones past the new end, in this open and after
// reopening.
TEST_P(PageLayerTest, AFailedShrinkingTruncateLeavesEveryByteReadable) {
  for (bool fail_write : {true, false}) {
    SCOPED_TRACE(fail_write ? "the new last page's write fails" : "the cut fails");
    const std::string name = fail_write ? "w" : "t";
    auto want = Pattern(10 * 4096 + 300, 50);
    {
      auto f = Open(name);
      WriteAll(*f, 0, want);
    }
    auto armed = std::make_unique<ArmedFailureBackingFile>(backend_.Open(name));
    ArmedFailureBackingFile* fault = armed.get();
    auto f = std::move(layer_->Open(std::move(armed), name)).value();
    const auto dirty = Pattern(4096, 51);  // page 8, cached and not yet written back
    ASSERT_EQ(*f->Write(8 * 4096, dirty), dirty.size());
    std::copy(dirty.begin(), dirty.end(), want.begin() + 8 * 4096);
    (fail_write ? fault->fail_writes : fault->fail_truncates) = true;
    EXPECT_FALSE(f->Truncate(3 * 4096 + 100).ok());
    fault->fail_writes = fault->fail_truncates = false;
    EXPECT_EQ(f->size(), want.size());
    EXPECT_EQ(ReadAll(*f), want);
    ASSERT_TRUE(f->Flush().ok());
    f.reset();
    auto g = Open(name);
    EXPECT_EQ(ReadAll(*g), want) << "after reopening";
  }
}

// Giving up after a failed write-back leaves the file as its cipher file holds it, in this
// open (what the mount serves after a failed close) exactly as after reopening: the appended
// pages gone, an overwritten stored page back to its stored bytes, the size the stored one.
// Nothing is dropped while write-backs succeed, and the file works on afterwards.
TEST_P(PageLayerTest, DiscardingWhatAFailedWriteBackCouldNotStoreLeavesTheStoredFile) {
  const auto stored = Pattern(5 * 4096 + 700, 60);
  {
    auto f = Open("d");
    WriteAll(*f, 0, stored);
  }
  auto armed = std::make_unique<ArmedFailureBackingFile>(backend_.Open("d"));
  ArmedFailureBackingFile* fault = armed.get();
  auto f = std::move(layer_->Open(std::move(armed), "d")).value();
  const auto more = Pattern(3 * 4096 + 10, 61);
  ASSERT_EQ(*f->Write(2 * 4096, Pattern(4096, 62)), 4096u);  // an overwrite, stored
  ASSERT_TRUE(f->Flush().ok());
  EXPECT_FALSE(f->DiscardUnstored()) << "nothing failed, nothing to give up";
  auto want = stored;
  const auto page2 = Pattern(4096, 62);
  std::copy(page2.begin(), page2.end(), want.begin() + 2 * 4096);
  EXPECT_EQ(ReadAll(*f), want);

  ASSERT_EQ(*f->Write(4096, Pattern(100, 63)), 100u);  // into a stored page, then an append
  ASSERT_EQ(*f->Write(stored.size(), more), more.size());
  fault->fail_writes = true;
  EXPECT_FALSE(f->Flush().ok());
  EXPECT_EQ(f->size(), stored.size() + more.size()) << "kept for a retry until given up";
  fault->fail_writes = false;
  EXPECT_TRUE(f->DiscardUnstored());
  EXPECT_EQ(f->size(), want.size());
  EXPECT_EQ(ReadAll(*f), want);
  EXPECT_FALSE(f->DiscardUnstored());
  ASSERT_TRUE(f->Flush().ok()) << "nothing left to store";

  // Writes work on from the stored file, and are stored.
  const auto tail = Pattern(5000, 64);
  ASSERT_EQ(*f->Write(want.size(), tail), tail.size());
  want.insert(want.end(), tail.begin(), tail.end());
  ASSERT_TRUE(f->Flush().ok());
  EXPECT_EQ(ReadAll(*f), want);
  f.reset();
  auto g = Open("d");
  EXPECT_EQ(ReadAll(*g), want) << "after reopening";
}

// A daemon builds its volume and then forks (fuse_daemonize), and threads do not survive
// fork(): large (parallel) writes must work in a child whether or not the parent had used the
// crypto workers before forking. The first case hung before the workers started lazily.
void WriteInForkedChild(PageLayer& layer, TestBackend& backend) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(20);  // a hang fails the child instead of the suite
    auto f = layer.Open(backend.Open("forked"), "forked");
    if (!f.ok()) ::_exit(2);
    const auto data = Pattern(256 * 4096, 5);  // large: sealed in parallel pieces
    auto n = (*f)->Write(0, data);
    if (!n.ok() || *n != data.size() || !(*f)->Flush().ok()) ::_exit(3);
    std::vector<uint8_t> back(data.size());
    auto r = (*f)->Read(0, back);
    ::_exit(r.ok() && back == data ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung or crashed (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_P(PageLayerTest, ParallelWritesWorkInAChildForkedBeforeFirstUse) {
  WriteInForkedChild(*layer_, backend_);
}

TEST_P(PageLayerTest, ParallelWritesWorkInAChildForkedAfterUse) {
  auto f = Open("parent");
  WriteAll(*f, 0, Pattern(256 * 4096, 6));  // starts the workers in the parent
  ASSERT_TRUE(f->Flush().ok());
  WriteInForkedChild(*layer_, backend_);
}

// --- Randomized comparison against a plain model. ---

TEST_P(PageLayerTest, RandomOperationsMatchAModel) {
  const char* env_seed = std::getenv("SIGILFS_SEED");
  const uint32_t seed = env_seed ? static_cast<uint32_t>(std::strtoul(env_seed, nullptr, 10))
                                 : static_cast<uint32_t>(std::random_device{}());
  const bool is_long = std::getenv("SIGILFS_LONG") != nullptr;
  const int ops = is_long ? 100000 : 4000;
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (rerun with SIGILFS_SEED=" + std::to_string(seed) + ")");
  std::mt19937 rng(seed);
  PageLayerOptions o;
  o.cache_bytes = 64 * 4096;  // a small cache so eviction and reloading are exercised
  o.writeback_pages = 8;
  o.readahead_pages = 4;
  Reconfigure(o);

  std::vector<uint8_t> model;
  auto f = Open("m");
  auto rand_below = [&](uint64_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<uint64_t>(0, n - 1)(rng);
  };
  for (int i = 0; i < ops; ++i) {
    const int op = static_cast<int>(rand_below(100));
    const uint64_t span = model.size() + 3 * 4096;
    if (op < 45) {  // write at a random offset, random length (aligned now and then)
      uint64_t off = rand_below(span);
      uint64_t len = 1 + rand_below(rand_below(4) == 0 ? 5 * 4096 : 300);
      if (rand_below(4) == 0) off -= off % 4096, len = 4096 * (1 + rand_below(3));
      if (rand_below(10) == 0) len = 1 + rand_below(40 * 4096);   // large: cached
      if (rand_below(50) == 0) len = 1 + rand_below(200 * 4096);  // larger: past it from 512 KiB
      auto data = Pattern(len, static_cast<uint32_t>(rng()));
      ASSERT_EQ(*f->Write(off, data), len) << "op " << i;
      if (model.size() < off + len) model.resize(off + len, 0);
      std::copy(data.begin(), data.end(), model.begin() + static_cast<long>(off));
    } else if (op < 80) {  // read
      uint64_t off = rand_below(span);
      std::vector<uint8_t> buf(1 + rand_below(rand_below(8) == 0 ? 40 * 4096 : 3 * 4096));
      if (rand_below(4) == 0) off -= off % 4096;
      auto n = f->Read(off, buf);
      ASSERT_TRUE(n.ok()) << "op " << i << ": " << n.status().ToString();
      const size_t expect_n =
          off >= model.size() ? 0 : std::min<size_t>(buf.size(), model.size() - off);
      ASSERT_EQ(*n, expect_n) << "op " << i;
      ASSERT_TRUE(std::equal(buf.begin(), buf.begin() + static_cast<long>(expect_n),
                             model.begin() + static_cast<long>(off)))
          << "op " << i << " read at " << off;
    } else if (op < 90) {  // truncate
      uint64_t to = rand_below(span);
      if (rand_below(8) == 0) to = 0;
      ASSERT_TRUE(f->Truncate(to).ok()) << "op " << i;
      model.resize(to, 0);
    } else if (op < 95) {  // flush
      ASSERT_TRUE(f->Flush().ok()) << "op " << i;
    } else {  // close and reopen
      ASSERT_TRUE(f->Flush().ok());
      f.reset();
      f = Open("m");
      ASSERT_EQ(f->size(), model.size()) << "op " << i;
    }
    ASSERT_EQ(f->size(), model.size()) << "op " << i;
  }
  ASSERT_TRUE(f->Flush().ok());
  f.reset();
  auto g = Open("m");
  EXPECT_EQ(ReadAll(*g), model);
}

std::string ParamName(
    const ::testing::TestParamInfo<std::tuple<BackendKind, crypt::AeadAlgorithm>>& info) {
  return test::BackendName(std::get<0>(info.param)) + crypt::AeadName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Backends, PageLayerTest,
    ::testing::Combine(::testing::Values(BackendKind::kMemory, BackendKind::kPosix),
                       ::testing::Values(crypt::AeadAlgorithm::kAes256Gcm,
                                         crypt::AeadAlgorithm::kXChaCha20Poly1305)),
    ParamName);
INSTANTIATE_TEST_SUITE_P(Backends, TamperTest,
                         ::testing::Combine(::testing::Values(BackendKind::kMemory,
                                                              BackendKind::kPosix),
                                            ::testing::Values(crypt::AeadAlgorithm::kAes256Gcm)),
                         ParamName);

}  // namespace
}  // namespace sigilfs::core
