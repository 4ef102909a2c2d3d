// Deterministic pseudo-random test contents: the same (size, seed) always gives the same bytes.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace sigilfs::test {

inline std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

}  // namespace sigilfs::test
