// Tests of the directory handles an exclusive mount keeps open (MountOptions::open_dirs),
// without a kernel: bounded, closed with their directory, and never a way for an entry made in
// one directory to land in another, whatever is done to the store behind the mount.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdio.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "mount/filesystem.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/core/volume.h"
#include "sigilfs/crypt/kdf.h"
#include "sigilfs/fuse/errno_map.h"
#include "test_support/process.h"
#include "test_support/temp_dir.h"

namespace sigilfs::fuse {
namespace {

namespace fs = std::filesystem;

class MountOpenDirsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::VaultCreateOptions cheap;
    cheap.kdf = crypt::Argon2ParamsFor(crypt::KdfPreset::kTest);
    ASSERT_TRUE(core::Vault::Create(vault_dir(), AsBytes("pass"), cheap).ok());
    Mount(4);
  }

  std::string vault_dir() const { return tmp_.path() / "vault"; }

  // The mount again, on the same vault, keeping at most `open_dirs` directories open and
  // `handle_cache` forgotten nodes known.
  void Mount(size_t open_dirs, size_t handle_cache = MountOptions::kDefaultHandleCache) {
    fs_.reset();
    auto vault = core::Vault::Unlock(vault_dir(), AsBytes("pass"));
    ASSERT_TRUE(vault.ok()) << vault.status().ToString();
    auto volume = core::Volume::Open(std::move(vault).value(), core::VolumeOptions{});
    ASSERT_TRUE(volume.ok()) << volume.status().ToString();
    MountOptions options;
    options.open_dirs = open_dirs;
    options.handle_cache = handle_cache;
    fs_ = std::make_unique<Filesystem>(std::move(volume).value(), options);
  }

  std::shared_ptr<Inode> Mkdir(Inode& parent, const std::string& name) {
    auto made = fs_->DoMkdir(parent, name, 0755, Caller{});
    EXPECT_TRUE(made.ok()) << name << ": " << made.status().ToString();
    return made.ok() ? made->inode : nullptr;
  }
  // A file made and its node given back, as the kernel would forget it.
  Status MakeFile(Inode& parent, const std::string& name) {
    auto made = fs_->DoMknod(parent, name, S_IFREG | 0644, 0, Caller{});
    if (made.ok()) fs_->Forget(fs_->NodeId(*made->inode), 1);
    return made.status();
  }
  // Whether `path` ("a/b") leads to an entry, through lookups from the root.
  bool Exists(const std::string& path) {
    std::shared_ptr<Inode> at = fs_->root();
    for (const auto& part : fs::path(path)) {
      auto entry = fs_->DoLookup(*at, part.string());
      if (!entry.ok()) return false;
      at = entry->inode;
    }
    return true;
  }
  // The cipher directories below the vault's root, by path.
  std::vector<fs::path> CipherDirs() const {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::recursive_directory_iterator(vault_dir()))
      if (e.is_directory()) dirs.push_back(e.path());
    return dirs;
  }
  size_t CipherEntries() const {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::recursive_directory_iterator(vault_dir())) ++n;
    return n;
  }

  test::TempDir tmp_;
  std::unique_ptr<Filesystem> fs_;
};

TEST_F(MountOpenDirsTest, DirectoriesInUseStayOpenUpToTheBoundAndAllStillWork) {
  const size_t fds = test::OwnDescriptors();
  std::vector<std::shared_ptr<Inode>> dirs;
  for (int i = 0; i < 12; ++i) dirs.push_back(Mkdir(*fs_->root(), "d" + std::to_string(i)));
  for (size_t round = 0; round < 2; ++round)
    for (size_t i = 0; i < dirs.size(); ++i)
      ASSERT_TRUE(MakeFile(*dirs[i], "f" + std::to_string(round)).ok());
  EXPECT_GT(fs_->node_stats().open_dirs, 0u);
  EXPECT_LE(fs_->node_stats().open_dirs, 4u);
  EXPECT_LE(test::OwnDescriptors(), fds + 4) << "a descriptor per directory kept, no more";
  for (size_t i = 0; i < dirs.size(); ++i) {
    EXPECT_TRUE(Exists("d" + std::to_string(i) + "/f0"));
    EXPECT_TRUE(Exists("d" + std::to_string(i) + "/f1"));
  }
}

TEST_F(MountOpenDirsTest, ADirectoryTheMountRemovesHasItsHandleClosedAtOnce) {
  std::shared_ptr<Inode> dir = Mkdir(*fs_->root(), "d");
  ASSERT_TRUE(MakeFile(*dir, "f").ok());
  ASSERT_EQ(fs_->node_stats().open_dirs, 1u);
  ASSERT_TRUE(fs_->DoUnlink(*dir, "f").ok());
  ASSERT_TRUE(fs_->DoRmdir(*fs_->root(), "d").ok());
  EXPECT_EQ(fs_->node_stats().open_dirs, 0u);
  EXPECT_EQ(ErrnoFor(MakeFile(*dir, "g")), ENOENT) << "a removed directory takes nothing";

  // Replaced by a rename: the same.
  std::shared_ptr<Inode> a = Mkdir(*fs_->root(), "a");
  std::shared_ptr<Inode> b = Mkdir(*fs_->root(), "b");
  ASSERT_TRUE(MakeFile(*b, "f").ok());
  ASSERT_TRUE(fs_->DoUnlink(*b, "f").ok());
  ASSERT_TRUE(fs_->DoRename(*fs_->root(), "a", *fs_->root(), "b", 0).ok());
  EXPECT_EQ(ErrnoFor(MakeFile(*b, "g")), ENOENT);
  ASSERT_TRUE(MakeFile(*a, "g").ok());
  EXPECT_TRUE(Exists("b/g"));
}

TEST_F(MountOpenDirsTest, ADirectoryRenamedByTheMountKeepsTakingEntries) {
  std::shared_ptr<Inode> a = Mkdir(*fs_->root(), "a");
  std::shared_ptr<Inode> b = Mkdir(*a, "b");
  ASSERT_TRUE(MakeFile(*b, "x").ok());
  ASSERT_TRUE(fs_->DoRename(*a, "b", *fs_->root(), "c", 0).ok());
  ASSERT_TRUE(MakeFile(*b, "y").ok());
  Mount(0);  // a mount that walks paths: what the store holds
  EXPECT_TRUE(Exists("c/x"));
  EXPECT_TRUE(Exists("c/y"));
  EXPECT_FALSE(Exists("a/b"));
}

// Another actor removes a directory from the store while the mount keeps it open: new entries
// in it fail, and none appears anywhere else in the vault.
TEST_F(MountOpenDirsTest, ADirectoryRemovedBehindTheMountTakesNoNewEntries) {
  std::shared_ptr<Inode> dir = Mkdir(*fs_->root(), "d");
  ASSERT_TRUE(MakeFile(*dir, "x").ok());
  const std::vector<fs::path> dirs = CipherDirs();
  ASSERT_EQ(dirs.size(), 1u);
  fs::remove_all(dirs[0]);
  const size_t entries = CipherEntries();
  EXPECT_EQ(ErrnoFor(MakeFile(*dir, "y")), ENOENT);
  EXPECT_EQ(ErrnoFor(fs_->DoMkdir(*dir, "z", 0755, Caller{}).status()), ENOENT);
  EXPECT_FALSE(fs_->DoLookup(*dir, "x").ok());
  EXPECT_FALSE(fs_->DoGetattr(*dir).ok()) << "its attributes are not those of what took its place";
  EXPECT_EQ(CipherEntries(), entries) << "nothing was made elsewhere";
}

// Another actor swaps two directories' names in the store: each directory the mount holds
// still takes its own entries, beside the ones it had, never into the other.
TEST_F(MountOpenDirsTest, DirectoriesSwappedBehindTheMountKeepTheirOwnEntries) {
  std::shared_ptr<Inode> one = Mkdir(*fs_->root(), "one");
  std::shared_ptr<Inode> two = Mkdir(*fs_->root(), "two");
  ASSERT_TRUE(MakeFile(*one, "one-before").ok());
  ASSERT_TRUE(MakeFile(*two, "two-before").ok());
  const std::vector<fs::path> dirs = CipherDirs();
  ASSERT_EQ(dirs.size(), 2u);
  ASSERT_EQ(::renameat2(AT_FDCWD, dirs[0].c_str(), AT_FDCWD, dirs[1].c_str(), RENAME_EXCHANGE), 0);
  ASSERT_TRUE(MakeFile(*one, "one-after").ok());
  ASSERT_TRUE(MakeFile(*two, "two-after").ok());
  Mount(0);
  // Each directory's entries are together, under whichever name it now has (the store's names
  // are sealed to their directory, so both names still decrypt).
  for (const std::string name : {"one", "two"}) {
    const bool has_one = Exists(name + "/one-before"), has_two = Exists(name + "/two-before");
    ASSERT_NE(has_one, has_two) << name;
    const std::string own = has_one ? "one" : "two", other = has_one ? "two" : "one";
    EXPECT_TRUE(Exists(name + "/" + own + "-after")) << name;
    EXPECT_FALSE(Exists(name + "/" + other + "-after")) << name;
  }
}

TEST_F(MountOpenDirsTest, ForgottenDirectoriesCloseTheirHandles) {
  Mount(4, /*handle_cache=*/0);  // forgotten nodes go at once
  const size_t fds = test::OwnDescriptors();
  std::shared_ptr<Inode> dir = Mkdir(*fs_->root(), "d");
  ASSERT_TRUE(MakeFile(*dir, "f").ok());
  ASSERT_EQ(fs_->node_stats().open_dirs, 1u);
  const uint64_t id = fs_->NodeId(*dir);
  dir.reset();
  fs_->Forget(id, 1);  // the kernel's lookup of it, from the mkdir
  EXPECT_EQ(fs_->node_stats().open_dirs, 0u);
  EXPECT_EQ(test::OwnDescriptors(), fds);
}

}  // namespace
}  // namespace sigilfs::fuse
