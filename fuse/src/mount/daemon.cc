// FUSE session lifecycle for `sigilfs mount`.
#include "daemon.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <system_error>
#include <thread>

#include "../daemon/device_io.h"
#include "../daemon/log.h"
#include "../daemon/session.h"
#include "filesystem.h"
#include "lowlevel.h"
#include "sigilfs/core/mountinfo.h"
#include "sigilfs/fuse/mount_record.h"
#include "stats.h"

namespace sigilfs::fuse {
namespace {

// Whether the store of `dir` keeps `user.*` extended attributes: asking for one that is not
// there answers ENODATA where it does (EOPNOTSUPP where it does not). Nothing is written.
bool KeepsUserXattrs(core::BackingDir& dir) {
  auto probe = dir.GetXattr("", "user.sigilfs.probe");
  return probe.ok() || probe.status().sys_errno() == ENODATA;
}

// Wakes the housekeeper: SIGUSR1 (write the stats) and shutdown.
int g_wake_fd = -1;
void OnUsr1(int) {
  const uint64_t one = 1;
  (void)!::write(g_wake_fd, &one, sizeof one);
}

// A thread beside the FUSE loop: answers `sigilfs stats` on the mount record's socket, writes
// the stats file on SIGUSR1, and unmounts after `idle` without requests while no file is open
// (by raising SIGTERM, which ends the loop as Ctrl-C does). `stats` gives the figures.
class Housekeeper {
 public:
  Housekeeper(Filesystem& fs, const DaemonOptions& o, const MountRecord& record,
              std::function<std::string()> stats)
      : fs_(fs), o_(o), record_(record), stats_(std::move(stats)) {
    if (o_.stats_file.empty() && o_.idle.count() == 0 && record_.socket() < 0) return;
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
    if (wake_fd_ < 0) return;
    g_wake_fd = wake_fd_;
    if (!o_.stats_file.empty()) {
      struct sigaction sa {};
      sa.sa_handler = OnUsr1;
      ::sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      ::sigaction(SIGUSR1, &sa, nullptr);
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~Housekeeper() {
    if (!thread_.joinable()) return;
    stop_ = true;
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
    thread_.join();
    ::signal(SIGUSR1, SIG_IGN);
    g_wake_fd = -1;
    ::close(wake_fd_);
  }
  Housekeeper(const Housekeeper&) = delete;
  Housekeeper& operator=(const Housekeeper&) = delete;

 private:
  void Run() {
    // Signals go to the FUSE threads (a blocked read there is what SIGTERM must interrupt).
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
    const int tick_ms =
        o_.idle.count() > 0
            ? static_cast<int>(std::clamp<int64_t>(o_.idle.count() * 100, 100, 5000))
            : -1;
    while (!stop_) {
      // A record without a socket gives -1, which poll leaves be.
      pollfd p[2] = {{wake_fd_, POLLIN, 0}, {record_.socket(), POLLIN, 0}};
      const int n = ::poll(p, 2, tick_ms);
      if (stop_) break;
      if (n > 0 && (p[0].revents & POLLIN) != 0) {
        uint64_t count = 0;
        (void)!::read(wake_fd_, &count, sizeof count);
        if (!o_.stats_file.empty()) WriteStatsFile(stats_(), o_.stats_file);
      }
      if (n > 0 && p[1].revents != 0) record_.AnswerWaiting(stats_);
      if (o_.idle.count() > 0 && fs_.open_files() == 0 && fs_.IdleFor() >= o_.idle) {
        Log("idle for %lld s: unmounting", static_cast<long long>(o_.idle.count()));
        ::kill(::getpid(), SIGTERM);
        break;
      }
    }
  }

  Filesystem& fs_;
  const DaemonOptions& o_;
  const MountRecord& record_;
  const std::function<std::string()> stats_;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// This daemon's mount as /proc/self/mountinfo shows it: its device and its per-mount options
// (found by its mount point, since a stat of it would wait on this daemon; the last sigilfs
// mount there is the one on top). Empty where not found.
struct OwnMount {
  std::string device;   // major:minor
  std::string options;  // "rw,nosuid,nodev,noatime"
};
OwnMount FindOwnMount(const std::string& mountpoint) {
  OwnMount found;
  for (const core::MountInfoEntry& m : core::ReadMountInfo())
    if (m.type == "fuse.sigilfs" && m.mount_point == mountpoint) found = {m.device, m.options};
  return found;
}

// Sequential reads through FUSE come in requests no larger than the read-ahead window of the
// mount's backing device, 128 KiB unless raised: set it to `kib` in sysfs (root only). Cold
// sequential reads of 256 MiB: 246 ms at 128 KiB, 191 ms at 2 MiB.
void SetReadahead(const std::string& mountpoint, size_t kib) {
  const std::string device = FindOwnMount(mountpoint).device;
  if (device.empty()) return;
  std::ofstream out("/sys/class/bdi/" + device + "/read_ahead_kb");
  out << kib << std::flush;
  if (!out && ::geteuid() == 0) Log("read-ahead of %s not set", mountpoint.c_str());
}

std::string CanonicalPath(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::canonical(dir, ec);
  if (ec) p = std::filesystem::absolute(dir, ec).lexically_normal();
  return p.string();
}

}  // namespace

int RunDaemon(std::unique_ptr<core::Volume> volume, const DaemonOptions& o) {
  const auto started = std::chrono::steady_clock::now();
  const rlim_t descriptors = RaiseFileLimit();
  Session session;
  session.mountpoint = o.mountpoint;
  // The mount's source is the cipher directory's absolute path, as `findmnt -S`, `mount | grep`
  // and sshfs or gocryptfs users expect; its type is fuse.sigilfs.
  session.source = CanonicalPath(volume->vault().dir());
  session.subtype = "sigilfs";
  if (o.read_only) session.options.push_back("ro");
  session.options.insert(session.options.end(), o.fuse_options.begin(), o.fuse_options.end());
  session.foreground = o.foreground;
  session.transport = o.transport;

  MountOptions fs_options;
  fs_options.read_only = o.read_only;
  fs_options.shared = o.shared;
  fs_options.set_owner = ::geteuid() == 0;
  fs_options.handle_cache = o.handle_cache;
  // A descriptor per directory kept open: an eighth of what the process may open, so that open
  // files (two descriptors each) and listings have the rest.
  fs_options.open_dirs =
      descriptors == RLIM_INFINITY ? 8192 : std::clamp<size_t>(descriptors / 8, 16, 8192);
  fs_options.max_readahead = o.readahead_kib * 1024;
  // ACLs are extended attributes to the kernel, stored as `user.*` ones: offered only where the
  // backing filesystem keeps those, or every permission check of the kernel would fail.
  fs_options.acls =
      o.xattrs && o.acls && KeepsUserXattrs(*core::BorrowPosixBackingDir(volume->root_fd()));
  fs_options.kernel_acls = fs_options.acls && o.kernel_acls;
  Filesystem fs(std::move(volume), fs_options);
  session.ops = &Operations(o.xattrs);
  session.server = &fs;

  // Resolved before mounting: once mounted, resolving it would ask this daemon.
  std::error_code ec;
  const std::string real_mountpoint = std::filesystem::canonical(o.mountpoint, ec).string();
  session.mounted = [&](fuse_session* se) {
    SetSession(se);
    if (o.readahead_kib > 0 && !real_mountpoint.empty())
      SetReadahead(real_mountpoint, o.readahead_kib);
    // noatime and nodiratime are the daemon's to honour (the kernel leaves access times to it),
    // also after a remount changes them.
    if (!real_mountpoint.empty())
      fs.WatchAtimeOptions([real_mountpoint] { return FindOwnMount(real_mountpoint).options; });
  };
  // The record by which `sigilfs unmount` finds this daemon and waits for it to end, made
  // before detaching so that a mount that cannot have one fails here, on the terminal, and is
  // undone. An exclusive mount may go without where its user has no runtime directory: its
  // daemon holds the vault lock until it ends, which unmount also waits for.
  std::optional<MountRecord> record;
  session.detaching = [&] {
    auto published = MountRecord::Publish(FindOwnMount(real_mountpoint).device, o.shared);
    if (!published.ok()) {
      std::fprintf(stderr, "sigilfs: not serving %s: its daemon cannot be recorded (%s)\n",
                   o.mountpoint.c_str(), published.status().message().c_str());
      return false;
    }
    record = std::move(published).value();
    return true;
  };
  const auto stats = [&] { return MountStats(fs, o.mountpoint, started); };
  std::optional<Housekeeper> housekeeper;
  session.serving = [&] {
    // The serving process (fuse_daemonize forked it; the record's lock and socket came along).
    if (Status named = record->NameThisProcess(); !named.ok()) Log("%s", named.ToString().c_str());
    if (o.on_serving) o.on_serving();
    housekeeper.emplace(fs, o, *record, stats);
  };
  session.served = [&] { housekeeper.reset(); };
  session.unmounting = [&] {
    fs.FlushAll();  // every dirty page reaches the cipher files before the mount goes away
    if (!o.stats_file.empty()) WriteStatsFile(stats(), o.stats_file);
  };
  return RunSession(session);
}

}  // namespace sigilfs::fuse
