// pam_sigilfs.so against another local user: the session count in /run/sigilfs is root's alone,
// so nothing another account does there, in the rest of /run, to the home or to the daemon
// (files, links, locks, unmounts, signals, its own logins and logouts) blocks, delays or
// misdirects a login's mount or the last logout's unmount, or keeps a home mounted after it.
// Each test runs in a mount namespace of its own with a /run of its own, laid out as a booted
// machine has it (/run/lock open to all, a runtime directory per user): what is planted there is
// no other test's, nor this machine's.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_support/fuse_access.h"
#include "test_support/mount_table.h"
#include "test_support/pam_services.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/system_user.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::ProcessResult;
using test::RunProcess;

using test::kPamtester;
constexpr char kRunDir[] = "/run/sigilfs";
const std::string kPassword = "Pass-word-4711";

// What `attack` (which says what it managed to do, "" for nothing) did as `who`; the process
// then stays, holding what it opened, locked or bound, until the account goes away (its
// processes are stopped then).
std::string AttackAndStay(const test::SystemUser& who, const std::function<std::string()>& attack) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return "no pipe";
  const int rc = who.RunAs([&] {
    const std::string done = attack();
    (void)!::write(report[1], done.data(), done.size());
    ::close(report[1]);
    if (::fork() == 0)
      for (;;) ::pause();
    return 0;
  });
  ::close(report[1]);
  std::string done = rc == 0 ? "" : "the attacker failed to run;";
  char buf[512];
  for (ssize_t n; (n = ::read(report[0], buf, sizeof buf)) > 0;) done.append(buf, n);
  ::close(report[0]);
  return done;
}

// `what` if `rc` says the call succeeded: an attack's report.
std::string IfDone(long rc, const std::string& what) { return rc >= 0 ? " " + what + ";" : ""; }

class PamOtherUserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = test::PamSessionsUnavailable();
    SIGILFS_NEEDS(why.empty(), why);
    SIGILFS_NEEDS_FUSE();
    own_mounts_ = ::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    ASSERT_EQ(::unshare(CLONE_NEWNS), 0) << std::strerror(errno);
    ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
    ASSERT_EQ(::mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755"), 0);
    ASSERT_EQ(::mkdir("/run/lock", 01777), 0);
    ASSERT_EQ(::chmod("/run/lock", 01777), 0);
    ASSERT_EQ(::mkdir("/run/user", 0755), 0);
    // The accounts run sigilfs and reach their homes: the binary goes next to the homes (the
    // build tree may be closed to others).
    fs::permissions(tmp_.path(), fs::perms(0755));
    for (const char* dir : {"homes", "vaults", "bin"}) fs::create_directories(Tmp(dir));
    fs::copy_file(SIGILFS_BINARY, Tmp("bin/sigilfs"));
    fs::permissions(Tmp("bin/sigilfs"), fs::perms(0755));
    victim_ = MakeAccount();
    attacker_ = MakeAccount();
    ASSERT_FALSE(HasFailure());
    // As before the first login: `home setup` may have made it for its own mounts.
    fs::remove_all(kRunDir);
    // The attacker's own runtime directory, as a login session makes it.
    ASSERT_EQ(::mkdir(Runtime(*attacker_).c_str(), 0700), 0);
    ASSERT_EQ(::chown(Runtime(*attacker_).c_str(), attacker_->uid(), attacker_->gid()), 0);
    services_ = std::make_unique<test::PamServices>(
        "sigilfs-test-" + victim_->name(), "vault=" + Tmp("vaults").string() + "/%u sigilfs=" +
                                               Tmp("bin/sigilfs").string() + " debug");
  }
  void TearDown() override {
    // In this namespace, where their homes are mounted.
    services_.reset();
    victim_.reset();
    attacker_.reset();
    fuse_access_.clear();
    if (own_mounts_ >= 0) {
      (void)::setns(own_mounts_, CLONE_NEWNS);
      ::close(own_mounts_);
    }
  }

  fs::path Tmp(const std::string& rel) const { return tmp_.path() / rel; }
  static std::string Runtime(const test::SystemUser& u) {
    return "/run/user/" + std::to_string(u.uid());
  }

  // A throw-away account whose home moved into a vault wrapped with its login password.
  std::unique_ptr<test::SystemUser> MakeAccount() {
    auto user = std::make_unique<test::SystemUser>(Tmp("homes"));
    user->SetPassword(kPassword);
    fuse_access_.push_back(std::make_unique<test::FuseDeviceAccess>(user->uid()));
    if (!fuse_access_.back()->error().empty()) {
      ADD_FAILURE() << fuse_access_.back()->error();
      return user;
    }
    ProcessResult r =
        RunProcess({SIGILFS_BINARY, "home", "setup", user->name(), "--vault",
                    Tmp("vaults/" + user->name()).string(), "--migrate", "--kdf", "test"},
                   kPassword + "\n");
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return user;
  }

  // pamtester on the strict service for `user`; each call must be quick (the lock on a count is
  // waited for at most 75 s, which another user must never make it do).
  ProcessResult Pam(const test::SystemUser& user, std::vector<std::string> operations,
                    const std::string& input = "") {
    std::vector<std::string> args = {kPamtester, "-v", services_->strict(), user.name()};
    args.insert(args.end(), operations.begin(), operations.end());
    const auto start = std::chrono::steady_clock::now();
    ProcessResult r = RunProcess(args, input);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 20s) << "pamtester waited";
    return r;
  }
  void Login(const test::SystemUser& user) {
    const ProcessResult r = Pam(user, {"authenticate", "open_session"}, kPassword + "\n");
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  void Logout(const test::SystemUser& user) {
    const ProcessResult r = Pam(user, {"close_session"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }

  static size_t Mounts(const test::SystemUser& user) {
    size_t n = 0;
    for (const auto& m : test::MountsAt(user.home())) n += m.type == "fuse.sigilfs" ? 1 : 0;
    return n;
  }
  static int Sessions(const test::SystemUser& user) {
    std::ifstream in(std::string(kRunDir) + "/" + std::to_string(user.uid()));
    int n = -1;
    in >> n;
    return n;
  }
  // Waits up to 10 s for the user's processes (its daemon, after an unmount) to end.
  static bool ProcessesEnd(const test::SystemUser& user) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!user.Processes().empty() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    return user.Processes().empty();
  }

  test::TempDir tmp_;
  std::vector<std::unique_ptr<test::FuseDeviceAccess>> fuse_access_;
  std::unique_ptr<test::SystemUser> victim_, attacker_;
  std::unique_ptr<test::PamServices> services_;

 private:
  int own_mounts_ = -1;
};

// Before the first login (no /run/sigilfs yet) and after it, the other account tries all it can:
// take or plant the directory, the count or look-alikes in /run/lock and its runtime directory,
// hold them open and locked, unmount the home, signal the daemon, sit in the home. The logins
// still mount once and count both sessions, the first logout leaves the home mounted and the last
// one unmounts it and ends its daemon.
TEST_F(PamOtherUserTest, NothingAnotherUserDoesBlocksOrMisdirectsTheSessions) {
  const std::string uid = std::to_string(victim_->uid());
  const std::string count = std::string(kRunDir) + "/" + uid;
  const std::string runtime = Runtime(*attacker_);
  std::string done = AttackAndStay(*attacker_, [&] {
    std::string out;
    out += IfDone(::mkdir(kRunDir, 0777), "made /run/sigilfs");
    out += IfDone(::symlink(runtime.c_str(), kRunDir), "linked /run/sigilfs");
    out += IfDone(::open(count.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666), "made the count");
    // Look-alikes where it may write, held locked: the module must never look there. (Not
    // runtime/sigilfs: that is where its own daemons keep their records.)
    for (const std::string& path :
         {std::string("/run/lock/sigilfs"), std::string("/run/lock/sigilfs.lock"),
          "/run/lock/" + uid, "/run/lock/sigilfs-" + uid, runtime + "/" + uid,
          runtime + "/sigilfs-" + uid}) {
      const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
      if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0 || ::write(fd, "0\n", 2) != 2)
        out += " could not plant " + path + ";";
    }
    if (::symlink(runtime.c_str(), "/run/lock/sigilfs.d") != 0) out += " could not link;";
    return out;
  });
  // Only the planting in its own places was to work.
  EXPECT_EQ(done, "");

  Login(*victim_);
  EXPECT_EQ(Mounts(*victim_), 1u);
  EXPECT_EQ(Sessions(*victim_), 1);
  struct stat st;
  ASSERT_EQ(::lstat(kRunDir, &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::lstat(count.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0600u);

  const std::vector<pid_t> daemon = victim_->Processes();
  ASSERT_FALSE(daemon.empty()) << "no daemon of the user's";
  const std::string home = victim_->home();
  done = AttackAndStay(*attacker_, [&] {
    std::string out;
    out += IfDone(::open(kRunDir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), "opened /run/sigilfs");
    for (int flags : {O_RDONLY, O_WRONLY, O_RDWR | O_TRUNC})
      if (const int fd = ::open(count.c_str(), flags | O_CLOEXEC); fd >= 0)
        out += " opened the count" + IfDone(::flock(fd, LOCK_SH | LOCK_NB), " and locked it");
    out += IfDone(::open((std::string(kRunDir) + "/x").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666),
                  "made a file in /run/sigilfs");
    out += IfDone(::unlink(count.c_str()), "removed the count");
    out += IfDone(::rename(kRunDir, "/run/lock/taken"), "moved /run/sigilfs");
    out += IfDone(::symlink("/dev/null", (std::string(kRunDir) + "/y").c_str()), "linked");
    // The daemon: the kernel lets no other user signal it.
    for (pid_t pid : daemon)
      for (int sig : {SIGTERM, SIGKILL, SIGSTOP, SIGUSR1, SIGHUP})
        out += IfDone(::kill(pid, sig), "signalled " + std::to_string(pid));
    // The home: the mount is the user's alone (no allow_other), so no one else can sit in it and
    // keep it busy, nor unmount it.
    out += IfDone(::chdir(home.c_str()), "entered the home");
    out += IfDone(::open(home.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC), "opened the home");
    for (const auto& argv : std::vector<std::vector<std::string>>{
             {"/bin/fusermount3", "-u", home},
             {"/bin/fusermount3", "-u", "-z", home},
             {Tmp("bin/sigilfs").string(), "unmount", home, "--timeout", "1"}})
      if (RunProcess(argv).exit_code == 0) out += " " + argv[0] + " succeeded;";
    return out;
  });
  EXPECT_EQ(done, "");
  EXPECT_EQ(Mounts(*victim_), 1u);
  for (pid_t pid : daemon) EXPECT_EQ(::kill(pid, 0), 0) << pid << " ended";

  // Its own vault's sessions, opened and closed (and closed again, with none open) as it likes,
  // count for itself alone.
  Login(*attacker_);
  EXPECT_EQ(Mounts(*attacker_), 1u);
  Logout(*attacker_);
  Logout(*attacker_);
  EXPECT_EQ(Mounts(*attacker_), 0u);
  EXPECT_EQ(Mounts(*victim_), 1u);
  EXPECT_EQ(Sessions(*victim_), 1);

  Login(*victim_);
  EXPECT_EQ(Mounts(*victim_), 1u);
  EXPECT_EQ(Sessions(*victim_), 2);
  Logout(*victim_);
  EXPECT_EQ(Mounts(*victim_), 1u) << "the first logout unmounted the home";
  EXPECT_EQ(Sessions(*victim_), 1);
  Logout(*victim_);
  EXPECT_EQ(Mounts(*victim_), 0u) << "the last logout left the home mounted";
  EXPECT_EQ(Sessions(*victim_), 0);
  EXPECT_TRUE(ProcessesEnd(*victim_)) << "the daemon still runs";
}

// Logins and logouts of two accounts at once: each account's count is its own, taken under its
// own lock, and each home is mounted once and unmounted by its own last logout.
TEST_F(PamOtherUserTest, ConcurrentSessionsOfTwoUsersKeepTheirOwnCounts) {
  const auto at_once = [&](const std::vector<std::function<void()>>& steps) {
    std::vector<std::future<void>> running;
    for (const auto& step : steps) running.push_back(std::async(std::launch::async, step));
    for (auto& r : running) r.get();
  };
  const auto login = [this](const test::SystemUser& u) {
    return [this, &u] {
      const ProcessResult r =
          RunProcess({kPamtester, services_->strict(), u.name(), "authenticate", "open_session"},
                     kPassword + "\n");
      EXPECT_EQ(r.exit_code, 0) << r.err;
    };
  };
  const auto logout = [this](const test::SystemUser& u) {
    return [this, &u] {
      const ProcessResult r =
          RunProcess({kPamtester, services_->strict(), u.name(), "close_session"});
      EXPECT_EQ(r.exit_code, 0) << r.err;
    };
  };
  at_once({login(*victim_), login(*victim_), login(*attacker_), login(*attacker_)});
  EXPECT_EQ(Mounts(*victim_), 1u);
  EXPECT_EQ(Mounts(*attacker_), 1u);
  EXPECT_EQ(Sessions(*victim_), 2);
  EXPECT_EQ(Sessions(*attacker_), 2);
  // The other account logs out three times (once more than it logged in) while the user logs out
  // once and in again.
  at_once({logout(*attacker_), logout(*attacker_), logout(*attacker_), logout(*victim_),
           login(*victim_)});
  EXPECT_EQ(Mounts(*attacker_), 0u);
  EXPECT_EQ(Sessions(*attacker_), 0);
  EXPECT_EQ(Mounts(*victim_), 1u);
  EXPECT_EQ(Sessions(*victim_), 2);
  at_once({logout(*victim_), logout(*victim_)});
  EXPECT_EQ(Mounts(*victim_), 0u);
  EXPECT_EQ(Sessions(*victim_), 0);
  EXPECT_TRUE(ProcessesEnd(*victim_));
}

// Only root can make /run/sigilfs another's, open to others or a symbolic link; should it be so
// (a directory handed over, a link left by a script), the module believes nothing in it and
// writes nothing through it: a logout leaves the home mounted, whatever count is planted there,
// and a login neither mounts a second time nor counts.
TEST_F(PamOtherUserTest, ACountDirectoryNotRootsAloneIsNotUsed) {
  const std::string uid = std::to_string(victim_->uid());
  const std::string runtime = Runtime(*attacker_);
  struct Case {
    std::string name;
    std::function<void()> make;
  };
  const std::vector<Case> cases = {
      {"owned by the other account",
       [&] {
         ASSERT_EQ(::mkdir(kRunDir, 0700), 0);
         ASSERT_EQ(::chown(kRunDir, attacker_->uid(), attacker_->gid()), 0);
       }},
      {"writable by others",
       [&] {
         ASSERT_EQ(::mkdir(kRunDir, 0700), 0);
         ASSERT_EQ(::chmod(kRunDir, 0777), 0);
       }},
      {"a symbolic link to the other account's directory",
       [&] { ASSERT_EQ(::symlink(runtime.c_str(), kRunDir), 0); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    fs::remove_all(kRunDir);
    Login(*victim_);
    ASSERT_EQ(Mounts(*victim_), 1u);
    ASSERT_EQ(::rename(kRunDir, "/run/sigilfs.good"), 0);
    c.make();
    if (HasFailure()) return;
    // The count the other account would have the module believe: none left.
    const std::string planted =
        (fs::is_symlink(kRunDir) ? runtime : std::string(kRunDir)) + "/" + uid;
    std::ofstream(planted) << "1\n";
    ::chown(planted.c_str(), attacker_->uid(), attacker_->gid());
    Logout(*victim_);
    EXPECT_EQ(Mounts(*victim_), 1u) << "unmounted on a count not root's";
    Login(*victim_);
    EXPECT_EQ(Mounts(*victim_), 1u);
    EXPECT_EQ(test::ReadAll(planted), "1\n") << "written through";
    for (const auto& e : fs::directory_iterator(runtime))
      EXPECT_EQ(e.path().filename(), uid) << "made in the other account's directory";
    fs::remove_all(kRunDir);
    ASSERT_EQ(::rename("/run/sigilfs.good", kRunDir), 0);
    // Back to root's own: the session the module counted ends, and with it the mount.
    EXPECT_EQ(Sessions(*victim_), 1);
    Logout(*victim_);
    EXPECT_EQ(Mounts(*victim_), 0u);
    EXPECT_TRUE(ProcessesEnd(*victim_));
  }
}

}  // namespace
}  // namespace sigilfs
