// Tests of the mount's node table without a kernel: which nodes stay known, and when they go.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "mount/filesystem.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/core/volume.h"
#include "sigilfs/crypt/kdf.h"
#include "test_support/process.h"
#include "test_support/temp_dir.h"

namespace sigilfs::fuse {
namespace {

namespace fs = std::filesystem;

class NodeTableTest : public ::testing::Test {
 protected:
  void SetUp() override { Mount(MountOptions{}); }

  void Mount(const MountOptions& options) {
    fs_.reset();
    const std::string dir = tmp_.path() / "vault";
    fs::remove_all(dir);
    core::VaultCreateOptions cheap;
    cheap.kdf = crypt::Argon2ParamsFor(crypt::KdfPreset::kTest);
    ASSERT_TRUE(core::Vault::Create(dir, AsBytes("pass"), cheap).ok());
    auto vault = core::Vault::Unlock(dir, AsBytes("pass"));
    ASSERT_TRUE(vault.ok()) << vault.status().ToString();
    auto volume = core::Volume::Open(std::move(vault).value(), core::VolumeOptions{});
    ASSERT_TRUE(volume.ok()) << volume.status().ToString();
    fs_ = std::make_unique<Filesystem>(std::move(volume).value(), options);
  }

  test::TempDir tmp_;
  std::unique_ptr<Filesystem> fs_;
};

// The kernel may forget a node while the thread that answered it still holds it: the reply is
// sent before the thread lets go. A directory removed meanwhile must go with that holder, and
// with it the descriptor that kept it reachable while the kernel held it.
TEST_F(NodeTableTest, ARemovedDirectoryForgottenWhileARequestHoldsItGoesWithTheRequest) {
  const size_t fds = test::OwnDescriptors();
  const uint64_t nodes = fs_->node_stats().nodes;
  auto made = fs_->DoMkdir(*fs_->root(), "d", 0755, Caller{});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::shared_ptr<Inode> request = std::move(made->inode);  // a request still finishing

  ASSERT_TRUE(fs_->DoRmdir(*fs_->root(), "d").ok());
  EXPECT_EQ(test::OwnDescriptors(), fds + 1)
      << "the removed directory is kept while the kernel holds it";
  fs_->Forget(fs_->NodeId(*request), 1);
  EXPECT_EQ(fs_->node_stats().nodes, nodes) << "forgotten and removed, it left the table";

  request.reset();
  EXPECT_EQ(test::OwnDescriptors(), fds) << "its descriptor went with the last holder";
}

// A directory the kernel forgot while a node still names it as its parent stays known (renames
// of it must reach that node); it goes with that child.
TEST_F(NodeTableTest, AForgottenDirectoryStaysForItsChildAndGoesWithIt) {
  MountOptions no_cache;
  no_cache.handle_cache = 0;  // forgotten nodes go at once, but for their children's sake
  Mount(no_cache);
  const uint64_t nodes = fs_->node_stats().nodes;
  auto dir = fs_->DoMkdir(*fs_->root(), "d", 0755, Caller{});
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  auto child = fs_->DoMkdir(*dir->inode, "e", 0755, Caller{});
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const uint64_t dir_id = fs_->NodeId(*dir->inode), child_id = fs_->NodeId(*child->inode);
  dir->inode.reset();
  child->inode.reset();

  fs_->Forget(dir_id, 1);
  EXPECT_EQ(fs_->node_stats().nodes, nodes + 2) << "kept: its child names it";
  fs_->Forget(child_id, 1);
  EXPECT_EQ(fs_->node_stats().nodes, nodes) << "gone with its child";
}

}  // namespace
}  // namespace sigilfs::fuse
