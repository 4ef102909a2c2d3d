// pam_syslog at four levels; Debug is silent unless the module was given `debug`.
#include "log.h"

#include <security/pam_ext.h>
#include <syslog.h>

#include <cstdarg>

namespace sigilfs::pam {

void Log::Write(int priority, const char* format, va_list args) const {
  pam_vsyslog(pamh_, priority, format, args);
}

void Log::Debug(const char* format, ...) const {
  if (!debug_) return;
  va_list args;
  va_start(args, format);
  Write(LOG_DEBUG, format, args);
  va_end(args);
}

void Log::Info(const char* format, ...) const {
  va_list args;
  va_start(args, format);
  Write(LOG_INFO, format, args);
  va_end(args);
}

void Log::Warning(const char* format, ...) const {
  va_list args;
  va_start(args, format);
  Write(LOG_WARNING, format, args);
  va_end(args);
}

void Log::Error(const char* format, ...) const {
  va_list args;
  va_start(args, format);
  Write(LOG_ERR, format, args);
  va_end(args);
}

}  // namespace sigilfs::pam
