// A program that uses the installed sigilfs library, without FUSE: it makes a vault, writes a
// tree into it (a directory, a file, a symlink, a hard link, an extended attribute), lists it
// back and reads the file, and checks that the cipher directory holds no plaintext name.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "sigilfs/core/check.h"
#include "sigilfs/core/tree.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/core/volume.h"

namespace {

using sigilfs::Status;

int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "consumer: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

int Wrong(const std::string& what) {
  std::fprintf(stderr, "consumer: %s\n", what.c_str());
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
  auto opened = Tree::Open(**volume);
  if (!opened.ok()) return Fail("tree", opened.status());
  Tree& tree = **opened;

  // docs/hello.txt with an attribute, docs/latest -> hello.txt, and docs/copy.txt, a second
  // name of the same file.
  auto root = tree.Root();
  if (!root.ok()) return Fail("root", root.status());
  if (Status s = tree.MakeDir(**root, "docs", 0755); !s.ok()) return Fail("mkdir", s);
  auto docs = tree.Walk("docs");
  if (!docs.ok()) return Fail("walk", docs.status());
  {
    auto file = tree.CreateFile(**docs, "hello.txt", 0644);
    if (!file.ok()) return Fail("create", file.status());
    auto n = (*file)->Write(0, Bytes(text));
    if (!n.ok() || *n != text.size()) return Fail("write", n.ok() ? Status::Ok() : n.status());
    if (Status s = (*file)->Sync(false); !s.ok()) return Fail("sync", s);
  }
  if (Status s = tree.SetXattr(**docs, "hello.txt", "user.lang", Bytes("en")); !s.ok())
    return Fail("setxattr", s);
  if (Status s = tree.MakeSymlink(**docs, "latest", "hello.txt"); !s.ok())
    return Fail("symlink", s);
  if (Status s = tree.Link(**docs, "hello.txt", **docs, "copy.txt"); !s.ok())
    return Fail("link", s);

  // The listing shows the plaintext names; the cipher directory holds only stored ones.
  std::vector<DirEntry> entries;
  if (Status s = tree.ListSorted(**docs, entries); !s.ok()) return Fail("list", s);
  if (entries.size() != 3 || entries[0].name != "copy.txt" || entries[1].name != "hello.txt" ||
      entries[2].name != "latest")
    return Wrong("the listing is wrong");
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    for (const char* plain : {"docs", "hello", "copy", "latest"})
      if (name.find(plain) != std::string::npos) return Wrong("a plaintext name is stored");
  }

  // Read back through the other name; the link and the attribute come back too.
  auto file = tree.OpenFile(**docs, "copy.txt", /*write=*/false);
  if (!file.ok()) return Fail("open", file.status());
  std::string back((*file)->size(), '\0');
  auto got = (*file)->Read(0, {reinterpret_cast<uint8_t*>(back.data()), back.size()});
  if (!got.ok()) return Fail("read", got.status());
  if (back != text) return Wrong("read back something else");
  auto target = tree.ReadLink(**docs, "latest");
  auto lang = tree.GetXattr(**docs, "copy.txt", "user.lang");
  if (!target.ok() || *target != "hello.txt") return Wrong("the symlink reads wrong");
  if (!lang.ok() || std::string(lang->begin(), lang->end()) != "en")
    return Wrong("the attribute reads wrong");
  auto st = tree.Stat(**docs, "hello.txt");
  if (!st.ok() || st->st_nlink != 2 || st->st_size != static_cast<off_t>(text.size()))
    return Wrong("the file's attributes are wrong");

  // And the whole vault checks clean.
  const CheckSummary checked = CheckTree(tree, [](const std::string& path, const Status& s) {
    std::fprintf(stderr, "consumer: %s: %s\n", path.c_str(), s.ToString().c_str());
  });
  if (checked.problems != 0 || checked.files != 1 || checked.symlinks != 1)
    return Wrong("the check found problems");
  std::printf("consumer: stored %zu bytes under two names, a symlink and an attribute; read back\n",
              back.size());
  return 0;
}
