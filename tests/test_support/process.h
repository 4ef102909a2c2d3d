// Test helper: run a program with arguments and optional standard input, capture its output.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "test_support/temp_dir.h"

namespace sigilfs::test {

struct ProcessResult {
  int exit_code = -1;  // -1 if killed by a signal
  std::string out;
  std::string err;
};

// Descriptors this process has open.
inline size_t OwnDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

inline std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// This process's environment without the variable `name` ("NAME=..." entries, for RunProcess).
inline std::vector<std::string> EnvironmentWithout(const std::string& name) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::string_view(*e).substr(0, name.size() + 1) != name + "=") env.emplace_back(*e);
  return env;
}

// Runs argv[0] (a path) with `input` on its standard input (empty: /dev/null), in `env` if
// given ("NAME=value" entries), else in this process's environment.
inline ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& input = "",
                                const std::optional<std::vector<std::string>>& env = std::nullopt) {
  TempDir io;
  const auto in_path = io.path() / "in", out_path = io.path() / "out", err_path = io.path() / "err";
  { std::ofstream(in_path, std::ios::binary) << input; }
  // Built before the fork.
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  if (env)
    for (const std::string& e : *env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int in = ::open(input.empty() ? "/dev/null" : in_path.c_str(), O_RDONLY);
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::setsid();  // no controlling terminal: prompts must not reach the developer's tty
    if (env)
      ::execve(args[0], args.data(), envp.data());
    else
      ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ProcessResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadAll(out_path);
  r.err = ReadAll(err_path);
  return r;
}

}  // namespace sigilfs::test
