// Linked into fuse_tests: the environment every test of the command runs in, set before any
// test starts, so that no test (a new one included) and no process a test starts can lack it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "test_support/uring.h"

namespace {

// At the end of the process, as at its start: the io_uring switch a killed test process left
// changed is put back once no test holds it, even if no later test takes it.
class PutBackAtTheEnd : public ::testing::Environment {
 public:
  void TearDown() override { sigilfs::test::UringSwitch::PutBackAfterKilledRun(); }
};

struct SuiteEnvironment {
  SuiteEnvironment() {
    // `--kdf test`, the cheap Argon2id cost every test vault is made with, is accepted only
    // with this set (the command does not offer it to users).
    ::setenv("SIGILFS_TEST_KDF", "1", 1);
    // A test process killed while it held the fuse module's io_uring switch (SIGKILL at a CTest
    // timeout) left the machine's value changed: put back before any test runs.
    sigilfs::test::UringSwitch::PutBackAfterKilledRun();
    ::testing::AddGlobalTestEnvironment(new PutBackAtTheEnd);
  }
};
[[maybe_unused]] const SuiteEnvironment kSuiteEnvironment;

}  // namespace
