// KnownAbsentAcls: what is learned stays known until a change, and no answer a change made
// stale survives it, whatever the order of readers and the change.
#include "sigilfs/core/absent_acls.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace sigilfs::core {
namespace {

using Bits = KnownAbsentAcls;

TEST(KnownAbsentAclsTest, LearnedIsKnownUntilAChange) {
  KnownAbsentAcls known;
  Node node;
  EXPECT_FALSE(Bits::Known(node, Bits::kAccess));
  known.Learned(node, Bits::kAccess, known.Now());
  EXPECT_TRUE(Bits::Known(node, Bits::kAccess));
  EXPECT_FALSE(Bits::Known(node, Bits::kDefault));
  EXPECT_FALSE(Bits::Known(node, Bits::kAccess | Bits::kDefault));  // all of them, or no
  known.Learned(node, Bits::kDefault, known.Now());
  EXPECT_TRUE(Bits::Known(node, Bits::kAccess | Bits::kDefault));
  known.Changed(node);
  EXPECT_FALSE(Bits::Known(node, Bits::kAccess));
  EXPECT_FALSE(Bits::Known(node, Bits::kDefault));
}

TEST(KnownAbsentAclsTest, AChangeLeavesKnownOnlyWhatItRemoved) {
  KnownAbsentAcls known;
  Node node;
  known.Learned(node, Bits::kAccess | Bits::kDefault, known.Now());
  known.Changed(node, Bits::kAccess);  // say, the default ACL was set, the access one removed
  EXPECT_TRUE(Bits::Known(node, Bits::kAccess));
  EXPECT_FALSE(Bits::Known(node, Bits::kDefault));
}

TEST(KnownAbsentAclsTest, AnAnswerOlderThanAChangeAnywhereTeachesNothing) {
  KnownAbsentAcls known;
  Node asked, changed;
  const uint64_t since = known.Now();
  known.Changed(changed);  // another node's: the answer may date from before either
  known.Learned(asked, Bits::kAccess, since);
  EXPECT_FALSE(Bits::Known(asked, Bits::kAccess));
  known.Learned(asked, Bits::kAccess, known.Now());
  EXPECT_TRUE(Bits::Known(asked, Bits::kAccess));
}

// Readers ask a "store" (has_acl) and record what it said; a writer sets the ACL, calls Changed,
// and from then on no reader may find the node known to be without it, until the writer removes
// it again. Run under TSan too.
TEST(KnownAbsentAclsTest, ConcurrentReadersNeverMakeAChangeInvisibleAfterItReturned) {
  KnownAbsentAcls known;
  Node node;
  std::atomic<bool> has_acl{false}, stop{false};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i)
    readers.emplace_back([&] {
      while (!stop.load()) {
        if (Bits::Known(node, Bits::kAccess)) continue;
        const uint64_t since = known.Now();
        if (!has_acl.load()) known.Learned(node, Bits::kAccess, since);
      }
    });
  int stale = 0;
  for (int round = 0; round < 2000; ++round) {
    has_acl.store(true);
    known.Changed(node);
    for (int look = 0; look < 50; ++look) stale += Bits::Known(node, Bits::kAccess) ? 1 : 0;
    has_acl.store(false);
    known.Changed(node, Bits::kAccess);
  }
  stop.store(true);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(stale, 0);
}

}  // namespace
}  // namespace sigilfs::core
