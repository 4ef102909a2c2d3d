// A user's number of open sessions, in /run/sigilfs/UID under flock: first mounts, last unmounts.
#pragma once

#include <sys/types.h>

#include <optional>

#include "log.h"

namespace sigilfs::pam {

inline constexpr char kRunDir[] = "/run/sigilfs";

class SessionCount {
 public:
  // Opens and locks the user's counter (made, with /run/sigilfs, if absent). The lock is held
  // until the object goes away, so a concurrent login waits while this one mounts. Nothing when
  // the directory or file cannot be used (logged).
  static std::optional<SessionCount> Lock(uid_t uid, const Log& log);
  ~SessionCount();
  SessionCount(SessionCount&& other) noexcept;
  SessionCount& operator=(SessionCount&&) = delete;
  SessionCount(const SessionCount&) = delete;
  SessionCount& operator=(const SessionCount&) = delete;

  // The count (0 for a new, empty or unreadable file: /run is emptied at boot, as it should be).
  int value() const { return value_; }
  // Writes a new count; false (logged) on failure.
  bool Set(int value, const Log& log);

 private:
  SessionCount(int fd, int value) : fd_(fd), value_(value) {}
  int fd_;
  int value_;
};

}  // namespace sigilfs::pam
