// Test helper: hex strings of test vectors to bytes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace sigilfs::test {

// Parses hex digits; spaces are skipped so vectors can keep the grouping of their source.
inline std::vector<uint8_t> FromHex(std::string_view hex) {
  std::vector<uint8_t> out;
  int high = -1;
  for (char c : hex) {
    int v = 0;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else if (c == ' ') {
      continue;
    } else {
      ADD_FAILURE() << "bad hex digit '" << c << "' in test vector";
      return {};
    }
    if (high < 0) {
      high = v;
    } else {
      out.push_back(static_cast<uint8_t>((high << 4) | v));
      high = -1;
    }
  }
  if (high >= 0) ADD_FAILURE() << "odd number of hex digits in test vector";
  return out;
}

}  // namespace sigilfs::test
