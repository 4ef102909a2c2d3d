// FUSE session lifecycle for `sigilfs mount`.
#include "daemon.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

#include "filesystem.h"
#include "log.h"
#include "lowlevel.h"

namespace sigilfs::fuse {
namespace {

// One descriptor per open file, and one or two per operation in flight: raise the soft limit
// to the hard one, as libfuse's passthrough_hp does.
void RaiseFileLimit() {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ',';
    out += p;
  }
  return out;
}

}  // namespace

int RunDaemon(std::unique_ptr<core::Volume> volume, const DaemonOptions& o) {
  RaiseFileLimit();
  std::vector<std::string> mount_opts = {"fsname=sigilfs:" + volume->vault().dir(),
                                         "subtype=sigilfs"};
  if (o.read_only) mount_opts.push_back("ro");
  mount_opts.insert(mount_opts.end(), o.fuse_options.begin(), o.fuse_options.end());
  const std::string joined = Join(mount_opts);
  fuse_args args = FUSE_ARGS_INIT(0, nullptr);
  fuse_opt_add_arg(&args, "sigilfs");
  fuse_opt_add_arg(&args, "-o");
  fuse_opt_add_arg(&args, joined.c_str());

  MountOptions fs_options;
  fs_options.read_only = o.read_only;
  fs_options.set_owner = ::geteuid() == 0;
  Filesystem fs(std::move(volume), fs_options);

  fuse_session* se = fuse_session_new(&args, &Operations(o.xattrs), sizeof(fuse_lowlevel_ops), &fs);
  fuse_opt_free_args(&args);
  if (se == nullptr) {
    std::fprintf(stderr, "sigilfs: bad mount options: %s\n", joined.c_str());
    return 1;
  }
  int rc = 1;
  if (fuse_set_signal_handlers(se) != 0) {
    std::fprintf(stderr, "sigilfs: cannot install signal handlers\n");
  } else if (fuse_session_mount(se, o.mountpoint.c_str()) != 0) {
    std::fprintf(stderr, "sigilfs: cannot mount on %s\n", o.mountpoint.c_str());
  } else {
    if (!o.foreground) LogToSyslog();
    if (fuse_daemonize(o.foreground ? 1 : 0) != 0) {
      std::fprintf(stderr, "sigilfs: cannot daemonize\n");
    } else {
      fuse_loop_config* cfg = fuse_loop_cfg_create();
      fuse_loop_cfg_set_max_threads(cfg, 16);
      rc = fuse_session_loop_mt(se, cfg) == 0 ? 0 : 1;
      fuse_loop_cfg_destroy(cfg);
    }
    fs.FlushAll();  // every dirty page reaches the cipher files before the mount goes away
    fuse_session_unmount(se);
  }
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return rc;
}

}  // namespace sigilfs::fuse
