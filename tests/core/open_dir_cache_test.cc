// OpenDirCache: handles kept per node up to the capacity, the least recently used closed first,
// and never one node's handle given for another, even one at the same address.
#include "sigilfs/core/open_dir_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <new>
#include <thread>
#include <vector>

namespace sigilfs::core {
namespace {

std::shared_ptr<BackingDir> NewDir() { return NewMemoryBackingStore(); }

TEST(OpenDirCacheTest, KeepsUpToItsCapacityAndClosesTheLeastRecentlyUsedFirst) {
  OpenDirCache cache(2);
  auto a = std::make_shared<Node>(), b = std::make_shared<Node>(), c = std::make_shared<Node>();
  std::shared_ptr<BackingDir> da = NewDir(), db = NewDir(), dc = NewDir();
  std::weak_ptr<BackingDir> weak_b = db;
  cache.Keep(a, da);
  cache.Keep(b, std::move(db));
  EXPECT_EQ(cache.Find(*a), da);  // a is now the most recently used: b goes first
  cache.Keep(c, dc);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Find(*b), nullptr);
  EXPECT_TRUE(weak_b.expired()) << "the handle that fell out is closed";
  EXPECT_EQ(cache.Find(*a), da);
  EXPECT_EQ(cache.Find(*c), dc);
}

TEST(OpenDirCacheTest, KeepingAgainReplacesAndCloseGivesTheHandleBack) {
  OpenDirCache cache(4);
  auto node = std::make_shared<Node>();
  std::shared_ptr<BackingDir> first = NewDir(), second = NewDir();
  std::weak_ptr<BackingDir> weak_first = first;
  cache.Keep(node, std::move(first));
  cache.Keep(node, second);
  EXPECT_TRUE(weak_first.expired());
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.Close(*node), second);
  EXPECT_EQ(cache.Find(*node), nullptr);
  EXPECT_EQ(cache.Close(*node), nullptr);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(OpenDirCacheTest, NoCapacityKeepsNothing) {
  OpenDirCache cache(0);
  auto node = std::make_shared<Node>();
  cache.Keep(node, NewDir());
  EXPECT_EQ(cache.Find(*node), nullptr);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(OpenDirCacheTest, AHandleNeverKeepsItsNodeAlive) {
  OpenDirCache cache(4);
  auto node = std::make_shared<Node>();
  std::weak_ptr<Node> weak = node;
  cache.Keep(node, NewDir());
  node.reset();
  EXPECT_TRUE(weak.expired());
}

// A node gone and a new one made at its very address (as an allocator may do): the new node
// must not be given the old one's directory.
TEST(OpenDirCacheTest, ANodeGoneLeavesNothingForANodeAtItsAddress) {
  OpenDirCache cache(4);
  alignas(Node) unsigned char storage[sizeof(Node)];
  auto in_place = [&storage] {
    return std::shared_ptr<Node>(new (storage) Node(), [](Node* n) { n->~Node(); });
  };
  std::shared_ptr<BackingDir> old_dir = NewDir();
  std::weak_ptr<BackingDir> weak_old = old_dir;
  {
    std::shared_ptr<Node> old_node = in_place();
    cache.Keep(old_node, std::move(old_dir));
  }
  std::shared_ptr<Node> new_node = in_place();
  EXPECT_EQ(cache.Find(*new_node), nullptr);
  EXPECT_TRUE(weak_old.expired()) << "the stale handle closes when found";
  EXPECT_EQ(cache.size(), 0u);
  auto new_dir = NewDir();
  cache.Keep(new_node, new_dir);
  EXPECT_EQ(cache.Find(*new_node), new_dir);
}

// Threads keeping, finding and closing handles of a few nodes: every handle found is the one
// kept for that node, and the bound holds. Run under TSan too.
TEST(OpenDirCacheTest, ConcurrentKeepsFindsAndClosesGiveEachNodeItsOwnHandle) {
  constexpr size_t kNodes = 8;
  OpenDirCache cache(3);
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<std::shared_ptr<BackingDir>> dirs;
  for (size_t i = 0; i < kNodes; ++i) {
    nodes.push_back(std::make_shared<Node>());
    dirs.push_back(NewDir());
  }
  std::atomic<bool> wrong{false}, over{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5000; ++round) {
        const size_t i = static_cast<size_t>(round * 7 + t) % kNodes;
        switch (round % 3) {
          case 0:
            cache.Keep(nodes[i], dirs[i]);
            break;
          case 1:
            if (auto found = cache.Find(*nodes[i]); found && found != dirs[i]) wrong = true;
            break;
          default:
            if (auto closed = cache.Close(*nodes[i]); closed && closed != dirs[i]) wrong = true;
        }
        if (cache.size() > cache.capacity()) over = true;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_FALSE(wrong);
  EXPECT_FALSE(over);
}

}  // namespace
}  // namespace sigilfs::core
