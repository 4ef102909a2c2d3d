// The FUSE session's life, alike for the mount and the reverse view.
#include "session.h"

#include <signal.h>

#include <cstdio>

#include "device_io.h"
#include "log.h"
#include "process.h"
#include "reply_faults.h"

namespace sigilfs::fuse {
namespace {

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ',';
    out += p;
  }
  return out;
}

void SetUpDeviceIo(fuse_session* se, const std::optional<Transport>& transport) {
  if (transport) {
    if (!TakeOverDeviceIo(se, *transport, true))
      Log("device I/O: libfuse refused; set-ID bits left to the kernel, requests on /dev/fuse");
  } else if (ReplyFaultsFromEnvironment() && !TakeOverDeviceIo(se, Transport::kDev, false)) {
    Log("fault injection: libfuse refused the device I/O; replies go unrefused");
  }
}

// The request loop, on up to 16 threads. A loop ended by SIGINT/SIGTERM/SIGHUP (or by a
// daemon's own SIGTERM: the mount's idle timer) reports the signal: that is a clean unmount.
int Loop(fuse_session* se) {
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(cfg, 16);
  const int loop = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  int rc = loop == 0 || loop == SIGINT || loop == SIGTERM || loop == SIGHUP ? 0 : 1;
  // A mount that was to serve over io_uring only and could not ended itself (logged).
  if (const std::string refused = DeviceIoRefusal(); !refused.empty()) {
    std::fprintf(stderr, "sigilfs: %s\n", refused.c_str());
    rc = 1;
  }
  return rc;
}

}  // namespace

int RunSession(const Session& s) {
  std::vector<std::string> options = {"fsname=" + EscapeOption(s.source), "subtype=" + s.subtype};
  options.insert(options.end(), s.options.begin(), s.options.end());
  const std::string joined = Join(options);
  fuse_args args = FUSE_ARGS_INIT(0, nullptr);
  fuse_opt_add_arg(&args, "sigilfs");
  fuse_opt_add_arg(&args, "-o");
  fuse_opt_add_arg(&args, joined.c_str());
  fuse_session* se = fuse_session_new(&args, s.ops, sizeof(fuse_lowlevel_ops), s.server);
  fuse_opt_free_args(&args);
  if (se == nullptr) {
    std::fprintf(stderr, "sigilfs: bad mount options: %s\n", joined.c_str());
    return 1;
  }
  int rc = 1;
  if (!SetUpSignals(se)) {
    std::fprintf(stderr, "sigilfs: cannot install signal handlers\n");
  } else if (fuse_session_mount(se, s.mountpoint.c_str()) != 0) {
    std::fprintf(stderr, "sigilfs: cannot mount on %s\n", s.mountpoint.c_str());
  } else {
    if (s.mounted) s.mounted(se);
    SetUpDeviceIo(se, s.transport);
    if (!s.foreground) LogToSyslog();
    if (s.detaching && !s.detaching()) {
      // Said why; unmounted below.
    } else if (fuse_daemonize(s.foreground ? 1 : 0) != 0) {
      std::fprintf(stderr, "sigilfs: cannot daemonize\n");
    } else {
      if (s.serving) s.serving();
      rc = Loop(se);
      if (s.served) s.served();
    }
    // The ring's threads end first: a request they serve after this would race the unmount.
    StopDeviceIo();
    if (s.unmounting) s.unmounting();
    fuse_session_unmount(se);
  }
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return rc;
}

rlim_t RaiseFileLimit() {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

std::string EscapeOption(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == ',' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace sigilfs::fuse
