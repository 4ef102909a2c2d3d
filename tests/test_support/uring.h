// Test helper: the fuse module's `enable_uring` switch, turned on (or off) for as long as a test
// needs it and put back as it was once no test of any process needs it any more.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>

namespace sigilfs::test {

inline constexpr char kUringSwitch[] = "/sys/module/fuse/parameters/enable_uring";

// Whether this kernel has FUSE over io_uring at all (Linux 6.14+: the switch exists).
inline bool KernelHasFuseOverUring() { return ::access(kUringSwitch, F_OK) == 0; }

// Holds the switch at `on` (root only). Holders of the same value share it, across processes
// (ctest runs tests side by side), through a lock file: the first one in notes the value it
// found, the last one out puts it back. A holder of the other value waits for the others.
//
// The noted value stays in a file until it is put back, so a run that was killed (a CTest
// timeout sends SIGKILL) is undone by the next process that finds no holder left:
// PutBackAfterKilledRun, which every fuse_tests process calls as it starts and ends. On SIGINT,
// SIGTERM or SIGHUP a holder puts the value back itself before it dies.
class UringSwitch {
 public:
  explicit UringSwitch(bool on) : exclusive_(!on) {
    fd_ = ::open(Files().lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) return;
    // Joining holders of "on": the switch is theirs while any holds the lock shared.
    if (on && ::flock(fd_, LOCK_SH) == 0 && ::access(Files().original, F_OK) == 0 &&
        Read() == "Y") {
      ok_ = true;
    } else {
      ::flock(fd_, LOCK_EX);
      // The value before any holder: noted by the first, kept until the last has left.
      if (::access(Files().original, F_OK) != 0) std::ofstream(Files().original) << Read();
      ok_ = Write(on ? "Y" : "N") && Read() == (on ? "Y" : "N");
      if (!exclusive_) ::flock(fd_, LOCK_SH);  // others turning it on may join
    }
    CatchSignals();
  }
  ~UringSwitch() {
    if (fd_ < 0) return;
    ReleaseSignals();
    PutBackIfAlone(fd_);  // the last holder puts the value back
    ::close(fd_);
  }
  UringSwitch(const UringSwitch&) = delete;
  UringSwitch& operator=(const UringSwitch&) = delete;

  // Whether the switch holds the value asked for.
  bool ok() const { return ok_; }

  // Puts back the value a killed holder left noted, if no holder is left (a live one keeps the
  // lock file locked). Does nothing where there is no note or no right to the lock file.
  static void PutBackAfterKilledRun() {
    const int fd = ::open(Files().lock, O_RDWR | O_CLOEXEC);
    if (fd < 0) return;
    PutBackIfAlone(fd);
    ::close(fd);
  }

 private:
  // The lock file and the noted value, shared by every test process of the machine; /run/lock
  // is emptied at boot, as the module's parameters are.
  struct Paths {
    char lock[64];
    char original[64];
  };
  static const Paths& Files() {
    static const Paths paths = [] {
      Paths p;
      const char* dir = ::access("/run/lock", W_OK) == 0 ? "/run/lock" : "/tmp";
      std::snprintf(p.lock, sizeof p.lock, "%s/sigilfs-test-uring.lock", dir);
      std::snprintf(p.original, sizeof p.original, "%s/sigilfs-test-uring.original", dir);
      return p;
    }();
    return paths;
  }
  static std::string Read() {
    std::string v;
    std::getline(std::ifstream(kUringSwitch), v);
    return v;
  }
  static bool Write(const std::string& v) {
    return static_cast<bool>(std::ofstream(kUringSwitch) << v);
  }

  // If `fd` can take the lock alone (no other holder), writes the noted value back and drops
  // the note. Plain system calls only: the signal handler calls it too.
  static void PutBackIfAlone(int fd) {
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return;
    const int in = ::open(Files().original, O_RDONLY | O_CLOEXEC);
    if (in < 0) return;
    char value[16];
    ssize_t n = ::read(in, value, sizeof value);
    ::close(in);
    while (n > 0 && (value[n - 1] == '\n' || value[n - 1] == ' ')) --n;
    bool put_back = n == 0;  // an empty note has nothing to put back
    const int out = n > 0 ? ::open(kUringSwitch, O_WRONLY | O_CLOEXEC) : -1;
    if (out >= 0) {
      put_back = ::write(out, value, static_cast<size_t>(n)) == n;
      ::close(out);
    }
    // Kept if the value could not be written, so that a later process tries again.
    if (put_back) ::unlink(Files().original);
  }

  // A holder killed by SIGINT (Ctrl-C), SIGTERM or SIGHUP puts the value back first. Only the
  // process that took the switch: a forked child shares its lock and must not give it up.
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  static inline std::atomic<int> held_fd_{-1};
  static inline std::atomic<pid_t> holder_pid_{0};
  static inline struct sigaction previous_[3];
  static void OnSignal(int sig) {
    const int fd = held_fd_.exchange(-1);
    if (fd >= 0 && ::getpid() == holder_pid_.load()) PutBackIfAlone(fd);
    for (size_t i = 0; i < 3; ++i)
      if (kSignals[i] == sig) ::sigaction(sig, &previous_[i], nullptr);
    ::raise(sig);  // delivered with the previous action once this handler returns
  }
  void CatchSignals() {
    int none = -1;
    if (!held_fd_.compare_exchange_strong(none, fd_)) return;  // one holder per process has it
    catching_ = true;
    holder_pid_ = ::getpid();
    struct sigaction action = {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    // A signal the process ignores (SIGINT in a background job) stays ignored.
    for (size_t i = 0; i < 3; ++i) {
      ::sigaction(kSignals[i], nullptr, &previous_[i]);
      if (previous_[i].sa_handler != SIG_IGN) ::sigaction(kSignals[i], &action, nullptr);
    }
  }
  void ReleaseSignals() {
    if (!catching_) return;
    for (size_t i = 0; i < 3; ++i)
      if (previous_[i].sa_handler != SIG_IGN) ::sigaction(kSignals[i], &previous_[i], nullptr);
    held_fd_ = -1;
  }

  bool exclusive_;
  int fd_ = -1;
  bool ok_ = false;
  bool catching_ = false;
};

}  // namespace sigilfs::test
