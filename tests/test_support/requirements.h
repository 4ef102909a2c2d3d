// Test helper: what a test needs from the machine it runs on, FUSE (the /dev/fuse device and
// fusermount3) and root. Without it a test is skipped, as on a developer's machine that lacks
// them; where SIGILFS_REQUIRE_FUSE=1 says the machine has them (CI sets it), it fails instead,
// so that no mount test passes by not running.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace sigilfs::test {

inline bool EnvironmentFlag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string_view(value) == "1";
}

// True if this machine can mount FUSE filesystems (device node and helper present).
// SIGILFS_TEST_NO_FUSE=1 makes the tests act as if it could not: a check of the skip and of
// SIGILFS_REQUIRE_FUSE that leaves the device alone for everyone else.
inline bool FuseAvailable() {
  if (EnvironmentFlag("SIGILFS_TEST_NO_FUSE")) return false;
  return ::access("/dev/fuse", R_OK | W_OK) == 0 &&
         (::access("/usr/bin/fusermount3", X_OK) == 0 || ::access("/bin/fusermount3", X_OK) == 0);
}

enum class Verdict { kRun, kSkip, kFail };

// What becomes of a test that does or does not `have` what it needs, `required` being the
// value of SIGILFS_REQUIRE_FUSE (null when unset).
inline Verdict Decide(bool have, const char* required) {
  if (have) return Verdict::kRun;
  return required != nullptr && std::string_view(required) == "1" ? Verdict::kFail : Verdict::kSkip;
}
inline Verdict Decide(bool have) { return Decide(have, std::getenv("SIGILFS_REQUIRE_FUSE")); }

}  // namespace sigilfs::test

// In a test or its SetUp: goes on if `have`; else skips the test saying `why`, or fails it
// under SIGILFS_REQUIRE_FUSE=1.
#define SIGILFS_NEEDS(have, why)                                                            \
  do {                                                                                      \
    const ::sigilfs::test::Verdict sigilfs_verdict_ = ::sigilfs::test::Decide(have);        \
    if (sigilfs_verdict_ == ::sigilfs::test::Verdict::kSkip) GTEST_SKIP() << (why);         \
    if (sigilfs_verdict_ == ::sigilfs::test::Verdict::kFail)                                \
      FAIL() << (why) << " (SIGILFS_REQUIRE_FUSE=1: this machine must have FUSE and root)"; \
  } while (0)

#define SIGILFS_NEEDS_FUSE() SIGILFS_NEEDS(::sigilfs::test::FuseAvailable(), "no FUSE here")
#define SIGILFS_NEEDS_ROOT(why) SIGILFS_NEEDS(::geteuid() == 0, why)
