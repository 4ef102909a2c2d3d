// Linked into fuse_tests: the environment every test of the command runs in, set before any
// test starts, so that no test (a new one included) and no process a test starts can lack it.
#include <stdlib.h>

namespace {

struct SuiteEnvironment {
  SuiteEnvironment() {
    // `--kdf test`, the cheap Argon2id cost every test vault is made with, is accepted only
    // with this set (the command does not offer it to users).
    ::setenv("SIGILFS_TEST_KDF", "1", 1);
  }
};
[[maybe_unused]] const SuiteEnvironment kSuiteEnvironment;

}  // namespace
