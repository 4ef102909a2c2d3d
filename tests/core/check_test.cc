// The vault check (core/check.h) without FUSE, against both stores: a clean tree has no
// problem, and each damage is reported once under its vault path while the rest is read.
#include "sigilfs/core/check.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "test_support/pattern.h"
#include "test_support/stores.h"
#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

class CheckTest : public ::testing::TestWithParam<test::Store> {
 protected:
  void SetUp() override {
    volume_ = test::NewTestVolume((temp_.path() / "vault").string());
    auto store = test::NewStore(GetParam(), temp_.path() / "store");
    ASSERT_TRUE(Tree::Format(*store).ok());
    tree_ = std::move(Tree::Open(*volume_, std::move(store))).value();
    root_ = std::move(tree_->Root()).value();
  }

  void Write(const Tree::Dir& dir, const std::string& name, size_t size) {
    auto file = std::move(tree_->CreateFile(dir, name, 0644)).value();
    ASSERT_TRUE(file->Write(0, test::Pattern(size, 4)).ok());
    ASSERT_TRUE(file->Sync(false).ok());
  }

  // A byte of the backing entry `stored` of `dir` changed.
  static void Flip(const Tree::Dir& dir, const std::string& stored, uint64_t at) {
    auto file = std::move(dir.backing().OpenFile(stored, {})).value();
    uint8_t byte = 0;
    ASSERT_TRUE(file->ReadAt({&byte, 1}, at).ok());
    byte ^= 0x20;
    const ByteSpan parts[] = {ByteSpan(&byte, 1)};
    ASSERT_TRUE(file->WriteAt(parts, at).ok());
  }

  std::map<std::string, std::string> Check(CheckSummary* summary = nullptr) {
    std::map<std::string, std::string> found;
    const CheckSummary s = CheckTree(*tree_, [&](const std::string& path, const Status& st) {
      found[path] += std::string(CodeName(st.code())) + ";";
    });
    if (summary != nullptr) *summary = s;
    EXPECT_EQ(s.problems, found.size());
    return found;
  }

  test::TempDir temp_;
  std::unique_ptr<Volume> volume_;
  std::unique_ptr<Tree> tree_;
  std::unique_ptr<Tree::Dir> root_;
};

TEST_P(CheckTest, EachDamageIsReportedUnderItsPathAndTheRestIsRead) {
  ASSERT_TRUE(tree_->MakeDir(*root_, "d", 0700).ok());
  auto d = std::move(tree_->OpenDir(*root_, "d")).value();
  Write(*d, "a", 20000);
  Write(*d, "b", 100);
  ASSERT_TRUE(tree_->Link(*d, "a", *root_, "a2").ok());
  ASSERT_TRUE(tree_->MakeSymlink(*root_, "l", "d/a").ok());
  CheckSummary clean;
  EXPECT_TRUE(Check(&clean).empty());
  EXPECT_EQ(clean.directories, 2u);
  EXPECT_EQ(clean.files, 2u);  // a and a2 are one file, read once
  EXPECT_EQ(clean.symlinks, 1u);

  Flip(*d, *volume_->StoredName(d->iv(), "a"), 9000);  // a page of the file's middle
  ASSERT_TRUE(root_->backing().Unlink(*volume_->StoredName(root_->iv(), "l")).ok());
  ASSERT_TRUE(root_->backing().MakeSymlink(*volume_->StoredName(root_->iv(), "l"), "junk").ok());
  ASSERT_TRUE(d->backing()
                  .Rename(*volume_->StoredName(d->iv(), "b"), d->backing(),
                          "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
                  .ok());
  const auto found = Check();
  EXPECT_EQ(found.size(), 3u);
  EXPECT_EQ(found.count("a2"), 1u);  // the file is read once, under its first name walked
  EXPECT_EQ(found.count("l"), 1u);
  EXPECT_EQ(found.count("d/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA (stored name)"), 1u);
}

TEST_P(CheckTest, ADirectoryWithoutItsIvIsOneProblemAndItsSiblingsAreRead) {
  ASSERT_TRUE(tree_->MakeDir(*root_, "lost", 0700).ok());
  ASSERT_TRUE(tree_->MakeDir(*root_, "kept", 0700).ok());
  auto lost = std::move(tree_->OpenDir(*root_, "lost")).value();
  auto kept = std::move(tree_->OpenDir(*root_, "kept")).value();
  Write(*kept, "f", 10);
  ASSERT_TRUE(lost->backing().Unlink(kDirIvFileName).ok());
  CheckSummary summary;
  const auto found = Check(&summary);
  EXPECT_EQ(found, (std::map<std::string, std::string>{{"lost", "corrupt;"}}));
  EXPECT_EQ(summary.files, 1u);
}

SIGILFS_INSTANTIATE_FOR_STORES(CheckTest);

}  // namespace
}  // namespace sigilfs::core
