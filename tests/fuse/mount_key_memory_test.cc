// Key bytes in a running daemon's memory: what a core dump of it would hold (every readable
// mapping not marked MADV_DONTDUMP, read through /proc/PID/mem while it serves) must not contain
// the passphrase or the volume keys; and the daemon makes no core dumps at all, since OpenSSL
// keeps each open file's AES key schedule (which begins with the file key) in its own heap.
// gcore is no use here: gdb stops the daemon and then reads files of its own mount, and waits
// forever.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sigilfs/core/format.h"
#include "sigilfs/core/keys.h"
#include "sigilfs/core/vault.h"
#include "test_support/mount.h"
#include "test_support/process.h"
#include "test_support/requirements.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;

bool Contains(const std::string& haystack, ByteSpan needle) {
  const auto* begin = reinterpret_cast<const uint8_t*>(haystack.data());
  return std::search(begin, begin + haystack.size(), needle.begin(), needle.end()) !=
         begin + haystack.size();
}

// The bytes a core dump of `pid` would hold: its readable mappings, without the ones marked
// VM_DONTDUMP ("dd" in smaps), as the kernel's dumper skips them.
std::string DumpableMemory(pid_t pid) {
  std::ifstream smaps("/proc/" + std::to_string(pid) + "/smaps");
  std::ifstream mem("/proc/" + std::to_string(pid) + "/mem", std::ios::binary);
  std::string out, line;
  uintptr_t lo = 0, hi = 0;
  bool readable = false;
  while (std::getline(smaps, line)) {
    uintptr_t a = 0, b = 0;
    char dash = 0;
    std::string perms;
    std::istringstream head(line);
    if (head >> std::hex >> a >> dash >> b >> perms && dash == '-') {
      lo = a;
      hi = b;
      readable = perms.size() == 4 && perms[0] == 'r';
    } else if (line.rfind("VmFlags:", 0) == 0) {
      if (!readable || line.find(" dd") != std::string::npos || hi - lo > (size_t{1} << 30))
        continue;
      std::string bytes(hi - lo, '\0');
      mem.clear();
      mem.seekg(static_cast<std::streamoff>(lo));
      mem.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      bytes.resize(static_cast<size_t>(std::max<std::streamsize>(0, mem.gcount())));
      out += bytes;
    }
  }
  return out;
}

pid_t DaemonOf(const test::MountedVault& vault) {
  test::ProcessResult r =
      test::RunProcess({"/usr/bin/pgrep", "-f", "-n", "mount " + vault.cipher()});
  return r.exit_code == 0 ? static_cast<pid_t>(std::stol(r.out)) : -1;
}

TEST(MountKeyMemoryTest, NoCoreDumpsAndNoVolumeKeysInDumpableMemory) {
  SIGILFS_NEEDS_FUSE();
#if defined(__SANITIZE_ADDRESS__)
  // Its allocator keeps freed blocks unwiped in quarantine and moves stack frames to the heap.
  GTEST_SKIP() << "memory contents are AddressSanitizer's own under it";
#endif
  test::MountedVault vault;
  const std::string passphrase = test::ReadAll(vault.passfile());
  // An open file whose key the daemon holds, with contents written through it.
  const int fd = ::open(vault.path("open").c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  const std::string text(10000, 'k');
  ASSERT_EQ(::pwrite(fd, text.data(), text.size(), 0), static_cast<ssize_t>(text.size()));
  ASSERT_EQ(::fsync(fd), 0);
  const pid_t pid = DaemonOf(vault);
  ASSERT_GT(pid, 0);

  auto unlocked =
      core::Vault::Unlock(vault.cipher(), AsBytes(passphrase.substr(0, passphrase.find('\n'))));
  ASSERT_TRUE(unlocked.ok()) << unlocked.status().ToString();
  const core::VolumeKeys& keys = (*unlocked)->keys();
  std::string cipher_file;
  for (const auto& e : fs::directory_iterator(vault.cipher()))
    if (e.is_regular_file() && e.file_size() > 10000) cipher_file = e.path();
  ASSERT_FALSE(cipher_file.empty());
  const std::string raw = test::ReadAll(cipher_file);
  auto header = core::DecodeFileHeader(AsBytes(raw).first(core::kFileHeaderSize));
  ASSERT_TRUE(header.ok());
  auto file_key = core::DeriveFileKey(keys.content.span(), header->nonce);
  ASSERT_TRUE(file_key.ok());

  const std::string dump = DumpableMemory(pid);
  ::close(fd);
  ASSERT_GT(dump.size(), 1u << 20);
  // The reader does see the daemon's memory: its command line is in it.
  EXPECT_TRUE(Contains(dump, AsBytes(vault.cipher())));
  EXPECT_FALSE(Contains(dump, AsBytes(passphrase.substr(0, passphrase.find('\n')))))
      << "passphrase";
  EXPECT_FALSE(Contains(dump, keys.content.span())) << "content key";
  EXPECT_FALSE(Contains(dump, keys.names.span().first(32))) << "names key (first half)";
  EXPECT_FALSE(Contains(dump, keys.names.span().last(32))) << "names key (second half)";
  // A file key is in the dump (inside OpenSSL's cipher context): the reason no dump is made.
  EXPECT_TRUE(Contains(dump, file_key->span())) << "the search finds a key that is there";
  const std::string limits = test::ReadAll("/proc/" + std::to_string(pid) + "/limits");
  EXPECT_NE(limits.find("Max core file size        0                    0"), std::string::npos)
      << limits;
}

}  // namespace
}  // namespace sigilfs
