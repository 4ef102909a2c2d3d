// Replies the kernel refuses (an interrupted caller, an aborted connection), injected at every
// kind of request in turn on both transports: the daemon gives back what each refused reply
// handed over, never touches a request after its reply, does not spin, writes back what it
// holds and exits cleanly.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support/mount.h"
#include "test_support/pattern.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"
#include "test_support/uring.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;

// The daemon's CPU time so far, in clock ticks (user and system).
long CpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; fields >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stol(field);
    if (i == 15) {
      stime = std::stol(field);
      break;
    }
  }
  return utime + stime;
}

// One worker's round: each kind of request whose reply hands something over (a lookup
// reference, an open handle, a directory handle, a listing) and the plain ones. Failures are
// expected (a refused reply reaches the caller as EIO) and ignored: the checks come after.
void Churn(const std::string& root, int id, const std::atomic<bool>& stop) {
  const std::string dir = root + "/w" + std::to_string(id);
  ::mkdir(dir.c_str(), 0755);
  const std::vector<uint8_t> data = test::Pattern(3 * 4096 + 17, static_cast<uint32_t>(id));
  for (int i = 0; !stop.load(); ++i) {
    const std::string f = dir + "/f" + std::to_string(i % 8);
    const int fd = ::open(f.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (fd >= 0) {
      (void)!::write(fd, data.data(), data.size());
      char buf[4096];
      (void)!::pread(fd, buf, sizeof buf, 0);
      ::fsync(fd);
      ::close(fd);
    }
    struct stat st;
    ::stat(f.c_str(), &st);
    const std::string sub = dir + "/d" + std::to_string(i % 4);
    ::mkdir(sub.c_str(), 0755);
    if (DIR* d = ::opendir(dir.c_str()); d != nullptr) {
      while (::readdir(d) != nullptr) {
      }
      ::closedir(d);
    }
    ::symlink("f0", (dir + "/s" + std::to_string(i % 4)).c_str());
    ::link(f.c_str(), (dir + "/h" + std::to_string(i % 4)).c_str());
    ::rename((dir + "/h" + std::to_string(i % 4)).c_str(),
             (dir + "/r" + std::to_string(i % 4)).c_str());
    ::unlink((dir + "/r" + std::to_string(i % 4)).c_str());
    ::unlink((dir + "/s" + std::to_string(i % 4)).c_str());
    ::rmdir(sub.c_str());
    ::lstat((dir + "/missing").c_str(), &st);
  }
}

// Whether the daemon's log says it refused replies to requests of `opcode`.
bool Refused(const std::string& log, const std::string& opcode) {
  return log.find("fault injection: refusing replies to opcode " + opcode + "\n") !=
         std::string::npos;
}

// Lets the load run at least 3 s, and until `vault`'s daemon has refused replies to each of
// `opcodes` (a busy machine serves fewer requests a second), for at most a minute.
void WaitUntilRefused(const test::MountedVault& vault, const std::vector<std::string>& opcodes) {
  const auto started = std::chrono::steady_clock::now();
  auto all = [&] {
    const std::string log = vault.log();
    return std::all_of(opcodes.begin(), opcodes.end(),
                       [&](const std::string& op) { return Refused(log, op); });
  };
  while (std::chrono::steady_clock::now() - started < std::chrono::seconds(3) ||
         (!all() && std::chrono::steady_clock::now() - started < std::chrono::minutes(1)))
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
}

class MountReplyFaultTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    if (std::string(GetParam()) == "uring") {
      SIGILFS_NEEDS_ROOT("turning the kernel's FUSE-over-io_uring switch on needs root");
      SIGILFS_NEEDS(test::KernelHasFuseOverUring(), "this kernel has no FUSE over io_uring");
      on_ = std::make_unique<test::UringSwitch>(true);
      ASSERT_TRUE(on_->ok()) << "cannot turn " << test::kUringSwitch << " on";
    }
  }
  std::unique_ptr<test::UringSwitch> on_;
};

TEST_P(MountReplyFaultTest, RefusedRepliesLoseNothingAndTheDaemonEndsCleanly) {
  const std::vector<std::string> args = {"--transport", GetParam()};
  // A file kept open and written before the storm, so the daemon holds data of it to write back.
  ::setenv("SIGILFS_FAULT_REPLIES", "5", 1);
  std::unique_ptr<test::MountedVault> vault;
  try {
    vault = std::make_unique<test::MountedVault>(args);
  } catch (...) {
    ::unsetenv("SIGILFS_FAULT_REPLIES");
    throw;
  }
  ::unsetenv("SIGILFS_FAULT_REPLIES");
  const std::vector<uint8_t> kept_bytes = test::Pattern(64 * 1024 + 5, 99);
  const std::string kept_data(kept_bytes.begin(), kept_bytes.end());
  int kept = -1;
  for (int tries = 0; kept < 0 && tries < 50; ++tries)
    kept = ::open(vault->path("kept").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(kept, 0);
  size_t written = 0;
  for (int tries = 0; written < kept_data.size() && tries < 50; ++tries) {
    const ssize_t n = ::pwrite(kept, kept_data.data() + written, kept_data.size() - written,
                               static_cast<off_t>(written));
    if (n > 0) written += static_cast<size_t>(n);
  }
  ASSERT_EQ(written, kept_data.size());

  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int i = 0; i < 6; ++i) workers.emplace_back([&, i] { Churn(vault->plain(), i, stop); });
  // Every kind of request whose reply hands something over.
  const std::vector<std::string> handing_over = {"1", "9", "6", "13", "14", "35", "27", "18"};
  WaitUntilRefused(*vault, handing_over);
  stop = true;
  for (std::thread& t : workers) t.join();

  // Idle now: a daemon spinning on a lock it lost track of would burn a core here.
  const long before = CpuTicks(vault->pid());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const long after = CpuTicks(vault->pid());
  const long per_second = ::sysconf(_SC_CLK_TCK);
  EXPECT_LT(after - before, per_second / 2) << "the daemon is busy with no request";

  const std::string log = vault->log();
  // Every kind of request whose reply hands something over had replies refused.
  for (const std::string& op : handing_over)
    EXPECT_TRUE(Refused(log, op)) << "opcode " << op << "\n" << log.substr(0, 4000);
  ::close(kept);  // its FLUSH reply may be refused too: the data is stored all the same

  const pid_t daemon = vault->pid();
  vault->Unmount();
  EXPECT_TRUE(WIFEXITED(vault->exit_status()) && WEXITSTATUS(vault->exit_status()) == 0)
      << "daemon " << daemon << " ended with wait status " << vault->exit_status() << "\n"
      << vault->log().substr(0, 4000);

  // Mounted again without faults: what was held is there, and the vault is sound.
  vault->Mount();
  std::ifstream in(vault->path("kept"), std::ios::binary);
  const std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(back == kept_data) << "kept holds " << back.size() << " bytes";
  vault->Unmount();
  auto check =
      test::RunProcess({SIGILFS_BINARY, "fsck", vault->cipher(), "--passfile", vault->passfile()});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
}

INSTANTIATE_TEST_SUITE_P(Transports, MountReplyFaultTest, ::testing::Values("dev", "uring"),
                         [](const auto& info) { return std::string(info.param); });

// The reverse view's daemon, with replies refused while readers walk and read the view: it
// gives back what each refused reply handed over (a lookup reference, an open file, a listing
// handle), stays idle afterwards, and ends with status 0; mounted again, the view reads as the
// same bytes (it is deterministic).
TEST(ReverseReplyFaultTest, RefusedRepliesChangeNothingAndTheDaemonEndsCleanly) {
  SIGILFS_NEEDS_FUSE();
  test::TempDir dir;
  const fs::path plain = dir.path() / "plain", view = dir.path() / "view";
  const std::string pass = (dir.path() / "pass").string();
  for (int d = 0; d < 4; ++d) {
    fs::create_directories(plain / ("d" + std::to_string(d)));
    for (int f = 0; f < 6; ++f) {
      const auto bytes =
          test::Pattern(1000 + 7000 * static_cast<size_t>(f), static_cast<uint32_t>(d * 10 + f));
      std::ofstream(plain / ("d" + std::to_string(d)) / ("f" + std::to_string(f)), std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size()));
    }
  }
  fs::create_directories(view);
  std::ofstream(pass) << "backup passphrase\n";
  auto made = test::RunProcess(
      {SIGILFS_BINARY, "init", "--reverse", plain.string(), "--kdf", "test", "--passfile", pass});
  ASSERT_EQ(made.exit_code, 0) << made.err;

  // What every file of the view reads as, without faults.
  auto read_all = [&](bool tolerate_errors) {
    std::map<std::string, std::string> seen;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(view, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      // A refused reply reaches the reader as EIO (libstdc++ throws it from the read).
      try {
        std::ifstream in(it->path(), std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (in.bad() && tolerate_errors) continue;
        seen[it->path().string().substr(view.string().size())] = bytes;
      } catch (const std::exception&) {
        if (!tolerate_errors) throw;
      }
    }
    return seen;
  };
  std::map<std::string, std::string> before;
  {
    test::MountedVault v(test::MountedVault::ReverseView{}, plain.string(), view.string(), pass);
    before = read_all(false);
  }
  ASSERT_GE(before.size(), 24u);

  ::setenv("SIGILFS_FAULT_REPLIES", "5", 1);
  auto v = std::make_unique<test::MountedVault>(test::MountedVault::ReverseView{}, plain.string(),
                                                view.string(), pass);
  ::unsetenv("SIGILFS_FAULT_REPLIES");
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i)
    readers.emplace_back([&] {
      while (!stop.load()) (void)read_all(true);
    });
  const std::vector<std::string> handing_over = {"1", "14", "15", "27"};
  WaitUntilRefused(*v, handing_over);
  stop = true;
  for (std::thread& t : readers) t.join();
  const long before_ticks = CpuTicks(v->pid());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_LT(CpuTicks(v->pid()) - before_ticks, ::sysconf(_SC_CLK_TCK) / 2)
      << "the daemon is busy with no request";
  const std::string log = v->log();
  for (const std::string& op : handing_over)
    EXPECT_TRUE(Refused(log, op)) << "opcode " << op << "\n" << log.substr(0, 4000);
  v->Unmount();
  EXPECT_TRUE(WIFEXITED(v->exit_status()) && WEXITSTATUS(v->exit_status()) == 0)
      << "wait status " << v->exit_status() << "\n"
      << v->log().substr(0, 4000);
  v->Mount();
  EXPECT_TRUE(read_all(false) == before) << "the view reads differently after the faults";
}

}  // namespace
}  // namespace sigilfs
