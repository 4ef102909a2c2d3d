// Daemon logging: stderr in the foreground, syslog once daemonized. Never logs plaintext.
#pragma once

namespace sigilfs::fuse {

void LogToSyslog();
void Log(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace sigilfs::fuse
