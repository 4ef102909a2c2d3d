// Recovering from interruptions with the sigilfs command (issue 39, points 6 to 8): an
// interrupted or killed import, a dead mount, a busy unmount, a full disk at init, a lost root
// IV; the messages checked word for word.
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

// The regular files of the vault's cipher tree that are entries (not the vault's own files,
// whose names have a '.'), and the staged ones a killed import left (".sigilfs.new.").
struct CipherFiles {
  size_t entries = 0;
  size_t staged = 0;
};
CipherFiles CountCipherFiles(const std::string& vault) {
  CipherFiles n;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(vault, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(".sigilfs.new.")) ++n.staged;
    if (it->is_regular_file(ec) && name.find('.') == std::string::npos) ++n.entries;
  }
  return n;
}

// `sigilfs ARGS...` started in the background, its standard error to `err`; its pid.
pid_t Start(const std::vector<std::string>& args, const std::string& err) {
  std::vector<std::string> argv = {SIGILFS_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c;
  for (std::string& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    ::execv(c[0], c.data());
    ::_exit(127);
  }
  return pid;
}

class CliImportRecoverTest : public CliRecoverTest {
 protected:
  static constexpr int kDirs = 20, kFiles = 100;
  void SetUp() override {
    CliRecoverTest::SetUp();
    for (int d = 1; d <= kDirs; ++d) {
      fs::create_directories(Source() + "/d" + std::to_string(d));
      for (int f = 1; f <= kFiles; ++f)
        std::ofstream(Source() + "/d" + std::to_string(d) + "/f" + std::to_string(f))
            << "file " << d << " " << f << "\n";
    }
  }
  std::string Source() const { return Path("share"); }
  std::vector<std::string> Import() const {
    return {"import", Vault(), Source(), "--passfile", Pass()};
  }

  // Starts the import, and sends it `signal` once some of its files are in place; its exit
  // status and standard error.
  std::pair<int, std::string> ImportCutShort(int signal) {
    const std::string err = Path("import.err");
    const pid_t pid = Start(Import(), err);
    int status = 0;
    bool ended = false;
    for (int i = 0; i < 3000 && !ended; ++i) {
      if (CountCipherFiles(Vault()).entries >= 20) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ended = ::waitpid(pid, &status, WNOHANG) == pid;
    }
    EXPECT_FALSE(ended) << "the import ended before it could be interrupted";
    if (!ended) {
      ::kill(pid, signal);
      ::waitpid(pid, &status, 0);
    }
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), test::ReadAll(err)};
  }

  // The vault's `share` exported and compared with the source: names, contents, modes, times.
  void ExpectTheWholeSource() {
    const ProcessResult r =
        Sigilfs({"export", Vault(), "share", Path("out"), "--passfile", Pass()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    size_t compared = 0;
    for (const auto& e : fs::recursive_directory_iterator(Source())) {
      const fs::path out = Path("out") / fs::relative(e.path(), Source());
      struct stat a, b;
      ASSERT_EQ(::lstat(e.path().c_str(), &a), 0);
      ASSERT_EQ(::lstat(out.c_str(), &b), 0) << out;
      EXPECT_EQ(a.st_mode, b.st_mode) << out;
      EXPECT_EQ(a.st_mtim.tv_sec, b.st_mtim.tv_sec) << out;
      EXPECT_EQ(a.st_mtim.tv_nsec, b.st_mtim.tv_nsec) << out;
      if (e.is_regular_file()) {
        EXPECT_EQ(test::ReadAll(e.path()), test::ReadAll(out)) << out;
      }
      ++compared;
    }
    EXPECT_EQ(compared, size_t{kDirs + kDirs * kFiles});
  }
};

// Ctrl-C during an import says what was done and how to finish; the same command finishes it
// (entries in place left as they are, one that changed since replaced) without --force.
TEST_F(CliImportRecoverTest, AnInterruptedImportSaysSoAndIsFinishedByTheSameCommand) {
  const auto [code, err] = ImportCutShort(SIGINT);
  EXPECT_EQ(code, 130);
  const CipherFiles after = CountCipherFiles(Vault());
  EXPECT_EQ(after.staged, 0u) << "the file being made is dropped";
  ASSERT_GT(after.entries, 0u);
  ASSERT_LT(after.entries, size_t{kDirs * kFiles});
  EXPECT_EQ(err, "sigilfs: import interrupted: " + std::to_string(after.entries) + " entries of " +
                     Source() +
                     " are in the vault at share, the rest is not; run the same command again "
                     "to finish it\n");
  EXPECT_TRUE(fs::exists(Vault() + "/sigilfs.imports"));

  // The first file in place (names go in order) changed since: it is replaced.
  std::ofstream(Source() + "/d1/f1") << "changed since";
  const ProcessResult r = Sigilfs(Import());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Finished the import of " + Source() + " into share: " +
                       std::to_string(after.entries - 1) + " entries were in place already, " +
                       std::to_string(kDirs * kFiles - after.entries + 1) +
                       " entries imported now.\n");
  EXPECT_FALSE(fs::exists(Vault() + "/sigilfs.imports"));
  ExpectTheWholeSource();
  // Finished, it is an import like any other: the entry is there.
  EXPECT_EQ(Sigilfs(Import()).err, "sigilfs: already exists: share (--force replaces it)\n");
}

// A killed import leaves its record, and maybe an entry half made under a hidden name: the same
// command removes that and finishes the import.
TEST_F(CliImportRecoverTest, AKilledImportIsFinishedAndLeavesNothingHidden) {
  const auto [code, err] = ImportCutShort(SIGKILL);
  EXPECT_EQ(code, 128 + SIGKILL);
  EXPECT_EQ(err, "");
  // A file staged at the kill, as it would be if the kill came mid-copy.
  fs::path share_dir;
  for (const auto& e : fs::directory_iterator(Vault()))
    if (e.is_directory() && e.path().filename().string().find('.') == std::string::npos)
      share_dir = e.path();
  ASSERT_FALSE(share_dir.empty());
  std::ofstream(share_dir / ".sigilfs.new.0123456789abcdef01234567") << "half";
  const ProcessResult r = Sigilfs(Import());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(CountCipherFiles(Vault()).staged, 0u);
  EXPECT_EQ(CountCipherFiles(Vault()).entries, size_t{kDirs * kFiles});
  ExpectTheWholeSource();
}

}  // namespace
}  // namespace sigilfs
