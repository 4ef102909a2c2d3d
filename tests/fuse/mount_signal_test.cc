// The signals the mount daemon may get from its own user or from the kernel while files are being
// written (another user's the kernel refuses). SIGUSR1, a request for the stats file, and SIGPIPE,
// however many, leave it serving, with a stats file or without; SIGINT, SIGTERM and SIGHUP, to a
// daemon in the foreground or detached, end it once it has written back everything it took, the
// data of files still open too; SIGXFSZ, for a cipher file past the daemon's file size limit,
// fails that file's writes alone. After each, the files read back whole from a new mount and
// `sigilfs fsck` finds nothing wrong.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_support/mount.h"
#include "test_support/mount_table.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The sigilfs under test; SIGILFS_TEST_DAEMON runs the mounts of another build (to show that a
// test fails on the code before a fix).
std::string Sigilfs() {
  const char* other = std::getenv("SIGILFS_TEST_DAEMON");
  return other != nullptr ? other : SIGILFS_BINARY;
}

// Version `round` of file `name`: its own length (no page multiple) and bytes.
std::string Contents(const std::string& name, int round) {
  const size_t seed = std::hash<std::string>{}(name) + static_cast<size_t>(round) * 7919;
  std::string s(3 * 4096 + 17 + seed % 5000, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>('a' + (seed + i * 13) % 26);
  return s;
}

// Creates or truncates `path` and writes `data` to it in pieces, without fsync: once written, the
// data is the daemon's to write back. The descriptor, or -1 (errno set) at the first failure.
int WriteOpen(const std::string& path, const std::string& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  for (size_t at = 0; at < data.size();) {
    const ssize_t n = ::pwrite(fd, data.data() + at, std::min<size_t>(65536, data.size() - at),
                               static_cast<off_t>(at));
    if (n <= 0) {
      const int saved = errno;
      ::close(fd);
      errno = n == 0 ? EIO : saved;
      return -1;
    }
    at += static_cast<size_t>(n);
  }
  return fd;
}

// Threads writing their files again and again (each written whole, then closed; no fsync) until
// stopped, or until a failure (the daemon gone) ends them. A file counts as stored from the
// successful close of its latest version on; one being rewritten is unknown until then. The files
// are in a directory made on the mount, so that a write after the mount has gone fails instead of
// landing in the bare mount point (which a remount would then find not empty).
class Writers {
 public:
  Writers(const std::string& dir, int n) {
    if (::mkdir((dir + "/" + kDir).c_str(), 0755) != 0 && errno != EEXIST)
      failures_ = std::string(" mkdir: ") + std::strerror(errno) + ";";
    for (int w = 0; w < n; ++w) threads_.emplace_back([this, dir, w] { Run(dir, w); });
  }
  ~Writers() { Stop(); }
  Writers(const Writers&) = delete;
  Writers& operator=(const Writers&) = delete;

  void WaitForFiles(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (completed_.load() < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
  }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
  }
  std::map<std::string, std::string> stored() {
    std::lock_guard<std::mutex> lock(mu_);
    return stored_;
  }
  std::string failures() {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
  }

 private:
  void Run(const std::string& dir, int w) {
    for (int round = 0; !stop_.load(); ++round) {
      const std::string name =
          std::string(kDir) + "/w" + std::to_string(w) + "-" + std::to_string(round % 20);
      const std::string data = Contents(name, round);
      {
        std::lock_guard<std::mutex> lock(mu_);
        stored_.erase(name);
      }
      const int fd = WriteOpen(dir + "/" + name, data);
      const bool ok = fd >= 0 && ::close(fd) == 0;
      std::lock_guard<std::mutex> lock(mu_);
      if (!ok) {
        failures_ += " " + name + ": " + std::strerror(errno) + ";";
        return;
      }
      stored_[name] = data;
      completed_.fetch_add(1);
    }
  }

  static constexpr char kDir[] = "written";
  std::atomic<bool> stop_{false};
  std::atomic<size_t> completed_{0};
  std::mutex mu_;
  std::map<std::string, std::string> stored_;
  std::string failures_;
  std::vector<std::thread> threads_;
};

// A file written and kept open: its data reached the daemon, and no close has flushed it yet.
struct HeldFile {
  std::string name, data;
  int fd = -1;
  HeldFile(const std::string& dir, std::string file, size_t size) : name(std::move(file)) {
    for (int part = 0; data.size() < size; ++part) data += Contents(name, part);
    data.resize(size);
    fd = WriteOpen(dir + "/" + name, data);
  }
  ~HeldFile() {
    if (fd >= 0) ::close(fd);
  }
  HeldFile(const HeldFile&) = delete;
  HeldFile& operator=(const HeldFile&) = delete;
};

// Waits up to `limit` (0: looks once) for `pid`, a child, to exit; its wait status, or -1 while
// it runs.
int WaitExit(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(10ms);
  }
}

// Whether `pid`, not a child, is still alive (a zombie is not).
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

bool Mounted(const std::string& plain) {
  for (const auto& m : test::MountsAt(plain))
    if (m.type == "fuse.sigilfs") return true;
  return false;
}

// Mounts `v` again (unmounted now, by its daemon's end or by the test): every file in `files`
// reads back as it was stored; then unmounts it and runs `sigilfs fsck`, which must find nothing.
void ExpectWholeAfterRemount(test::MountedVault& v,
                             const std::map<std::string, std::string>& files) {
  v.Unmount();
  v.Mount();
  for (const auto& [name, data] : files) {
    const std::string got = test::ReadAll(v.path(name));
    EXPECT_TRUE(got == data) << name << ": " << got.size() << " bytes read, " << data.size()
                             << " stored";
  }
  v.Unmount();
  const test::ProcessResult r =
      test::RunProcess({SIGILFS_BINARY, "fsck", v.cipher(), "--passfile", v.passfile()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(" 0 problems"), std::string::npos) << r.out << r.err;
}

// SIGUSR1 asks for the stats file and SIGPIPE is what a closed pipe raises: a flood of both under
// writes, with a stats file and without, ends nothing and fails no write. The older code had
// SIGUSR1 end a daemon without a stats file on the spot, the data of open files lost with it.
TEST(MountSignalTest, AFloodOfSigusr1AndSigpipeUnderWritesEndsNothing) {
  SIGILFS_NEEDS_FUSE();
  for (const bool with_stats : {false, true}) {
    SCOPED_TRACE(with_stats ? "with a stats file" : "without a stats file");
    test::TempDir out;
    const std::string stats = (out.path() / "stats.json").string();
    std::vector<std::string> extra;
    if (with_stats) extra = {"--stats-file", stats};
    test::MountedVault v(extra);
    std::map<std::string, std::string> files;
    {
      HeldFile held(v.plain(), "held", (1 << 20) + 123);
      ASSERT_GE(held.fd, 0) << std::strerror(errno);
      Writers writers(v.plain(), 3);
      writers.WaitForFiles(20);
      int refused = 0;
      for (int i = 0; i < 3000; ++i) {
        refused += ::kill(v.pid(), i % 3 == 2 ? SIGPIPE : SIGUSR1) == 0 ? 0 : 1;
        if (i % 10 == 0) std::this_thread::sleep_for(1ms);
      }
      EXPECT_EQ(refused, 0);
      writers.WaitForFiles(60);
      writers.Stop();
      EXPECT_EQ(writers.failures(), "");
      ASSERT_EQ(WaitExit(v.pid(), 0s), -1) << "the daemon ended: " << v.log();
      EXPECT_TRUE(Mounted(v.plain()));
      // The held file takes more, and its close writes it all.
      const std::string more = Contents("more", 1);
      EXPECT_EQ(::pwrite(held.fd, more.data(), more.size(), static_cast<off_t>(held.data.size())),
                static_cast<ssize_t>(more.size()));
      EXPECT_EQ(::close(std::exchange(held.fd, -1)), 0);
      files = writers.stored();
      files["held"] = held.data + more;
    }
    v.Unmount();
    EXPECT_TRUE(WIFEXITED(v.exit_status()) && WEXITSTATUS(v.exit_status()) == 0)
        << v.exit_status() << " " << v.log();
    if (with_stats) {
      EXPECT_TRUE(fs::exists(stats));
    }
    ExpectWholeAfterRemount(v, files);
  }
}

// SIGINT (Ctrl-C), SIGTERM and SIGHUP (a closed terminal) under writes end the daemon with
// status 0 once it has written back all it took: the files closed before, and what was written to
// a file still open then.
TEST(MountSignalTest, SigintSigtermOrSighupUnderWritesEndTheDaemonAfterWritingBack) {
  SIGILFS_NEEDS_FUSE();
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    SCOPED_TRACE(::strsignal(sig));
    test::MountedVault v;
    std::map<std::string, std::string> files;
    {
      HeldFile held(v.plain(), "held", (2 << 20) + 4095);
      ASSERT_GE(held.fd, 0) << std::strerror(errno);
      Writers writers(v.plain(), 3);
      writers.WaitForFiles(40);
      ASSERT_EQ(::kill(v.pid(), sig), 0);
      const int status = WaitExit(v.pid(), 20s);
      ASSERT_NE(status, -1) << "the daemon did not end: " << v.log();
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << " " << v.log();
      writers.Stop();  // they end at their next request, if not already
      EXPECT_FALSE(Mounted(v.plain()));
      files = writers.stored();
      files["held"] = held.data;
    }
    EXPECT_GE(files.size(), 20u);
    ExpectWholeAfterRemount(v, files);
  }
}

// A detached daemon (no -f) has no terminal, so a SIGHUP is someone's request to end: it ends as
// for SIGTERM, the mount removed and everything written back.
TEST(MountSignalTest, SighupToADetachedDaemonEndsItAfterWritingBack) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault v;  // the vault; mounted again below, detached
  v.Unmount();
  const test::ProcessResult r =
      test::RunProcess({Sigilfs(), "mount", v.cipher(), v.plain(), "--passfile", v.passfile(),
                        "--transport", "dev"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const test::ProcessResult found = test::RunProcess({"/usr/bin/pgrep", "-f", "-n", v.cipher()});
  const pid_t pid = std::atoi(found.out.c_str());
  struct Cleanup {
    pid_t pid;
    std::string plain;
    ~Cleanup() {
      if (pid > 0 && Alive(pid)) ::kill(pid, SIGKILL);
      test::RunProcess({"/bin/fusermount3", "-u", "-z", plain});
    }
  } cleanup{pid, v.plain()};
  ASSERT_GT(pid, 0) << found.out << found.err;
  ASSERT_TRUE(Mounted(v.plain()));
  std::map<std::string, std::string> files;
  {
    HeldFile held(v.plain(), "held", (1 << 20) + 1);
    ASSERT_GE(held.fd, 0) << std::strerror(errno);
    Writers writers(v.plain(), 2);
    writers.WaitForFiles(20);
    ASSERT_EQ(::kill(pid, SIGHUP), 0);
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (Alive(pid) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    ASSERT_FALSE(Alive(pid)) << "the daemon did not end";
    writers.Stop();
    EXPECT_FALSE(Mounted(v.plain()));
    files = writers.stored();
    files["held"] = held.data;
  }
  ExpectWholeAfterRemount(v, files);
}

// A cipher file that grows past the daemon's file size limit (RLIMIT_FSIZE, its user's) makes the
// kernel send SIGXFSZ: that file's write fails, and the daemon serves on, the data of other open
// files kept. The older code was ended by the signal, losing them.
TEST(MountSignalTest, AFileSizeLimitFailsThatFileAloneAndEndsNothing) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault v;
  const rlimit limit = {1 << 20, 1 << 20};
  ASSERT_EQ(::prlimit(v.pid(), RLIMIT_FSIZE, &limit, nullptr), 0) << std::strerror(errno);
  std::map<std::string, std::string> files;
  {
    HeldFile held(v.plain(), "held", 64 * 1024 + 5);
    ASSERT_GE(held.fd, 0) << std::strerror(errno);
    std::string big(3 << 20, 'x');
    const int fd = WriteOpen(v.path("big"), big);
    const int err = fd < 0 ? errno : (::fsync(fd) == 0 ? 0 : errno);
    const bool closed = fd < 0 || ::close(fd) == 0;
    EXPECT_TRUE(err != 0 || !closed) << "3 MiB written past a 1 MiB limit";
    ASSERT_EQ(WaitExit(v.pid(), 0s), -1) << "the daemon ended: " << v.log();
    // The failed file is removed, as its writer would; the others are untouched.
    EXPECT_EQ(::unlink(v.path("big").c_str()), 0) << std::strerror(errno);
    const int other = WriteOpen(v.path("small"), Contents("small", 0));
    EXPECT_GE(other, 0) << std::strerror(errno);
    EXPECT_EQ(::close(other), 0);
    EXPECT_EQ(::close(std::exchange(held.fd, -1)), 0);
    files["held"] = held.data;
    files["small"] = Contents("small", 0);
  }
  ExpectWholeAfterRemount(v, files);
}

}  // namespace
}  // namespace sigilfs
