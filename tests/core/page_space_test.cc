// Tests of fallocate (reserve, punch hole, zero range) and SEEK_DATA / SEEK_HOLE in the page
// layer, on the memory and POSIX backends.
#include <gtest/gtest.h>
#include <linux/falloc.h>

#include <algorithm>

#include "sigilfs/core/page_layer.h"
#include "sigilfs/crypt/random.h"
#include "test_support/backends.h"
#include "test_support/contents.h"
#include "test_support/pattern.h"

namespace sigilfs::core {
namespace {

using test::BackendKind;
using test::Pattern;
using test::ReadAll;
using test::WriteAll;

constexpr uint64_t kPage = 4096;

class PageSpaceTest : public ::testing::TestWithParam<BackendKind> {
 protected:
  PageSpaceTest() : backend_(GetParam()) { MakeLayer({}); }

  void MakeLayer(PageLayerOptions options) {
    crypt::RandomBytes(key_);
    layer_ = std::make_unique<PageLayer>(crypt::AeadAlgorithm::kAes256Gcm, key_, options);
  }

  std::unique_ptr<FileContents> Open(const std::string& name) {
    auto f = layer_->Open(backend_.Open(name), name);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(f).value() : nullptr;
  }

  // The stored unit of page `index` in the cipher file `name`.
  std::vector<uint8_t> RawUnit(const std::string& name, uint64_t index) {
    const auto raw = backend_.Raw(name);
    const PageGeometry& g = layer_->geometry();
    const auto begin = static_cast<ptrdiff_t>(g.UnitOffset(index));
    const auto end = std::min<ptrdiff_t>(begin + static_cast<ptrdiff_t>(g.unit_size()),
                                         static_cast<ptrdiff_t>(raw.size()));
    return {raw.begin() + begin, raw.begin() + end};
  }

  static bool AllZero(const std::vector<uint8_t>& v) {
    return std::all_of(v.begin(), v.end(), [](uint8_t b) { return b == 0; });
  }

  std::array<uint8_t, 32> key_;
  test::TestBackend backend_;
  std::unique_ptr<PageLayer> layer_;
};

TEST_P(PageSpaceTest, PunchedRangeReadsZerosAndWholePagesBecomeHoles) {
  auto model = Pattern(20 * kPage + 123, 1);
  {
    auto f = Open("a");
    WriteAll(*f, 0, model);
    const uint64_t from = 2 * kPage + 100, to = 10 * kPage + 50;
    ASSERT_TRUE(f->Allocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, from, to - from).ok());
    std::fill(model.begin() + from, model.begin() + to, 0);
    EXPECT_EQ(f->size(), model.size());
    EXPECT_EQ(ReadAll(*f), model);
  }
  for (uint64_t page = 3; page < 10; ++page) EXPECT_TRUE(AllZero(RawUnit("a", page))) << page;
  EXPECT_FALSE(AllZero(RawUnit("a", 2)));   // partly punched: sealed zeros and data
  EXPECT_FALSE(AllZero(RawUnit("a", 10)));  // likewise
  auto g = Open("a");
  EXPECT_EQ(g->size(), model.size());
  EXPECT_EQ(ReadAll(*g), model);
  EXPECT_EQ(g->counters().Get(PageCounter::kHolesRead), 7u);
}

TEST_P(PageSpaceTest, PunchingEverythingKeepsTheLastPageSealed) {
  const uint64_t size = 12 * kPage;
  {
    auto f = Open("a");
    WriteAll(*f, 0, Pattern(size, 2));
    ASSERT_TRUE(f->Allocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, size + kPage).ok());
    EXPECT_EQ(ReadAll(*f), std::vector<uint8_t>(size, 0));
  }
  // Were the last unit a hole, a file cut back at a page boundary could not be told from it.
  EXPECT_FALSE(AllZero(RawUnit("a", 11)));
  EXPECT_TRUE(AllZero(RawUnit("a", 5)));
  auto g = Open("a");
  EXPECT_EQ(ReadAll(*g), std::vector<uint8_t>(size, 0));
}

TEST_P(PageSpaceTest, StrictHolesModePunchesWithSealedZeros) {
  MakeLayer({.strict_holes = true});
  auto model = Pattern(8 * kPage, 3);
  {
    auto f = Open("a");
    WriteAll(*f, 0, model);
    ASSERT_TRUE(f->Allocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, kPage, 5 * kPage).ok());
  }
  std::fill(model.begin() + kPage, model.begin() + 6 * kPage, 0);
  for (uint64_t page = 1; page < 6; ++page) EXPECT_FALSE(AllZero(RawUnit("a", page))) << page;
  auto g = Open("a");
  EXPECT_EQ(ReadAll(*g), model);  // no EIO: nothing was left as a hole
}

TEST_P(PageSpaceTest, ReservingGrowsTheFileWithZerosUnlessKeepSize) {
  auto f = Open("a");
  WriteAll(*f, 0, Pattern(100, 4));
  ASSERT_TRUE(f->Allocate(0, 3 * kPage, 10000).ok());
  EXPECT_EQ(f->size(), 3 * kPage + 10000);
  ASSERT_TRUE(f->Allocate(FALLOC_FL_KEEP_SIZE, 0, 100 * kPage).ok());
  EXPECT_EQ(f->size(), 3 * kPage + 10000);
  ASSERT_TRUE(f->Allocate(0, 0, 10).ok());  // inside the file: the size stays
  EXPECT_EQ(f->size(), 3 * kPage + 10000);
  auto expect = Pattern(100, 4);
  expect.resize(3 * kPage + 10000, 0);
  EXPECT_EQ(ReadAll(*f), expect);
  f.reset();
  auto g = Open("a");
  EXPECT_EQ(g->size(), expect.size());
  EXPECT_EQ(ReadAll(*g), expect);
}

TEST_P(PageSpaceTest, ZeroRangeZerosAndGrowsUnlessKeepSize) {
  auto model = Pattern(6 * kPage, 5);
  auto f = Open("a");
  WriteAll(*f, 0, model);
  ASSERT_TRUE(f->Allocate(FALLOC_FL_ZERO_RANGE, 100, 3 * kPage).ok());
  std::fill(model.begin() + 100, model.begin() + 100 + 3 * kPage, 0);
  EXPECT_EQ(ReadAll(*f), model);
  ASSERT_TRUE(f->Allocate(FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 5 * kPage, 4 * kPage).ok());
  std::fill(model.begin() + 5 * kPage, model.end(), 0);
  EXPECT_EQ(ReadAll(*f), model);
  ASSERT_TRUE(f->Allocate(FALLOC_FL_ZERO_RANGE, 5 * kPage, 4 * kPage).ok());
  model.resize(9 * kPage, 0);
  EXPECT_EQ(ReadAll(*f), model);
}

TEST_P(PageSpaceTest, RefusesWhatLinuxRefuses) {
  auto f = Open("a");
  WriteAll(*f, 0, Pattern(3 * kPage, 6));
  EXPECT_EQ(f->Allocate(FALLOC_FL_COLLAPSE_RANGE, 0, kPage).sys_errno(), EOPNOTSUPP);
  EXPECT_EQ(f->Allocate(FALLOC_FL_PUNCH_HOLE, 0, kPage).sys_errno(), EOPNOTSUPP);
  EXPECT_EQ(f->Allocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 0, 1)
                .sys_errno(),
            EOPNOTSUPP);
  EXPECT_EQ(f->Allocate(0, 0, 0).sys_errno(), EINVAL);
  EXPECT_EQ(f->Allocate(0, kMaxFileSize, 1).sys_errno(), EFBIG);
  ASSERT_TRUE(f->EnableVerity({}).ok());
  EXPECT_EQ(f->Allocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, kPage).sys_errno(), EPERM);
  EXPECT_EQ(f->Allocate(0, 0, 10 * kPage).sys_errno(), EPERM);
}

TEST_P(PageSpaceTest, AFullDiskFailsTheReserveBeforeTheSizeChanges) {
  auto faulty = std::make_unique<FaultyBackingFile>(backend_.Open("a"), FaultPlan{});
  FaultyBackingFile* plan = faulty.get();
  auto f = std::move(layer_->Open(std::move(faulty), "a")).value();
  WriteAll(*f, 0, Pattern(kPage, 7));
  ASSERT_TRUE(f->Flush().ok());
  plan->set_plan({.write_budget = 0});
  EXPECT_EQ(f->Allocate(0, 0, 50 * kPage).sys_errno(), ENOSPC);
  EXPECT_EQ(f->size(), kPage);
  EXPECT_EQ(ReadAll(*f), Pattern(kPage, 7));
}

// A file with data at pages 0-1, 20 and 39 (its last), holes between: the seek points fall on
// page boundaries, within the store's block granularity of the true ones.
TEST_P(PageSpaceTest, SeekFindsDataAndHoles) {
  auto f = Open("a");
  WriteAll(*f, 0, Pattern(2 * kPage, 8));
  ASSERT_TRUE(f->Truncate(40 * kPage).ok());
  WriteAll(*f, 20 * kPage, Pattern(kPage, 9));  // left dirty: seeking writes it back first
  auto seek = [&](uint64_t at, bool data) {
    auto r = f->SeekData(at, data);
    EXPECT_TRUE(r.ok()) << at << " " << data << ": " << r.status().ToString();
    return r.ok() ? *r : ~uint64_t{0};
  };
  EXPECT_EQ(seek(0, true), 0u);
  EXPECT_EQ(seek(5000, true), 5000u);
  const uint64_t hole = seek(0, false);
  EXPECT_EQ(hole % kPage, 0u);
  EXPECT_GE(hole, 2 * kPage);
  EXPECT_LE(hole, 3 * kPage);  // a unit of page 2 shares a block with page 1's
  const uint64_t data = seek(hole, true);
  EXPECT_EQ(data % kPage, 0u);
  EXPECT_GE(data, 19 * kPage);
  EXPECT_LE(data, 20 * kPage);
  EXPECT_EQ(seek(hole + 10, false), hole + 10);  // already in a hole
  const uint64_t hole2 = seek(20 * kPage, false);
  EXPECT_GE(hole2, 21 * kPage);
  EXPECT_LE(hole2, 22 * kPage);
  EXPECT_EQ(seek(39 * kPage + 7, false), 40 * kPage);  // the end counts as a hole
  const uint64_t last_data = seek(hole2, true);        // the last page, sealed even when grown
  EXPECT_GE(last_data, 38 * kPage);
  EXPECT_LE(last_data, 39 * kPage);
  EXPECT_EQ(f->SeekData(40 * kPage, true).status().sys_errno(), ENXIO);
  EXPECT_EQ(f->SeekData(40 * kPage, false).status().sys_errno(), ENXIO);
  // The holes read as zeros and the data as written.
  std::vector<uint8_t> buf(data - hole);
  ASSERT_EQ(*f->Read(hole, buf), buf.size());
  EXPECT_TRUE(AllZero(buf));
}

// A page next to a hole whose unit shares a block of the store with its neighbour's data (units
// are 4124 bytes, blocks 4096) is all zeros, so a hole too: seeking answers the page boundaries
// exactly, and never puts the data's start on a page that reads as a hole. Holes left by a
// write past the end and by a punch, from every offset around their edges.
TEST_P(PageSpaceTest, SeekPutsTheEdgesOfHolesOnTheExactPages) {
  auto f = Open("a");
  WriteAll(*f, 0, Pattern(2 * kPage, 11));
  WriteAll(*f, 100 * kPage, Pattern(20 * kPage, 12));  // pages 100-119; 119 is the last
  ASSERT_TRUE(f->Allocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 105 * kPage, 5 * kPage).ok());
  const uint64_t size = 120 * kPage;
  ASSERT_EQ(f->size(), size);
  auto is_data = [](uint64_t page) {
    return page < 2 || (page >= 100 && page < 105) || page >= 110;
  };
  auto expect_seek = [&](uint64_t at, bool data) {
    uint64_t want = at;
    while (want < size && is_data(want / kPage) != data) want = (want / kPage + 1) * kPage;
    auto r = f->SeekData(at, data);
    ASSERT_TRUE(r.ok()) << at << " " << data << ": " << r.status().ToString();
    EXPECT_EQ(*r, std::min(want, size)) << (data ? "SEEK_DATA" : "SEEK_HOLE") << " from " << at;
  };
  for (const uint64_t page : {0, 1, 2, 50, 99, 100, 104, 105, 107, 109, 110, 119}) {
    for (const int64_t delta : {-1, 0, 1}) {
      if (page == 0 && delta < 0) continue;
      const uint64_t at = page * kPage + static_cast<uint64_t>(delta);
      expect_seek(at, true);
      expect_seek(at, false);
    }
  }
  EXPECT_EQ(f->SeekData(size, true).status().sys_errno(), ENXIO);
  EXPECT_EQ(f->SeekData(size, false).status().sys_errno(), ENXIO);
  // Reopened: the answers come from the stored file alone.
  f.reset();
  f = Open("a");
  expect_seek(3 * kPage, true);
  expect_seek(106 * kPage, true);
  expect_seek(0, false);
  expect_seek(101 * kPage, false);
}

TEST_P(PageSpaceTest, AFileWithoutHolesIsAllData) {
  auto f = Open("a");
  WriteAll(*f, 0, Pattern(10 * kPage + 1, 10));
  EXPECT_EQ(*f->SeekData(0, false), 10 * kPage + 1);
  EXPECT_EQ(*f->SeekData(3 * kPage, true), 3 * kPage);
  auto empty = Open("b");
  EXPECT_EQ(empty->SeekData(0, true).status().sys_errno(), ENXIO);
}

INSTANTIATE_TEST_SUITE_P(Backends, PageSpaceTest,
                         ::testing::Values(BackendKind::kMemory, BackendKind::kPosix),
                         [](const auto& info) { return test::BackendName(info.param); });

}  // namespace
}  // namespace sigilfs::core
