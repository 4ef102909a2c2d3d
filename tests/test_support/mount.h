// Test helper: a vault mounted with the real `sigilfs mount` daemon in a temporary directory,
// always unmounted (and the daemon killed if it hangs) when the object goes away.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs::test {

inline constexpr long kFuseSuperMagic = 0x65735546;

class MountedVault {
 public:
  // Creates a vault (cheap KDF) and mounts it with `extra` mount arguments (over /dev/fuse
  // unless they or SIGILFS_TEST_MOUNT_ARGS say `--transport`).
  // SIGILFS_TEST_CIPHER_ROOT puts the cipher directory below that directory instead (another
  // filesystem: the suites on sshfs), removed with the object.
  explicit MountedVault(std::vector<std::string> extra = {}) : extra_(std::move(extra)) {
    if (const char* root = std::getenv("SIGILFS_TEST_CIPHER_ROOT"); root != nullptr) {
      std::string templ = std::string(root) + "/vault.XXXXXX";
      if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp in " + templ);
      cipher_ = own_cipher_ = templ;
    }
    std::filesystem::create_directories(cipher());
    std::filesystem::create_directories(plain());
    std::ofstream(passfile()) << "test passphrase\n";
    ProcessResult r =
        RunProcess({SIGILFS_BINARY, "init", cipher(), "--kdf", "test", "--passfile", passfile()});
    if (r.exit_code != 0) throw std::runtime_error("sigilfs init failed: " + r.err);
    Mount();
  }
  // Mounts the existing vault `cipher` on `plain` with the passphrase in `passfile`.
  MountedVault(std::string cipher, std::string plain, std::string passfile,
               std::vector<std::string> extra = {})
      : extra_(std::move(extra)),
        cipher_(std::move(cipher)),
        plain_(std::move(plain)),
        passfile_(std::move(passfile)) {
    Mount();
  }
  // The encrypted view of plain directory `dir` (`sigilfs reverse`, made ready by
  // `init --reverse`) on `view`.
  struct ReverseView {};
  MountedVault(ReverseView, std::string dir, std::string view, std::string passfile,
               std::vector<std::string> extra = {})
      : command_("reverse"),
        extra_(std::move(extra)),
        cipher_(std::move(dir)),
        plain_(std::move(view)),
        passfile_(std::move(passfile)) {
    Mount();
  }
  ~MountedVault() {
    Unmount();
    std::error_code ec;
    if (!own_cipher_.empty()) std::filesystem::remove_all(own_cipher_, ec);
  }
  MountedVault(const MountedVault&) = delete;
  MountedVault& operator=(const MountedVault&) = delete;

  std::string cipher() const {
    return cipher_.empty() ? (dir_.path() / "cipher").string() : cipher_;
  }
  std::string plain() const { return plain_.empty() ? (dir_.path() / "plain").string() : plain_; }
  std::string passfile() const {
    return passfile_.empty() ? (dir_.path() / "pass").string() : passfile_;
  }
  std::string path(const std::string& rel) const { return plain() + "/" + rel; }
  std::string log() const { return ReadAll(dir_.path() / "daemon.log"); }
  bool mounted() const { return pid_ > 0; }
  // The daemon's pid (it runs in the foreground, so it is the process started here), or -1.
  pid_t pid() const { return pid_; }

  // Descriptors the daemon has open on regular files: open cipher files and the vault lock
  // (not the directory handles it keeps for requests).
  size_t DaemonOpenFiles() const {
    size_t n = 0;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      struct stat st;
      if (::stat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) ++n;
    }
    return n;
  }

  // Waits (a moment at most) until the daemon holds no more than `count` open files
  // (DaemonOpenFiles): the kernel sends RELEASE after close() has returned.
  void WaitForReleases(size_t count) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (DaemonOpenFiles() > count && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  void Mount() {
    const std::string log_path = (dir_.path() / "daemon.log").string();
    pid_ = ::fork();
    if (pid_ == 0) {
      int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      ::dup2(log, 1);
      ::dup2(log, 2);
      // SIGILFS_TEST_DAEMON runs the mount suites against another build's daemon (to show that
      // a test fails on the code before a fix).
      const char* daemon = std::getenv("SIGILFS_TEST_DAEMON");
      std::vector<std::string> args = {daemon != nullptr ? daemon : SIGILFS_BINARY,
                                       command_,
                                       cipher(),
                                       plain(),
                                       "-f",
                                       "--passfile",
                                       passfile()};
      args.insert(args.end(), extra_.begin(), extra_.end());
      // SIGILFS_TEST_MOUNT_ARGS: more arguments for every mount (the suites in shared mode).
      if (const char* more = std::getenv("SIGILFS_TEST_MOUNT_ARGS");
          more != nullptr && command_ == "mount") {
        std::istringstream words(more);
        for (std::string w; words >> w;)
          if (std::find(args.begin(), args.end(), w) == args.end()) args.push_back(w);
      }
      // The suites run over /dev/fuse unless a test or SIGILFS_TEST_MOUNT_ARGS names the
      // transport (the io_uring run), whatever the kernel's switch says meanwhile.
      if (command_ == "mount" && daemon == nullptr &&
          std::find(args.begin(), args.end(), "--transport") == args.end()) {
        args.push_back("--transport");
        args.push_back("dev");
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < deadline) {
      struct statfs sf;
      if (::statfs(plain().c_str(), &sf) == 0 && sf.f_type == kFuseSuperMagic) return;
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("sigilfs mount exited early: " + log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Unmount();
    throw std::runtime_error("sigilfs mount did not come up: " + log());
  }

  // Unmounts and waits for the daemon; kills it if it does not exit within 15 s. A report of a
  // sanitizer in the daemon's log (it runs in another process, so nothing else would see it)
  // fails the test.
  void Unmount() {
    if (pid_ <= 0) return;
    const ScopedLogCheck check(*this);
    RunProcess({"/bin/fusermount3", "-u", "-z", plain()});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    int status;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    exit_status_ = status;
    pid_ = -1;
  }
  // The wait status of the daemon the last Unmount waited for (-1 before one).
  int exit_status() const { return exit_status_; }

  void Remount() {
    Unmount();
    Mount();
  }

  // A crash: kills the daemon with SIGKILL (nothing is written back), then detaches the dead
  // mount, which answers "Transport endpoint is not connected" until then, with a lazy unmount
  // (processes may still hold descriptors on it). Mount() mounts the vault again.
  void Kill() {
    if (pid_ <= 0) return;
    const ScopedLogCheck check(*this);
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    RunProcess({"/bin/fusermount3", "-u", "-z", plain()});
  }

 private:
  // On scope exit (once the daemon has stopped): fails the test if the daemon's log holds a
  // report of ASan, LSan, TSan or UBSan, quoting it.
  struct ScopedLogCheck {
    const MountedVault& v;
    explicit ScopedLogCheck(const MountedVault& vault) : v(vault) {}
    ~ScopedLogCheck() {
      const std::string text = v.log();
      for (const char* mark : {"Sanitizer", "runtime error:"}) {
        const size_t at = text.find(mark);
        if (at == std::string::npos) continue;
        const size_t from = text.rfind('\n', at);
        ADD_FAILURE() << "the daemon reported:\n"
                      << text.substr(from == std::string::npos ? 0 : from + 1, 3000);
        return;
      }
    }
    ScopedLogCheck(const ScopedLogCheck&) = delete;
    ScopedLogCheck& operator=(const ScopedLogCheck&) = delete;
  };

  TempDir dir_;
  std::string command_ = "mount";  // or "reverse"
  std::vector<std::string> extra_;
  std::string cipher_, plain_, passfile_;  // given, or empty for the ones in dir_
  std::string own_cipher_;                 // made below SIGILFS_TEST_CIPHER_ROOT, removed after
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

}  // namespace sigilfs::test
