// End-to-end tests of `sigilfs home setup` and `home undo` on a throw-away account: a home with
// every kind of entry moves into a vault and reads back identical through a mount, the home is
// left an empty mount point, undo puts it back; and each refusal leaves everything untouched.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "sigilfs/core/config.h"
#include "test_support/mount.h"
#include "test_support/pattern.h"
#include "test_support/process.h"
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

class HomeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = test::SystemUser::Unavailable(); !why.empty()) GTEST_SKIP() << why;
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
    SetMtime(h / "tool", 1000000000, 123456789);
    SetMtime(h / "link", 1200000000, 5);
    SetMtime(h / "docs" / "deep" / "er", 1300000000, 999999999);
    SetMtime(h / "docs" / "deep", 1300000001, 1);
  }

  test::TempDir tmp_;
  std::unique_ptr<test::SystemUser> user_;
};

TEST_F(HomeTest, MigrateMovesEverythingAndTheMountShowsItUnchanged) {
  if (!test::FuseAvailable()) GTEST_SKIP() << "no FUSE here";
  BuildOddHome();
  const auto before = test::Snapshot(Home());
  ASSERT_GT(before.size(), 30u);

  ProcessResult r = Setup({"--migrate"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("copying into the vault: "), std::string::npos) << r.out;
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
}

TEST_F(HomeTest, UndoPutsTheHomeBackAndRemovesTheVault) {
  BuildOddHome();
  const auto before = test::Snapshot(Home());
  ProcessResult r = Setup({"--migrate"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::is_empty(Home()));

  r = Sigilfs({"home", "undo", user_->name(), "--vault", Vault(), "--passfile", Pass()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("exported and verified"), std::string::npos) << r.out;
  EXPECT_EQ(test::Snapshot(Home()), before);
  EXPECT_FALSE(fs::exists(Vault()));
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
  if (!small.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here";
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
