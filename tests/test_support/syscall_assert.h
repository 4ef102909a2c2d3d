// Test helper: assertions on system calls that return -1 and set errno, naming the errno.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace sigilfs::test {

inline std::string ErrnoName(int e) {
  const char* name = ::strerrorname_np(e);
  return (name != nullptr ? std::string(name) : "errno " + std::to_string(e)) + " (" +
         ::strerror(e) + ")";
}

// For a call returning -1 with errno on failure: success unless it returned -1.
inline ::testing::AssertionResult Ok(long result) {
  const int e = errno;
  if (result != -1) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "failed with " << ErrnoName(e);
}

// For a call returning -1 with errno on failure: it must fail with errno `expected`.
inline ::testing::AssertionResult FailsWith(long result, int expected) {
  const int e = errno;
  if (result == -1 && e == expected) return ::testing::AssertionSuccess();
  if (result != -1)
    return ::testing::AssertionFailure()
           << "succeeded (returned " << result << "), expected " << ErrnoName(expected);
  return ::testing::AssertionFailure()
         << "failed with " << ErrnoName(e) << ", expected " << ErrnoName(expected);
}

// All names readdir returns for `path` (with "." and ".."), in readdir order.
inline ::testing::AssertionResult ListDir(const std::string& path,
                                          std::vector<std::string>* names) {
  names->clear();
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr)
    return ::testing::AssertionFailure() << "opendir(" << path << "): " << ErrnoName(errno);
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(dir);  // NOLINT(concurrency-mt-unsafe): a private stream
    if (e == nullptr) break;
    names->push_back(e->d_name);
  }
  const int e = errno;
  ::closedir(dir);
  if (e != 0) return ::testing::AssertionFailure() << "readdir(" << path << "): " << ErrnoName(e);
  return ::testing::AssertionSuccess();
}

}  // namespace sigilfs::test
