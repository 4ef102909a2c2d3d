// Passphrase input: no-echo terminal prompt, --passfile, --extpass; always into locked memory.
#include "sigilfs/fuse/passphrase.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sigilfs::fuse {
namespace {

using crypt::SecureBytes;

// Reads up to the first newline (or EOF) from `fd` into secure memory, one byte at a time so
// nothing past the line is consumed and no copy is left in a stdio buffer.
Result<SecureBytes> ReadLine(int fd, const std::string& what) {
  SecureBytes buf(kMaxPassphraseSize + 1);
  size_t n = 0;
  for (;;) {
    uint8_t c;
    ssize_t r = ::read(fd, &c, 1);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "read passphrase from " + what);
    }
    if (r == 0 || c == '\n') break;
    if (n == kMaxPassphraseSize)
      return Status(Code::kInvalidArgument,
                    "passphrase from " + what + " is longer than 4096 bytes");
    buf.data()[n++] = c;
  }
  if (n > 0 && buf.data()[n - 1] == '\r') --n;
  buf.Truncate(n);
  if (n == 0) return Status(Code::kInvalidArgument, "empty passphrase from " + what);
  return buf;
}

Result<SecureBytes> FromFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "passfile " + path);
  auto r = ReadLine(fd, "passfile " + path);
  ::close(fd);
  return r;
}

Result<SecureBytes> FromProgram(const std::string& command) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe for --extpass");
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::FromErrno(errno, "fork for --extpass");
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  auto r = ReadLine(fds[0], "--extpass program");
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
    return Status(Code::kInvalidArgument,
                  "--extpass program failed (exit status " +
                      std::to_string(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1) + ")");
  return r;
}

// Prompts on the controlling terminal with echo off, restoring the terminal afterwards.
Result<SecureBytes> FromTerminal(int tty, const std::string& prompt) {
  (void)!::write(tty, prompt.data(), prompt.size());
  termios old{};
  const bool have_termios = ::tcgetattr(tty, &old) == 0;
  if (have_termios) {
    termios quiet = old;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    quiet.c_lflag |= ECHONL;
    ::tcsetattr(tty, TCSAFLUSH, &quiet);
  }
  auto r = ReadLine(tty, "terminal");
  if (have_termios) ::tcsetattr(tty, TCSAFLUSH, &old);
  return r;
}

}  // namespace

Result<SecureBytes> ReadPassphrase(const PassphraseSource& source, const std::string& prompt,
                                   PromptMode mode) {
  if (!source.passfile.empty() && !source.extpass.empty())
    return Status(Code::kInvalidArgument, "give either a passfile or an extpass command, not both");
  if (!source.passfile.empty()) return FromFile(source.passfile);
  if (!source.extpass.empty()) return FromProgram(source.extpass);
  if (!::isatty(STDIN_FILENO)) return ReadLine(STDIN_FILENO, "standard input");

  int tty = ::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (tty < 0) tty = ::dup(STDIN_FILENO);
  SIGILFS_ASSIGN_OR_RETURN(SecureBytes first, FromTerminal(tty, prompt + ": "));
  if (mode == PromptMode::kNew) {
    auto second = FromTerminal(tty, "Repeat " + prompt + ": ");
    if (!second.ok()) {
      ::close(tty);
      return second.status();
    }
    if (!crypt::ConstantTimeEqual(first.span(), second->span())) {
      ::close(tty);
      return Status(Code::kInvalidArgument, "the two passphrases differ");
    }
  }
  ::close(tty);
  return first;
}

}  // namespace sigilfs::fuse
