// Test helper: lets one throw-away account open /dev/fuse where the machine does not let everyone
// (Debian's udev rule makes it 0666; containers often leave it 0600): a POSIX ACL entry for that
// uid only, removed again when the object goes away. Changes to the ACL are serialized with an
// flock, since tests run as parallel processes.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "test_support/process.h"

namespace sigilfs::test {

class FuseDeviceAccess {
 public:
  explicit FuseDeviceAccess(uid_t uid) : entry_("u:" + std::to_string(uid)) {
    struct stat st;
    if (::stat("/dev/fuse", &st) != 0) {
      error_ = "no /dev/fuse";
      return;
    }
    if ((st.st_mode & 0006) == 0006) return;  // everyone may open it already
    if (::access(kSetfacl, X_OK) != 0) {
      error_ = "/dev/fuse is not open to users and there is no setfacl to grant it";
      return;
    }
    Locked lock;
    ProcessResult r = RunProcess({kSetfacl, "-m", entry_ + ":rw", "/dev/fuse"});
    if (r.exit_code != 0) {
      error_ = "cannot grant a user /dev/fuse: " + r.err;
      return;
    }
    granted_ = true;
  }
  ~FuseDeviceAccess() {
    if (!granted_) return;
    Locked lock;
    RunProcess({kSetfacl, "-x", entry_, "/dev/fuse"});
    // The last entry gone, the ACL goes too (setfacl -x leaves an empty mask behind).
    ProcessResult acl = RunProcess({"/usr/bin/getfacl", "-c", "-n", "/dev/fuse"});
    bool named = false;
    for (const char* kind : {"\nuser:", "\ngroup:"}) {
      for (size_t at = ("\n" + acl.out).find(kind); at != std::string::npos;
           at = ("\n" + acl.out).find(kind, at + 1)) {
        const std::string rest = ("\n" + acl.out).substr(at + std::string(kind).size());
        if (!rest.empty() && rest[0] != ':') named = true;
      }
    }
    if (!named) RunProcess({kSetfacl, "-b", "/dev/fuse"});
  }
  FuseDeviceAccess(const FuseDeviceAccess&) = delete;
  FuseDeviceAccess& operator=(const FuseDeviceAccess&) = delete;

  // Empty when the account can open /dev/fuse; else why not.
  const std::string& error() const { return error_; }

 private:
  static constexpr char kSetfacl[] = "/usr/bin/setfacl";

  class Locked {
   public:
    Locked() : fd_(::open("/tmp/sigilfs-test-dev-fuse.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
      if (fd_ >= 0) ::flock(fd_, LOCK_EX);
    }
    ~Locked() {
      if (fd_ >= 0) ::close(fd_);
    }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

   private:
    int fd_;
  };

  std::string entry_;
  std::string error_;
  bool granted_ = false;
};

}  // namespace sigilfs::test
