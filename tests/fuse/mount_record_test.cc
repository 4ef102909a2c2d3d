// The mount record against other users and old daemons: `sigilfs unmount` finds a mount's daemon
// by a record that no other user can block (it returns within its timeout whatever nobody does),
// plant or replace (a directory or record not the mount user's own is refused, by the mount and
// by unmount), and that an old daemon of a reused device number does not confuse; a mount that
// cannot have a record is refused, and an unmount that finds none says so. `sigilfs stats` asks
// the daemon through the socket beside its record, which no other user can reach, answer for or
// jam.
#include "sigilfs/fuse/mount_record.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sigilfs/core/mountinfo.h"
#include "sigilfs/core/vault_lock.h"
#include "test_support/as_nobody.h"
#include "test_support/mount.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::RunProcess;
using ::testing::HasSubstr;

constexpr char kRecords[] = "/run/sigilfs/mounts";

// The sigilfs under test; SIGILFS_TEST_DAEMON runs these tests against another build, mount
// and unmount both (to show that they fail on the code before a fix).
std::string Sigilfs() {
  const char* other = std::getenv("SIGILFS_TEST_DAEMON");
  return other != nullptr ? other : SIGILFS_BINARY;
}

// `sigilfs unmount --timeout T POINT`, killed after 30 s should it block (exit 124 then).
test::ProcessResult Unmount(const std::string& point, int timeout) {
  return RunProcess({"/usr/bin/timeout", "30", Sigilfs(), "unmount", point, "--timeout",
                     std::to_string(timeout)});
}

// The device ("major:minor") of the sigilfs mount on `point`, from the mount table; "" if none.
std::string DeviceOf(const std::string& point) {
  std::string device;
  for (const core::MountInfoEntry& m : core::ReadMountInfo())
    if (m.mount_point == point && m.type == "fuse.sigilfs") device = m.device;
  return device;
}

// The device numbers from `below` under `device` to `above` over it ("0:25" ... "0:57"): where
// the next mount will likely be, since the kernel hands out the lowest free one, and mounts of
// tests running beside this one free and take numbers below and above it.
std::vector<std::string> DevicesAround(const std::string& device, int below, int above) {
  const size_t colon = device.find(':');
  const int minor = std::stoi(device.substr(colon + 1));
  std::vector<std::string> out;
  for (int i = std::max(-below, 1 - minor); i <= above; ++i)
    out.push_back(device.substr(0, colon + 1) + std::to_string(minor + i));
  return out;
}

// The process id the record of `device` names, or -1.
pid_t RecordedPid(const std::string& device) {
  std::ifstream in(std::string(kRecords) + "/" + device);
  pid_t pid = -1;
  in >> pid;
  return pid;
}

// "PID START" of this process, as a daemon writes its record.
std::string ThisProcess() {
  const auto self = core::VaultLock::ProcessOf(::getpid());
  return std::to_string(self->pid) + " " + std::to_string(self->start) + "\n";
}

// A process (as nobody if `as_nobody`) that runs `body`, which calls `ready` with a report once
// it has made what it holds, and then waits until End() (its body then returns, so what it holds
// is let go of as a process does at its end) or the object goes (SIGKILL).
class Actor {
 public:
  using Body = std::function<void(const std::function<void(const std::string&)>& ready)>;
  Actor(bool as_nobody, const Body& body) {
    int report[2], go[2];
    if (::pipe2(report, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(report[0]);
      ::close(go[1]);
      if (as_nobody && (::setgroups(0, nullptr) != 0 || ::setgid(test::kNogroup) != 0 ||
                        ::setuid(test::kNobody) != 0))
        ::_exit(125);
      body([&](const std::string& text) {
        const std::string line = text + "\n";
        (void)!::write(report[1], line.data(), line.size());
        char c;
        while (::read(go[0], &c, 1) < 0 && errno == EINTR) {
        }
      });
      ::_exit(0);
    }
    ::close(report[1]);
    ::close(go[0]);
    go_ = go[1];
    char c;
    while (::read(report[0], &c, 1) == 1 && c != '\n') report_ += c;
    ::close(report[0]);
  }
  ~Actor() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);
    Reap();
  }
  Actor(const Actor&) = delete;
  Actor& operator=(const Actor&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& report() const { return report_; }
  bool running() const { return pid_ > 0 && core::VaultLock::ProcessOf(pid_).has_value(); }
  // Lets the body return, and waits for the process to end.
  void End() {
    // A byte, not the pipe's end: a process forked meanwhile holds a copy of this end too.
    if (go_ >= 0 && pid_ > 0) (void)!::write(go_, "g", 1);
    Reap();
  }

 private:
  void Reap() {
    if (go_ >= 0) ::close(go_);
    go_ = -1;
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  pid_t pid_ = -1;
  int go_ = -1;
  std::string report_;
};

// The name an older sigilfs daemon listened on: an abstract socket named for the device.
socklen_t OldBeaconAddress(const std::string& device, sockaddr_un* addr) {
  *addr = {};
  addr->sun_family = AF_UNIX;
  const std::string name = "sigilfs-mount-" + device;
  std::memcpy(addr->sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

// Listens there, as such a daemon did (the descriptor is kept open: the process holds it).
bool ListenAsOldBeacon(const std::string& device) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr;
  const socklen_t len = OldBeaconAddress(device, &addr);
  return ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 && ::listen(fd, 16) == 0;
}

// Connects there without waiting (the descriptor is kept open: the jam): false once the backlog
// is full, or nothing listens.
bool ConnectToOldBeacon(const std::string& device) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_un addr;
  const socklen_t len = OldBeaconAddress(device, &addr);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0;
}

// Unmounts `v` and mounts it again once `actor` (as nobody if `as_nobody`) has done `plant` for
// each of the device numbers the new mount will likely get (the lowest free one: the freed one,
// one another test's unmount freed below it meanwhile, or one of the next few); tries again
// while other mounts take them meanwhile. The device the mount got.
std::string RemountAfter(test::MountedVault& v, std::optional<Actor>& actor, bool as_nobody,
                         const std::function<bool(const std::string&)>& plant) {
  std::set<std::string> planted;
  std::string device;
  for (int attempt = 0; attempt < 5 && !planted.contains(device); ++attempt) {
    const std::vector<std::string> next = DevicesAround(DeviceOf(v.plain()), 16, 16);
    v.Unmount();
    actor.reset();
    actor.emplace(as_nobody, [&](const auto& ready) {
      std::string failed;
      for (const std::string& d : next)
        if (!plant(d)) failed += " " + d;
      ready(failed);
    });
    EXPECT_EQ(actor->report(), "") << "not planted";
    planted.insert(next.begin(), next.end());
    v.Mount();
    device = DeviceOf(v.plain());
  }
  EXPECT_TRUE(planted.contains(device)) << device << ": other mounts took the numbers meanwhile";
  return device;
}

// Makes /run/sigilfs/mounts as a daemon of root's would.
void MakeRecordDir() {
  ::mkdir("/run/sigilfs", 0700);
  ::mkdir(kRecords, 0700);
}

// A vault (cheap KDF) in `dir`: its cipher directory, mount point and passphrase file.
struct Vault {
  std::string cipher, plain, passfile;
};
Vault MakeVault(const fs::path& dir) {
  Vault v{(dir / "cipher").string(), (dir / "plain").string(), (dir / "pass").string()};
  fs::create_directories(v.cipher);
  fs::create_directories(v.plain);
  std::ofstream(v.passfile) << "test passphrase\n";
  auto r =
      RunProcess({SIGILFS_BINARY, "init", v.cipher, "--kdf", "test", "--passfile", v.passfile});
  if (r.exit_code != 0) throw std::runtime_error("sigilfs init failed: " + r.err);
  return v;
}

// Each test in a mount namespace of its own, with a /run of its own: the records and the
// directories it plants, squats or removes are no other test's (nor this machine's). And in a
// network namespace of its own: the abstract socket names older versions used (which tests here
// bind, as root or as nobody) are per network namespace, and a test running beside this one
// binds the same names.
class MountRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    SIGILFS_NEEDS_ROOT("needs root to play another user and to own /run/sigilfs");
    own_mounts_ = ::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    own_network_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    ASSERT_EQ(::unshare(CLONE_NEWNS | CLONE_NEWNET), 0) << std::strerror(errno);
    ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
    ASSERT_EQ(::mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755"), 0);
  }
  void TearDown() override {
    for (auto [fd, type] : {std::pair{own_mounts_, CLONE_NEWNS}, {own_network_, CLONE_NEWNET}}) {
      if (fd < 0) continue;
      (void)::setns(fd, type);
      ::close(fd);
    }
  }

 private:
  int own_mounts_ = -1;
  int own_network_ = -1;
};

TEST_F(MountRecordTest, AnotherUserCannotJamTheUnmount) {
  test::MountedVault v({"--shared"});
  const std::string device = DeviceOf(v.plain());
  ASSERT_FALSE(device.empty());
  Actor nobody(true, [&](const auto& ready) {
    std::string done;
    int connected = 0;
    while (connected < 64 && ConnectToOldBeacon(device)) ++connected;
    for (const std::string& path :
         {std::string("/run/sigilfs"), std::string(kRecords), std::string(kRecords) + "/" + device})
      if (const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC); fd >= 0)
        done += " opened " + path + (::flock(fd, LOCK_SH | LOCK_NB) == 0 ? " and locked it;" : ";");
    const std::string planted = std::string(kRecords) + "/" + device + ".x";
    if (::open(planted.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644) >= 0) done += " made a file;";
    if (::mkdir("/run/sigilfs/x", 0700) == 0) done += " made a directory;";
    ready(done);
  });
  EXPECT_EQ(nobody.report(), "") << "what nobody could do";
  const auto start = std::chrono::steady_clock::now();
  const auto r = Unmount(v.plain(), 10);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(core::VaultLock::ProcessOf(v.pid()), std::nullopt) << "the daemon still runs";
  EXPECT_EQ(DeviceOf(v.plain()), "");
}

// (b) The daemon of an earlier mount that got the same device number still runs (a lazily
// unmounted mount's daemon writing back): here a process holding a record of that device (and,
// as older versions had it, listening for it). The new mount's daemon replaces the record, and
// unmount waits for the new daemon, not the old one. The older code logged "Address already in
// use", ran without, and had unmount wait on the old process and fail naming it.
TEST_F(MountRecordTest, AnOldDaemonOfTheSameDeviceNumberIsNotTakenForTheNewOne) {
  test::MountedVault v({"--shared"});
  std::optional<Actor> old;
  const std::string device = RemountAfter(v, old, false, [](const std::string& d) {
    MakeRecordDir();
    const std::string path = std::string(kRecords) + "/" + d;
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const std::string text = ThisProcess();
    return fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
           ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
           ListenAsOldBeacon(d);
  });
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(RecordedPid(device), v.pid());
  const auto r = Unmount(v.plain(), 5);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(core::VaultLock::ProcessOf(v.pid()), std::nullopt) << "the daemon still runs";
  EXPECT_TRUE(old->running());
  EXPECT_FALSE(fs::exists(std::string(kRecords) + "/" + device)) << "the record stayed";
}

// (c) Another user took the names by which older versions found a daemon (an abstract socket per
// device number, which anyone may bind) before the mount: nothing of the mount's is hidden by
// that. Here the daemon is stopped: unmount waits for it and names it. The older code ran
// without its socket, and unmount returned 0 at once.
TEST_F(MountRecordTest, NamesBoundAheadByAnotherUserHideNoDaemon) {
  test::MountedVault v({"--shared"});
  std::optional<Actor> squatter;
  RemountAfter(v, squatter, true, [](const std::string& d) { return ListenAsOldBeacon(d); });
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(::kill(v.pid(), SIGSTOP), 0);
  const auto r = Unmount(v.plain(), 1);
  ASSERT_EQ(::kill(v.pid(), SIGCONT), 0);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("its daemon (process " + std::to_string(v.pid()) +
                               ") has not ended after 1 s"));
}

// (b) A record left by a daemon that crashed (its process gone, its id perhaps reused) is
// replaced by the next mount of that device number and counts for nothing.
TEST_F(MountRecordTest, AStaleRecordIsReplaced) {
  test::MountedVault v({"--shared"});
  const std::string freed = DeviceOf(v.plain());
  v.Unmount();
  MakeRecordDir();
  // This process's id (alive, but holding no lock) and a start time it never had.
  for (const std::string& d : DevicesAround(freed, 16, 16))
    std::ofstream(std::string(kRecords) + "/" + d) << ::getpid() << " 1\n";
  v.Mount();
  const std::string device = DeviceOf(v.plain());
  EXPECT_EQ(RecordedPid(device), v.pid());
  const auto r = Unmount(v.plain(), 5);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(core::VaultLock::ProcessOf(v.pid()), std::nullopt) << "the daemon still runs";
  EXPECT_FALSE(fs::exists(std::string(kRecords) + "/" + device)) << "the record stayed";
}

// (c) A record directory that another user owns or may write, or a symbolic link, is not used:
// the mount is refused with the reason, and undone, shared or not. The older code mounted
// without minding (and another user could bind its socket names ahead of it).
TEST_F(MountRecordTest, ARecordDirectoryAnotherUserCouldWriteIsRefused) {
  struct Case {
    std::string name;
    std::function<void()> make;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"owned by nobody",
       [] {
         MakeRecordDir();
         ASSERT_EQ(::chown(kRecords, test::kNobody, test::kNogroup), 0);
       },
       "/run/sigilfs/mounts is owned by uid 65534, not 0: not used"},
      {"writable by others",
       [] {
         MakeRecordDir();
         ASSERT_EQ(::chmod(kRecords, 0777), 0);
       },
       "/run/sigilfs/mounts may be written by group or others: not used"},
      {"a symbolic link",
       [] {
         ASSERT_EQ(::mkdir("/run/nobodys", 0700), 0);
         ASSERT_EQ(::chown("/run/nobodys", test::kNobody, test::kNogroup), 0);
         ASSERT_EQ(::mkdir("/run/sigilfs", 0700), 0);
         fs::create_directory_symlink("/run/nobodys", kRecords);
       },
       "/run/sigilfs/mounts is not a directory (a symbolic link?): not used"},
      {"its parent owned by nobody",
       [] {
         ASSERT_EQ(::mkdir("/run/sigilfs", 0700), 0);
         ASSERT_EQ(::chown("/run/sigilfs", test::kNobody, test::kNogroup), 0);
       },
       "/run/sigilfs is owned by uid 65534, not 0: not used"},
  };
  for (const Case& c : cases) {
    for (const bool shared : {true, false}) {
      SCOPED_TRACE(c.name + (shared ? ", shared" : ", exclusive"));
      fs::remove_all("/run/sigilfs");
      fs::remove_all("/run/nobodys");
      c.make();
      test::TempDir dir;
      const Vault vault = MakeVault(dir.path());
      std::vector<std::string> extra;
      if (shared) extra.emplace_back("--shared");
      try {
        test::MountedVault v(vault.cipher, vault.plain, vault.passfile, extra);
        ADD_FAILURE() << "mounted";
      } catch (const std::runtime_error& e) {
        EXPECT_THAT(e.what(), HasSubstr("sigilfs: not serving " + vault.plain +
                                        ": its daemon cannot be recorded (" + c.reason + ")"));
      }
      EXPECT_EQ(DeviceOf(vault.plain), "") << "the mount stayed";
    }
  }
}

// (c) Had another user's record (or directory) taken the place of the daemon's, unmount would
// not believe it: it unmounts, says it cannot wait for the daemon and why, and exits 1.
TEST_F(MountRecordTest, ARecordOfAnotherUserIsNotBelieved) {
  test::MountedVault v({"--shared"});
  const std::string device = DeviceOf(v.plain());
  const std::string record = std::string(kRecords) + "/" + device;
  ASSERT_EQ(RecordedPid(device), v.pid());
  ASSERT_EQ(::unlink(record.c_str()), 0);
  std::ofstream(record) << ThisProcess();
  ASSERT_EQ(::chown(record.c_str(), test::kNobody, test::kNogroup), 0);
  // Held, as the daemon holds its own.
  Actor holder(false, [&](const auto& ready) {
    const int fd = ::open(record.c_str(), O_RDONLY | O_CLOEXEC);
    ready(fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? "" : "not locked");
  });
  ASSERT_EQ(holder.report(), "");
  const auto r = Unmount(v.plain(), 5);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: " + v.plain() +
                       " is unmounted, but its daemon cannot be waited for (" + record +
                       " is not a file of uid 0's: not used): the vault may not be free "
                       "yet\n");
  EXPECT_EQ(DeviceOf(v.plain()), "");
}

// A mount whose record is gone (removed by hand, or made by an older version) is still
// unmounted; unmount says that it could not wait for the daemon, with exit 1, as when the
// daemon does not end in time.
TEST_F(MountRecordTest, AnUnmountThatFindsNoRecordSaysSo) {
  test::MountedVault v({"--shared"});
  const std::string device = DeviceOf(v.plain());
  ASSERT_EQ(::unlink((std::string(kRecords) + "/" + device).c_str()), 0);
  const auto r = Unmount(v.plain(), 5);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: " + v.plain() +
                       " is unmounted, but its daemon cannot be waited for (no record of it in " +
                       kRecords + "): the vault may not be free yet\n");
  EXPECT_EQ(DeviceOf(v.plain()), "");
}

// Two daemons in turn for one device number: the later one's record replaces the earlier's,
// the earlier one at its end leaves it be, and the later one's end removes it.
TEST_F(MountRecordTest, AnOlderDaemonLeavesTheNewerRecord) {
  const std::string device = "0:999999";  // no mount's: the record alone
  const auto daemon = [&](const auto& ready) {
    auto record = fuse::MountRecord::Publish(device, true);
    ready(record.ok() ? "" : record.status().ToString());
  };
  Actor older(false, daemon);
  ASSERT_EQ(older.report(), "");
  auto found = fuse::RecordedDaemon::Find(device, 0);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->Process()->pid, older.pid());
  Actor newer(false, daemon);
  ASSERT_EQ(newer.report(), "");
  EXPECT_FALSE(found->Ended()) << "the older daemon's lock went with its record";
  older.End();
  EXPECT_TRUE(found->Ended());
  found = fuse::RecordedDaemon::Find(device, 0);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->Process()->pid, newer.pid());
  newer.End();
  EXPECT_TRUE(found->Ended());
  found = fuse::RecordedDaemon::Find(device, 0);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().message(), std::string("no record of it in ") + kRecords);
}

// A user with no runtime directory (no login session) mounts exclusively without a record (the
// vault lock stands in), but not shared; one whose runtime directory is another's is refused.
TEST_F(MountRecordTest, WithoutARuntimeDirectoryOnlyAnExclusiveMountGoesOn) {
  Actor user(true, [&](const auto& ready) {
    std::string out;
    ::unsetenv("XDG_RUNTIME_DIR");
    auto exclusive = fuse::MountRecord::Publish("0:999999", false);
    if (!exclusive.ok() || exclusive->recorded()) out += " exclusive: recorded or refused;";
    auto shared = fuse::MountRecord::Publish("0:999999", true);
    if (shared.ok() || shared.status().message() !=
                           "no runtime directory for uid 65534 (/run/user/65534, which a login "
                           "session makes, or $XDG_RUNTIME_DIR)")
      out += " shared: " + (shared.ok() ? std::string("recorded") : shared.status().message());
    ::setenv("XDG_RUNTIME_DIR", "/run", 1);  // root's
    auto others = fuse::MountRecord::Publish("0:999999", false);
    if (others.ok() || others.status().message() != "/run is owned by uid 0, not 65534: not used")
      out += " another's: " + (others.ok() ? std::string("used") : others.status().message());
    ready(out);
  });
  EXPECT_EQ(user.report(), "");
}

// Another user's records are in its runtime directory, where root's unmount finds them too.
TEST_F(MountRecordTest, AUsersRecordIsInItsRuntimeDirectory) {
  ASSERT_EQ(::mkdir("/run/user", 0755), 0);
  ASSERT_EQ(::mkdir("/run/user/65534", 0700), 0);
  ASSERT_EQ(::chown("/run/user/65534", test::kNobody, test::kNogroup), 0);
  Actor daemon(true, [&](const auto& ready) {
    auto record = fuse::MountRecord::Publish("0:999999", true);
    ready(!record.ok() ? record.status().ToString() : record->recorded() ? "" : "not recorded");
  });
  ASSERT_EQ(daemon.report(), "");
  struct stat st;
  ASSERT_EQ(::lstat("/run/user/65534/sigilfs/0:999999", &st), 0);
  EXPECT_EQ(st.st_uid, test::kNobody);
  auto found = fuse::RecordedDaemon::Find("0:999999", test::kNobody);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->Process()->pid, daemon.pid());
  daemon.End();
  EXPECT_TRUE(found->Ended());
  EXPECT_FALSE(fs::exists("/run/user/65534/sigilfs/0:999999"));
}

// `sigilfs stats POINT`, killed after 30 s should it block (exit 124 then).
test::ProcessResult Stats(const std::string& point) {
  return RunProcess({"/usr/bin/timeout", "30", Sigilfs(), "stats", point, "--json"});
}

// A Unix socket bound at `path` and listening (as the process is when called); -1 on failure.
int ListenAt(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), std::min(path.size(), sizeof addr.sun_path - 1));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  return ::listen(fd, 16) == 0 ? fd : -1;
}

// `sigilfs stats` asks the mount's daemon alone. Another user can neither reach its socket nor
// put one of its own beside it. Should a socket be planted all the same (here by root, as only
// someone who may write the record directory could), its answer is not believed unless it is a
// socket of the mount's user, served by that user, from the process the record names; and one
// that takes the question and never answers holds the command up for five seconds, no more.
TEST_F(MountRecordTest, AnotherUserCannotForgeOrJamTheStats) {
  test::MountedVault v({"--shared"});
  const std::string device = DeviceOf(v.plain());
  ASSERT_FALSE(device.empty());
  const std::string socket = std::string(kRecords) + "/" + device + ".sock";
  Actor nobody(true, [&](const auto& ready) {
    std::string done;
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, socket.c_str(), socket.size());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) done += " asked;";
    if (ListenAt(socket + ".x") >= 0) done += " bound one beside it;";
    ready(done);
  });
  EXPECT_EQ(nobody.report(), "") << "what nobody could do";
  test::ProcessResult r = Stats(v.plain());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"pid\": " + std::to_string(v.pid()) + ","));

  const std::string point = "sigilfs: " + v.plain() + ": ";
  const std::string forged = "{\"pid\": " + std::to_string(v.pid()) + ", \"nodes\": 999}";
  // Served by nobody: a socket of root's, listened on once the process became nobody.
  ASSERT_EQ(::unlink(socket.c_str()), 0);
  Actor turned(false, [&](const auto& ready) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, socket.c_str(), socket.size());
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    const bool became = ::setgroups(0, nullptr) == 0 && ::setgid(test::kNogroup) == 0 &&
                        ::setuid(test::kNobody) == 0;
    ready(bound && became && ::listen(fd, 16) == 0 ? "" : "not listening");
  });
  ASSERT_EQ(turned.report(), "");
  r = Stats(v.plain());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, point + socket + " is served by uid 65534, not 0: not believed\n");
  turned.End();

  // Served by root, but not by the daemon the record names: its word is not taken.
  ASSERT_EQ(::unlink(socket.c_str()), 0);
  Actor other(false, [&](const auto& ready) {
    const int fd = ListenAt(socket);
    std::thread answer([&] {
      const int peer = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      const std::string text = "{\"pid\": " + std::to_string(::getpid()) + ", \"nodes\": 999}";
      (void)!::write(peer, text.data(), text.size());
      ::close(peer);
    });
    answer.detach();
    ready(fd >= 0 ? "" : "not listening");
  });
  ASSERT_EQ(other.report(), "");
  r = Stats(v.plain());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, point + "the answer did not come from its daemon (process " +
                       std::to_string(v.pid()) + "): not believed\n");
  other.End();

  // Takes the question and never answers.
  ASSERT_EQ(::unlink(socket.c_str()), 0);
  Actor silent(false, [&](const auto& ready) { ready(ListenAt(socket) >= 0 ? "" : "no"); });
  ASSERT_EQ(silent.report(), "");
  const auto start = std::chrono::steady_clock::now();
  r = Stats(v.plain());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, point + "its daemon (process " + std::to_string(v.pid()) +
                       ") did not answer within 5 s\n");
  silent.End();

  // Nobody's own socket, moved into the directory.
  ASSERT_EQ(::mkdir("/run/nobodys", 0700), 0);
  ASSERT_EQ(::chown("/run/nobodys", test::kNobody, test::kNogroup), 0);
  Actor planted(true, [&](const auto& ready) {
    const int fd = ListenAt("/run/nobodys/s");
    std::thread answer([&] {
      const int peer = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
      (void)!::write(peer, forged.data(), forged.size());
      ::close(peer);
    });
    answer.detach();
    ready(fd >= 0 ? "" : "not listening");
  });
  ASSERT_EQ(planted.report(), "");
  ASSERT_EQ(::rename("/run/nobodys/s", socket.c_str()), 0);
  r = Stats(v.plain());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, point + socket + " is not a socket of uid 0's: not used\n");
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace sigilfs
