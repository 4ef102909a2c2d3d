// `--transport uring` means io_uring or a refused mount: where this process may not set up a
// ring (kernel.io_uring_disabled = 1 for a user outside its group, a seccomp policy), the mount
// is refused with the reason instead of serving over /dev/fuse.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <fstream>
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

bool Mounted(const std::string& point) {
  struct statfs sf;
  return ::statfs(point.c_str(), &sf) == 0 && sf.f_type == test::kFuseSuperMagic;
}

// Runs `argv` where io_uring_setup fails with EPERM (a seccomp filter, as a container runtime
// sets), with stdout and stderr into `log`; its wait status, or -1 if it ran past 30 s. Sets
// `mounted` if `point` was mounted meanwhile (and unmounts it, which ends the daemon).
int RunWithoutIoUring(const std::vector<std::string>& argv, const std::string& log,
                      const std::string& point, bool* mounted) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out, 1);
    ::dup2(out, 2);
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
      ::_exit(125);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int status = 0;
  *mounted = false;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Mounted(point)) {
      *mounted = true;
      test::RunProcess({"/bin/fusermount3", "-u", "-z", point});
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

TEST(MountUringRefusalTest, AskingForIoUringWhereThisProcessMayNotSetUpARingIsRefused) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS_ROOT("turning the kernel's FUSE-over-io_uring switch on needs root");
  SIGILFS_NEEDS(test::KernelHasFuseOverUring(), "this kernel has no FUSE over io_uring");
  test::UringSwitch on(true);  // the kernel offers it: only this process may not use it
  ASSERT_TRUE(on.ok());
  test::TempDir dir;
  const std::string cipher = (dir.path() / "cipher").string();
  const std::string plain = (dir.path() / "plain").string();
  const std::string pass = (dir.path() / "pass").string();
  std::filesystem::create_directories(cipher);
  std::filesystem::create_directories(plain);
  std::ofstream(pass) << "test passphrase\n";
  auto made =
      test::RunProcess({SIGILFS_BINARY, "init", cipher, "--kdf", "test", "--passfile", pass});
  ASSERT_EQ(made.exit_code, 0) << made.err;

  const std::string log = (dir.path() / "mount.log").string();
  bool mounted = false;
  const int status = RunWithoutIoUring(
      {SIGILFS_BINARY, "mount", cipher, plain, "-f", "--passfile", pass, "--transport", "uring"},
      log, plain, &mounted);
  const std::string said = test::ReadAll(log);
  EXPECT_FALSE(mounted) << "served without io_uring: " << said;
  ASSERT_NE(status, -1) << "still running after 30 s: " << said;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << said;
  EXPECT_NE(said.find("cannot set up an io_uring ring"), std::string::npos) << said;
}

}  // namespace
}  // namespace sigilfs
