// Test helper: a directory reached over sshfs, as a vault on another machine is. An sshd of its
// own on 127.0.0.1 (a free port, throw-away host and client keys, nothing of the system's
// configuration), and an sshfs mount of an exported directory; both gone with the object, the
// mount even if a test failed.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "test_support/ports.h"
#include "test_support/process.h"
#include "test_support/temp_dir.h"

namespace sigilfs::test {

// True if sshd and sshfs are installed (scripts/install-deps.sh installs them) and this process
// is root (sshd needs it for its privilege separation).
inline bool SshfsAvailable() {
  return ::geteuid() == 0 && ::access("/usr/sbin/sshd", X_OK) == 0 &&
         ::access("/usr/bin/sshfs", X_OK) == 0 && ::access("/usr/bin/ssh-keygen", X_OK) == 0;
}

class SshfsStore {
 public:
  // `dir_cache`: sshfs's own cache of names and attributes (20 s), coherent for the mounts of
  // this one host; several hosts turn it off (README, "Several machines").
  explicit SshfsStore(bool dir_cache = true) {
    namespace fs = std::filesystem;
    fs::create_directories(export_dir());
    fs::create_directories(mount_dir());
    fs::create_directories("/run/sshd");  // sshd's privilege separation directory
    for (const char* key : {"host_key", "client_key"}) {
      const std::string path = (dir_.path() / key).string();
      Check(RunProcess({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path}),
            "ssh-keygen");
    }
    fs::copy_file(dir_.path() / "client_key.pub", dir_.path() / "authorized_keys");
    port_ = FreeLoopbackPort();
    std::ofstream(dir_.path() / "sshd_config")
        << "Port " << port_ << "\nListenAddress 127.0.0.1\nHostKey "
        << (dir_.path() / "host_key").string() << "\nAuthorizedKeysFile "
        << (dir_.path() / "authorized_keys").string()
        << "\nPidFile none\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password"
           "\nPasswordAuthentication no\nKbdInteractiveAuthentication no"
           "\nSubsystem sftp internal-sftp\n";
    sshd_ = ::fork();
    if (sshd_ == 0) {
      const std::string log = (dir_.path() / "sshd.log").string();
      const std::string config = (dir_.path() / "sshd_config").string();
      ::freopen(log.c_str(), "w", stderr);
      ::execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-e", "-f", config.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // sshfs retries nothing: wait until the server answers.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!Listening()) {
      int status;
      if (std::chrono::steady_clock::now() > deadline || ::waitpid(sshd_, &status, WNOHANG) != 0) {
        Stop();
        throw std::runtime_error("sshd did not start: " + ReadAll(dir_.path() / "sshd.log"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const std::string identity = "IdentityFile=" + (dir_.path() / "client_key").string();
    ProcessResult r = RunProcess(
        {"/usr/bin/sshfs", "-p", std::to_string(port_), "-o", identity, "-o",
         std::string("StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes,"
                     "LogLevel=ERROR") +
             (dir_cache ? "" : ",dir_cache=no"),
         "root@127.0.0.1:" + export_dir(), mount_dir()});
    if (r.exit_code != 0) {
      Stop();
      throw std::runtime_error("sshfs failed: " + r.err);
    }
    mounted_ = true;
  }
  ~SshfsStore() { Stop(); }
  SshfsStore(const SshfsStore&) = delete;
  SshfsStore& operator=(const SshfsStore&) = delete;

  // The directory as sshfs shows it, and as the server holds it.
  std::string mount_dir() const { return (dir_.path() / "mnt").string(); }
  std::string export_dir() const { return (dir_.path() / "export").string(); }

 private:
  static void Check(const ProcessResult& r, const std::string& what) {
    if (r.exit_code != 0) throw std::runtime_error(what + " failed: " + r.err);
  }
  bool Listening() const {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port_));
    const bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(s);
    return ok;
  }
  void Stop() {
    if (mounted_) RunProcess({"/bin/fusermount3", "-u", "-z", mount_dir()});
    mounted_ = false;
    if (sshd_ > 0) {
      ::kill(sshd_, SIGTERM);
      int status;
      ::waitpid(sshd_, &status, 0);
      sshd_ = -1;
    }
  }

  TempDir dir_;
  int port_ = 0;
  pid_t sshd_ = -1;
  bool mounted_ = false;
};

}  // namespace sigilfs::test
