// Node ids that outlive a front end (core/persistent_id.h) without a kernel: ids from the
// store's file handles, the object an id names opened again, and the bounded search of the
// vault for an inode number; against the POSIX and the memory store.
#include "sigilfs/core/persistent_id.h"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sigilfs/core/names.h"
#include "sigilfs/core/tree.h"
#include "test_support/stores.h"
#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

using test::Store;

class PersistentIdTest : public ::testing::TestWithParam<Store> {
 protected:
  void SetUp() override {
    volume_ = test::NewTestVolume((temp_.path() / "vault").string());
    std::unique_ptr<BackingDir> store = test::NewStore(GetParam(), temp_.path() / "store");
    ASSERT_TRUE(Tree::Format(*store).ok());
    store_ = std::move(store->OpenDir("")).value();
    tree_ = std::move(Tree::Open(*volume_, std::move(store))).value();
    auto root = std::move(tree_->Root()).value();
    // a/b/f, and a file of the same inode number nowhere else.
    ASSERT_TRUE(tree_->MakeDir(*root, "a", 0755).ok());
    auto a = std::move(tree_->OpenDir(*root, "a")).value();
    ASSERT_TRUE(tree_->MakeDir(*a, "b", 0755).ok());
    auto b = std::move(tree_->OpenDir(*a, "b")).value();
    ASSERT_TRUE(tree_->MakeNode(*b, "f", S_IFREG | 0644, 0).ok());
    path_ = {*volume_->StoredName(root->iv(), "a"), *volume_->StoredName(a->iv(), "b"),
             *volume_->StoredName(b->iv(), "f")};
    dir_b_ = std::move(store_->OpenObject(path_[0] + "/" + path_[1])).value();
    st_ = *dir_b_->Stat(path_[2]);
  }

  test::TempDir temp_;
  std::unique_ptr<Volume> volume_;
  std::unique_ptr<BackingDir> store_;
  std::unique_ptr<Tree> tree_;
  std::vector<std::string> path_;  // stored names of a/b/f
  std::unique_ptr<BackingDir> dir_b_;
  struct stat st_ {};
};

TEST_P(PersistentIdTest, AFileIsFoundByItsInodeNumberWithinTheBudget) {
  EXPECT_EQ(FindInVault(*store_, st_.st_ino), path_);
  // Directories are reached by their paths, not searched for.
  const struct stat a = *store_->Stat(path_[0]);
  EXPECT_TRUE(FindInVault(*store_, a.st_ino).empty());
  // The search visits at most `budget` entries: a forged id costs no more.
  EXPECT_TRUE(FindInVault(*store_, st_.st_ino, /*budget=*/2).empty());
  EXPECT_TRUE(FindInVault(*store_, st_.st_ino + 1'000'000).empty());
}

TEST_P(PersistentIdTest, OnlyEntriesOfTheVaultAreNames) {
  for (const std::string& stored : path_) EXPECT_TRUE(IsEntryName(stored));
  EXPECT_FALSE(IsEntryName("sigilfs.diriv"));
  std::string long_stored = *volume_->StoredName(DirIv{}, std::string(200, 'x'));
  EXPECT_TRUE(NameCodec::IsLongName(long_stored));
  EXPECT_TRUE(IsEntryName(long_stored));
}

TEST_P(PersistentIdTest, AnIdFromTheStoresFileHandleOpensTheSameObject) {
  const uint64_t id = PersistentId(*dir_b_, path_[2], st_);
  // On ext4 (this suite's store where CI runs it) the POSIX store's handles are an inode number
  // and a generation: no id there would be a failure, not a store without them.
  struct statfs fs;
  if (GetParam() == Store::kPosix && ::statfs(temp_.path().c_str(), &fs) == 0 &&
      fs.f_type == EXT4_SUPER_MAGIC) {
    ASSERT_NE(id, 0u) << "no persistent id on ext4";
  }
  if (id == 0) {
    // The store's file handles are not an inode number and a generation (the memory store's,
    // tmpfs's): no id, and no id opens anything.
    EXPECT_EQ(OpenPersistentId(*store_, st_.st_ino).status().sys_errno(), ESTALE);
    return;
  }
  EXPECT_EQ(static_cast<uint32_t>(id), st_.st_ino);
  EXPECT_EQ(id >> 63, 0u);  // never an address id
  auto object = std::move(dir_b_->OpenObject(path_[2])).value();
  EXPECT_EQ(PersistentId(*object, "", st_), id);  // the same from a handle on the object
  auto opened = OpenPersistentId(*store_, id);
  if (::geteuid() != 0) {
    EXPECT_EQ(opened.status().sys_errno(), ESTALE);  // no CAP_DAC_READ_SEARCH
    return;
  }
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->st.st_ino, st_.st_ino);
  // Another generation is another object: stale.
  EXPECT_EQ(OpenPersistentId(*store_, id ^ (uint64_t{1} << 40)).status().sys_errno(), ESTALE);
}

SIGILFS_INSTANTIATE_FOR_STORES(PersistentIdTest);

}  // namespace
}  // namespace sigilfs::core
