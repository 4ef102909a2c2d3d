// Test helper: the fuse module's `enable_uring` switch, turned on (or off) for as long as a test
// needs it and put back as it was once no test of any process needs it any more.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace sigilfs::test {

inline constexpr char kUringSwitch[] = "/sys/module/fuse/parameters/enable_uring";

// Whether this kernel has FUSE over io_uring at all (Linux 6.14+: the switch exists).
inline bool KernelHasFuseOverUring() { return ::access(kUringSwitch, F_OK) == 0; }

// Holds the switch at `on` (root only). Holders of the same value share it, across processes
// (ctest runs tests side by side), through a lock file: the first one in notes the value it
// found, the last one out puts it back. A holder of the other value waits for the others.
class UringSwitch {
 public:
  explicit UringSwitch(bool on) : exclusive_(!on) {
    fd_ = ::open(Path(".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) return;
    // Joining holders of "on": the switch is theirs while any holds the lock shared.
    if (on && ::flock(fd_, LOCK_SH) == 0 && ::access(Path(".original").c_str(), F_OK) == 0 &&
        Read() == "Y") {
      ok_ = true;
      return;
    }
    ::flock(fd_, LOCK_EX);
    // The value before any holder: noted by the first, kept until the last has left.
    if (::access(Path(".original").c_str(), F_OK) != 0) std::ofstream(Path(".original")) << Read();
    ok_ = Write(on ? "Y" : "N") && Read() == (on ? "Y" : "N");
    if (!exclusive_) ::flock(fd_, LOCK_SH);  // others turning it on may join
  }
  ~UringSwitch() {
    if (fd_ < 0) return;
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {  // the last holder: put the value back
      std::string original;
      std::getline(std::ifstream(Path(".original")) >> std::ws, original);
      if (!original.empty()) Write(original);
      ::unlink(Path(".original").c_str());
    }
    ::close(fd_);
  }
  UringSwitch(const UringSwitch&) = delete;
  UringSwitch& operator=(const UringSwitch&) = delete;

  // Whether the switch holds the value asked for.
  bool ok() const { return ok_; }

 private:
  // The lock file and the noted value, shared by every test process of the machine.
  static std::string Path(const char* suffix) {
    const char* dir = ::access("/run/lock", W_OK) == 0 ? "/run/lock" : "/tmp";
    return std::string(dir) + "/sigilfs-test-uring" + suffix;
  }
  static std::string Read() {
    std::string v;
    std::getline(std::ifstream(kUringSwitch), v);
    return v;
  }
  static bool Write(const std::string& v) {
    return static_cast<bool>(std::ofstream(kUringSwitch) << v);
  }

  bool exclusive_;
  int fd_ = -1;
  bool ok_ = false;
};

}  // namespace sigilfs::test
