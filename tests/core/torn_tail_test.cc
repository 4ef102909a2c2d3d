// Crash consistency of the page layer. A crash of the daemon stops a write-back somewhere: the
// backing file holds a prefix of the writes (simulated here by a backing file that stores the
// first `budget` bytes written, then fails). What is left must open, read every page as it was
// before or after the change except at most the one page being written, which fails and never
// gives other plaintext; a torn tail must not pass for a sealed file; a writer must be able to
// repair it; and a deliberate cut must still be detected.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <set>

#include "sigilfs/core/page_layer.h"
#include "sigilfs/core/verity.h"
#include "sigilfs/crypt/random.h"
#include "test_support/backends.h"
#include "test_support/param_names.h"
#include "test_support/pattern.h"

namespace sigilfs::core {
namespace {

using test::BackendKind;
using test::Pattern;
using test::TestBackend;

using Change = std::function<void(FileContents&)>;

class TornTailTest
    : public ::testing::TestWithParam<std::tuple<BackendKind, crypt::AeadAlgorithm>> {
 protected:
  TornTailTest() : backend_(std::get<0>(GetParam())) {
    crypt::RandomBytes(key_);
    PageLayerOptions o;
    o.crypto_threads = 4;  // pieces finish sealing out of order; they must be written in order
    layer_ = std::make_unique<PageLayer>(std::get<1>(GetParam()), key_, o);
  }

  const PageGeometry& geometry() const { return layer_->geometry(); }
  // Sets the bytes of cipher file `name`, creating it first if need be.
  void Put(const std::string& name, const std::vector<uint8_t>& bytes) {
    (void)backend_.Open(name);
    backend_.SetRaw(name, bytes);
  }
  uint64_t Unit(uint64_t i) const { return geometry().UnitOffset(i); }

  std::unique_ptr<FileContents> Open(const std::string& name) {
    auto f = layer_->Open(backend_.Open(name), name);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(f).value() : nullptr;
  }

  // The cipher bytes of a file holding `plain`.
  std::vector<uint8_t> CipherOf(const std::vector<uint8_t>& plain) {
    Put("w", {});
    auto f = Open("w");
    EXPECT_EQ(*f->Write(0, plain), plain.size());
    EXPECT_TRUE(f->Flush().ok());
    return backend_.Raw("w");
  }

  // Page `i` as a read of a file of `size` bytes holding `plain` shows it (zeros past its end).
  static std::vector<uint8_t> PageOf(const std::vector<uint8_t>& plain, uint64_t i, uint64_t size) {
    const uint64_t begin = i * kPageSize, end = std::min<uint64_t>(size, begin + kPageSize);
    std::vector<uint8_t> out(end - begin, 0);
    for (uint64_t b = begin; b < end && b < plain.size(); ++b) out[b - begin] = plain[b];
    return out;
  }

  // A file holding `before` (written back), then `change` made through a backing file that
  // stores only the first `budget` bytes written (-1: all) and fails every write after: the
  // cipher bytes left, and how many bytes the change wrote.
  std::vector<uint8_t> CrashState(const std::vector<uint8_t>& before, int64_t budget,
                                  const Change& change, uint64_t* written = nullptr) {
    Put("c", before.empty() ? std::vector<uint8_t>{} : CipherOf(before));
    FaultPlan plan;
    plan.write_budget = budget;
    plan.torn_writes = true;
    plan.crash = true;
    auto f = layer_->Open(std::make_unique<FaultyBackingFile>(backend_.Open("c"), plan), "c");
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    if (!f.ok()) return {};
    change(**f);
    const Status flushed = (*f)->Flush();
    if (budget < 0) {
      EXPECT_TRUE(flushed.ok()) << flushed.ToString();
    }
    if (written) *written = (*f)->counters().Get(PageCounter::kBackingBytesWritten);
    auto state = backend_.Raw("c");
    f->reset();  // its last flush fails too: the budget is spent
    EXPECT_EQ(backend_.Raw("c"), state);
    return state;
  }

  // Opens `state`, the file after a crash stopped a change from `before` to `after`, and checks
  // it: no shorter than the shorter of them, its size the one its length gives, every page reading
  // as before or after the change, at most one page failing (one the change was writing, or the
  // last, or `resealed`: a page whose bytes stay but which the change seals anew), nothing
  // changed by opening it. Returns the pages that failed.
  std::set<uint64_t> CheckCrashState(const std::vector<uint8_t>& state,
                                     const std::vector<uint8_t>& before,
                                     const std::vector<uint8_t>& after,
                                     std::optional<uint64_t> resealed = std::nullopt) {
    SCOPED_TRACE("cipher length " + std::to_string(state.size()));
    Put("s", state);
    std::set<uint64_t> failed;
    auto f = Open("s");
    if (!f) return failed;
    EXPECT_FALSE(f->sealed());
    const uint64_t size = f->size();
    EXPECT_GE(size, std::min(before.size(), after.size()));
    auto plain_size = geometry().PlainSize(state.size());
    EXPECT_TRUE(plain_size.ok() && *plain_size == size);
    const uint64_t pages = PageGeometry::PageCount(size);
    for (uint64_t i = 0; i < pages; ++i) {
      std::vector<uint8_t> buf(kPageSize);
      auto n = f->Read(i * kPageSize, buf);
      if (!n.ok()) {
        EXPECT_TRUE(n.status().code() == Code::kAuthFailed || n.status().code() == Code::kCorrupt)
            << n.status().ToString();
        const bool changed = PageOf(before, i, size) != PageOf(after, i, size) || resealed == i;
        EXPECT_TRUE(changed || i + 1 == pages) << "page " << i << " failed, yet was not written";
        failed.insert(i);
        continue;
      }
      buf.resize(*n);
      EXPECT_TRUE(buf == PageOf(before, i, size) || buf == PageOf(after, i, size))
          << "page " << i << " reads neither as before nor as after the change";
    }
    EXPECT_LE(failed.size(), 1u);
    EXPECT_EQ(backend_.Raw("s"), state) << "opening the file changed it";
    return failed;
  }

  // Budgets that stop the write-back everywhere it matters: at and around every unit boundary
  // of the bytes written (remainders of 1, 8 — which looks sealed — and overhead + 1 bytes),
  // at every 4 KiB (where the kernel cuts a write that a fatal signal stops), and at a few
  // random places.
  std::vector<int64_t> Budgets(uint64_t total) const {
    const auto t = static_cast<int64_t>(total);
    std::set<int64_t> out = {0, t};
    const auto u = static_cast<int64_t>(geometry().unit_size());
    const auto o = static_cast<int64_t>(geometry().overhead());
    for (int64_t b = 0; b <= t; b += u)
      for (int64_t d : {int64_t{0}, int64_t{1}, int64_t{8}, o + 1}) out.insert(std::min(b + d, t));
    for (int64_t b = 4096; b < t; b += 4096) out.insert(b);
    std::mt19937 rng(static_cast<uint32_t>(total));
    for (int i = 0; i < 20; ++i) out.insert(static_cast<int64_t>(rng() % (total + 1)));
    return {out.begin(), out.end()};
  }

  // Runs `change` on `before`, stopped at every budget, and checks each state. With `growing`,
  // the one page that may fail is the file's last; `resealed` as for CheckCrashState. Returns
  // how many states had a torn tail.
  size_t CheckEveryStop(const std::vector<uint8_t>& before, const std::vector<uint8_t>& after,
                        const Change& change, bool growing,
                        std::optional<uint64_t> resealed = std::nullopt) {
    // Not stopped: the change is complete, and the model of it right.
    uint64_t total = 0;
    const auto complete = CrashState(before, -1, change, &total);
    EXPECT_TRUE(CheckCrashState(complete, before, after).empty());
    {
      auto f = Open("s");
      std::vector<uint8_t> back(f->size() + 1);
      auto n = f->Read(0, back);
      EXPECT_TRUE(n.ok()) << n.status().ToString();
      back.resize(n.ok() ? *n : 0);
      EXPECT_TRUE(back == after) << "the change did not make `after`";
    }
    EXPECT_GT(total, 0u);
    size_t torn = 0;
    for (int64_t budget : Budgets(total)) {
      // A crash never tears the 32-byte header of a new file: it is written alone, in one page.
      if (before.empty() && budget > 0 && budget < static_cast<int64_t>(kFileHeaderSize)) continue;
      SCOPED_TRACE("budget " + std::to_string(budget) + " of " + std::to_string(total));
      const auto state = CrashState(before, budget, change);
      if (geometry().TornTail(state.size())) ++torn;
      const auto failed = CheckCrashState(state, before, after, resealed);
      if (growing && !failed.empty()) {
        auto size = geometry().PlainSize(state.size());
        EXPECT_TRUE(size.ok() && *failed.begin() + 1 == PageGeometry::PageCount(*size))
            << "page " << *failed.begin() << " failed, not the last one";
      }
      if (::testing::Test::HasFailure()) break;
    }
    return torn;
  }

  std::array<uint8_t, 32> key_;
  TestBackend backend_;
  std::unique_ptr<PageLayer> layer_;
};

std::vector<uint8_t> Written(std::vector<uint8_t> before, uint64_t offset,
                             const std::vector<uint8_t>& data) {
  if (before.size() < offset + data.size()) before.resize(offset + data.size(), 0);
  std::copy(data.begin(), data.end(), before.begin() + static_cast<long>(offset));
  return before;
}

TEST_P(TornTailTest, AGrowingFileStoppedAtAnyByteFailsAtMostItsLastPage) {
  struct Case {
    const char* what;
    std::vector<uint8_t> before;
    uint64_t offset;
    std::vector<uint8_t> data;
  };
  const Case cases[] = {
      // A short old last page re-sealed as full, then 129 pages past the cache: 130 pages
      // written back together, in pieces sealed in parallel.
      {"large append", Pattern(5 * 4096 + 100, 1), 5 * 4096 + 100, Pattern(130 * 4096 + 7, 2)},
      // A new file: the header, then its units.
      {"new file", {}, 0, Pattern(20 * 4096 + 1, 3)},
      // A full old last page re-sealed as not-last, and a short new one from the cache.
      {"small append", Pattern(8 * 4096, 4), 8 * 4096, Pattern(3000, 5)},
      // Past the end: the old last page, a hole, the new last page.
      {"write past the end", Pattern(3 * 4096 + 10, 6), 9 * 4096 + 5, Pattern(200, 7)},
  };
  size_t torn = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const auto after = Written(c.before, c.offset, c.data);
    torn += CheckEveryStop(
        c.before, after, [&](FileContents& f) { (void)f.Write(c.offset, c.data); }, true);
    if (HasFailure()) return;
  }
  EXPECT_GT(torn, 0u) << "no stop left a tail too short for a nonce and a tag";
}

TEST_P(TornTailTest, OverwritesAndTruncatesStoppedAtAnyByteFailAtMostOnePage) {
  const auto before = Pattern(20 * 4096 + 33, 8);
  {
    SCOPED_TRACE("overwrites in the middle and an append");
    const auto a = Pattern(100, 9), b = Pattern(2 * 4096, 10), c = Pattern(5000, 11);
    auto after =
        Written(Written(Written(before, 3 * 4096 + 50, a), 10 * 4096, b), before.size(), c);
    CheckEveryStop(
        before, after,
        [&](FileContents& f) {
          (void)f.Write(3 * 4096 + 50, a);
          (void)f.Write(10 * 4096, b);
          (void)f.Write(before.size(), c);
        },
        false);
  }
  for (uint64_t to : {uint64_t{7 * 4096 + 10}, uint64_t{7 * 4096}, uint64_t{25 * 4096 + 1}}) {
    SCOPED_TRACE("truncate to " + std::to_string(to));
    auto after = before;
    after.resize(to, 0);
    // A shrinking truncate re-seals the new last page in place before it cuts (so that a
    // failed cut leaves every byte readable): a crash while that unit is written may fail it,
    // in the middle of the file still long. The cut itself is not budgeted.
    std::optional<uint64_t> resealed;
    if (to < before.size()) resealed = PageGeometry::PageCount(to) - 1;
    CheckEveryStop(
        before, after, [&](FileContents& f) { (void)f.Truncate(to); }, false, resealed);
  }
}

TEST_P(TornTailTest, ATailOfEightBytesIsNotTakenForASeal) {
  const auto plain = Pattern(18 * 4096, 12);
  const auto full = CipherOf(plain);
  struct Case {
    const char* what;
    uint64_t length;
    std::optional<uint64_t> trailer;  // what the last 8 bytes are made to say, if anything
  };
  const Case cases[] = {
      {"ciphertext", Unit(17) + 8, std::nullopt},
      // A trailer that accounts for exactly this length (data of 1..4096 bytes, no tree, the
      // record in unit 16), but unit 16 is a data page and page 0 is not sealed as last.
      {"a trailer of the right size", Unit(17) + 8, 100},
      // Size 0 and the length of an empty sealed file, but unit 0 holds data, not a hole.
      {"a trailer of an empty file", Unit(1) + 8, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<uint8_t> raw(full.begin(), full.begin() + static_cast<long>(c.length));
    ASSERT_TRUE(verity::LooksSealed(geometry(), raw.size()));
    ASSERT_TRUE(geometry().TornTail(raw.size()));
    if (c.trailer) {
      for (size_t b = 0; b < 8; ++b)
        raw[raw.size() - 8 + b] = static_cast<uint8_t>(*c.trailer >> (8 * b));
      ASSERT_TRUE(verity::LayoutFromTrailer(geometry(), raw.size(),
                                            ByteSpan(raw).last(verity::kTrailerSize))
                      .ok());
    }
    Put("a", raw);
    auto f = Open("a");
    ASSERT_TRUE(f);
    EXPECT_FALSE(f->sealed());
    const uint64_t whole = (c.length - kFileHeaderSize) / geometry().unit_size();
    EXPECT_EQ(f->size(), whole * 4096 + 1);
    std::vector<uint8_t> buf(whole * 4096);
    auto n = f->Read(0, buf);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ(*n, buf.size());
    EXPECT_TRUE(std::equal(buf.begin(), buf.end(), plain.begin()));
    auto torn = f->Read(whole * 4096, buf);
    ASSERT_FALSE(torn.ok());
    EXPECT_EQ(torn.status().code(), Code::kCorrupt);
    EXPECT_EQ(backend_.Raw("a"), raw) << "the file was cut";
  }
}

TEST_P(TornTailTest, ASealStoppedBeforeItsRecordWasWrittenIsUndone) {
  for (size_t size : {size_t{0}, size_t{20000}, size_t{130 * 4096 + 5}}) {
    SCOPED_TRACE(size);
    const auto plain = Pattern(size, 13);
    Put("a", {});
    std::vector<uint8_t> unsealed;
    {
      auto f = Open("a");
      if (size > 0) {
        ASSERT_EQ(*f->Write(0, plain), size);
      }
      ASSERT_TRUE(f->Flush().ok());
      unsealed = backend_.Raw("a");
      ASSERT_TRUE(f->EnableVerity({}).ok());
    }
    // As if the crash came right after the trailer: no header flag, no tree, no record (the
    // hole they would have filled), and the last page not yet bound.
    const auto layout = verity::LayoutOf(geometry(), size, /*pinned=*/true);
    auto raw = backend_.Raw("a");
    ASSERT_EQ(raw.size(), layout.cipher_size);
    raw[10] &= static_cast<uint8_t>(~kFileFlagsSeal);
    std::fill(raw.begin() + static_cast<long>(Unit(layout.tree_first_unit)),
              raw.end() - verity::kTrailerSize, 0);
    if (size > 0)
      std::copy(unsealed.begin() + static_cast<long>(kFileHeaderSize), unsealed.end(),
                raw.begin() + static_cast<long>(kFileHeaderSize));
    Put("a", raw);
    auto f = Open("a");
    ASSERT_TRUE(f);
    EXPECT_FALSE(f->sealed());
    EXPECT_EQ(f->size(), size);
    EXPECT_EQ(backend_.Raw("a"), raw) << "an open changes nothing";
    std::vector<uint8_t> back(size + 1);
    auto n = f->Read(0, back);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    back.resize(*n);
    EXPECT_TRUE(back == plain);
    // The first change cuts the interrupted seal's tail, then makes its own.
    ASSERT_TRUE(f->Truncate(size + 1).ok());
    EXPECT_EQ(backend_.Raw("a").size(), geometry().CipherSize(size + 1));
  }
  // Without the record, a last data page that does not open as the last proves nothing: the
  // file is left as it is.
  const auto plain = Pattern(20000, 14);
  Put("a", {});
  {
    auto f = Open("a");
    ASSERT_EQ(*f->Write(0, plain), plain.size());
    ASSERT_TRUE(f->EnableVerity({}).ok());
  }
  const auto layout = verity::LayoutOf(geometry(), plain.size(), /*pinned=*/true);
  auto raw = backend_.Raw("a");
  raw[10] &= static_cast<uint8_t>(~kFileFlagsSeal);
  std::fill(raw.begin() + static_cast<long>(Unit(layout.record_unit)),
            raw.end() - verity::kTrailerSize, 0);
  raw[Unit(layout.data_pages - 1) + 40] ^= 1;
  Put("a", raw);
  auto f = Open("a");
  ASSERT_TRUE(f);
  EXPECT_EQ(backend_.Raw("a"), raw);
}

TEST_P(TornTailTest, AWriterRepairsATornTailByTruncatingOrRewritingIt) {
  const auto plain = Pattern(12 * 4096, 15);
  const auto full = CipherOf(plain);
  const uint64_t overhead = geometry().overhead();
  // A tail of 5 bytes (no room for a nonce and tag), and one of 2000 (a short, torn unit).
  for (uint64_t tail : {uint64_t{5}, uint64_t{2000}}) {
    SCOPED_TRACE("tail of " + std::to_string(tail));
    const std::vector<uint8_t> torn(full.begin(),
                                    full.begin() + static_cast<long>(Unit(11) + tail));
    const uint64_t size = 11 * 4096 + (tail <= overhead ? 1 : tail - overhead);
    auto reset = [&] {
      Put("a", torn);
      auto f = Open("a");
      EXPECT_EQ(f->size(), size);
      return f;
    };
    const auto bytes = Pattern(10, 16);
    {
      // What needs the torn page's bytes fails, before anything changes: a partial write into
      // it, an append, a write or a truncate past it (both re-seal it as not-last).
      auto f = reset();
      EXPECT_FALSE(f->Write(11 * 4096 + 1, bytes).ok());
      EXPECT_FALSE(f->Write(size, bytes).ok());
      EXPECT_FALSE(f->Write(20 * 4096, bytes).ok());
      EXPECT_FALSE(f->Truncate(30 * 4096).ok());
      // A large aligned write past it goes past the cache, and fails before the size changes.
      EXPECT_FALSE(f->Write(16 * 4096, Pattern(128 * 4096, 18)).ok());
      EXPECT_EQ(f->size(), size);
      EXPECT_TRUE(f->Flush().ok());
      EXPECT_EQ(backend_.Raw("a"), torn);
    }
    {
      // Truncating to the last whole page repairs it; appending works again.
      auto f = reset();
      ASSERT_TRUE(f->Truncate(11 * 4096).ok());
      EXPECT_EQ(backend_.Raw("a").size(), geometry().CipherSize(11 * 4096));
      ASSERT_EQ(*f->Write(11 * 4096, bytes), bytes.size());
      ASSERT_TRUE(f->Flush().ok());
      auto g = Open("a");
      std::vector<uint8_t> back(g->size());
      ASSERT_TRUE(g->Read(0, back).ok());
      auto expect = plain;
      expect.resize(11 * 4096);
      expect.insert(expect.end(), bytes.begin(), bytes.end());
      EXPECT_TRUE(back == expect);
    }
    {
      // Rewriting the whole torn page repairs it too.
      auto f = reset();
      const auto page = Pattern(4096, 17);
      ASSERT_EQ(*f->Write(11 * 4096, page), page.size());
      ASSERT_TRUE(f->Flush().ok());
      auto g = Open("a");
      ASSERT_EQ(g->size(), 12u * 4096);
      std::vector<uint8_t> back(g->size());
      ASSERT_TRUE(g->Read(0, back).ok());
      EXPECT_TRUE(back == Written(plain, 11 * 4096, page));
    }
    {
      // So does truncating to zero (or opening with O_TRUNC).
      auto f = reset();
      ASSERT_TRUE(f->Truncate(0).ok());
      ASSERT_EQ(*f->Write(0, bytes), bytes.size());
      ASSERT_TRUE(f->Flush().ok());
      auto g = Open("a");
      std::vector<uint8_t> back(20);
      ASSERT_EQ(*g->Read(0, back), bytes.size());
    }
  }
}

TEST_P(TornTailTest, ACutAnywhereFailsThePageItCutsAndNoOther) {
  const auto plain = Pattern(4 * 4096, 18);
  const auto full = CipherOf(plain);
  const uint64_t overhead = geometry().overhead();
  for (uint64_t length = Unit(0) + 1; length < full.size(); ++length) {
    const uint64_t rest = (length - kFileHeaderSize) % geometry().unit_size();
    // Every length near a unit boundary, a sample of the others.
    if (rest > overhead + 2 && rest % 97 != 0) continue;
    SCOPED_TRACE("cut to " + std::to_string(length));
    Put("a", std::vector<uint8_t>(full.begin(), full.begin() + static_cast<long>(length)));
    auto f = Open("a");
    ASSERT_TRUE(f);
    const uint64_t pages = PageGeometry::PageCount(f->size());
    ASSERT_GE(pages, 1u);
    std::vector<uint8_t> buf(4096);
    // At a unit boundary the new last page was sealed as not-last; inside a unit, that unit is
    // cut. Either way the last page fails, and the ones before it read.
    for (uint64_t i = 0; i + 1 < pages; ++i) {
      auto n = f->Read(i * 4096, buf);
      ASSERT_TRUE(n.ok()) << i << ": " << n.status().ToString();
      EXPECT_TRUE(std::equal(buf.begin(), buf.end(), plain.begin() + static_cast<long>(i * 4096)));
    }
    auto last = f->Read((pages - 1) * 4096, buf);
    EXPECT_FALSE(last.ok()) << "page " << pages - 1 << " of a cut file read";
  }
}

std::string ParamName(
    const ::testing::TestParamInfo<std::tuple<BackendKind, crypt::AeadAlgorithm>>& info) {
  return test::BackendName(std::get<0>(info.param)) + crypt::AeadName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Backends, TornTailTest,
    ::testing::Combine(::testing::Values(BackendKind::kMemory, BackendKind::kPosix),
                       ::testing::Values(crypt::AeadAlgorithm::kAes256Gcm,
                                         crypt::AeadAlgorithm::kXChaCha20Poly1305)),
    ParamName);

}  // namespace
}  // namespace sigilfs::core
