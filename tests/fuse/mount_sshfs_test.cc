// The mount with its cipher directory on sshfs, a network filesystem served by an sshd of the
// test's own: mount suites run there in shared mode, and the checker of shared mounts runs with
// two daemons on the one sshfs directory.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/sshfs.h"

namespace sigilfs {
namespace {

// The suites that run on sshfs: what a network store can do. Left out, each for what sshfs
// (SFTP version 3) lacks: FIFOs and device nodes (mknod), hard links as one file (each name has
// an inode number and a link count of its own; directories' link counts, which the randomized
// suite compares, are 1), times finer than a second, RENAME_EXCHANGE,
// files that stay usable by descriptor once removed, and paths near PATH_MAX; so also the
// workload suite, whose tree holds a FIFO.
constexpr char kSuitesOnSshfs[] =
    "MountPosixTest.*:MountListingTest.*:MountPathsTest.*"
    ":MountSharedTest.PartialWrites*:MountSharedTest.Appends*"
    "-MountPosixTest.ModeOwnerAndTimesAreAsSet:MountPosixTest.RenameExchangeSwapsTwoEntries"
    ":MountPosixTest.HardLinks:MountPosixTest.MknodFifoAndSocketHaveTheRightType"
    ":MountPosixTest.RemovedObjectsStayUsableThroughTheirDescriptors"
    ":MountListingTest.ListingsCarryTheRightAttributes:MountPathsTest.AFullLengthPath*"
    ":MountPathsTest.SymlinkTargetsUpToPathMax";

// Runs this test program again with `filter`, its vaults on `store` and every mount shared;
// returns its output where it failed.
::testing::AssertionResult RunOnSshfs(const test::SshfsStore& store, const std::string& filter) {
  std::vector<std::string> env = test::EnvironmentWithout("SIGILFS_TEST_CIPHER_ROOT");
  env.push_back("SIGILFS_TEST_CIPHER_ROOT=" + store.mount_dir());
  env.push_back("SIGILFS_TEST_MOUNT_ARGS=--shared");
  const test::ProcessResult r =
      test::RunProcess({"/proc/self/exe", "--gtest_filter=" + filter, "--gtest_brief=1"}, "", env);
  std::printf("%s", r.out.substr(r.out.size() > 4000 ? r.out.size() - 4000 : 0).c_str());
  if (r.exit_code == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "exit " << r.exit_code << "\n" << r.err;
}

class MountSshfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    SIGILFS_NEEDS(test::SshfsAvailable(), "no sshd and sshfs here, or not root");
    if (std::getenv("SIGILFS_TEST_CIPHER_ROOT") != nullptr)
      GTEST_SKIP() << "already running on another store";
  }
};

TEST_F(MountSshfsTest, MountSuitesPassWithTheVaultOnSshfs) {
  test::SshfsStore store;
  EXPECT_TRUE(RunOnSshfs(store, kSuitesOnSshfs));
}

// As several hosts would mount it: without sshfs's directory cache.
TEST_F(MountSshfsTest, TwoSharedMountsOnOneSshfsDirectoryPassTheChecker) {
  test::SshfsStore store(/*dir_cache=*/false);
  EXPECT_TRUE(RunOnSshfs(store, "MountSharedCheckerTest.TwoMounts"));
}

// As one host mounts it by default: with the cache. (The checker drops the kernel's caches as
// it runs, so sshfs numbers the objects afresh under the mounts' feet: see
// core::BackingDir::KeepsInodeNumbers.)
TEST_F(MountSshfsTest, TwoSharedMountsOnACachedSshfsDirectoryPassTheChecker) {
  test::SshfsStore store(/*dir_cache=*/true);
  EXPECT_TRUE(RunOnSshfs(store, "MountSharedCheckerTest.TwoMounts"));
}

}  // namespace
}  // namespace sigilfs
