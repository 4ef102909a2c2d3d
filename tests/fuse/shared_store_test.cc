// Tests without a kernel of two shared-mode front ends over one store: what one caches about
// the store is checked again before it is used, whatever the other did in the meantime.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <string>

#include "mount/filesystem.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/core/volume.h"
#include "sigilfs/crypt/kdf.h"
#include "test_support/temp_dir.h"

namespace sigilfs::fuse {
namespace {

namespace fs = std::filesystem;

class SharedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::VaultCreateOptions cheap;
    cheap.kdf = crypt::Argon2ParamsFor(crypt::KdfPreset::kTest);
    ASSERT_TRUE(core::Vault::Create(dir(), AsBytes("pass"), cheap).ok());
    a_ = Open();
    b_ = Open();
  }

  std::string dir() const { return (tmp_.path() / "vault").string(); }

  std::unique_ptr<Filesystem> Open() {
    auto vault = core::Vault::Unlock(dir(), AsBytes("pass"));
    EXPECT_TRUE(vault.ok()) << vault.status().ToString();
    // As `mount --shared` opens it: beside the other front end's, under the vault lock's shared
    // mode, with the page layer's shared mode.
    core::VolumeOptions volume_options;
    volume_options.pages.shared = true;
    auto volume = core::Volume::Open(std::move(vault).value(), std::move(volume_options));
    EXPECT_TRUE(volume.ok()) << volume.status().ToString();
    MountOptions options;
    options.shared = true;
    return std::make_unique<Filesystem>(std::move(volume).value(), options);
  }

  // The cipher directory's inode number of the plain directory `name` in the root, as `fs`
  // sees it through a fresh lookup.
  static ino_t CipherIno(Filesystem& fs, const std::string& name) {
    auto e = fs.DoLookup(*fs.root(), name);
    if (!e.ok()) return 0;
    const ino_t ino = e->attr.st_ino;
    fs.Forget(fs.NodeId(*e->inode), 1);
    return ino;
  }

  test::TempDir tmp_;
  std::unique_ptr<Filesystem> a_, b_;
};

// B replaces a directory A holds (rmdir, mkdir: ext4 gives the new one the old inode number,
// so A's node still matches it). A name A makes in it afterwards is encrypted under the new
// directory's IV: B finds it, by name and in a listing.
TEST_F(SharedStoreTest, ANameMadeInADirectoryReplacedByTheOtherIsFoundByIt) {
  auto held = a_->DoMkdir(*a_->root(), "d", 0755, Caller{});
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  auto first = a_->DoCreate(*held->inode, "first", 0644, O_WRONLY, Caller{});
  ASSERT_TRUE(first.ok()) << first.status().ToString();  // A has read (and cached) d's IV
  ASSERT_TRUE(a_->DoRelease(*first->inode, true).ok());
  const ino_t before = held->attr.st_ino;

  // Replaced until the store reuses the inode number (at once on ext4), as another host
  // would; on a store that does not, each new directory is also one A never saw.
  bool reused = false;
  for (int i = 0; i < 8 && !reused; ++i) {
    auto b_dir = b_->DoLookup(*b_->root(), "d");
    ASSERT_TRUE(b_dir.ok()) << b_dir.status().ToString();
    if (auto f = b_->DoLookup(*b_dir->inode, "first"); f.ok()) {
      ASSERT_TRUE(b_->DoUnlink(*b_dir->inode, "first").ok());
      b_->Forget(b_->NodeId(*f->inode), 1);
    }
    b_->Forget(b_->NodeId(*b_dir->inode), 1);
    ASSERT_TRUE(b_->DoRmdir(*b_->root(), "d").ok());
    auto made = b_->DoMkdir(*b_->root(), "d", 0755, Caller{});
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    b_->Forget(b_->NodeId(*made->inode), 1);
    reused = CipherIno(*b_, "d") == before;
  }

  auto made = a_->DoCreate(*held->inode, "new", 0644, O_WRONLY, Caller{});
  RecordProperty("inode_number_reused", reused ? "yes" : "no");
  if (!made.ok()) {
    // Only where the store gave another number may A refuse (the object it held is gone); it
    // never misplaces the name. Where the number was reused, the create must work.
    ASSERT_FALSE(reused) << made.status().ToString();
    return;
  }
  ASSERT_TRUE(a_->DoRelease(*made->inode, true).ok());

  auto b_dir = b_->DoLookup(*b_->root(), "d");
  ASSERT_TRUE(b_dir.ok()) << b_dir.status().ToString();
  auto found = b_->DoLookup(*b_dir->inode, "new");
  EXPECT_TRUE(found.ok()) << "B cannot find the name A made: " << found.status().ToString();
  // And a front end that never saw the old directory agrees.
  std::unique_ptr<Filesystem> c = Open();
  auto c_dir = c->DoLookup(*c->root(), "d");
  ASSERT_TRUE(c_dir.ok()) << c_dir.status().ToString();
  EXPECT_TRUE(c->DoLookup(*c_dir->inode, "new").ok());
}

}  // namespace
}  // namespace sigilfs::fuse
