// Test helper: two Syncthing instances on 127.0.0.1 that sync one folder between two
// directories, as two machines syncing a vault would. Each has a home of its own, its own ports,
// no discovery, relays or reporting, and nothing of the system's configuration; each can be
// stopped and started again (to make both sides change a file before they sync), and both are
// stopped with the object.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

#include "test_support/ports.h"
#include "test_support/process.h"
#include "test_support/temp_dir.h"

namespace sigilfs::test {

inline bool SyncthingAvailable() { return ::access("/usr/bin/syncthing", X_OK) == 0; }

class SyncthingPair {
 public:
  SyncthingPair() {
    namespace fs = std::filesystem;
    for (int i = 0; i < 2; ++i) {
      fs::create_directories(folder(i));
      const std::string home = Home(i);
      ProcessResult r = RunProcess({"/usr/bin/syncthing", "generate", "--home=" + home,
                                    "--no-default-folder", "--skip-port-probing"});
      const std::string text = r.out + r.err;
      const size_t at = text.find("Device ID: ");
      if (r.exit_code != 0 || at == std::string::npos)
        throw std::runtime_error("syncthing generate failed: " + text);
      ids_[i] = text.substr(at + 11, 63);
      ports_[i] = FreeLoopbackPort();
      gui_ports_[i] = FreeLoopbackPort();
    }
    for (int i = 0; i < 2; ++i) WriteConfig(i);
    for (int i = 0; i < 2; ++i) Start(i);
  }
  ~SyncthingPair() {
    for (int i = 0; i < 2; ++i) Stop(i);
  }
  SyncthingPair(const SyncthingPair&) = delete;
  SyncthingPair& operator=(const SyncthingPair&) = delete;

  // The synced directory of instance `i` (0 or 1).
  std::string folder(int i) const {
    return (dir_.path() / ("folder" + std::to_string(i))).string();
  }

  void Start(int i) {
    if (pids_[i] > 0) return;
    const std::string home = Home(i);
    const std::string log = (dir_.path() / ("syncthing" + std::to_string(i) + ".log")).string();
    pids_[i] = ::fork();
    if (pids_[i] == 0) {
      ::setenv("STNODEFAULTFOLDER", "1", 1);
      ::setenv("HOME", home.c_str(), 1);
      ::freopen(log.c_str(), "a", stdout);
      ::freopen(log.c_str(), "a", stderr);
      ::execl("/usr/bin/syncthing", "/usr/bin/syncthing", "serve", ("--home=" + home).c_str(),
              "--no-browser", "--no-restart", "--no-upgrade", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  void Stop(int i) {
    if (pids_[i] <= 0) return;
    ::kill(pids_[i], SIGTERM);
    int status;
    ::waitpid(pids_[i], &status, 0);
    pids_[i] = -1;
  }
  std::string log(int i) const {
    return ReadAll(dir_.path() / ("syncthing" + std::to_string(i) + ".log"));
  }

  // Waits up to `seconds` for `done`, polling; true if it held.
  static bool WaitFor(const std::function<bool()>& done, int seconds = 90) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return true;
  }

 private:
  std::string Home(int i) const { return (dir_.path() / ("home" + std::to_string(i))).string(); }

  // Both devices, one folder shared between them, scanned every second and watched; nothing
  // that would reach past 127.0.0.1.
  void WriteConfig(int i) {
    std::ofstream out(Home(i) + "/config.xml", std::ios::trunc);
    out << "<configuration version=\"36\">\n"
        << "  <folder id=\"vault\" label=\"vault\" path=\"" << folder(i)
        << "\" type=\"sendreceive\" rescanIntervalS=\"1\" fsWatcherEnabled=\"true\" "
           "fsWatcherDelayS=\"1\">\n";
    for (int d = 0; d < 2; ++d) out << "    <device id=\"" << ids_[d] << "\"></device>\n";
    // Conflict copies kept (a setting left out of the file reads as none kept).
    out << "    <minDiskFree unit=\"%\">0</minDiskFree>\n    <maxConflicts>10</maxConflicts>\n"
           "  </folder>\n";
    for (int d = 0; d < 2; ++d)
      out << "  <device id=\"" << ids_[d] << "\" name=\"host" << d
          << "\" compression=\"metadata\" introducer=\"false\">\n    <address>tcp://127.0.0.1:"
          << ports_[d] << "</address>\n  </device>\n";
    out << "  <gui enabled=\"true\" tls=\"false\">\n    <address>127.0.0.1:" << gui_ports_[i]
        << "</address>\n    <apikey>sigilfs-test-" << i << "</apikey>\n  </gui>\n"
        << "  <options>\n    <listenAddress>tcp://127.0.0.1:" << ports_[i]
        << "</listenAddress>\n"
           "    <globalAnnounceEnabled>false</globalAnnounceEnabled>\n"
           "    <localAnnounceEnabled>false</localAnnounceEnabled>\n"
           "    <relaysEnabled>false</relaysEnabled>\n"
           "    <natEnabled>false</natEnabled>\n"
           "    <urAccepted>-1</urAccepted>\n"
           "    <autoUpgradeIntervalH>0</autoUpgradeIntervalH>\n"
           "    <crashReportingEnabled>false</crashReportingEnabled>\n"
           "    <startBrowser>false</startBrowser>\n"
           "    <minHomeDiskFree unit=\"%\">0</minHomeDiskFree>\n"
           "  </options>\n</configuration>\n";
  }

  TempDir dir_;
  std::array<std::string, 2> ids_;
  std::array<int, 2> ports_{}, gui_ports_{};
  std::array<pid_t, 2> pids_{-1, -1};
};

}  // namespace sigilfs::test
