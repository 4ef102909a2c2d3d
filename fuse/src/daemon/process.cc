// Process hardening and signal set-up, alike for the mount and the reverse view.
#include "process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "libfuse.h"

namespace sigilfs::fuse {

void KeepSecretsOutOfDumps() {
  (void)::prctl(PR_SET_DUMPABLE, 0);
  const struct rlimit no_core = {0, 0};
  (void)::setrlimit(RLIMIT_CORE, &no_core);
}

bool SetUpSignals(fuse_session* se) {
  // SIGUSR1 asks the mount for its stats file (its housekeeper takes it where there is one): a
  // `pkill -USR1 sigilfs` must not end the daemons without one. SIGXFSZ is what the kernel sends
  // for a cipher file past the user's file size limit: the write then fails with EFBIG, for
  // that file alone.
  ::signal(SIGUSR1, SIG_IGN);
  ::signal(SIGXFSZ, SIG_IGN);
  return fuse_set_signal_handlers(se) == 0;
}

}  // namespace sigilfs::fuse
