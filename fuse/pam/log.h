// Logging through pam_syslog (which names service and module); never a password in a line.
#pragma once

#include <security/pam_modules.h>
#include <string.h>

#include <cstdarg>
#include <string>

namespace sigilfs::pam {

class Log {
 public:
  Log(pam_handle_t* pamh, bool debug) : pamh_(pamh), debug_(debug) {}

  void Debug(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  void Info(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  void Warning(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  void Error(const char* format, ...) const __attribute__((format(printf, 2, 3)));

 private:
  void Write(int priority, const char* format, va_list args) const;

  pam_handle_t* pamh_;
  bool debug_;
};

// strerror's text for `err`, thread-safe (the login program may have threads; strerror is not).
inline std::string ErrorText(int err) {
  char buf[128];
  return ::strerror_r(err, buf, sizeof buf);  // the GNU form: returns the text
}

}  // namespace sigilfs::pam
