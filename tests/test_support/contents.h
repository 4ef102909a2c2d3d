// Test helper: read or write a whole FileContents, failing the test on an error.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "sigilfs/core/page_layer.h"

namespace sigilfs::test {

// The file's whole contents (as many bytes as a read at 0 returns).
inline std::vector<uint8_t> ReadAll(core::FileContents& f) {
  std::vector<uint8_t> out(f.size());
  auto n = f.Read(0, out);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  if (n.ok()) out.resize(*n);
  return out;
}

// Writes all of `data` at `off`; a failure or a short write fails the test.
inline void WriteAll(core::FileContents& f, uint64_t off, const std::vector<uint8_t>& data) {
  auto n = f.Write(off, data);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, data.size());
}

}  // namespace sigilfs::test
