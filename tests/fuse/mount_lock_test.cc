// One mount per vault: a second mount (elsewhere or stacked) and the offline commands that write
// the cipher directory are refused while the vault is mounted, naming the mount point; readers
// warn and go on; the lock file is nowhere to be seen; a killed daemon leaves no lock behind.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "sigilfs/core/vault_lock.h"
#include "sigilfs/core/volume.h"
#include "test_support/as_nobody.h"
#include "test_support/mount.h"
#include "test_support/mount_table.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"
#include "test_support/tree_snapshot.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::ProcessResult;
using test::RunProcess;

// Detaches whatever sigilfs mounts a test made on `points` beyond `keep` each (a refused mount
// makes none; a mount that was not refused must not outlive the test).
class ExtraMounts {
 public:
  void Watch(const std::string& point, size_t keep) { watched_.emplace_back(point, keep); }
  ~ExtraMounts() {
    for (const auto& [point, keep] : watched_)
      for (size_t n = test::MountsAt(point).size(); n > keep; --n)
        RunProcess({"/bin/fusermount3", "-u", "-z", point});
  }

 private:
  std::vector<std::pair<std::string, size_t>> watched_;
};

// `sigilfs mount` in the background (no -f: it returns once mounted, the daemon detached).
ProcessResult MountDetached(const std::string& cipher, const std::string& point,
                            const std::string& passfile) {
  return RunProcess({SIGILFS_BINARY, "mount", cipher, point, "--passfile", passfile});
}

std::string Mounted(const std::string& cipher, const std::string& point) {
  return "sigilfs: the vault " + cipher + " is mounted on " + fs::canonical(point).string() + "\n";
}

// Another local user (nobody) trying to take the lock of the vault in `cipher` and hold it: a
// process that holds it until the object goes, if it could.
class NobodyHoldingTheLock {
 public:
  explicit NobodyHoldingTheLock(const std::string& cipher) {
    int ready[2];
    if (::pipe(ready) != 0) return;
    const std::string lock = cipher + "/" + core::kLockFileName;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      char held = 'N';
      if (::setgroups(0, nullptr) == 0 && ::setgid(test::kNogroup) == 0 &&
          ::setuid(test::kNobody) == 0) {
        // flock needs a descriptor open for reading only.
        const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0) held = 'H';
      }
      (void)!::write(ready[1], &held, 1);
      ::close(ready[1]);
      if (held == 'H') ::pause();
      ::_exit(0);
    }
    ::close(ready[1]);
    char held = 'N';
    (void)!::read(ready[0], &held, 1);
    ::close(ready[0]);
    held_ = held == 'H';
  }
  ~NobodyHoldingTheLock() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  NobodyHoldingTheLock(const NobodyHoldingTheLock&) = delete;
  NobodyHoldingTheLock& operator=(const NobodyHoldingTheLock&) = delete;
  bool held() const { return held_; }

 private:
  pid_t pid_ = -1;
  bool held_ = false;
};

// Another local user who can reach a vault (a directory left open to all, as `mkdir` makes it)
// cannot take its lock, which would keep the owner's mounts (a login's among them) out and make
// an unmount wait: the lock file is open only to who may change the vault, and one an older
// version left open to all is closed at the owner's next mount.
TEST(MountLockTest, AnotherUserCannotHoldTheLock) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS_ROOT("playing another user needs root");
  test::TempDir tmp;
  fs::permissions(tmp.path(), fs::perms(0755));
  const std::string cipher = (tmp.path() / "cipher").string();
  const std::string point = (tmp.path() / "plain").string();
  const std::string pass = (tmp.path() / "pass").string();
  fs::create_directories(cipher);
  fs::permissions(cipher, fs::perms(0755));
  fs::create_directories(point);
  std::ofstream(pass) << "test passphrase\n";
  ASSERT_EQ(
      RunProcess({SIGILFS_BINARY, "init", cipher, "--kdf", "test", "--passfile", pass}).exit_code,
      0);
  { test::MountedVault first(cipher, point, pass); }  // the lock file is made
  for (const bool left_open_by_an_older_version : {false, true}) {
    SCOPED_TRACE(left_open_by_an_older_version ? "a lock file open to all" : "a new lock file");
    if (left_open_by_an_older_version) {
      ASSERT_EQ(::chmod((cipher + "/" + core::kLockFileName).c_str(), 0644), 0);
      test::MountedVault closes_it(cipher, point, pass);
    }
    const NobodyHoldingTheLock nobody(cipher);
    ASSERT_FALSE(nobody.held()) << "nobody holds the vault's lock";
    test::MountedVault v(cipher, point, pass);  // refused ("in use") while nobody held it
    std::ofstream(v.path("f")) << "mounted";
    auto r = RunProcess({SIGILFS_BINARY, "unmount", point, "--timeout", "5"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
}

TEST(MountLockTest, ASecondMountElsewhereIsRefusedNamingTheFirst) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault v;
  test::TempDir tmp;
  const std::string other = (tmp.path() / "other").string();
  fs::create_directory(other);
  ExtraMounts extra;
  extra.Watch(other, 0);
  const ProcessResult r = MountDetached(v.cipher(), other, v.passfile());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, Mounted(v.cipher(), v.plain()));
  EXPECT_TRUE(test::MountsAt(other).empty());
  // The first mount goes on serving.
  std::ofstream(v.path("f")) << "still here";
  EXPECT_EQ(test::ReadAll(v.path("f")), "still here");
}

TEST(MountLockTest, AStackedMountIsRefused) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault v;
  ASSERT_EQ(::mkdir(v.path("inner").c_str(), 0755), 0);
  ExtraMounts extra;
  extra.Watch(v.plain(), 1);
  extra.Watch(v.path("inner"), 0);
  // On its own mount point, and on a directory inside its own mount.
  for (const std::string& point : {v.plain(), v.path("inner")}) {
    const ProcessResult r = MountDetached(v.cipher(), point, v.passfile());
    EXPECT_EQ(r.exit_code, 1) << point;
    EXPECT_EQ(r.err, Mounted(v.cipher(), v.plain())) << point;
  }
  EXPECT_EQ(test::MountsAt(v.plain()).size(), 1u);
  EXPECT_TRUE(test::MountsAt(v.path("inner")).empty());
  std::ofstream(v.path("inner/f")) << "still here";
  EXPECT_EQ(test::ReadAll(v.path("inner/f")), "still here");
}

// import and verity enable write the cipher directory: refused, with the mount point named,
// before the passphrase is asked for, and nothing changes. passwd is not refused: pam_sigilfs.so
// changes the password of a mounted home.
TEST(MountLockTest, OfflineWritersAreRefusedWhileMounted) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault v;
  std::ofstream(v.path("f")) << "contents";
  test::TempDir tmp;
  std::ofstream(tmp.path() / "new") << "new file";
  const auto before = test::Snapshot(v.cipher());
  const std::vector<std::vector<std::string>> writers = {
      {"verity", "enable", v.cipher(), "f"},
      {"import", v.cipher(), (tmp.path() / "new").string()},
      {"import", v.cipher(), (tmp.path() / "new").string(), "f", "--force"},
  };
  for (std::vector<std::string> args : writers) {
    args.insert(args.begin(), SIGILFS_BINARY);
    args.insert(args.end(), {"--passfile", v.passfile()});
    const ProcessResult r = RunProcess(args);
    EXPECT_EQ(r.exit_code, 1) << args[1];
    EXPECT_EQ(r.err, Mounted(v.cipher(), v.plain())) << args[1];
    EXPECT_EQ(r.out, "") << args[1];
  }
  EXPECT_EQ(test::Snapshot(v.cipher()), before);
  EXPECT_EQ(test::ReadAll(v.path("f")), "contents");
  EXPECT_FALSE(fs::exists(v.path("new")));

  std::ofstream(tmp.path() / "next") << "next passphrase\n";
  ProcessResult r = RunProcess({SIGILFS_BINARY, "passwd", v.cipher(), "--passfile", v.passfile(),
                                "--new-passfile", (tmp.path() / "next").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

// A program using the library cannot write into a mounted vault: its volume is refused with the
// words the commands use; and a mount is refused while a program holds the vault.
TEST(MountLockTest, ALibraryProgramAndAMountKeepEachOtherOut) {
  SIGILFS_NEEDS_FUSE();
  const std::string pass = "test passphrase";
  const ByteSpan bytes(reinterpret_cast<const uint8_t*>(pass.data()), pass.size());
  test::MountedVault v;
  auto refused = core::Volume::Open(std::move(core::Vault::Unlock(v.cipher(), bytes)).value(), {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().sys_errno(), EBUSY);
  EXPECT_EQ("sigilfs: " + refused.status().message() + "\n", Mounted(v.cipher(), v.plain()));
  v.Unmount();

  auto volume = core::Volume::Open(std::move(core::Vault::Unlock(v.cipher(), bytes)).value(), {});
  ASSERT_TRUE(volume.ok()) << volume.status().ToString();
  const ProcessResult r =
      RunProcess({SIGILFS_BINARY, "mount", v.cipher(), v.plain(), "--passfile", v.passfile()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: the vault " + v.cipher() + " is in use by another sigilfs process\n");
  EXPECT_TRUE(test::MountsAt(v.plain()).empty());
}

// export and fsck only read: they warn that the mount may not have written back yet, and work.
TEST(MountLockTest, OfflineReadersWarnAndGoOn) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault v;
  std::ofstream(v.path("f")) << "contents";
  const std::string warning = "sigilfs: warning: the vault " + v.cipher() + " is mounted on " +
                              fs::canonical(v.plain()).string() +
                              ": what this reads may be stale\n";
  ProcessResult r =
      RunProcess({SIGILFS_BINARY, "export", v.cipher(), "f", "-", "--passfile", v.passfile()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "contents");
  EXPECT_EQ(r.err, warning);
  r = RunProcess({SIGILFS_BINARY, "fsck", v.cipher(), "--passfile", v.passfile()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err, warning);
  EXPECT_NE(r.out.find("1 file "), std::string::npos) << r.out;
}

// `sigilfs unmount` returns once the daemon let go of the vault, so the offline commands and a
// new mount work at once, without warnings.
TEST(MountLockTest, AfterUnmountEverythingWorksAgain) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault v;
  std::ofstream(v.path("f")) << "contents";
  test::TempDir tmp;
  std::ofstream(tmp.path() / "new") << "new file";
  ProcessResult r = RunProcess({SIGILFS_BINARY, "unmount", v.plain()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunProcess({SIGILFS_BINARY, "verity", "enable", v.cipher(), "f", "--passfile", v.passfile()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunProcess({SIGILFS_BINARY, "import", v.cipher(), (tmp.path() / "new").string(), "--passfile",
                  v.passfile()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunProcess({SIGILFS_BINARY, "export", v.cipher(), "new", "-", "--passfile", v.passfile()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "new file");
  v.Unmount();  // collects the daemon, long gone
  v.Mount();
  EXPECT_EQ(test::ReadAll(v.path("f")), "contents");
  EXPECT_EQ(test::ReadAll(v.path("new")), "new file");
}

// "pid (comm) S ...": the state letter of process `pid`, or 0 if it is gone.
char StateOf(pid_t pid) {
  std::string text = test::ReadAll("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? 0 : text[close + 2];
}

// `sigilfs unmount` returns once the daemon has ended, not only once the kernel let go: a
// shutdown script may unmount the disk under the vault next. A daemon that does not end in
// time (here: stopped) is named, with exit 1.
TEST(MountLockTest, UnmountReturnsOnceTheDaemonHasEnded) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault v;
  for (int i = 0; i < 20; ++i) std::ofstream(v.path("f" + std::to_string(i))) << "contents";
  const auto holder = core::VaultLock::HolderOf(v.cipher());
  ASSERT_TRUE(holder.has_value());
  ASSERT_EQ(holder->pid, v.pid());
  ProcessResult r = RunProcess({SIGILFS_BINARY, "unmount", v.plain()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const char state = StateOf(v.pid());
  EXPECT_TRUE(state == 'Z' || state == 0) << "the daemon is still running: " << state;
  EXPECT_EQ(core::VaultLock::HolderOf(v.cipher()), std::nullopt);  // that process has ended
  v.Unmount();

  v.Mount();
  ASSERT_EQ(::kill(v.pid(), SIGSTOP), 0);
  r = RunProcess({SIGILFS_BINARY, "unmount", v.plain(), "--timeout", "1"});
  ASSERT_EQ(::kill(v.pid(), SIGCONT), 0);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: " + v.plain() + " is unmounted, but its daemon (process " +
                       std::to_string(v.pid()) +
                       ") has not ended after 1 s (it may still be writing back; the vault is "
                       "not free yet)\n");
}

// The lock is held by the process that serves (fuse_daemonize forks, and the process that was
// started exits), and is not handed to the --extpass program.
TEST(MountLockTest, TheDetachedDaemonHoldsTheLockAndNoProgramItRunsDoes) {
  SIGILFS_NEEDS_FUSE();
  test::TempDir tmp;
  const std::string cipher = (tmp.path() / "cipher").string();
  const std::string plain = (tmp.path() / "plain").string();
  const std::string other = (tmp.path() / "other").string();
  const std::string pass = (tmp.path() / "pass").string();
  const std::string fds = (tmp.path() / "fds").string();
  fs::create_directory(plain);
  fs::create_directory(other);
  std::ofstream(pass) << "pw\n";
  ASSERT_EQ(
      RunProcess({SIGILFS_BINARY, "init", cipher, "--kdf", "test", "--passfile", pass}).exit_code,
      0);
  ExtraMounts extra;
  extra.Watch(plain, 0);
  extra.Watch(other, 0);
  ProcessResult r = RunProcess({SIGILFS_BINARY, "mount", cipher, plain, "--extpass",
                                "ls -l /proc/self/fd >" + fds + "; echo pw"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(test::MountsAt(plain).size(), 1u);
  EXPECT_EQ(test::ReadAll(fds).find(core::kLockFileName), std::string::npos) << test::ReadAll(fds);
  r = MountDetached(cipher, other, pass);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, Mounted(cipher, plain));
  r = RunProcess({SIGILFS_BINARY, "unmount", plain});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::MountsAt(plain).empty());
  r = MountDetached(cipher, other, pass);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunProcess({SIGILFS_BINARY, "unmount", other});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A crash leaves no lock: the kernel drops it with the daemon's last descriptor.
TEST(MountLockTest, ADaemonKilledWithSigkillLeavesNoLock) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault v;
  std::ofstream(v.path("f")) << "contents";
  for (int round = 0; round < 3; ++round) {
    v.Kill();
    ASSERT_NO_THROW(v.Mount()) << "round " << round;
    EXPECT_EQ(test::ReadAll(v.path("f")), "contents");
  }
  v.Kill();
  const ProcessResult r =
      RunProcess({SIGILFS_BINARY, "verity", "enable", v.cipher(), "f", "--passfile", v.passfile()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// The lock file is the vault's own: never listed by the mount, never reported by fsck, and a
// plaintext file of the same name is an ordinary file. Making it leaves the root's modification
// time (the plaintext root's) as it was.
TEST(MountLockTest, TheLockFileIsNotListedOrReported) {
  SIGILFS_NEEDS_FUSE();
  test::TempDir tmp;
  const std::string cipher = (tmp.path() / "cipher").string();
  const std::string plain = (tmp.path() / "plain").string();
  const std::string pass = (tmp.path() / "pass").string();
  fs::create_directory(plain);
  std::ofstream(pass) << "pw\n";
  ASSERT_EQ(
      RunProcess({SIGILFS_BINARY, "init", cipher, "--kdf", "test", "--passfile", pass}).exit_code,
      0);
  const fs::path lock = fs::path(cipher) / core::kLockFileName;
  ASSERT_FALSE(fs::exists(lock));
  struct stat before, after;
  ASSERT_EQ(::stat(cipher.c_str(), &before), 0);
  test::MountedVault v(cipher, plain, pass);
  ASSERT_TRUE(fs::exists(lock));
  ASSERT_EQ(::stat(cipher.c_str(), &after), 0);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  // The serving daemon's process id and start time, and nothing else.
  EXPECT_EQ(test::ReadAll(lock).rfind(std::to_string(v.pid()) + " ", 0), 0u) << test::ReadAll(lock);
  EXPECT_TRUE(fs::is_empty(v.plain()));
  std::ofstream(v.path(core::kLockFileName)) << "a plaintext file";
  std::vector<std::string> listed;
  for (const auto& e : fs::directory_iterator(v.plain())) listed.push_back(e.path().filename());
  EXPECT_EQ(listed, std::vector<std::string>{core::kLockFileName});
  EXPECT_EQ(test::ReadAll(v.path(core::kLockFileName)), "a plaintext file");
  EXPECT_EQ(test::ReadAll(lock).rfind(std::to_string(v.pid()) + " ", 0), 0u);
  v.Unmount();
  const ProcessResult r =
      RunProcess({SIGILFS_BINARY, "fsck", v.cipher(), "--passfile", v.passfile()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "1 directory, 1 file (0 sealed), 0 symlinks checked; 0 problems\n");
  EXPECT_EQ(r.err, "");
}

}  // namespace
}  // namespace sigilfs
