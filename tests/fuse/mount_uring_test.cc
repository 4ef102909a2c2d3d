// The mount over FUSE's io_uring transport: the mount suites pass over it, the stats say which
// transport serves, and the daemon's end (SIGTERM, unmount, SIGKILL) mid-load hangs nothing and
// loses nothing that was stored.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_support/mount.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"
#include "test_support/uring.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;

// The mount suites of the io_uring run: the POSIX calls, the workloads, concurrency, crashes,
// load, a full disk, verity, file handles, listings, locks, shared mode and the randomized
// checker.
constexpr char kSuitesOverUring[] =
    "MountPosixTest.*:MountWorkloadTest.*:MountConcurrencyTest.*:MountCrashTest.*"
    ":MountLoadTest.*:MountEnospcTest.*:MountVerityTest.*:MountHandleTest.*:MountListingTest.*"
    ":MountLocksTest.*:MountRaceTest.*:MountRandomTest.*:MountSharedTest.*:MountXattrTest.*";

class MountUringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    SIGILFS_NEEDS_ROOT("turning the kernel's FUSE-over-io_uring switch on needs root");
    SIGILFS_NEEDS(test::KernelHasFuseOverUring(), "this kernel has no FUSE over io_uring");
    if (std::getenv("SIGILFS_TEST_MOUNT_ARGS") != nullptr)
      GTEST_SKIP() << "already running with other mount arguments";
    on_ = std::make_unique<test::UringSwitch>(true);
    ASSERT_TRUE(on_->ok()) << "cannot turn " << test::kUringSwitch << " on";
  }
  std::unique_ptr<test::UringSwitch> on_;
};

// The mount's stats file, written on SIGUSR1 (and waited for) or read as it is.
nlohmann::json Stats(const test::MountedVault& vault, const std::string& path, bool ask = true) {
  if (ask) {
    fs::remove(path);
    ::kill(vault.pid(), SIGUSR1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!fs::exists(path) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  try {
    return nlohmann::json::parse(test::ReadAll(path));
  } catch (const std::exception&) {
    return nlohmann::json::object();
  }
}

TEST_F(MountUringTest, MountSuitesPassOverIoUring) {
  std::vector<std::string> env = test::EnvironmentWithout("SIGILFS_TEST_MOUNT_ARGS");
  env.push_back("SIGILFS_TEST_MOUNT_ARGS=--transport uring");
  const test::ProcessResult r = test::RunProcess(
      {"/proc/self/exe", std::string("--gtest_filter=") + kSuitesOverUring, "--gtest_brief=1"}, "",
      env);
  std::printf("%s", r.out.substr(r.out.size() > 4000 ? r.out.size() - 4000 : 0).c_str());
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// The threads of process `pid` named `name`.
int ThreadsNamed(pid_t pid, const std::string& name) {
  int n = 0;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::string comm = test::ReadAll(task.path() / "comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    if (comm == name) ++n;
  }
  return n;
}

// A daemon that may leave SCHED_IDLE again (root here) serves RELEASE on the entry's own thread
// (and commits its replies under SCHED_IDLE where the round trip is cheap): it starts no helper.
// One that may not (without CAP_SYS_NICE and with the default RLIMIT_NICE, as most unprivileged
// daemons) commits them as usual and hands RELEASE to the helper, and the POSIX, workload,
// concurrency and race suites pass that way too.
TEST_F(MountUringTest, DaemonsThatMayNotLeaveSchedIdleServeAsWellWithTheHelper) {
  ASSERT_TRUE(fs::exists("/usr/bin/setpriv")) << "setpriv (util-linux) drops the capability";
  test::TempDir dir;
  const fs::path wrapper = dir.path() / "daemon-without-sys-nice";
  std::ofstream(wrapper) << "#!/bin/sh\nexec /usr/bin/setpriv --bounding-set=-sys_nice "
                            "--inh-caps=-sys_nice -- "
                         << SIGILFS_BINARY << " \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  auto helpers = [](const test::MountedVault& vault) {
    for (int i = 0; i < 20; ++i) std::ofstream(vault.path("f" + std::to_string(i))) << i;
    return ThreadsNamed(vault.pid(), "sigilfs-qhelp");
  };
  // The daemon has this process's rights: whether it may come back from SCHED_IDLE is asked
  // here the way the transport asks, on a thread of its own.
  bool may_leave_idle = false;
  std::thread([&may_leave_idle] {
    sched_param none{};
    may_leave_idle = ::sched_setscheduler(0, SCHED_IDLE, &none) == 0 &&
                     ::sched_setscheduler(0, SCHED_OTHER, &none) == 0;
  }).join();
  {
    test::MountedVault vault({"--transport", "uring"});
    EXPECT_EQ(helpers(vault), may_leave_idle ? 0 : 1)
        << (may_leave_idle ? "a daemon that may leave SCHED_IDLE starts no helper"
                           : "this process may not leave SCHED_IDLE: its daemon has the helper");
  }
  ::setenv("SIGILFS_TEST_DAEMON", wrapper.c_str(), 1);
  {
    test::MountedVault vault({"--transport", "uring"});
    EXPECT_EQ(helpers(vault), 1) << "one that may not hands RELEASE to the helper";
  }
  ::unsetenv("SIGILFS_TEST_DAEMON");

  std::vector<std::string> env = test::EnvironmentWithout("SIGILFS_TEST_MOUNT_ARGS");
  env.push_back("SIGILFS_TEST_MOUNT_ARGS=--transport uring");
  env.push_back("SIGILFS_TEST_DAEMON=" + wrapper.string());
  const test::ProcessResult r = test::RunProcess(
      {"/proc/self/exe",
       "--gtest_filter=MountPosixTest.*:MountWorkloadTest.*:MountConcurrencyTest.*:MountRaceTest.*",
       "--gtest_brief=1"},
      "", env);
  std::printf("%s", r.out.substr(r.out.size() > 4000 ? r.out.size() - 4000 : 0).c_str());
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(MountUringTest, StatsSayWhichTransportServesAndHowManyRequestsEachCarried) {
  test::TempDir out;
  const std::string stats = (out.path() / "stats.json").string();
  for (const char* transport : {"uring", "auto", "dev"}) {
    SCOPED_TRACE(transport);
    test::MountedVault vault({"--transport", transport, "--stats-file", stats});
    for (int i = 0; i < 20; ++i) {
      std::ofstream(vault.path("f" + std::to_string(i))) << "data " << i;
      EXPECT_EQ(test::ReadAll(vault.path("f" + std::to_string(i))), "data " + std::to_string(i));
    }
    const nlohmann::json j = Stats(vault, stats);
    const bool uring = std::string(transport) != "dev";
    EXPECT_EQ(j.value("transport", ""), uring ? "uring" : "dev") << j.dump();
    if (uring) {
      // INIT comes over /dev/fuse; the 20 creates, writes and reads over the ring.
      EXPECT_GE(j.value("requests_uring", 0), 60) << j.dump();
      EXPECT_EQ(j.value("uring_queues", 0u), static_cast<unsigned>(::sysconf(_SC_NPROCESSORS_CONF)))
          << j.dump();
    } else {
      EXPECT_EQ(j.value("requests_uring", -1), 0) << j.dump();
      EXPECT_GE(j.value("requests_dev", 0), 60) << j.dump();
    }
    EXPECT_GE(j.value("requests_dev", 0), 1) << j.dump();
  }
}

// Read-ahead comes as READs of a MiB, decrypted straight into the ring entries' buffers by
// threads that leave their queue's CPU while they serve them, while small reads of the same
// files come between them: several readers at once, cold, get every byte as written.
TEST_F(MountUringTest, ColdLargeReadsFromSeveralReadersComeBackIntact) {
  test::TempDir out;
  const std::string stats = (out.path() / "stats.json").string();
  test::MountedVault vault({"--transport", "uring", "--stats-file", stats});
  constexpr size_t kSize = (12 << 20) + 777;  // a tail that ends inside a page
  std::vector<std::string> written(3);
  for (size_t f = 0; f < written.size(); ++f) {
    std::string& data = written[f];
    data.resize(kSize);
    uint64_t x = 0x9e3779b97f4a7c15ULL * (f + 1);
    for (char& c : data) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      c = static_cast<char>(x);
    }
    std::ofstream(vault.path("big" + std::to_string(f)), std::ios::binary) << data;
  }
  for (size_t f = 0; f < written.size(); ++f) {
    // Out of the page cache, so that the reads below reach the daemon.
    const int fd = ::open(vault.path("big" + std::to_string(f)).c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    ::close(fd);
  }
  std::vector<std::future<std::string>> reads;
  for (size_t f = 0; f < written.size(); ++f)
    reads.push_back(std::async(std::launch::async, [&vault, f] {
      return test::ReadAll(vault.path("big" + std::to_string(f)));
    }));
  // Meanwhile, small reads here and there in the last file, each a request of its own.
  const int fd = ::open(vault.path("big2").c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  for (size_t at = 4096 * 7; at + 4096 < kSize; at += (1 << 20) + 4096) {
    alignas(4096) static char page[4096];
    ASSERT_EQ(::pread(fd, page, sizeof page, static_cast<off_t>(at)), 4096);
    EXPECT_TRUE(std::string(page, sizeof page) == written[2].substr(at, 4096)) << "at " << at;
  }
  ::close(fd);
  for (size_t f = 0; f < written.size(); ++f) {
    const std::string got = reads[f].get();
    ASSERT_EQ(got.size(), kSize) << f;
    EXPECT_TRUE(got == written[f]) << "file " << f << " differs";
  }
  const nlohmann::json j = Stats(vault, stats);
  // 3 files of 12 MiB cold, in READs of at most a MiB, came over the ring.
  EXPECT_GE(j["requests"]["read"].value("uring", 0), 36) << j.dump();
}

// A new vault in `dir`: its cipher directory, mount point and passphrase file.
struct NewVault {
  std::string cipher, plain, pass;
};
NewVault MakeVault(const fs::path& dir) {
  NewVault v{(dir / "c").string(), (dir / "p").string(), (dir / "pass").string()};
  fs::create_directories(v.plain);
  std::ofstream(v.pass) << "pw\n";
  const test::ProcessResult r =
      test::RunProcess({SIGILFS_BINARY, "init", v.cipher, "--kdf", "test", "--passfile", v.pass});
  if (r.exit_code != 0) throw std::runtime_error("sigilfs init: " + r.err);
  return v;
}

TEST(MountUringSwitchTest, AskingForIoUringWhereTheKernelHasItOffIsRefusedWithTheFix) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS_ROOT("turning the kernel's FUSE-over-io_uring switch off needs root");
  SIGILFS_NEEDS(test::KernelHasFuseOverUring(), "this kernel has no FUSE over io_uring");
  test::UringSwitch off(false);
  ASSERT_TRUE(off.ok());
  test::TempDir dir;
  const NewVault v = MakeVault(dir.path());
  const test::ProcessResult r = test::RunProcess(
      {SIGILFS_BINARY, "mount", v.cipher, v.plain, "--passfile", v.pass, "--transport", "uring"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("enable_uring"), std::string::npos) << r.err;
  struct statfs sf;
  ASSERT_EQ(::statfs(v.plain.c_str(), &sf), 0);
  EXPECT_NE(sf.f_type, test::kFuseSuperMagic) << "mounted anyway";
  // Where it is off, the default serves over /dev/fuse.
  const std::string stats = (dir.path() / "stats.json").string();
  {
    test::MountedVault vault(v.cipher, v.plain, v.pass,
                             {"--transport", "auto", "--stats-file", stats});
    std::ofstream(vault.path("f")) << "x";
    EXPECT_EQ(Stats(vault, stats).value("transport", ""), "dev");
  }
}

// Writers on a mount, each making files one after another (written, fsync'ed, closed) through a
// descriptor of the mount's root, so that once the mount is gone nothing lands in the
// directory below it. Remembers the files whose every step succeeded.
class Writers {
 public:
  Writers(const std::string& root, int count) {
    dir_ = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int w = 0; w < count; ++w) threads_.emplace_back([this, w] { Run(w); });
  }
  ~Writers() { Join(std::chrono::seconds(60)); }

  // Waits for the writers to end (they end at their first error); false if they did not
  // within `limit`: a hang.
  bool Join(std::chrono::seconds limit) {
    stop_ = true;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (running_.load() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (running_.load() > 0) return false;
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
    if (dir_ >= 0) ::close(dir_);
    dir_ = -1;
    return true;
  }
  // Waits until files were stored `n` times (names are reused: each writer has 50).
  void WaitForFiles(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (completed_.load() < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::map<std::string, std::string> stored() {
    std::lock_guard<std::mutex> lock(mu_);
    return stored_;
  }
  static std::string Contents(int writer, int n) {
    std::string s(4096 * 3 + 123 * writer + n % 7, '\0');
    for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>('a' + (writer + n + i) % 26);
    return s;
  }

 private:
  void Run(int w) {
    running_.fetch_add(1);
    for (int n = 0; !stop_.load() || n < 1; ++n) {
      const std::string name = "w" + std::to_string(w) + "-" + std::to_string(n % 50);
      const std::string data = Contents(w, n);
      const int fd = ::openat(dir_, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) {
        // The daemon may have truncated the file before it died: no longer checked.
        std::lock_guard<std::mutex> lock(mu_);
        stored_.erase(name);
        break;
      }
      bool ok = true;
      for (size_t at = 0; ok && at < data.size(); at += 4096) {
        const size_t len = std::min<size_t>(4096, data.size() - at);
        ok = ::pwrite(fd, data.data() + at, len, static_cast<off_t>(at)) ==
             static_cast<ssize_t>(len);
      }
      ok = ok && ::fsync(fd) == 0;
      ok = ::close(fd) == 0 && ok;
      {
        std::lock_guard<std::mutex> lock(mu_);
        // A failed rewrite leaves the file unknown: no longer checked.
        if (ok) {
          stored_[name] = data;
          completed_.fetch_add(1);
        }
        if (!ok) stored_.erase(name);
      }
      if (!ok) break;
    }
    running_.fetch_sub(1);
  }

  int dir_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> running_{0};
  std::atomic<size_t> completed_{0};
  std::mutex mu_;
  std::map<std::string, std::string> stored_;
  std::vector<std::thread> threads_;
};

// What the writers stored reads back after the vault is mounted again.
void ExpectStored(const std::string& cipher, const std::string& plain, const std::string& pass,
                  const std::map<std::string, std::string>& stored) {
  test::MountedVault again(cipher, plain, pass);
  for (const auto& [name, data] : stored) EXPECT_EQ(test::ReadAll(again.path(name)), data) << name;
}

// Waits for `pid` to exit within `limit`; its wait status, or -1 on a timeout.
int WaitExit(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

TEST_F(MountUringTest, KillingTheDaemonMidLoadEndsTheCallersAndKeepsWhatWasStored) {
  test::TempDir out;
  const NewVault v = MakeVault(out.path());
  const std::string stats = (out.path() / "stats.json").string();
  std::map<std::string, std::string> stored;
  {
    test::MountedVault vault(v.cipher, v.plain, v.pass,
                             {"--transport", "uring", "--stats-file", stats});
    Writers writers(v.plain, 4);
    writers.WaitForFiles(400);
    ASSERT_EQ(Stats(vault, stats).value("transport", ""), "uring");
    vault.Kill();  // SIGKILL mid-load, then a lazy unmount
    // Every caller ends (with an error) instead of waiting on the dead daemon.
    ASSERT_TRUE(writers.Join(std::chrono::seconds(20))) << "writers hang after the daemon died";
    stored = writers.stored();
    EXPECT_GE(stored.size(), 40u);
  }
  ExpectStored(v.cipher, v.plain, v.pass, stored);
}

TEST_F(MountUringTest, SigtermOrLazyUnmountMidLoadEndTheDaemonAndKeepWhatWasStored) {
  for (const bool sigterm : {true, false}) {
    SCOPED_TRACE(sigterm ? "SIGTERM" : "lazy unmount");
    test::TempDir out;
    const NewVault v = MakeVault(out.path());
    std::map<std::string, std::string> stored;
    {
      test::MountedVault vault(v.cipher, v.plain, v.pass, {"--transport", "uring"});
      Writers writers(v.plain, 4);
      writers.WaitForFiles(400);
      if (sigterm) {
        ::kill(vault.pid(), SIGTERM);
      } else {
        // Busy, so detached: the mount lives on for the writers' open descriptors, and ends
        // with the last of them.
        const test::ProcessResult r = test::RunProcess({"/bin/fusermount3", "-u", "-z", v.plain});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        ASSERT_TRUE(writers.Join(std::chrono::seconds(20))) << "writers hang after the unmount";
      }
      const int status = WaitExit(vault.pid(), std::chrono::seconds(20));
      ASSERT_NE(status, -1) << "the daemon did not end: " << vault.log();
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << vault.log();
      ASSERT_TRUE(writers.Join(std::chrono::seconds(20))) << "writers hang after the unmount";
      stored = writers.stored();
      EXPECT_GE(stored.size(), 40u);
    }
    ExpectStored(v.cipher, v.plain, v.pass, stored);
  }
}

}  // namespace
}  // namespace sigilfs
