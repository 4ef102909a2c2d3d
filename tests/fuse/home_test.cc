// End-to-end tests of `sigilfs home setup` and `home undo` on a throw-away account: a home with
// every kind of entry moves into a vault and reads back identical through a mount, the home is
// left an empty mount point, undo puts it back; and each refusal leaves everything untouched.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sigilfs/core/config.h"
#include "sigilfs/core/vault_lock.h"
#include "test_support/acls.h"
#include "test_support/mount.h"
#include "test_support/pattern.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/system_user.h"
#include "test_support/temp_dir.h"
#include "test_support/tree_snapshot.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::ProcessResult;
using test::RunProcess;

constexpr char kPassword[] = "Login-pass-2024";
constexpr gid_t kNogroup = 65534;

void WriteFile(const fs::path& p, const std::vector<uint8_t>& data, mode_t mode) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << p;
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ::close(fd);
  ASSERT_EQ(::chmod(p.c_str(), mode), 0);
}

void SetXattr(const fs::path& p, const std::string& name, const std::string& value) {
  ASSERT_EQ(::lsetxattr(p.c_str(), name.c_str(), value.data(), value.size(), 0), 0)
      << p << " " << name << ": errno " << errno;
}

void SetMtime(const fs::path& p, time_t sec, long nsec) {
  const struct timespec ts[2] = {{sec, 0}, {sec, nsec}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << p;
}

// A tmpfs of `size` mounted on `dir` for the duration of a test.
class SmallFilesystem {
 public:
  SmallFilesystem(const fs::path& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  ~SmallFilesystem() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallFilesystem(const SmallFilesystem&) = delete;
  SmallFilesystem& operator=(const SmallFilesystem&) = delete;
  bool mounted() const { return mounted_; }

 private:
  fs::path dir_;
  bool mounted_ = false;
};

// The names made in, moved into and moved out of a directory while this watches it (inotify),
// in order, as "create NAME", "moved_to NAME", "moved_from NAME".
class DirectoryEvents {
 public:
  explicit DirectoryEvents(const fs::path& dir) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    watching_ = fd_ >= 0 &&
                ::inotify_add_watch(fd_, dir.c_str(), IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM) >= 0;
  }
  ~DirectoryEvents() {
    if (fd_ >= 0) ::close(fd_);
  }
  DirectoryEvents(const DirectoryEvents&) = delete;
  DirectoryEvents& operator=(const DirectoryEvents&) = delete;
  bool watching() const { return watching_; }

  std::vector<std::string> Read() {
    std::vector<std::string> out;
    alignas(inotify_event) char buf[1 << 16];
    for (ssize_t n; (n = ::read(fd_, buf, sizeof(buf))) > 0;) {
      for (ssize_t at = 0; at < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
        const std::string name = e->len > 0 ? e->name : "";
        if (e->mask & IN_Q_OVERFLOW) out.push_back("overflow");
        if (e->mask & IN_CREATE) out.push_back("create " + name);
        if (e->mask & IN_MOVED_TO) out.push_back("moved_to " + name);
        if (e->mask & IN_MOVED_FROM) out.push_back("moved_from " + name);
        at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
    return out;
  }

 private:
  int fd_;
  bool watching_ = false;
};

// SIGILFS_TEST_AFTER_VERIFY (the test-only hook `home setup` runs between the verification of
// the copy and the removal of the originals) set for the life of this object.
class AfterVerifyHook {
 public:
  explicit AfterVerifyHook(const std::string& command) {
    ::setenv("SIGILFS_TEST_AFTER_VERIFY", command.c_str(), 1);
  }
  ~AfterVerifyHook() { ::unsetenv("SIGILFS_TEST_AFTER_VERIFY"); }
  AfterVerifyHook(const AfterVerifyHook&) = delete;
  AfterVerifyHook& operator=(const AfterVerifyHook&) = delete;
};

std::string Quoted(const fs::path& p) { return "'" + p.string() + "'"; }

class HomeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = test::SystemUser::Unavailable();
    SIGILFS_NEEDS(why.empty(), why);
    // The account must reach its home inside the temporary directory.
    fs::permissions(tmp_.path(), fs::perms(0755));
    fs::create_directories(Tmp("homes"));
    fs::create_directories(Tmp("vaults"));
    user_ = std::make_unique<test::SystemUser>(Tmp("homes"));
    std::ofstream(Pass()) << kPassword << "\n";
  }

  fs::path Tmp(const std::string& rel) const { return tmp_.path() / rel; }
  std::string Pass() const { return Tmp("pw").string(); }
  std::string Vault() const { return Tmp("vaults/" + user_->name()).string(); }
  fs::path Home() const { return user_->home(); }

  ProcessResult Sigilfs(std::vector<std::string> args) {
    args.insert(args.begin(), SIGILFS_BINARY);
    return RunProcess(args);
  }
  // `sigilfs home setup USER --vault VAULT --kdf test --passfile PW EXTRA...`
  ProcessResult Setup(std::vector<std::string> extra = {}, const std::string& vault = "") {
    std::vector<std::string> args = {
        "home",  "setup", user_->name(), "--vault", vault.empty() ? Vault() : vault,
        "--kdf", "test",  "--passfile",  Pass()};
    args.insert(args.end(), extra.begin(), extra.end());
    return Sigilfs(args);
  }

  // Gives `p` to the account (not following symlinks).
  void Own(const fs::path& p, gid_t gid = static_cast<gid_t>(-1)) {
    ASSERT_EQ(::lchown(p.c_str(), user_->uid(), gid == static_cast<gid_t>(-1) ? user_->gid() : gid),
              0)
        << p;
  }

  // A home with odd names, every entry type, sparse and hard-linked files, attributes, modes,
  // owners and exact times (set last, as making entries changes their directories' times).
  void BuildOddHome() {
    const fs::path h = Home();
    const std::string unicode = "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac";
    std::string long_unicode;  // 85 three-byte characters: 255 bytes
    for (int i = 0; i < 85; ++i) long_unicode += "\xe6\x97\xa5";
    fs::create_directories(h / "docs" / "deep" / "er");
    fs::create_directories(h / "with space dir");
    fs::create_directories(h / ".config" / "app");
    fs::create_directories(h / long_unicode);
    fs::create_directories(h / "shared");
    WriteFile(h / "docs" / "report.txt", test::Pattern(5000, 1), 0640);
    WriteFile(h / "docs" / "deep" / "er" / "note", test::Pattern(4096, 2), 0600);
    WriteFile(h / "with space dir" / "a file with spaces.txt", test::Pattern(70, 3), 0644);
    WriteFile(h / (unicode + ".txt"), test::Pattern(123, 4), 0644);
    WriteFile(h / ".hidden", test::Pattern(10, 5), 0600);
    WriteFile(h / "..two dots", test::Pattern(11, 6), 0600);
    WriteFile(h / ".config" / "app" / "settings", test::Pattern(300, 7), 0600);
    WriteFile(h / std::string(255, 'x'), test::Pattern(255, 8), 0644);
    WriteFile(h / long_unicode / "inner", test::Pattern(1, 9), 0644);
    WriteFile(h / "tool", test::Pattern(2000, 10), 0755);
    WriteFile(h / "readonly", test::Pattern(50, 11), 0444);
    WriteFile(h / "empty", {}, 0644);
    WriteFile(h / "big.bin", test::Pattern((2 << 20) + 77, 12), 0644);
    // Sparse: two written pages in 16 MiB.
    {
      const int fd = ::open((h / "sparse.img").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      ASSERT_GE(fd, 0);
      const std::vector<uint8_t> page = test::Pattern(4096, 13);
      ASSERT_EQ(::pwrite(fd, page.data(), page.size(), 0), 4096);
      ASSERT_EQ(::pwrite(fd, page.data(), page.size(), 10 << 20), 4096);
      ASSERT_EQ(::ftruncate(fd, 16 << 20), 0);
      ::close(fd);
    }
    fs::create_hard_link(h / "docs" / "report.txt", h / "shared" / "report-link");
    fs::create_hard_link(h / "docs" / "report.txt", h / "report again");
    fs::create_symlink("docs/report.txt", h / "link");
    fs::create_symlink("docs", h / "dirlink");
    fs::create_symlink("/nowhere/" + std::string(100, 'q'), h / "dangling");
    fs::create_symlink(unicode + ".txt", h / ".unicode link");
    ASSERT_EQ(::mkfifo((h / "pipe").c_str(), 0620), 0);
    SetXattr(h / "docs" / "report.txt", "user.comment", "quarterly");
    SetXattr(h / "docs" / "report.txt", "user.binary", std::string("\0\x01\xff", 3));
    SetXattr(h / "with space dir", "user.empty", "");
    SetXattr(h / long_unicode / "inner", "user." + std::string(250, 'n'), "long name");
    for (const auto& e : fs::recursive_directory_iterator(h)) Own(e.path());
    // Another group, and a file of root's in the home.
    Own(h / "shared", kNogroup);
    WriteFile(h / "root-owned", test::Pattern(33, 14), 0644);
    ASSERT_EQ(::chmod((h / "shared").c_str(), 02775), 0);
    ASSERT_EQ(::chmod((h / "docs" / "deep").c_str(), 0750), 0);
    // ACLs: a named user (the case an undo once lost), and a default ACL that entries made in
    // the directory inherit.
    test::Setfacl({"-m", "u:nobody:r--", (h / "docs" / "report.txt").string()});
    test::Setfacl({"-d", "-m", "u:nobody:r-x,g:nogroup:rwx", (h / "shared").string()});
    WriteFile(h / "shared" / "inherits", test::Pattern(21, 15), 0664);
    Own(h / "shared" / "inherits");
    SetMtime(h / "shared", 1300000002, 2);
    SetMtime(h / "tool", 1000000000, 123456789);
    SetMtime(h / "link", 1200000000, 5);
    SetMtime(h / "docs" / "deep" / "er", 1300000000, 999999999);
    SetMtime(h / "docs" / "deep", 1300000001, 1);
  }

  test::TempDir tmp_;
  std::unique_ptr<test::SystemUser> user_;
};

TEST_F(HomeTest, MigrateMovesEverythingAndTheMountShowsItUnchanged) {
  SIGILFS_NEEDS_FUSE();
  BuildOddHome();
  const auto before = test::Snapshot(Home());
  ASSERT_GT(before.size(), 30u);
  const std::string acls = test::AclsOf(Home().string());
  ASSERT_NE(acls.find("user:nobody:r--"), std::string::npos) << acls;

  ProcessResult r = Setup({"--migrate"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("copied into the vault: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verified "), std::string::npos) << r.out;

  // The home is an empty mount point of the user's; the vault and its config are theirs too.
  EXPECT_TRUE(fs::is_empty(Home()));
  struct stat st;
  ASSERT_EQ(::stat(Home().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user_->uid());
  ASSERT_EQ(::stat(Vault().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user_->uid());
  const std::string config = Vault() + "/" + core::kConfigFileName;
  ASSERT_EQ(::stat(config.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user_->uid());
  EXPECT_EQ(st.st_mode & 07777, 0600u);  // the wrapped key: as sensitive as the password's hash
  for (const auto& e : fs::recursive_directory_iterator(Vault())) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find("report"), std::string::npos) << e.path();
    EXPECT_EQ(name.find("hidden"), std::string::npos) << e.path();
  }

  // Names, contents, modes, owners, times, link targets, hard links and attributes, through a
  // mount of the vault.
  fs::create_directories(Tmp("view"));
  test::MountedVault view(Vault(), Tmp("view").string(), Pass());
  EXPECT_EQ(test::Snapshot(Tmp("view")), before);
  EXPECT_EQ(test::AclsOf(Tmp("view").string()), acls);
}

TEST_F(HomeTest, UndoPutsTheHomeBackAndRemovesTheVault) {
  BuildOddHome();
  const auto before = test::Snapshot(Home());
  const std::string acls = test::AclsOf(Home().string());
  ProcessResult r = Setup({"--migrate"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::is_empty(Home()));

  r = Sigilfs({"home", "undo", user_->name(), "--vault", Vault(), "--passfile", Pass()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("exported and verified"), std::string::npos) << r.out;
  EXPECT_EQ(test::Snapshot(Home()), before);
  EXPECT_EQ(test::AclsOf(Home().string()), acls);
  EXPECT_FALSE(fs::exists(Vault()));
  EXPECT_TRUE(fs::is_empty(Tmp("vaults")));  // no temporary name left behind either
}

// undo removes the vault, so it takes the vault's lock: a vault in use by another sigilfs process
// (here a lock held as a reader holds it, which no mount table shows) is refused and left as it
// was.
TEST_F(HomeTest, UndoRefusesAVaultInUse) {
  WriteFile(Home() / "notes", test::Pattern(3000, 1), 0644);
  Own(Home() / "notes");
  ProcessResult r = Setup({"--migrate"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string lock = Vault() + "/" + core::kLockFileName;
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  const auto before = test::Snapshot(Vault());
  r = Sigilfs({"home", "undo", user_->name(), "--vault", Vault(), "--passfile", Pass()});
  ::close(fd);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: the vault " + Vault() + " is in use by another sigilfs process\n");
  EXPECT_EQ(test::Snapshot(Vault()), before);
  EXPECT_TRUE(fs::is_empty(Home()));
  // Once the lock is let go, the undo goes through.
  r = Sigilfs({"home", "undo", user_->name(), "--vault", Vault(), "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(Vault()));
  EXPECT_EQ(test::ReadAll(Home() / "notes").size(), 3000u);
}

// The vault is built under a temporary name pam_sigilfs.so does not look for, and appears at
// its place only by a rename once its copy of the home is verified.
TEST_F(HomeTest, TheVaultAppearsAtItsPlaceOnlyOnceVerified) {
  WriteFile(Home() / "notes", test::Pattern(3000, 1), 0644);
  Own(Home() / "notes");
  DirectoryEvents events(Tmp("vaults"));
  ASSERT_TRUE(events.watching());
  // Between the verification and the removal: no vault at its place yet, one under a
  // temporary name.
  const fs::path seen = Tmp("seen");
  AfterVerifyHook hook("test ! -e " + Quoted(Vault()) + " && ls -d " + Quoted(Tmp("vaults")) +
                       "/." + user_->name() + ".setup-* > " + Quoted(seen));
  ProcessResult r = Setup({"--migrate"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(test::ReadAll(seen).find("/." + user_->name() + ".setup-"), std::string::npos)
      << r.out << r.err;
  EXPECT_TRUE(fs::is_empty(Home()));
  EXPECT_TRUE(fs::exists(Vault() + "/" + core::kConfigFileName));

  const std::vector<std::string> seen_events = events.Read();
  std::vector<std::string> at_place;
  for (const std::string& e : seen_events) {
    if (e.substr(e.find(' ') + 1) == user_->name()) at_place.push_back(e);
  }
  EXPECT_EQ(at_place, std::vector<std::string>{"moved_to " + user_->name()})
      << testing::PrintToString(seen_events);
  EXPECT_EQ(std::vector<fs::path>(fs::directory_iterator(Tmp("vaults")), {}),
            std::vector<fs::path>{Vault()});
}

// A setup that fails in the middle of the copy: its vault never existed at its place, and the
// home is untouched.
TEST_F(HomeTest, ASetupFailingMidCopyNeverShowsItsVault) {
  WriteFile(Home() / "a-notes", test::Pattern(5000, 1), 0644);
  fs::create_directories(Home() / "b-docs");
  WriteFile(Home() / "b-docs" / "report", test::Pattern(100, 2), 0600);
  // An extended attribute that ext4 holds but that does not fit once sealed (a value grows by
  // 33 bytes and its name, the stored name is 35 bytes): the copy stops there.
  WriteFile(Home() / "z-big-attribute", test::Pattern(10, 3), 0644);
  const std::string value(4000, 'v');
  ASSERT_EQ(
      ::setxattr((Home() / "z-big-attribute").c_str(), "user.x", value.data(), value.size(), 0), 0);
  for (const auto& e : fs::recursive_directory_iterator(Home())) Own(e.path());
  const auto before = test::Snapshot(Home());
  DirectoryEvents events(Tmp("vaults"));
  ASSERT_TRUE(events.watching());

  ProcessResult r = Setup({"--migrate"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("z-big-attribute"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(Home().string() + " was not changed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("removed the incomplete vault " + Tmp("vaults").string() + "/." +
                       user_->name() + ".setup-"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(test::Snapshot(Home()), before);
  EXPECT_FALSE(fs::exists(Vault()));
  EXPECT_TRUE(fs::is_empty(Tmp("vaults")));

  bool made_temporary = false;
  for (const std::string& e : events.Read()) {
    EXPECT_NE(e.substr(e.find(' ') + 1), user_->name()) << e;
    if (e.rfind("create ." + user_->name() + ".setup-", 0) == 0) made_temporary = true;
  }
  EXPECT_TRUE(made_temporary);
}

// What appears or changes in the home between the verification and the removal of the
// originals is not in the vault: it stays, and setup says so and fails.
TEST_F(HomeTest, EntriesMadeOrChangedAfterTheVerificationStay) {
  WriteFile(Home() / "notes", test::Pattern(100, 1), 0644);
  fs::create_directories(Home() / "docs" / "old");
  WriteFile(Home() / "docs" / "report", test::Pattern(2000, 2), 0600);
  WriteFile(Home() / "docs" / "old" / "draft", test::Pattern(20, 3), 0600);
  for (const auto& e : fs::recursive_directory_iterator(Home())) Own(e.path());
  const std::string notes_before = test::ReadAll(Home() / "notes");

  AfterVerifyHook hook("echo late > " + Quoted(Home() / "docs" / "arrived") + " && echo more >> " +
                       Quoted(Home() / "notes"));
  ProcessResult r = Setup({"--migrate"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("verified "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("2 entries were made or changed after the verification and left in place"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find((Home() / "docs" / "arrived").string() + " (new)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find((Home() / "notes").string() + " (changed)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the vault " + Vault() + " holds the verified copy"), std::string::npos)
      << r.err;

  // The late entries (and the directory holding one) are still there; everything verified went.
  EXPECT_EQ(test::ReadAll(Home() / "docs" / "arrived"), "late\n");
  EXPECT_EQ(test::ReadAll(Home() / "notes"), notes_before + "more\n");
  std::vector<std::string> left;
  for (const auto& e : fs::recursive_directory_iterator(Home()))
    left.push_back(fs::relative(e.path(), Home()).string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"docs", "docs/arrived", "notes"}));
  // The vault is in place with the verified copy.
  EXPECT_TRUE(fs::exists(Vault() + "/" + core::kConfigFileName));
  r = Sigilfs({"export", Vault(), "docs/report", Tmp("report").string(), "--passfile", Pass()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string report = test::ReadAll(Tmp("report"));
  EXPECT_EQ(std::vector<uint8_t>(report.begin(), report.end()), test::Pattern(2000, 2));
}

// An undo that fails once the vault was moved out of pam_sigilfs.so's sight puts it back.
TEST_F(HomeTest, AFailedUndoPutsTheVaultBack) {
  WriteFile(Home() / "notes", test::Pattern(100, 1), 0644);
  Own(Home() / "notes");
  ProcessResult r = Setup({"--migrate"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string config = test::ReadAll(Vault() + "/" + core::kConfigFileName);
  std::ofstream(Tmp("wrong")) << "not the password\n";
  DirectoryEvents events(Tmp("vaults"));
  ASSERT_TRUE(events.watching());

  r = Sigilfs(
      {"home", "undo", user_->name(), "--vault", Vault(), "--passfile", Tmp("wrong").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("wrong passphrase"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the vault " + Vault() + " was kept"), std::string::npos) << r.err;
  EXPECT_EQ(test::ReadAll(Vault() + "/" + core::kConfigFileName), config);
  EXPECT_EQ(std::vector<fs::path>(fs::directory_iterator(Tmp("vaults")), {}),
            std::vector<fs::path>{Vault()});
  EXPECT_TRUE(fs::is_empty(Home()));
  // It was out of sight meanwhile, under a temporary name.
  const std::vector<std::string> seen = events.Read();
  ASSERT_GE(seen.size(), 3u) << testing::PrintToString(seen);
  EXPECT_TRUE(std::find(seen.begin(), seen.end(), "moved_from " + user_->name()) != seen.end())
      << testing::PrintToString(seen);
  EXPECT_EQ(seen.back(), "moved_to " + user_->name()) << testing::PrintToString(seen);
}

TEST_F(HomeTest, SetupWithoutMigrateLeavesTheHomeAndRefusesASecondVault) {
  ProcessResult r = Setup();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // useradd -m copied /etc/skel: those files stay, and setup says they will be hidden.
  EXPECT_FALSE(fs::is_empty(Home()));
  EXPECT_NE(r.out.find("is not empty"), std::string::npos) << r.out;
  struct stat st;
  ASSERT_EQ(::stat(Vault().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user_->uid());
  EXPECT_EQ(st.st_mode & 07777, 0700u);

  const std::string config = test::ReadAll(Vault() + "/" + core::kConfigFileName);
  r = Setup({"--migrate"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(user_->name() + " already has a vault in " + Vault()), std::string::npos)
      << r.err;
  EXPECT_EQ(test::ReadAll(Vault() + "/" + core::kConfigFileName), config);
}

TEST_F(HomeTest, RefusesAnUnknownUser) {
  ProcessResult r = Sigilfs({"home", "setup", "sgt-no-such-user", "--vault", Vault(), "--kdf",
                             "test", "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: not found: no such user: sgt-no-such-user\n");
  EXPECT_FALSE(fs::exists(Vault()));
}

TEST_F(HomeTest, RefusesWhileTheUserIsLoggedIn) {
  WriteFile(Home() / "notes", test::Pattern(100, 1), 0644);
  const auto before = test::Snapshot(Home());
  const pid_t pid = user_->StartIdleProcess();
  ProcessResult r = Setup({"--migrate"});
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(user_->name() + " is logged in"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pid " + std::to_string(pid)), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(Vault()));
  EXPECT_EQ(test::Snapshot(Home()), before);
}

TEST_F(HomeTest, RefusesWhenTheDiskLacksRoomForTheCopy) {
  SmallFilesystem small(Tmp("small"), "1m");
  SIGILFS_NEEDS(small.mounted(), "cannot mount a tmpfs here");
  WriteFile(Home() / "large", test::Pattern(4 << 20, 1), 0644);
  Own(Home() / "large");
  const auto before = test::Snapshot(Home());
  ProcessResult r = Setup({"--migrate"}, Tmp("small/vault").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not enough space in " + Tmp("small").string()), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(Tmp("small/vault")));
  EXPECT_EQ(test::Snapshot(Home()), before);
}

TEST_F(HomeTest, RefusesAVaultTheMountWouldHide) {
  ProcessResult r = Setup({}, (Home() / ".vault").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("hidden by its own mount"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(Home() / ".vault"));
}

TEST_F(HomeTest, RefusesUndoIntoAHomeThatIsNotEmpty) {
  ProcessResult r = Setup({"--migrate"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  WriteFile(Home() / "made while unmounted", test::Pattern(5, 1), 0644);
  r = Sigilfs({"home", "undo", user_->name(), "--vault", Vault(), "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not empty"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(Vault() + "/" + core::kConfigFileName));
}

}  // namespace
}  // namespace sigilfs
