// Backup and restore workloads through a real mount: cp -a in, tar out and in, rsync --inplace
// over existing files; every result byte-exact (contents, names, modes, links, times).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "test_support/mount.h"
#include "test_support/process.h"
#include "test_support/requirements.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::ProcessResult;
using test::RunProcess;

ProcessResult Sh(const std::string& command) { return RunProcess({"/bin/sh", "-c", command}); }

// A tree with what backups meet: nested directories, empty and large files, odd names,
// symlinks (relative, absolute, dangling), hard links, a FIFO, unusual modes and old times.
void MakeTree(const fs::path& root) {
  fs::create_directories(root / "docs" / "deep" / "deeper");
  fs::create_directories(root / "empty dir");
  std::mt19937 rng(7);
  auto write = [&](const fs::path& p, size_t size) {
    std::ofstream out(p, std::ios::binary);
    for (size_t i = 0; i < size; ++i) out.put(static_cast<char>(rng()));
  };
  write(root / "empty", 0);
  write(root / "one", 1);
  write(root / "page", 4096);
  write(root / "docs" / "big.bin", 3 * 1024 * 1024 + 17);
  write(root / "docs" / "deep" / "deeper" / "note.txt", 777);
  write(root / "docs" / std::string(200, 'n'), 100);  // a long name
  write(root / "spaces and ünïcödé", 50);
  write(root / ".hidden", 10);
  fs::create_symlink("docs/big.bin", root / "rel-link");
  fs::create_symlink("/nonexistent/target", root / "dangling");
  fs::create_hard_link(root / "one", root / "one-hardlink");
  ::mkfifo((root / "fifo").c_str(), 0640);
  fs::permissions(root / "page", fs::perms::owner_read);
  ::chmod((root / "docs" / "deep").c_str(), 02750);
  // Backups copy old files: give every entry a distinct past time (nanoseconds included), so
  // each tool has to set it. (When a source was written within the same second, rsync leaves
  // the times of directories, symlinks and FIFOs as they are on a sigilfs mount: see
  // docs/design/mount.md, the end.)
  int64_t t = 1000000000;
  std::vector<fs::path> all;
  for (const auto& e : fs::recursive_directory_iterator(root)) all.push_back(e.path());
  all.push_back(root);
  for (const fs::path& p : all) {
    const struct timespec when[2] = {{t, 123456789}, {t, 987654321}};
    ::utimensat(AT_FDCWD, p.c_str(), when, AT_SYMLINK_NOFOLLOW);
    t += 86400;
  }
}

class MountWorkloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    vault_ = std::make_unique<test::MountedVault>();
    MakeTree(src_.path() / "tree");
  }
  // diff -r (contents, types, link targets) plus a comparison of modes, sizes, links and
  // mtimes by `find -printf`, so "byte-exact" includes the metadata that backups keep.
  void ExpectSameTree(const fs::path& a, const fs::path& b) {
    // (GNU diff cannot compare two FIFOs; the listing below checks their type and mode.)
    ProcessResult d =
        Sh("diff -r --no-dereference -x fifo '" + a.string() + "' '" + b.string() + "'");
    EXPECT_EQ(d.exit_code, 0) << d.out << d.err;
    const std::string fmt = "%P %y %m %s %l %n %T@\\n";
    ProcessResult la = Sh("cd '" + a.string() + "' && find . -printf '" + fmt + "' | sort");
    ProcessResult lb = Sh("cd '" + b.string() + "' && find . -printf '" + fmt + "' | sort");
    ASSERT_EQ(la.exit_code, 0) << la.err;
    // The root's own size and time differ by nature; everything below must match.
    auto strip_root = [](std::string s) { return s.substr(s.find('\n') + 1); };
    EXPECT_EQ(strip_root(lb.out), strip_root(la.out));
  }

  test::TempDir src_;
  std::unique_ptr<test::MountedVault> vault_;
};

TEST_F(MountWorkloadTest, CpArchiveInAndOut) {
  const fs::path tree = src_.path() / "tree";
  ProcessResult r = Sh("cp -a '" + tree.string() + "' '" + vault_->path("tree") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectSameTree(tree, vault_->path("tree"));
  vault_->Remount();  // and it was stored, not just cached
  ExpectSameTree(tree, vault_->path("tree"));
  r = Sh("cp -a '" + vault_->path("tree") + "' '" + (src_.path() / "back").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectSameTree(tree, src_.path() / "back");
}

TEST_F(MountWorkloadTest, TarInAndOut) {
  const fs::path tree = src_.path() / "tree";
  ProcessResult r = Sh("tar -C '" + src_.path().string() +
                       "' --format=posix -cf - tree | tar -C '" + vault_->plain() + "' -xpf -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectSameTree(tree, vault_->path("tree"));
  fs::create_directories(src_.path() / "restore");
  r = Sh("tar -C '" + vault_->plain() + "' --format=posix -cf - tree | tar -C '" +
         (src_.path() / "restore").string() + "' -xpf -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectSameTree(tree, src_.path() / "restore" / "tree");
}

TEST_F(MountWorkloadTest, RsyncInplaceRestoresOverExistingFiles) {
  SIGILFS_NEEDS(::access("/usr/bin/rsync", X_OK) == 0, "rsync not installed");
  const fs::path tree = src_.path() / "tree";
  ProcessResult r = Sh("rsync -aH '" + tree.string() + "/' '" + vault_->path("tree") + "/'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectSameTree(tree, vault_->path("tree"));
  // Change the source in place (middle of a large file, a truncation, a new file), then restore
  // it over the mounted copy with --inplace: rsync rewrites parts of existing files.
  {
    std::fstream f(tree / "docs" / "big.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1024 * 1024 + 5);
    f << "CHANGED IN THE MIDDLE";
  }
  fs::resize_file(tree / "docs" / "deep" / "deeper" / "note.txt", 100);
  std::ofstream(tree / "docs" / "new.txt") << "new file\n";
  const struct timespec when[2] = {{1500000000, 5}, {1500000000, 5}};
  ::utimensat(AT_FDCWD, (tree / "docs").c_str(), when, 0);  // the new entry changed it
  r = Sh("rsync -aH --inplace --no-whole-file '" + tree.string() + "/' '" + vault_->path("tree") +
         "/'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectSameTree(tree, vault_->path("tree"));
  vault_->Remount();
  ExpectSameTree(tree, vault_->path("tree"));
}

TEST_F(MountWorkloadTest, RemoveEverything) {
  ProcessResult r =
      Sh("cp -a '" + (src_.path() / "tree").string() + "' '" + vault_->path("tree") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Sh("rm -rf '" + vault_->path("tree") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(vault_->path("tree")));
  // The cipher directory is back to the vault's own files.
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(vault_->cipher()))
    left.push_back(e.path().filename());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"sigilfs.conf", "sigilfs.diriv", "sigilfs.lock"}));
}

}  // namespace
}  // namespace sigilfs
