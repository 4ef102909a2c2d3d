// Test helper: named cipher files on the in-memory or the POSIX backend, with raw access for
// tampering, so one suite runs against every BackingFile implementation.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "sigilfs/core/backing_file.h"
#include "test_support/process.h"
#include "test_support/temp_dir.h"

namespace sigilfs::test {

enum class BackendKind { kMemory, kPosix };

inline std::string BackendName(BackendKind k) {
  return k == BackendKind::kMemory ? "Memory" : "Posix";
}
// What gtest prints of the parameter (found through argument-dependent lookup).
inline void PrintTo(BackendKind k, std::ostream* os) { *os << BackendName(k); }

class TestBackend {
 public:
  explicit TestBackend(BackendKind kind) : kind_(kind) {}

  std::unique_ptr<core::BackingFile> Open(const std::string& name) {
    if (kind_ == BackendKind::kMemory) {
      auto& data = memory_[name];
      if (!data) data = std::make_shared<core::MemoryFileData>();
      return core::NewMemoryBackingFile(data);
    }
    int fd = ::open((dir_.path() / name).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) throw std::runtime_error("open backing file");
    return core::NewPosixBackingFile(fd);
  }

  std::vector<uint8_t> Raw(const std::string& name) {
    if (kind_ == BackendKind::kMemory) {
      core::MemoryFileData& data = *memory_[name];
      MutexLock lock(data.mu);
      return data.bytes;
    }
    std::string s = ReadAll(dir_.path() / name);
    return {s.begin(), s.end()};
  }

  void SetRaw(const std::string& name, const std::vector<uint8_t>& bytes) {
    if (kind_ == BackendKind::kMemory) {
      core::MemoryFileData& data = *memory_[name];
      MutexLock lock(data.mu);
      data.bytes = bytes;
      ++data.changes;
      return;
    }
    std::ofstream(dir_.path() / name, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }

 private:
  BackendKind kind_;
  TempDir dir_;
  std::map<std::string, std::shared_ptr<core::MemoryFileData>> memory_;
};

}  // namespace sigilfs::test
