// Runs a program as the session's user (never as root), with a secret on its standard input.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "account.h"
#include "log.h"

namespace sigilfs::pam {

struct CommandResult {
  bool finished = false;  // false: it could not be started, or was killed at the time limit
  int exit_code = -1;     // when finished: the exit status (-1 after a signal)
  std::string errors;     // the start of what it wrote to stderr, for the log
};

// Forks; the child drops to `account` (groups, gid, uid), resets signals, closes every other
// descriptor and execs argv[0] with a minimal environment, `input` on a pipe as its standard
// input (so a password is never in argv or the environment, where ps and /proc show it). Waits
// at most `limit`, then kills it.
CommandResult RunAsUser(const Account& account, const std::vector<std::string>& argv,
                        std::string_view input, std::chrono::seconds limit, const Log& log);

}  // namespace sigilfs::pam
