// Recovering from interruptions with the sigilfs command (issue 39, points 6 to 8): a dead
// mount, a busy unmount, a full disk at init, a lost root IV; the messages checked word for word.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sigilfs/core/config.h"
#include "sigilfs/core/names.h"
#include "sigilfs/core/vault_lock.h"
#include "test_support/cli_vault.h"
#include "test_support/mount.h"
#include "test_support/mount_table.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/small_fs.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::ProcessResult;
using test::RunProcess;

class CliRecoverTest : public test::CliVaultTest {
 protected:
  void SetUp() override {
    CliVaultTest::SetUp();
    fs::create_directories(Point());
  }
  void TearDown() override {
    // Whatever a test left mounted goes, dead or busy.
    if (!test::MountsAt(Point()).empty()) RunProcess({"/bin/fusermount3", "-u", "-z", Point()});
  }
  std::string Point() const { return Path("m5"); }
  ProcessResult Mount() { return Sigilfs({"mount", Vault(), Point(), "--passfile", Pass()}); }
};

// A process started in directory `dir` that sleeps until killed; its pid.
pid_t SleepIn(const std::string& dir) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(1);
    ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Until it has its directory there (and is sleep, not this test's copy).
  const std::string cwd = "/proc/" + std::to_string(pid) + "/cwd";
  const std::string exe = "/proc/" + std::to_string(pid) + "/exe";
  for (int i = 0; i < 500; ++i) {
    std::error_code ec;
    if (fs::read_symlink(cwd, ec) == fs::path(dir) && fs::read_symlink(exe, ec) == "/usr/bin/sleep")
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pid;
}

void End(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// After the daemon is killed, the mount point answers ENOTCONN: mounting there again says that
// `sigilfs unmount` clears it, and it does.
TEST_F(CliRecoverTest, ADeadMountSaysHowToClearIt) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_EQ(Mount().exit_code, 0);
  // The daemon names itself in the lock file once it serves.
  auto holder = core::VaultLock::HolderOf(Vault());
  for (int i = 0; i < 500 && !holder; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    holder = core::VaultLock::HolderOf(Vault());
  }
  ASSERT_TRUE(holder.has_value());
  ::kill(holder->pid, SIGKILL);
  struct stat st;
  for (int i = 0; i < 500 && (::stat(Point().c_str(), &st) == 0 || errno != ENOTCONN); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(errno, ENOTCONN);

  ProcessResult r = Mount();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: the mount point " + Point() +
                       " is left by a mount whose daemon has ended (Transport endpoint is not "
                       "connected): 'sigilfs unmount " +
                       Point() + "' clears it\n");
  r = Sigilfs({"unmount", Point()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "sigilfs: the daemon of " + Point() +
                       " had ended (what it had not written back is lost); its mount is cleared\n");
  EXPECT_TRUE(test::MountsAt(Point()).empty());
  r = Mount();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Sigilfs({"unmount", Point()}).exit_code, 0);
}

// A busy mount names what holds it, and is waited for up to --timeout: given up on with the
// holder named, or unmounted once it lets go.
TEST_F(CliRecoverTest, ABusyUnmountNamesTheHolderAndWaits) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_EQ(Mount().exit_code, 0);
  const pid_t sleeper = SleepIn(Point());
  const std::string who = "process " + std::to_string(sleeper) + " (sleep: current directory)";

  ProcessResult r = Sigilfs({"unmount", Point(), "--timeout", "0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: " + Point() + " is in use by " + who + ": it was not unmounted\n");
  const auto started = std::chrono::steady_clock::now();
  r = Sigilfs({"unmount", Point(), "--timeout", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  EXPECT_EQ(r.err, "sigilfs: " + Point() + " is in use by " + who + "; waiting up to 1 s\n" +
                       "sigilfs: " + Point() + " is still in use after 1 s, by " + who +
                       ": it was not unmounted\n");
  EXPECT_FALSE(test::MountsAt(Point()).empty());

  // An open file too; then both let go while the unmount waits.
  const std::string file = Point() + "/held";
  std::ofstream(file) << "x";
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);  // not the unmount's too
  ASSERT_GE(fd, 0);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::close(fd);
    End(sleeper);
  });
  r = Sigilfs({"unmount", Point(), "--timeout", "30"});
  release.join();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "sigilfs: " + Point() + " is in use by processes " + std::to_string(::getpid()) +
                       " (fuse_tests: open file) and " + std::to_string(sleeper) +
                       " (sleep: current directory); waiting up to 30 s\n");
  EXPECT_TRUE(test::MountsAt(Point()).empty());
}

// init on a full disk fails and leaves nothing: no vault directory it made, nothing in one that
// was there (empty) before; run again with room, it makes the vault.
TEST_F(CliRecoverTest, InitOnAFullDiskLeavesNoHalfMadeVault) {
  SIGILFS_NEEDS(test::SmallFilesystem::Available(), "mounting a tmpfs needs root");
  test::SmallFilesystem disk(256 << 10);
  const std::string given = (disk.path() / "given").string();
  fs::create_directory(given);
  // Room for nothing, then for the IV file but not the config.
  for (const uint64_t room : {uint64_t{0}, uint64_t{4096}}) {
    const fs::path filler = disk.path() / "filler";
    fs::remove(filler);
    {
      std::ofstream out(filler, std::ios::binary);
      out << std::string(disk.FreeBytes() - room, 'f');
    }
    ASSERT_EQ(disk.FreeBytes(), room);
    const std::string failed = room == 0 ? core::kDirIvFileName : core::kConfigFileName;
    for (const std::string& dir : {(disk.path() / "made").string(), given}) {
      const ProcessResult r = Sigilfs({"init", dir, "--kdf", "test", "--passfile", Pass()});
      EXPECT_EQ(r.exit_code, 1);
      EXPECT_EQ(r.err, "sigilfs: no vault was made in " + dir + ": write " + dir + "/." + failed +
                           ".tmp: No space left on device\n");
    }
    EXPECT_FALSE(fs::exists(disk.path() / "made")) << room;
    EXPECT_TRUE(fs::is_empty(given)) << room;
    fs::remove(filler);
  }
  EXPECT_EQ(Sigilfs({"init", given, "--kdf", "test", "--passfile", Pass()}).exit_code, 0);
}

// A vault whose root lost its IV file is refused at mount, pointing to fsck --repair, which puts
// the file back from the attribute copy (every name intact) or, with no copy left, gives the root
// a new IV and its entries names recovered-N (contents and subtrees intact).
TEST_F(CliRecoverTest, ALostRootIvIsRefusedAtMountAndRepairedByFsck) {
  SIGILFS_NEEDS_FUSE();
  fs::create_directories(Path("src/dir"));
  std::ofstream(Path("src/a")) << "file a";
  std::ofstream(Path("src/dir/b")) << "file b";
  ASSERT_EQ(Sigilfs({"import", Vault(), Path("src/."), "--passfile", Pass()}).exit_code, 0);
  const std::string iv_file = Vault() + "/" + core::kDirIvFileName;
  const std::string refused = "sigilfs: the vault " + Vault() +
                              " cannot be mounted: its root directory has no IV file "
                              "(sigilfs.diriv), so no name in it can be read; 'sigilfs fsck "
                              "--repair " +
                              Vault() + "' restores what can be restored\n";
  const std::string checked = "2 directories, 2 files (0 sealed), 0 symlinks checked; 0 problems\n";
  const auto export_all = [&](const std::string& to) {
    const ProcessResult r = Sigilfs({"export", Vault(), ".", Path(to), "--passfile", Pass()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  };

  // The attribute copy (init writes one where the store keeps attributes): names intact.
  if (::getxattr(Vault().c_str(), core::kDirIvAttrName, nullptr, 0) == core::kDirIvSize) {
    fs::remove(iv_file);
    ProcessResult r = Mount();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, refused);
    EXPECT_TRUE(test::MountsAt(Point()).empty());
    r = Sigilfs({"fsck", Vault(), "--repair", "--passfile", Pass()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out,
              "repaired: the root directory's IV file, from the copy in its attribute\n" + checked);
    export_all("out1");
    EXPECT_EQ(test::ReadAll(Path("out1/a")), "file a");
    EXPECT_EQ(test::ReadAll(Path("out1/dir/b")), "file b");
    ASSERT_EQ(::removexattr(Vault().c_str(), core::kDirIvAttrName), 0);
  }

  // No copy left: a new IV, and the entries recovered under names of their own.
  fs::remove(iv_file);
  ProcessResult r = Mount();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, refused);
  r = Sigilfs({"fsck", Vault(), "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 1) << "without --repair, fsck changes nothing";
  EXPECT_FALSE(fs::exists(iv_file));
  r = Sigilfs({"fsck", Vault(), "--repair", "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "repaired: the root directory's IV was lost with every copy: it has a new one (the "
            "names sealed under the old one cannot be read again)\n"
            "repaired: recovered-1: an entry of the root whose name could not be read\n"
            "repaired: recovered-2: an entry of the root whose name could not be read\n" +
                checked);
  export_all("out2");
  const bool first_is_a = fs::is_regular_file(Path("out2/recovered-1"));
  const std::string a = Path(first_is_a ? "out2/recovered-1" : "out2/recovered-2");
  const std::string dir = Path(first_is_a ? "out2/recovered-2" : "out2/recovered-1");
  EXPECT_EQ(test::ReadAll(a), "file a");
  EXPECT_EQ(test::ReadAll(dir + "/b"), "file b");
  r = Mount();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::ReadAll(Point() + "/" + (first_is_a ? "recovered-1" : "recovered-2")), "file a");
  EXPECT_EQ(Sigilfs({"unmount", Point()}).exit_code, 0);
}

}  // namespace
}  // namespace sigilfs
