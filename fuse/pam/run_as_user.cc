// fork, drop to the user, execve: all prepared before the fork, only system calls after it.
#include "run_as_user.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sigilfs::pam {
namespace {

// Pipes are written whole before the child starts, so the child can never block the login
// process and a child that dies early cannot raise SIGPIPE in it.
constexpr size_t kMaxInput = 60000;  // below the 64 KiB of a Linux pipe
constexpr size_t kMaxErrors = 2048;

// A descriptor above 2 (CLOEXEC): one that came out as 0, 1 or 2 (a login program started with
// a closed stdin) would be clobbered by, or survive, the child's dup2 onto the standard three.
int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

bool Pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  fds[0] = AboveStdio(fds[0]);
  fds[1] = AboveStdio(fds[1]);
  if (fds[0] >= 0 && fds[1] >= 0) return true;
  if (fds[0] >= 0) ::close(fds[0]);
  if (fds[1] >= 0) ::close(fds[1]);
  return false;
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// The child: only async-signal-safe calls (plus setgroups/setuid, which are plain system calls
// in a child with one thread), then exec or _exit.
[[noreturn]] void Child(const Account& a, int in, int err, char* const* argv, char* const* envp) {
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null < 0 || ::dup2(in, STDIN_FILENO) < 0 || ::dup2(null, STDOUT_FILENO) < 0 ||
      ::dup2(err, STDERR_FILENO) < 0)
    ::_exit(126);
  // Nothing of the login program's (its sockets, its terminal's other descriptors) may reach a
  // daemon that outlives the login.
  ::close_range(3, ~0U, 0);
  // Ignored signals and the blocked mask survive exec; the daemon needs SIGTERM and friends.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // NOLINT(concurrency-mt-unsafe): one thread here
  // Groups first, then the gid, then the uid: each later step takes the right to do the earlier.
  if (::setgroups(a.groups.size(), a.groups.data()) != 0 || ::setgid(a.gid) != 0 ||
      ::setuid(a.uid) != 0)
    ::_exit(126);
  // Never run anything as root by mistake: the switch must have taken, and stuck.
  if (a.uid != 0 && (::getuid() != a.uid || ::geteuid() != a.uid || ::setuid(0) == 0)) ::_exit(126);
  if (::chdir("/") != 0) ::_exit(126);
  ::execve(argv[0], argv, envp);
  ::_exit(127);
}

// While we wait, SIGCHLD must be neither ignored (children would be reaped behind our back and
// waitpid would fail) nor caught by the login program's handler (which might reap ours).
class DefaultSigchld {
 public:
  DefaultSigchld() {
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    saved_ok_ = ::sigaction(SIGCHLD, &dfl, &saved_) == 0;
  }
  ~DefaultSigchld() {
    if (saved_ok_) ::sigaction(SIGCHLD, &saved_, nullptr);
  }
  DefaultSigchld(const DefaultSigchld&) = delete;
  DefaultSigchld& operator=(const DefaultSigchld&) = delete;

 private:
  struct sigaction saved_;
  bool saved_ok_ = false;
};

// Reads what is there (the descriptor does not block); false once every writer has closed it.
bool Drain(int fd, std::string& out) {
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return false;
    if (n < 0) return true;
    const size_t room = kMaxErrors - std::min(kMaxErrors, out.size());
    out.append(buf, std::min(static_cast<size_t>(n), room));
  }
}

}  // namespace

CommandResult RunAsUser(const Account& account, const std::vector<std::string>& argv,
                        std::string_view input, std::chrono::seconds limit, const Log& log) {
  CommandResult result;
  if (input.size() > kMaxInput || argv.empty()) return result;
  // argv and the environment as C arrays, built before the fork.
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + account.home,
      "USER=" + account.name, "LOGNAME=" + account.name};
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int in[2], err[2];
  if (!Pipe(in)) {
    log.Error("pipe: %s", ErrorText(errno).c_str());
    return result;
  }
  if (!Pipe(err)) {
    log.Error("pipe: %s", ErrorText(errno).c_str());
    ::close(in[0]);
    ::close(in[1]);
    return result;
  }
  const bool written = WriteAll(in[1], input);
  ::close(in[1]);
  if (!written) {
    log.Error("cannot pass the password to %s", argv[0].c_str());
    ::close(in[0]);
    ::close(err[0]);
    ::close(err[1]);
    return result;
  }

  DefaultSigchld sigchld;
  const pid_t pid = ::fork();
  if (pid == 0) Child(account, in[0], err[1], args.data(), envp.data());
  const int fork_errno = errno;
  ::close(in[0]);  // the password's bytes go away with the pipe once the child has read them
  ::close(err[1]);
  if (pid < 0) {
    ::close(err[0]);
    log.Error("fork: %s", ErrorText(fork_errno).c_str());
    return result;
  }
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);
  // The child is waited for, not its stderr's end: a daemon it leaves behind may hold that open.
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  bool err_open = true;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      log.Error("waitpid: %s", ErrorText(errno).c_str());
      ::close(err[0]);
      return result;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      Drain(err[0], result.errors);
      ::close(err[0]);
      log.Error("%s did not finish within %lld s: stopped", argv[0].c_str(),
                static_cast<long long>(limit.count()));
      return result;
    }
    // Wake up for output or every 20 ms for the child; once stderr is closed, only the latter.
    struct pollfd p = {err[0], POLLIN, 0};
    if (::poll(&p, err_open ? 1 : 0, 20) > 0) err_open = Drain(err[0], result.errors);
  }
  Drain(err[0], result.errors);
  ::close(err[0]);
  while (!result.errors.empty() && (result.errors.back() == '\n' || result.errors.back() == '\r'))
    result.errors.pop_back();
  result.finished = true;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace sigilfs::pam
