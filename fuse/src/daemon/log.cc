// Daemon logging: one line per event, "sigilfs: ..." on stderr or to syslog.
#include "log.h"

#include <syslog.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace sigilfs::fuse {
namespace {
std::atomic<bool> g_syslog{false};
}  // namespace

void LogToSyslog() {
  ::openlog("sigilfs", LOG_PID, LOG_DAEMON);
  g_syslog = true;
}

void Log(const char* format, ...) {
  char line[1024];
  va_list args;
  va_start(args, format);
  // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): va_start above; analyzer false positive
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  if (g_syslog) {
    ::syslog(LOG_WARNING, "%s", line);
  } else {
    std::fprintf(stderr, "sigilfs: %s\n", line);
  }
}

}  // namespace sigilfs::fuse
