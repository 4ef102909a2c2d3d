// Test helper: run a program with arguments and optional standard input, capture its output.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_support/temp_dir.h"

namespace sigilfs::test {

struct ProcessResult {
  int exit_code = -1;  // -1 if killed by a signal
  std::string out;
  std::string err;
};

inline std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs argv[0] (a path) with `input` on its standard input (empty: /dev/null).
inline ProcessResult RunProcess(const std::vector<std::string>& argv,
                                const std::string& input = "") {
  TempDir io;
  const auto in_path = io.path() / "in", out_path = io.path() / "out", err_path = io.path() / "err";
  { std::ofstream(in_path, std::ios::binary) << input; }
  pid_t pid = ::fork();
  if (pid == 0) {
    int in = ::open(input.empty() ? "/dev/null" : in_path.c_str(), O_RDONLY);
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::setsid();  // no controlling terminal: prompts must not reach the developer's tty
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
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
