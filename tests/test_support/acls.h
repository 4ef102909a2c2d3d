// Test helper: POSIX ACLs as `getfacl` and `setfacl` see and set them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "test_support/process.h"

namespace sigilfs::test {

// `getfacl -R -p` of `dir`, with paths relative to it and entries sorted (each file system
// lists a directory in its own order).
inline std::string AclsOf(const std::string& dir, const std::string& extra = "") {
  ProcessResult r =
      RunProcess({"/bin/sh", "-c", "cd \"$1\" && exec getfacl -R -p " + extra + " .", "sh", dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> blocks;
  std::istringstream in(r.out);
  std::string block;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) {
      block += line + "\n";
    } else if (!block.empty()) {
      blocks.push_back(std::move(block));
      block.clear();
    }
  }
  if (!block.empty()) blocks.push_back(block);
  std::sort(blocks.begin(), blocks.end());
  std::string out;
  for (const std::string& b : blocks) out += b + "\n";
  return out;
}

inline void Setfacl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/setfacl"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace sigilfs::test
