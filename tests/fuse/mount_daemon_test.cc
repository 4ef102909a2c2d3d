// The daemon's own features: the stats file (on SIGUSR1 and on unmount), idle unmount, mounts
// through mount(8)/fstab syntax with options in -o, relative mount points, the mount's
// read-ahead, and remounting read-only and back.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fsverity.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support/daemon_stats.h"
#include "test_support/mount.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;

// From the mount table, not statfs(2): asking the mount would count as using it.
bool IsFuseMount(const std::string& path) {
  std::ifstream mounts("/proc/self/mounts");
  std::string device, where, type, rest;
  while (mounts >> device >> where >> type && std::getline(mounts, rest))
    if (where == path && type.rfind("fuse", 0) == 0) return true;
  return false;
}

// Waits up to `limit` for `done()`.
template <typename F>
bool WaitFor(F done, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

using test::StatsCounter;

TEST(MountDaemonTest, StatsFileOnSigusr1AndOnUnmount) {
  SIGILFS_NEEDS_FUSE();
  test::TempDir out;
  const std::string stats = (out.path() / "stats.json").string();
  test::MountedVault vault({"--stats-file", stats});
  {
    std::ofstream f(vault.path("a"), std::ios::binary);
    f << std::string(10 * 4096, 'x');
  }  // close() waits for the flush: the ten pages are sealed and counted by now
  test::ProcessResult r = test::RunProcess({"/usr/bin/pkill", "-USR1", "-f", vault.cipher()});
  ASSERT_EQ(r.exit_code, 0);
  ASSERT_TRUE(WaitFor([&] { return fs::exists(stats); }, std::chrono::seconds(5)));
  const std::string first = test::ReadAll(stats);
  EXPECT_GE(StatsCounter(first, "pages_encrypted"), 10) << first;
  EXPECT_GE(StatsCounter(first, "backing_bytes_written"), 10 * 4096) << first;
  {
    // One byte into an existing page: one more page sealed (whether or not the daemon still
    // had it cached: the kernel may send the last release after the next open).
    int fd = ::open(vault.path("a").c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "y", 1, 5 * 4096 + 7), 1);
    ::close(fd);
  }
  vault.Unmount();
  const std::string last = test::ReadAll(stats);
  EXPECT_GE(StatsCounter(last, "pages_encrypted"), StatsCounter(first, "pages_encrypted") + 1)
      << last;
  EXPECT_EQ(StatsCounter(last, "verity_pages_verified"), 0) << last;
  EXPECT_EQ(StatsCounter(last, "short_copies"), 0) << last;
}

TEST(MountDaemonTest, IdleUnmountWaitsForOpenFiles) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault vault({"--idle", "1s"});
  int fd = ::open(vault.path("held").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "data", 4), 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_TRUE(IsFuseMount(vault.plain())) << "unmounted with a file open";
  ::close(fd);
  EXPECT_TRUE(WaitFor([&] { return !IsFuseMount(vault.plain()); }, std::chrono::seconds(8)))
      << vault.log();
  // What was written reached the cipher files.
  vault.Remount();
  EXPECT_EQ(test::ReadAll(vault.path("held")), "data");
}

TEST(MountDaemonTest, MountSyntaxWithOptionsInDashO) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS(::access("/sbin/mount.fuse3", X_OK) == 0, "no mount.fuse3");
  test::MountedVault vault;  // for its vault; mounted again below the fstab way
  vault.Unmount();
  test::TempDir out;
  const std::string stats = (out.path() / "s.json").string();
  // What an /etc/fstab line `CIPHERDIR MOUNTPOINT fuse.sigilfs passfile=F 0 0` runs, with the
  // program named in the source (mount(8) looks `sigilfs` up in a fixed PATH otherwise).
  test::ProcessResult r = test::RunProcess(
      {"/bin/mount", "-t", "fuse", std::string(SIGILFS_BINARY) + "#" + vault.cipher(),
       vault.plain(), "-o", "passfile=" + vault.passfile() + ",stats_file=" + stats});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(IsFuseMount(vault.plain()));
  std::ofstream(vault.path("f")) << "through fstab";
  EXPECT_EQ(test::ReadAll(vault.path("f")), "through fstab");
  r = test::RunProcess({"/bin/umount", vault.plain()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(WaitFor([&] { return fs::exists(stats); }, std::chrono::seconds(5)));
  // A relative mount point works too (the daemon changes to / and must still unmount).
  test::ProcessResult m = test::RunProcess(
      {"/bin/sh", "-c",
       "cd '" + fs::path(vault.plain()).parent_path().string() + "' && '" + SIGILFS_BINARY +
           "' mount '" + vault.cipher() + "' plain --passfile '" + vault.passfile() + "'"});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_EQ(test::ReadAll(vault.path("f")), "through fstab");
  ASSERT_EQ(::kill(std::stoi(test::RunProcess({"/usr/bin/pgrep", "-f", "-n", vault.cipher()}).out),
                   SIGTERM),
            0);
  EXPECT_TRUE(WaitFor([&] { return !IsFuseMount(vault.plain()); }, std::chrono::seconds(8)));
}

// The mount's source is the cipher directory's absolute path, whatever path it was given, so
// `findmnt -S` and `mount | grep` find it; the type is fuse.sigilfs.
TEST(MountDaemonTest, TheMountTableNamesTheVaultByItsAbsolutePath) {
  SIGILFS_NEEDS_FUSE();
  test::TempDir dir;
  // A comma and a space: libfuse splits options at commas, the mount table escapes spaces.
  const fs::path cipher = dir.path() / "my vault, 2", plain = dir.path() / "plain";
  fs::create_directories(cipher);
  fs::create_directories(plain);
  std::ofstream(dir.path() / "pw") << "pw\n";
  test::ProcessResult r = test::RunProcess({SIGILFS_BINARY, "init", cipher.string(), "--kdf",
                                            "test", "--passfile", (dir.path() / "pw").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = test::RunProcess({"/bin/sh", "-c",
                        "cd \"$1\" && exec \"$2\" mount 'my vault, 2' plain --passfile pw", "sh",
                        dir.path().string(), SIGILFS_BINARY});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(IsFuseMount(plain.string()));
  r = test::RunProcess(
      {"/usr/bin/findmnt", "-n", "-o", "SOURCE,FSTYPE", "--mountpoint", plain.string()});
  EXPECT_EQ(r.out, cipher.string() + " fuse.sigilfs\n") << r.err;
  r = test::RunProcess({"/usr/bin/findmnt", "-n", "-o", "TARGET", "-S", cipher.string()});
  EXPECT_EQ(r.out, plain.string() + "\n") << r.err;
  r = test::RunProcess({SIGILFS_BINARY, "unmount", plain.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(IsFuseMount(plain.string()));
  if (IsFuseMount(plain.string())) (void)test::RunProcess({"/bin/umount", "-l", plain.string()});
}

// The daemon clears set-ID bits itself (FUSE_HANDLE_KILLPRIV_V2), so the kernel asks for a
// file's security.capability once, not before every write: a round trip per write(2) saved.
TEST(MountDaemonTest, WritesDoNotAskForSecurityAttributesEachTime) {
  SIGILFS_NEEDS_FUSE();
  test::TempDir out;
  const std::string stats = (out.path() / "s.json").string();
  test::MountedVault vault({"--stats-file", stats});
  const long long before = test::StatsCounter(test::RequestStats(vault.pid(), stats), "getxattrs");
  {
    const int fd = ::open(vault.path("f").c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    for (int i = 0; i < 200; ++i) ASSERT_EQ(::write(fd, "0123456789", 10), 10);
    ::close(fd);
  }
  const long long asked =
      test::StatsCounter(test::RequestStats(vault.pid(), stats), "getxattrs") - before;
  EXPECT_LE(asked, 2) << "200 writes";
  EXPECT_EQ(test::ReadAll(vault.path("f")).size(), 2000u);
}

// The kernel's read-ahead for the mount (its backing device's read_ahead_kb), in KiB.
std::string MountReadahead(const std::string& mountpoint) {
  struct stat st;
  if (::stat(mountpoint.c_str(), &st) != 0) return "no mount";
  return test::ReadAll("/sys/class/bdi/" + std::to_string(major(st.st_dev)) + ":" +
                       std::to_string(minor(st.st_dev)) + "/read_ahead_kb");
}

// Sequential reads come in requests no larger than the mount's read-ahead window: the daemon
// raises it from the kernel's 128 KiB (as root, where sysfs is writable), and the size is an
// option; 0 leaves the kernel's. Bad values are refused before anything is mounted.
TEST(MountDaemonTest, ReadaheadOfTheMountIsSetAndAnOption) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS_ROOT("setting a device's read-ahead needs root");
  {
    test::MountedVault vault;
    EXPECT_EQ(MountReadahead(vault.plain()), "2048\n");
    vault.Unmount();
  }
  {
    test::MountedVault vault({"-o", "readahead=512"});
    EXPECT_EQ(MountReadahead(vault.plain()), "512\n");
    const std::string data(3 << 20, 'r');
    std::ofstream(vault.path("f")) << data;
    EXPECT_EQ(test::ReadAll(vault.path("f")), data);
  }
  {
    test::MountedVault vault({"--readahead", "0"});
    EXPECT_EQ(MountReadahead(vault.plain()), "128\n") << "the kernel's default";
    vault.Unmount();
    for (const char* bad : {"lots", "-1", "100000"}) {
      test::ProcessResult r =
          test::RunProcess({SIGILFS_BINARY, "mount", vault.cipher(), vault.plain(), "--passfile",
                            vault.passfile(), "--readahead", bad});
      EXPECT_NE(r.exit_code, 0) << bad;
      EXPECT_NE(r.err.find("read-ahead"), std::string::npos) << r.err;
      EXPECT_FALSE(IsFuseMount(vault.plain()));
    }
    vault.Mount();
  }
}

// `mount -o remount,ro MOUNTPOINT` runs, through mount.fuse3, `sigilfs SOURCE MOUNTPOINT -o
// ...,remount,ro`: the same daemon keeps serving, read-only, and a remount,rw makes it writable.
TEST(MountDaemonTest, RemountReadOnlyAndBack) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS_ROOT("remounting needs root");
  test::MountedVault vault;
  std::ofstream(vault.path("f")) << "before";
  const std::string source = vault.cipher();
  auto remount = [&](const std::string& how) {
    // mount(8) hands the helper the mount's current options too, user_id= and group_id= among
    // them.
    return test::RunProcess(
        {SIGILFS_BINARY, source, vault.plain(), "-o", "rw,remount,user_id=0,group_id=0," + how});
  };
  auto read_only = [&] {
    struct statvfs sv;
    return ::statvfs(vault.plain().c_str(), &sv) == 0 && (sv.f_flag & ST_RDONLY) != 0;
  };
  // A file open for writing keeps the mount writable (the kernel refuses with EBUSY).
  {
    const int fd = ::open(vault.path("f").c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    EXPECT_NE(remount("ro").exit_code, 0);
    ::close(fd);
  }
  test::ProcessResult r;
  // The release of that descriptor reaches the daemon a moment after close().
  ASSERT_TRUE(WaitFor([&] { return (r = remount("ro")).exit_code == 0; }, std::chrono::seconds(5)))
      << r.err;
  EXPECT_TRUE(read_only());
  EXPECT_EQ(test::ReadAll(vault.path("f")), "before");
  EXPECT_EQ(::open(vault.path("g").c_str(), O_WRONLY | O_CREAT, 0644), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::unlink(vault.path("f").c_str()), -1);
  EXPECT_EQ(errno, EROFS);
  r = remount("rw");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(read_only());
  std::ofstream(vault.path("g")) << "after";
  EXPECT_EQ(test::ReadAll(vault.path("g")), "after");
  // The mount's other flags survive the round trip.
  struct statvfs sv;
  ASSERT_EQ(::statvfs(vault.plain().c_str(), &sv), 0);
  EXPECT_NE(sv.f_flag & ST_NOSUID, 0u);
  // Only a sigilfs mount is remounted.
  test::TempDir other;
  r = test::RunProcess({SIGILFS_BINARY, source, other.path().string(), "-o", "remount,ro"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not a sigilfs mount"), std::string::npos) << r.err;
}

// The kernel leaves access times to FUSE servers (it never updates a FUSE inode's atime itself),
// so `-o noatime` is the daemon's to honour: reading a file, executing one (the kernel reads it,
// and maps it), listing a directory and the stat of a sealed file (which reads its record)
// must leave every atime as it was. The daemon's reads of the cipher files would otherwise
// move them, as the backing filesystem's relatime does. Without noatime, reads still do, and a
// remount to noatime takes effect.
TEST(MountDaemonTest, NoatimeKeepsAccessTimesOnReadExecListAndStat) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault vault({"-o", "noatime"});
  const std::string data = vault.path("data"), tool = vault.path("tool"), dir = vault.path("dir"),
                    sealed = vault.path("sealed");
  std::ofstream(data) << std::string(64 << 10, 'd');
  {
    std::ifstream in("/bin/true", std::ios::binary);
    std::ofstream(tool, std::ios::binary) << in.rdbuf();
  }
  ASSERT_EQ(::chmod(tool.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  std::ofstream(dir + "/entry") << "x";
  std::ofstream(sealed) << std::string(10000, 's');
  bool have_sealed = false;
  {
    const int fd = ::open(sealed.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    fsverity_enable_arg arg{};
    arg.version = 1;
    arg.hash_algorithm = FS_VERITY_HASH_ALG_SHA256;
    arg.block_size = 4096;
    have_sealed = ::ioctl(fd, FS_IOC_ENABLE_VERITY, &arg) == 0;  // Linux 6.10 and later
    ::close(fd);
  }
  const std::vector<std::string> all = {data, tool, dir, sealed};
  // An atime older than the mtime: relatime on the backing filesystem would move it on a read.
  constexpr time_t kOld = 978307200;  // 2001-01-01
  auto age = [&] {
    for (const std::string& p : all) {
      const struct timespec ts[2] = {{kOld, 0}, {0, UTIME_OMIT}};
      ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, 0), 0) << p;
      if (p != data && p != tool) continue;
      // Nothing of it in the kernel's page cache: the reads below reach the daemon. (Opening
      // a file makes the daemon read its header: the sealed one is only stat'ed.)
      const int fd = ::open(p.c_str(), O_RDONLY);
      ASSERT_GE(fd, 0) << p;
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
  };
  auto use = [&] {
    EXPECT_EQ(test::ReadAll(data).size(), 64u << 10);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl(tool.c_str(), tool.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
    EXPECT_EQ(entries, 1u);
    // The kernel's attributes run out after a second: then a stat reaches the daemon, which
    // reads a sealed file's record for its size.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    struct stat st;
    ASSERT_EQ(::stat(sealed.c_str(), &st), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  };
  auto atime = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 ? st.st_atim.tv_sec : -1;
  };
  age();
  use();
  for (const std::string& p : all) {
    if (p == sealed && !have_sealed) continue;
    EXPECT_EQ(atime(p), kOld) << p << " under noatime";
  }

  // Mounted without noatime (so relatime, unless the backing filesystem itself is mounted
  // noatime), reading the file and running the program move their access times.
  struct statvfs backing;
  ASSERT_EQ(::statvfs(vault.cipher().c_str(), &backing), 0);
  if ((backing.f_flag & ST_NOATIME) != 0) return;
  vault.Unmount();
  {
    test::MountedVault relatime(vault.cipher(), vault.plain(), vault.passfile());
    age();
    use();
    EXPECT_GT(atime(data), kOld) << "read without noatime";
    EXPECT_GT(atime(tool), kOld) << "executed without noatime";
    if (have_sealed) {
      EXPECT_EQ(atime(sealed), kOld) << "a stat is no read";
    }
    // `mount -o remount,noatime` (root: through mount.fuse3, which runs this) reaches the
    // daemon too, within a second.
    if (::geteuid() != 0) return;
    const test::ProcessResult r = test::RunProcess(
        {SIGILFS_BINARY, vault.cipher(), vault.plain(), "-o", "rw,remount,noatime"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    struct statvfs sv;
    ASSERT_EQ(::statvfs(vault.plain().c_str(), &sv), 0);
    EXPECT_NE(sv.f_flag & ST_NOATIME, 0u);
    EXPECT_NE(sv.f_flag & ST_NOSUID, 0u) << "the mount's other flags stay";
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    age();
    EXPECT_EQ(test::ReadAll(data).size(), 64u << 10);
    EXPECT_EQ(atime(data), kOld) << "read after remount,noatime";
  }
  vault.Mount();
}

}  // namespace
}  // namespace sigilfs
