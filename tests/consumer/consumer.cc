// A program that uses the installed sigilfs library, without FUSE: it makes a vault, stores an
// encrypted directory and file in it, lists the directory and reads the file back.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "sigilfs/core/backing_file.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/core/volume.h"

namespace {

using sigilfs::Status;

int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "consumer: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

sigilfs::ByteSpan Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer EMPTY_DIR\n");
    return 2;
  }
  using namespace sigilfs::core;
  const std::string dir = argv[1];
  const std::string passphrase = "correct horse battery staple";
  const std::string text = "Hello from a program outside the sigilfs tree.\n";

  VaultCreateOptions options;
  options.kdf = sigilfs::crypt::Argon2ParamsFor(sigilfs::crypt::KdfPreset::kInteractive);
  if (Status s = Vault::Create(dir, Bytes(passphrase), options); !s.ok()) return Fail("create", s);
  auto vault = Vault::Unlock(dir, Bytes(passphrase));
  if (!vault.ok()) return Fail("unlock", vault.status());
  auto volume = Volume::Open(std::move(vault).value(), {});
  if (!volume.ok()) return Fail("open", volume.status());
  Volume& v = **volume;

  // A directory "docs" in the root, and "hello.txt" in it.
  auto root_iv = v.ReadDirIv(v.root_fd());
  if (!root_iv.ok()) return Fail("root IV", root_iv.status());
  if (Status s = v.MakeDirectory(v.root_fd(), *root_iv, "docs", 0755); !s.ok())
    return Fail("mkdir", s);
  auto docs_name = v.StoredName(*root_iv, "docs");
  if (!docs_name.ok()) return Fail("name", docs_name.status());
  const int docs = ::openat(v.root_fd(), docs_name->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (docs < 0) return Fail("open docs", Status::FromErrno(errno, "openat"));
  auto docs_iv = v.ReadDirIv(docs);
  if (!docs_iv.ok()) return Fail("docs IV", docs_iv.status());
  auto file_name = v.StoredName(*docs_iv, "hello.txt");
  if (!file_name.ok()) return Fail("name", file_name.status());
  if (Status s = v.PrepareName(docs, *docs_iv, "hello.txt"); !s.ok()) return Fail("name", s);
  {
    const int fd = ::openat(docs, file_name->c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return Fail("create file", Status::FromErrno(errno, "openat"));
    auto contents = v.pages().Open(NewPosixBackingFile(fd), "hello.txt");
    if (!contents.ok()) return Fail("contents", contents.status());
    auto n = (*contents)->Write(0, Bytes(text));
    if (!n.ok() || *n != text.size()) return Fail("write", n.ok() ? Status::Ok() : n.status());
    if (Status s = (*contents)->Flush(); !s.ok()) return Fail("flush", s);
  }

  // The listing shows the plaintext name; the cipher directory holds only the stored one.
  std::vector<DirEntry> entries;
  Status listed =
      v.ListSorted(docs, *docs_iv, entries, [](const std::string& stored, const Status& s) {
        std::fprintf(stderr, "consumer: damaged entry %s: %s\n", stored.c_str(),
                     s.ToString().c_str());
      });
  if (!listed.ok()) return Fail("list", listed);
  if (entries.size() != 1 || entries[0].name != "hello.txt" || entries[0].stored == "hello.txt") {
    std::fprintf(stderr, "consumer: the listing is wrong\n");
    return 1;
  }

  // Read back through a fresh open.
  const int fd = ::openat(docs, file_name->c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Fail("reopen", Status::FromErrno(errno, "openat"));
  auto contents = v.pages().Open(NewPosixBackingFile(fd), "hello.txt");
  if (!contents.ok()) return Fail("contents", contents.status());
  std::string back((*contents)->size(), '\0');
  auto got = (*contents)->Read(0, {reinterpret_cast<uint8_t*>(back.data()), back.size()});
  if (!got.ok()) return Fail("read", got.status());
  ::close(docs);
  if (back != text) {
    std::fprintf(stderr, "consumer: read back something else\n");
    return 1;
  }
  std::printf("consumer: stored and read back %zu bytes as %s/%s\n", back.size(),
              docs_name->c_str(), file_name->c_str());
  return 0;
}
