// End-to-end tests of reverse mode: `sigilfs reverse` mounts a plain tree's encrypted view, which
// rsync and tar copy as they are; the copy mounts as a vault holding the plain tree; incremental
// copies move only what changed; `sigilfs verify-backup` names every difference.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "test_support/mount.h"
#include "test_support/pattern.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"
#include "test_support/tree_snapshot.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::MountedVault;
using test::ProcessResult;
using test::RunProcess;

void WriteFile(const fs::path& p, const std::vector<uint8_t>& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// The number after `label` in rsync's --stats output ("Literal data: 4,900 bytes"), or -1.
long long StatOf(const std::string& stats, const std::string& label) {
  const size_t at = stats.find(label);
  if (at == std::string::npos) return -1;
  std::string digits;
  for (size_t i = at + label.size(); i < stats.size() && stats[i] != '\n'; ++i) {
    if (std::isdigit(static_cast<unsigned char>(stats[i])) != 0)
      digits += stats[i];
    else if (stats[i] != ',' && stats[i] != ' ' && !digits.empty())
      break;
  }
  return digits.empty() ? -1 : std::stoll(digits);
}

// A snapshot without the root's own line: a vault's root also holds its lock file, which moves
// the root's time when the copy is mounted.
std::map<std::string, std::string> Below(const fs::path& root) {
  auto snap = test::Snapshot(root);
  snap.erase(".");
  return snap;
}

class CliReverseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    std::ofstream(Pass()) << "backup passphrase\n";
    fs::create_directories(Plain() / "src" / "deep");
    fs::create_directories(Tmp("view"));
    WriteFile(Plain() / "big", test::Pattern(1 << 20, 1));
    WriteFile(Plain() / "empty", {});
    WriteFile(Plain() / "src" / "a.c", test::Pattern(5000, 2));
    WriteFile(Plain() / "src" / "deep" / "b.h", test::Pattern(4096, 3));
    WriteFile(Plain() / "src" / std::string(230, 'n'), test::Pattern(300, 4));
    fs::create_symlink("src/a.c", Plain() / "link");
    fs::create_hard_link(Plain() / "src" / "a.c", Plain() / "a-again");
    ASSERT_EQ(::mkfifo((Plain() / "fifo").c_str(), 0600), 0);
    ASSERT_EQ(::setxattr((Plain() / "big").c_str(), "user.origin", "camera", 6, 0), 0);
    ProcessResult r = Sigilfs({"init", "--reverse", Plain().string(), "--kdf", "test"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Backdate(Plain());
  }

  // Every entry's times an hour back. rsync compares times in whole seconds, also when it
  // decides whether to set one: an entry it makes within the second its source was made in
  // would keep the time of its making.
  static void Backdate(const fs::path& root) {
    struct timespec past;
    ::clock_gettime(CLOCK_REALTIME, &past);
    past.tv_sec -= 3600;
    const struct timespec times[2] = {past, past};
    for (const auto& e : fs::recursive_directory_iterator(root))
      ASSERT_EQ(::utimensat(AT_FDCWD, e.path().c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
    ASSERT_EQ(::utimensat(AT_FDCWD, root.c_str(), times, 0), 0);
  }

  ProcessResult Sigilfs(std::vector<std::string> args) {
    args.insert(args.begin(), SIGILFS_BINARY);
    args.insert(args.end(), {"--passfile", Pass()});
    return RunProcess(args, "", Env());
  }
  static std::vector<std::string> Env() {
    auto env = test::EnvironmentWithout("SIGILFS_TEST_KDF");
    env.emplace_back("SIGILFS_TEST_KDF=1");
    return env;
  }
  std::unique_ptr<MountedVault> View() {
    return std::make_unique<MountedVault>(MountedVault::ReverseView{}, Plain().string(),
                                          Tmp("view").string(), Pass());
  }
  // rsync of the view into `to` with `flags`: its --stats.
  std::string Rsync(const std::string& to, std::vector<std::string> flags = {}) {
    std::vector<std::string> args = {"/usr/bin/rsync", "-aHX", "--stats"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {Tmp("view").string() + "/", to + "/"});
    ProcessResult r = RunProcess(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  fs::path Tmp(const std::string& rel) const { return tmp_.path() / rel; }
  fs::path Plain() const { return Tmp("plain"); }
  std::string Pass() const { return Tmp("pw").string(); }

  test::TempDir tmp_;
};

TEST_F(CliReverseTest, AnRsyncOfTheViewIsAVaultAndTheNextOnlyCopiesWhatChanged) {
  auto view = View();
  EXPECT_FALSE(fs::exists(Tmp("view") / ".sigilfs-reverse.conf"));
  EXPECT_TRUE(fs::exists(Tmp("view") / "sigilfs.conf"));
  const std::string copy = Tmp("copy").string();
  const std::string first = Rsync(copy);
  EXPECT_GT(StatOf(first, "Literal data:"), 1 << 20) << first;

  // Nothing changed: nothing is sent.
  const std::string second = Rsync(copy);
  EXPECT_EQ(StatOf(second, "Literal data:"), 0) << second;
  EXPECT_EQ(StatOf(second, "Number of regular files transferred:"), 0) << second;

  // One byte of one page changes: about one unit (4,124 bytes) is sent.
  {
    std::fstream f(Plain() / "big", std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(500000);
    f.put('Z');
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the view's attribute timeout
  const std::string third = Rsync(copy, {"--inplace", "--no-whole-file"});
  EXPECT_EQ(StatOf(third, "Number of regular files transferred:"), 1) << third;
  EXPECT_GT(StatOf(third, "Literal data:"), 0) << third;
  EXPECT_LT(StatOf(third, "Literal data:"), 3 * 4124) << third;

  // The copy is ciphertext, and a vault that holds the plain tree.
  for (const auto& e : fs::recursive_directory_iterator(copy)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name.find("src") == std::string::npos && name.find("big") == std::string::npos)
        << name;
  }
  ProcessResult verified = Sigilfs({"verify-backup", copy, Plain().string()});
  EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
  EXPECT_NE(verified.out.find("the backup holds the plain tree"), std::string::npos);
  fs::create_directory(Tmp("restored"));
  {
    MountedVault restored(copy, Tmp("restored").string(), Pass());
    auto want = Below(Plain());
    want.erase(".sigilfs-reverse.conf");
    EXPECT_EQ(Below(Tmp("restored")), want);
    // The copy is an ordinary vault from now on: it takes writes (sealed with random nonces).
    WriteFile(Tmp("restored") / "src" / "new", test::Pattern(10000, 5));
    EXPECT_EQ(test::ReadAll(Tmp("restored") / "src" / "new").size(), 10000u);
  }
}

TEST_F(CliReverseTest, ChangesToThePlainTreeShowAndTheViewTakesNoWrites) {
  auto view = View();
  const std::string copy = Tmp("copy").string();
  Rsync(copy);
  // No write of any kind through the view.
  std::string stored;
  for (const auto& e : fs::directory_iterator(Tmp("view")))
    if (e.is_regular_file() && e.path().filename().string().find('.') == std::string::npos)
      stored = e.path().string();
  ASSERT_FALSE(stored.empty());
  EXPECT_LT(::open(stored.c_str(), O_WRONLY), 0);
  EXPECT_EQ(errno, EROFS);
  EXPECT_NE(::mkdir((Tmp("view") / "x").c_str(), 0700), 0);
  EXPECT_EQ(errno, EROFS);
  EXPECT_NE(::unlink(stored.c_str()), 0);
  EXPECT_EQ(errno, EROFS);

  // The plain tree changes while mounted: a file rewritten, one renamed, one removed.
  WriteFile(Plain() / "src" / "deep" / "b.h", test::Pattern(9000, 7));
  fs::rename(Plain() / "empty", Plain() / "src" / "moved");
  fs::remove(Plain() / "fifo");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  Rsync(copy, {"--delete"});
  ProcessResult verified = Sigilfs({"verify-backup", copy, Plain().string()});
  EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
}

TEST_F(CliReverseTest, ATarOfTheViewRestoresAndVerifyBackupNamesEachDifference) {
  auto view = View();
  const fs::path archive = Tmp("view.tar"), copy = Tmp("untarred");
  ProcessResult tar = RunProcess(
      {"/usr/bin/tar", "-C", Tmp("view").string(), "--xattrs", "-cf", archive.string(), "."});
  ASSERT_EQ(tar.exit_code, 0) << tar.err;
  fs::create_directory(copy);
  tar = RunProcess({"/usr/bin/tar", "-C", copy.string(), "--xattrs", "--xattrs-include=user.*",
                    "-xf", archive.string()});
  ASSERT_EQ(tar.exit_code, 0) << tar.err;
  ProcessResult verified = Sigilfs({"verify-backup", copy.string(), Plain().string()});
  EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;

  // The plain tree moves on: each difference is one line, and the exit status 1.
  WriteFile(Plain() / "src" / "a.c", test::Pattern(5001, 8));
  fs::remove(Plain() / "link");
  WriteFile(Plain() / "new", {'n'});
  verified = Sigilfs({"verify-backup", copy.string(), Plain().string()});
  EXPECT_EQ(verified.exit_code, 1) << verified.out << verified.err;
  // a.c's other name comes first in name order; the inode is compared once.
  EXPECT_NE(verified.out.find("a-again: sizes differ"), std::string::npos) << verified.out;
  EXPECT_NE(verified.out.find("link: in the vault but not in the plain tree"), std::string::npos)
      << verified.out;
  EXPECT_NE(verified.out.find("new: missing from the vault"), std::string::npos) << verified.out;
  EXPECT_NE(verified.out.find("differences"), std::string::npos) << verified.out;

  // Without the plain tree: every unit must open. One byte of the copy's big file changed fails.
  ProcessResult alone = Sigilfs({"verify-backup", copy.string()});
  EXPECT_EQ(alone.exit_code, 0) << alone.out << alone.err;
  fs::path biggest;
  for (const auto& e : fs::recursive_directory_iterator(copy))
    if (!e.is_symlink() && e.is_regular_file() && e.file_size() > (1 << 20)) biggest = e.path();
  ASSERT_FALSE(biggest.empty());
  {
    std::fstream f(biggest, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(300000);
    const int c = f.peek();
    f.put(static_cast<char>(c ^ 1));
  }
  alone = Sigilfs({"verify-backup", copy.string()});
  EXPECT_EQ(alone.exit_code, 1) << alone.out << alone.err;
  EXPECT_NE(alone.out.find("big"), std::string::npos) << alone.out;
}

// The summary restic prints last with --json: {"message_type":"summary",...}.
long long ResticSummary(const std::string& out, const std::string& field) {
  const size_t at = out.rfind("\"message_type\":\"summary\"");
  if (at == std::string::npos) return -1;
  const size_t f = out.find("\"" + field + "\":", at);
  if (f == std::string::npos) return -1;
  return std::stoll(out.substr(f + field.size() + 3));
}

TEST_F(CliReverseTest, ResticBacksTheViewUpIncrementallyAndItsRestoreIsTheVault) {
  if (!fs::exists("/usr/bin/restic")) {
    if (test::EnvironmentFlag("SIGILFS_REQUIRE_FUSE")) FAIL() << "restic is not installed";
    GTEST_SKIP() << "restic is not installed (scripts/install-deps.sh installs it)";
  }
  auto view = View();
  std::vector<std::string> env = test::EnvironmentWithout("RESTIC_PASSWORD");
  env.emplace_back("RESTIC_PASSWORD=repository passphrase");
  env.push_back("HOME=" + Tmp("").string());
  const std::string repo = Tmp("repo").string();
  auto restic = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/restic", "--no-cache", "--quiet", "-r", repo});
    return RunProcess(args, "", env);
  };
  ProcessResult r = restic({"init"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = restic({"backup", "--json", Tmp("view").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(ResticSummary(r.out, "data_blobs"), 0) << r.out;
  // The same tree again: the same bytes, so no new data.
  r = restic({"backup", "--json", "--force", Tmp("view").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ResticSummary(r.out, "data_blobs"), 0) << r.out;  // (its trees keep access times)

  r = restic({"restore", "latest", "--target", Tmp("restored").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path copy = Tmp("restored") / Tmp("view").relative_path();
  ProcessResult verified = Sigilfs({"verify-backup", copy.string(), Plain().string()});
  EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
}

TEST_F(CliReverseTest, AFileSystemMountedInsideThePlainTreeIsLeftOut) {
  SIGILFS_NEEDS_ROOT("mounting a tmpfs");
  fs::create_directory(Plain() / "elsewhere");
  ASSERT_EQ(::mount("tmpfs", (Plain() / "elsewhere").c_str(), "tmpfs", 0, "size=1m"), 0);
  WriteFile(Plain() / "elsewhere" / "not-backed-up", {'x'});
  // A file can be a mount point too: a bind mount of one from the other file system.
  WriteFile(Plain() / "bound", {'b'});
  ASSERT_EQ(::mount((Plain() / "elsewhere" / "not-backed-up").c_str(), (Plain() / "bound").c_str(),
                    nullptr, MS_BIND, nullptr),
            0);
  {
    auto view = View();
    Rsync(Tmp("copy").string());  // exit 0: nothing listed that then vanished
  }
  ASSERT_EQ(::umount((Plain() / "bound").c_str()), 0);
  ASSERT_EQ(::umount((Plain() / "elsewhere").c_str()), 0);
  // The view left the mount point out (what was mounted there, and the directory under it).
  ProcessResult verified = Sigilfs({"verify-backup", Tmp("copy").string(), Plain().string()});
  EXPECT_EQ(verified.exit_code, 1) << verified.out << verified.err;
  EXPECT_NE(verified.out.find("elsewhere: missing from the vault"), std::string::npos)
      << verified.out;
  EXPECT_NE(verified.out.find("bound: missing from the vault"), std::string::npos) << verified.out;
}

TEST_F(CliReverseTest, ABoundOnOpenDirectoriesStillCopiesTheWholeTree) {
  // More directories than the view may keep open: the others are opened again when needed.
  for (int i = 0; i < 30; ++i) {
    const fs::path dir = Plain() / ("d" + std::to_string(i)) / "inner";
    fs::create_directories(dir);
    WriteFile(dir / "f", test::Pattern(100 + i, i));
  }
  Backdate(Plain());
  {
    MountedVault view(MountedVault::ReverseView{}, Plain().string(), Tmp("view").string(), Pass(),
                      {"--max-open-dirs", "3"});
    Rsync(Tmp("copy").string());
    Rsync(Tmp("copy2").string());  // again, with the kernel's cache of the tree warm
  }
  for (const char* copy : {"copy", "copy2"}) {
    ProcessResult verified = Sigilfs({"verify-backup", Tmp(copy).string(), Plain().string()});
    EXPECT_EQ(verified.exit_code, 0) << copy << ": " << verified.out << verified.err;
  }
}

TEST_F(CliReverseTest, ExcludedEntriesStayOutOfTheBackup) {
  std::ofstream(Tmp("excludes")) << "# build trees and caches\nsrc/deep/\n*.c\n";
  const std::string copy = Tmp("copy").string();
  {
    MountedVault view(MountedVault::ReverseView{}, Plain().string(), Tmp("view").string(), Pass(),
                      {"--exclude-from", Tmp("excludes").string(), "--exclude", "fifo"});
    Rsync(copy);
  }
  ProcessResult verified = Sigilfs({"verify-backup", copy, Plain().string(), "--exclude-from",
                                    Tmp("excludes").string(), "--exclude", "fifo"});
  EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
  // Without the same rules, the left-out entries are differences, each named.
  verified = Sigilfs({"verify-backup", copy, Plain().string()});
  EXPECT_EQ(verified.exit_code, 1) << verified.out << verified.err;
  EXPECT_NE(verified.out.find("src/deep: missing from the vault"), std::string::npos)
      << verified.out;
  EXPECT_NE(verified.out.find("src/a.c: missing from the vault"), std::string::npos)
      << verified.out;
  EXPECT_NE(verified.out.find("fifo: missing from the vault"), std::string::npos) << verified.out;
  // A pattern that can match nothing is refused before the passphrase is read.
  ProcessResult bad =
      Sigilfs({"reverse", Plain().string(), Tmp("view").string(), "--exclude", "/"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("matches nothing"), std::string::npos) << bad.err;
}

TEST_F(CliReverseTest, BadInputIsNamedPlainly) {
  ProcessResult r = Sigilfs({"init", "--reverse", Plain().string(), "--kdf", "test"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already has a reverse config"), std::string::npos) << r.err;
  // info and passwd find the reverse config of a plain directory.
  r = RunProcess({SIGILFS_BINARY, "info", Plain().string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("its encrypted view"), std::string::npos) << r.out;
  std::ofstream(Tmp("pw2")) << "new passphrase\n";
  r = RunProcess({SIGILFS_BINARY, "passwd", Plain().string(), "--passfile", Pass(),
                  "--new-passfile", Tmp("pw2").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Sigilfs({"reverse", Plain().string(), Tmp("view").string()});  // the old passphrase
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("wrong passphrase"), std::string::npos) << r.err;
  r = Sigilfs({"reverse", Tmp("nothing").string(), Tmp("view").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("the plain directory"), std::string::npos) << r.err;
  fs::create_directory(Tmp("bare"));
  r = Sigilfs({"reverse", Tmp("bare").string(), Tmp("view").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("init --reverse"), std::string::npos) << r.err;
  // verify-backup tells a check it could not make (2) from a backup that differs (1).
  r = Sigilfs({"verify-backup", Tmp("nothing").string(), Plain().string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  fs::create_directory(Tmp("backup"));
  r = Sigilfs({"verify-backup", Tmp("backup").string(), Tmp("no-such-plain").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = Sigilfs({"verify-backup", Tmp("backup").string(), "--exclude", "*.o"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("need PLAINDIR"), std::string::npos) << r.err;
  // A mount point that holds entries is refused, naming them, unless -o nonempty.
  WriteFile(Tmp("view") / "hidden", {'h'});
  r = Sigilfs({"reverse", Plain().string(), Tmp("view").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("'hidden'"), std::string::npos) << r.err;
  fs::remove(Tmp("view") / "hidden");
  r = Sigilfs({"reverse", Plain().string(), Tmp("view").string(), "-o", "noatime,bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'bogus'"), std::string::npos) << r.err;
  std::ofstream(Tmp("wrong")) << "not it\n";
  r = RunProcess({SIGILFS_BINARY, "reverse", Plain().string(), Tmp("view").string(), "--passfile",
                  Tmp("wrong").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("wrong passphrase"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sigilfs
