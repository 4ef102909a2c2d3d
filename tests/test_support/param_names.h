// Test helper: the cipher's name for parameterized suites, in test names ("PosixGcm") and in
// what gtest prints of a parameter ("Gcm", not "4-byte object <00-00 00-00>").
#pragma once

#include <ostream>
#include <string>

#include "sigilfs/crypt/aead.h"

namespace sigilfs::crypt {

inline std::string AeadName(AeadAlgorithm a) {
  return a == AeadAlgorithm::kAes256Gcm ? "Gcm" : "XChaCha";
}
// Found by gtest through argument-dependent lookup.
inline void PrintTo(AeadAlgorithm a, std::ostream* os) { *os << AeadName(a); }

}  // namespace sigilfs::crypt
