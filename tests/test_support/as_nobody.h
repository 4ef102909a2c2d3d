// Test helper: run a piece of a test as the unprivileged user nobody:nogroup, in a child process.
#pragma once

#include <grp.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>

namespace sigilfs::test {

inline constexpr uid_t kNobody = 65534;
inline constexpr gid_t kNogroup = 65534;

// Runs `body` in a child process as nobody:nogroup (no supplementary groups); returns its result
// (0 or an errno), 125 if the identity could not be taken, 126 if the child died.
inline int AsNobody(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNogroup) != 0 || ::setuid(kNobody) != 0)
      ::_exit(125);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 126;
}

// errno for a call that returned -1, else 0: what a body passed to AsNobody returns.
inline int ErrnoOf(long rc) { return rc < 0 ? errno : 0; }

}  // namespace sigilfs::test
