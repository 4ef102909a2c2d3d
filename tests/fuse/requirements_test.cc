// SIGILFS_REQUIRE_FUSE: a test that lacks FUSE or root is skipped, unless the machine is said to
// have them, where it fails.
#include "test_support/requirements.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_support/process.h"

namespace sigilfs {
namespace {

using test::Decide;
using test::Verdict;

TEST(RequirementsTest, AMissingNeedSkipsUnlessRequired) {
  EXPECT_EQ(Decide(true, nullptr), Verdict::kRun);
  EXPECT_EQ(Decide(true, "1"), Verdict::kRun);
  EXPECT_EQ(Decide(false, nullptr), Verdict::kSkip);
  EXPECT_EQ(Decide(false, ""), Verdict::kSkip);
  EXPECT_EQ(Decide(false, "0"), Verdict::kSkip);
  EXPECT_EQ(Decide(false, "1"), Verdict::kFail);
}

// The whole way, in a run of this very binary: two mount tests (one that checks in its body, one
// in its fixture's SetUp) with FUSE made to look absent (SIGILFS_TEST_NO_FUSE=1; the device
// itself is left alone) skip, and fail under SIGILFS_REQUIRE_FUSE=1.
TEST(RequirementsTest, MountTestsWithoutFuseSkipOrFailWhenFuseIsRequired) {
  const std::vector<std::string> argv = {
      "/proc/self/exe",
      "--gtest_filter=MountListingTest.ListingsCarryTheRightAttributes:"
      "MountHandleTest.FilesAndDirectoriesOpenAfterTheKernelForgotThem"};
  std::vector<std::string> env = test::EnvironmentWithout("SIGILFS_REQUIRE_FUSE");
  env.emplace_back("SIGILFS_TEST_NO_FUSE=1");
  const test::ProcessResult skipped = test::RunProcess(argv, "", env);
  EXPECT_EQ(skipped.exit_code, 0) << skipped.out;
  EXPECT_NE(skipped.out.find("[  SKIPPED ] 2 tests"), std::string::npos) << skipped.out;

  env.emplace_back("SIGILFS_REQUIRE_FUSE=1");
  const test::ProcessResult failed = test::RunProcess(argv, "", env);
  EXPECT_EQ(failed.exit_code, 1) << failed.out;
  EXPECT_NE(failed.out.find("[  FAILED  ] 2 tests"), std::string::npos) << failed.out;
  EXPECT_NE(failed.out.find("no FUSE here (SIGILFS_REQUIRE_FUSE=1"), std::string::npos)
      << failed.out;
}

}  // namespace
}  // namespace sigilfs
