// Test helper: a directory store (BackingDir) in memory or on disk, and a cheap test vault, so
// the namespace suites run once per store.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/volume.h"

namespace sigilfs::test {

enum class Store { kPosix, kMemory };

// A new, empty store: in memory, or the directory `dir` (made if missing).
inline std::unique_ptr<core::BackingDir> NewStore(Store kind, const std::filesystem::path& dir) {
  if (kind == Store::kMemory) return core::NewMemoryBackingStore();
  std::filesystem::create_directories(dir);
  auto opened = core::OpenPosixBackingDir(dir.string());
  if (!opened.ok()) throw std::runtime_error(opened.status().ToString());
  return std::move(opened).value();
}

// The parameter names of a suite instantiated over both stores.
inline std::string StoreName(const ::testing::TestParamInfo<Store>& info) {
  return info.param == Store::kPosix ? "Posix" : "Memory";
}

// What gtest prints of the parameter (found through argument-dependent lookup).
inline void PrintTo(Store s, std::ostream* os) { *os << (s == Store::kPosix ? "Posix" : "Memory"); }

#define SIGILFS_INSTANTIATE_FOR_STORES(suite)                                             \
  INSTANTIATE_TEST_SUITE_P(                                                               \
      Stores, suite,                                                                      \
      ::testing::Values(::sigilfs::test::Store::kPosix, ::sigilfs::test::Store::kMemory), \
      ::sigilfs::test::StoreName)

// A vault made at `dir` with the test KDF, unlocked and opened as a volume.
inline std::unique_ptr<core::Volume> NewTestVolume(const std::string& dir,
                                                   core::VolumeOptions options = {}) {
  const auto bytes = [](std::string_view s) {
    return ByteSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  core::VaultCreateOptions cheap;
  cheap.kdf = crypt::Argon2ParamsFor(crypt::KdfPreset::kTest);
  if (Status s = core::Vault::Create(dir, bytes("pass"), cheap); !s.ok())
    throw std::runtime_error(s.ToString());
  auto vault = core::Vault::Unlock(dir, bytes("pass"));
  if (!vault.ok()) throw std::runtime_error(vault.status().ToString());
  auto volume = core::Volume::Open(std::move(vault).value(), std::move(options));
  if (!volume.ok()) throw std::runtime_error(volume.status().ToString());
  return std::move(volume).value();
}

}  // namespace sigilfs::test
