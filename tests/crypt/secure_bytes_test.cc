// SecureBytes memory: locked and undumpable, slots wiped on release and never shared
// (the basic API is covered with the other crypt building blocks in kat_test.cc).
#include "sigilfs/crypt/secure_bytes.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support/requirements.h"

namespace sigilfs::crypt {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMlockWorks = false;  // AddressSanitizer turns mlock into a no-op
#else
constexpr bool kMlockWorks = true;
#endif

bool AllZero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

// The VmFlags line of the mapping in /proc/self/smaps that holds `addr` ("" if none does).
std::string VmFlagsOf(const void* addr) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(SecureBytesTest, SlotsAndRegionsStartZeroed) {
  for (size_t size : {size_t{1}, size_t{32}, kSecureSlotSize, kSecureSlotSize + 1, size_t{4096}}) {
    SecureBytes b(size);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(b.size(), size);
    EXPECT_TRUE(AllZero(b.data(), size)) << size;
    std::fill(b.data(), b.data() + size, uint8_t{0xa5});
  }
  EXPECT_TRUE(SecureBytes(0).empty());
  EXPECT_TRUE(SecureBytes::CopyOf({}).empty());
}

TEST(SecureBytesTest, KeysLiveInLockedUndumpableMemory) {
  for (size_t size : {size_t{32}, size_t{4096}}) {  // a pooled slot and a region of its own
    SecureBytes b(size);
    const std::string flags = VmFlagsOf(b.data());
    ASSERT_FALSE(flags.empty()) << "no mapping holds the buffer";
    EXPECT_NE(flags.find(" dd"), std::string::npos) << "not excluded from core dumps: " << flags;
    // mlock may fail for an unprivileged user with a small RLIMIT_MEMLOCK; root never lacks it.
    if (geteuid() == 0 && kMlockWorks) {
      EXPECT_NE(flags.find(" lo"), std::string::npos) << "not locked: " << flags;
    }
  }
}

// mlock does not survive fork; a daemon forks after unlocking, so the pool locks again.
TEST(SecureBytesTest, KeysMadeBeforeAForkAreLockedInTheChild) {
  SIGILFS_NEEDS_ROOT("mlock may be refused without privileges");
  if (!kMlockWorks) GTEST_SKIP() << "mlock is a no-op under AddressSanitizer";
  SecureBytes key(32);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string flags = VmFlagsOf(key.data());
    ::_exit(flags.find(" lo") != std::string::npos && flags.find(" dd") != std::string::npos ? 0
                                                                                             : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "not locked in the child";
}

TEST(SecureBytesTest, APooledSlotIsWipedWhenReleased) {
  SecureBytes key(32);
  std::fill(key.data(), key.data() + key.size(), uint8_t{0x5c});
  // Slots stay mapped after release (the arena is kept), so looking at one afterwards is safe.
  const uint8_t* slot = key.data();
  key.Truncate(8);
  EXPECT_TRUE(AllZero(slot + 8, 32 - 8));
  key = SecureBytes();
  EXPECT_TRUE(AllZero(slot, kSecureSlotSize));
}

// Many threads take and give back slots at once: no slot may be handed to two owners.
TEST(SecureBytesTest, ConcurrentAllocationsNeverShareASlot) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      const auto mark = static_cast<uint8_t>(t + 1);
      for (int round = 0; round < kRounds; ++round) {
        std::vector<SecureBytes> keys;
        for (int i = 0; i < 8; ++i) {
          keys.emplace_back(32);
          std::fill(keys.back().data(), keys.back().data() + 32, mark);
        }
        std::this_thread::yield();
        for (const SecureBytes& k : keys)
          if (!std::all_of(k.data(), k.data() + 32, [mark](uint8_t b) { return b == mark; }))
            ++failures[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << t;
}

TEST(SecureBytesTest, LiveSlotsAreDistinct) {
  std::vector<SecureBytes> keys;
  std::set<const uint8_t*> seen;
  for (int i = 0; i < 3000; ++i) {  // more than one arena's worth
    keys.emplace_back(kSecureSlotSize);
    EXPECT_TRUE(seen.insert(keys.back().data()).second);
  }
}

}  // namespace
}  // namespace sigilfs::crypt
