// Test helper: a throw-away local account (useradd) with its home in a given directory, removed
// when the object goes away whatever the test's outcome: mounts on its home detached, its
// processes stopped (by pid), the account deleted with userdel -r, its session count removed.
#pragma once

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sigilfs/core/mountinfo.h"
#include "test_support/process.h"

namespace sigilfs::test {

class SystemUser {
 public:
  // Empty when this machine can make accounts (root, useradd, userdel, chpasswd); else why not.
  static std::string Unavailable() {
    if (::geteuid() != 0) return "needs root to create a local account";
    for (const char* tool : {"/usr/sbin/useradd", "/usr/sbin/userdel", "/usr/sbin/chpasswd"})
      if (::access(tool, X_OK) != 0) return std::string("no ") + tool;
    return "";
  }

  // Creates an account with a random name, its home `homes`/NAME made from /etc/skel, no
  // password (locked) until SetPassword.
  explicit SystemUser(const std::filesystem::path& homes) {
    std::random_device rd;
    name_ = "sgt" + std::to_string(100000 + rd() % 900000);
    home_ = (homes / name_).string();
    ProcessResult r = RunProcess({"/usr/sbin/useradd", "-m", "-d", home_, "-s", "/bin/sh", name_});
    if (r.exit_code != 0) throw std::runtime_error("useradd failed: " + r.err);
    created_ = true;
    struct passwd* pw = ::getpwnam(name_.c_str());
    if (pw == nullptr) throw std::runtime_error("useradd made no account " + name_);
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
  }

  ~SystemUser() {
    if (!created_) return;
    for (const std::string& point : MountPointsUnderHome()) ::umount2(point.c_str(), MNT_DETACH);
    StopProcesses();
    RunProcess({"/usr/sbin/userdel", "-r", "-f", name_});
    std::error_code ec;
    std::filesystem::remove("/run/sigilfs/" + std::to_string(uid_), ec);
  }
  SystemUser(const SystemUser&) = delete;
  SystemUser& operator=(const SystemUser&) = delete;

  const std::string& name() const { return name_; }
  const std::string& home() const { return home_; }
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }

  void SetPassword(const std::string& password) const {
    ProcessResult r = RunProcess({"/usr/sbin/chpasswd"}, name_ + ":" + password + "\n");
    if (r.exit_code != 0) throw std::runtime_error("chpasswd failed: " + r.err);
  }

  // Runs `body` in a child process as this user; its result is the child's exit code.
  int RunAs(const std::function<int()>& body) const {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (!BecomeUser()) ::_exit(125);
      ::_exit(body());
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // Starts a process of this user's that waits until it is killed (a logged-in user).
  pid_t StartIdleProcess() {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (!BecomeUser()) ::_exit(125);
      for (;;) ::pause();
    }
    children_.push_back(pid);
    // Wait until it runs as the user, so that a check made right after sees it.
    for (int i = 0; i < 500 && Processes().empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return pid;
  }

  // Pids of the processes running as this user (not those that exited and wait to be reaped).
  std::vector<pid_t> Processes() const {
    std::vector<pid_t> pids;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string pid = e.path().filename().string();
      if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream status(e.path() / "status");
      for (std::string line; std::getline(status, line);) {
        if (line.rfind("State:", 0) == 0 && line.find("Z (zombie)") != std::string::npos) break;
        if (line.rfind("Uid:", 0) != 0) continue;
        std::istringstream ids(line.substr(4));
        unsigned long real = 0;
        if (ids >> real && real == uid_) pids.push_back(std::stoi(pid));
        break;
      }
    }
    return pids;
  }

 private:
  bool BecomeUser() const {
    return ::setgroups(0, nullptr) == 0 && ::setgid(gid_) == 0 && ::setuid(uid_) == 0;
  }

  std::vector<std::string> MountPointsUnderHome() const {
    std::vector<std::string> points;
    for (const core::MountInfoEntry& m : core::ReadMountInfo()) {
      if (m.mount_point == home_ || m.mount_point.rfind(home_ + "/", 0) == 0)
        points.push_back(m.mount_point);
    }
    std::sort(points.rbegin(), points.rend());  // inner mounts first
    return points;
  }

  // SIGTERM to each of the user's processes (a sigilfs daemon unmounts and exits on it), then
  // SIGKILL to whatever is left after 5 s; children of this process are reaped.
  void StopProcesses() {
    for (pid_t pid : Processes()) ::kill(pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      for (pid_t child : children_) ::waitpid(child, nullptr, WNOHANG);
      const std::vector<pid_t> left = Processes();
      if (left.empty()) break;
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t pid : left) ::kill(pid, SIGKILL);
        for (pid_t child : children_) ::waitpid(child, nullptr, 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (pid_t child : children_) ::waitpid(child, nullptr, 0);  // killed: no longer blocks
  }

  std::string name_;
  std::string home_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool created_ = false;
  std::vector<pid_t> children_;
};

}  // namespace sigilfs::test
