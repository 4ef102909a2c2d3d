// Test helper: a vault made by `sigilfs init` (the cheap test KDF) in a temporary directory, for
// the tests of the sigilfs command, which run it on that vault and on paths beside it.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_support/process.h"
#include "test_support/temp_dir.h"

namespace sigilfs::test {

class CliVaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(Pass()) << "hunter2\n";
    ASSERT_EQ(Sigilfs({"init", Vault(), "--kdf", "test", "--passfile", Pass()}).exit_code, 0);
  }
  // `sigilfs ARGS...`, with `input` on its standard input.
  ProcessResult Sigilfs(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), SIGILFS_BINARY);
    return RunProcess(args, input);
  }
  std::string Path(const std::string& name) const { return (tmp_.path() / name).string(); }
  std::string Vault() const { return Path("vault"); }
  std::string Pass() const { return Path("pass"); }  // the vault's passphrase, "hunter2"

  TempDir tmp_;
};

}  // namespace sigilfs::test
