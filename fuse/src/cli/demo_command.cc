// `sigilfs demo`: a guided run on a throw-away vault — create, mount, copy a tree in, seal a
// file (encrypted fs-verity) and print its digest, unmount, look at the ciphertext.
#include <fcntl.h>
#include <fmt/core.h>
#include <linux/fsverity.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "commands.h"
#include "sigilfs/core/vault.h"

namespace sigilfs::cli {
namespace {

namespace fs = std::filesystem;

constexpr long kFuseSuperMagic = 0x65735546;
constexpr char kMarker[] = "TOP-SECRET-PLAN";

struct DemoOptions {
  std::string dir;  // where to put the demo; a fresh temporary directory if empty
  bool keep = false;
};

void Step(const std::string& text) { fmt::print("\n== {}\n", text); }

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A small tree like a home directory's, every file carrying a marker string.
void MakeSampleTree(const fs::path& root) {
  fs::create_directories(root / "Documents" / "taxes");
  fs::create_directories(root / "Pictures");
  fs::create_directories(root / ".config");
  std::ofstream(root / "Documents" / "plan.txt") << kMarker << ": move to the coast in spring.\n";
  std::ofstream(root / "Documents" / "taxes" / "2026.csv") << "item,amount\nrent,9600\n"
                                                           << kMarker << "\n";
  std::ofstream(root / ".config" / "settings.ini") << "[ui]\ntheme=dark\n# " << kMarker << "\n";
  std::ofstream photo(root / "Pictures" / "beach.raw", std::ios::binary);
  for (int i = 0; i < 20000; ++i) photo << kMarker << i;
  fs::create_symlink("Documents/plan.txt", root / "plan-link");
}

void ListTree(const fs::path& root) {
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path rel = fs::relative(it->path(), root);
    const int depth = it.depth();
    std::string size = it->is_symlink()        ? "-> " + fs::read_symlink(it->path()).string()
                       : it->is_regular_file() ? fmt::format("{} bytes", fs::file_size(it->path()))
                                               : "dir";
    std::string name = rel.filename().string();
    if (name.size() > 44) name = name.substr(0, 41) + "...";
    fmt::print("  {:{}}{:<46} {}\n", "", depth * 2, name, size);
  }
}

bool WaitForMount(const fs::path& mountpoint, pid_t daemon) {
  for (int i = 0; i < 500; ++i) {
    struct statfs sf;
    if (::statfs(mountpoint.c_str(), &sf) == 0 && sf.f_type == kFuseSuperMagic) return true;
    int status;
    if (::waitpid(daemon, &status, WNOHANG) == daemon) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string Hex(const uint8_t* p, size_t n) {
  std::string hex;
  for (size_t i = 0; i < n; ++i) hex += fmt::format("{:02x}", p[i]);
  return hex;
}

// The first word `fsverity digest FILE` prints, if the tool is installed.
std::string FsverityDigest(const fs::path& file) {
  if (::access("/usr/bin/fsverity", X_OK) != 0) return "";
  const std::string cmd = "/usr/bin/fsverity digest '" + file.string() + "' 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");  // NOLINT(cert-env33-c): fixed tool, quoted demo path
  if (p == nullptr) return "";
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  ::pclose(p);
  std::string out(buf, n);
  return out.substr(0, out.find(' '));
}

// Seals `file` through the mount with the fs-verity ioctls (what `fsverity enable` and
// `fsverity measure` do) and shows that the digest equals fsverity's over the plaintext `orig`.
// Returns false if something is wrong; a kernel that does not forward the ioctls is only noted.
bool SealAndMeasure(const fs::path& file, const fs::path& orig) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  fsverity_enable_arg arg{};
  arg.version = 1;
  arg.hash_algorithm = FS_VERITY_HASH_ALG_SHA256;
  arg.block_size = 4096;
  if (::ioctl(fd, FS_IOC_ENABLE_VERITY, &arg) != 0) {
    const int err = errno;
    ::close(fd);
    fmt::print("this kernel does not pass fs-verity requests to FUSE (Linux 6.10 does): {}\n",
               std::generic_category().message(err));
    fmt::print("offline instead: sigilfs verity enable VAULT PATH\n");
    return err == ENOTTY || err == EINVAL || err == ENOSYS;
  }
  // struct fsverity_digest ends in a flexible array: room for the digest follows it.
  alignas(fsverity_digest) uint8_t measured[sizeof(fsverity_digest) + 64] = {};
  fsverity_digest head{};
  head.digest_size = 64;
  std::memcpy(measured, &head, sizeof head);
  const bool ok = ::ioctl(fd, FS_IOC_MEASURE_VERITY, measured) == 0;
  ::close(fd);
  if (!ok) return false;
  std::memcpy(&head, measured, sizeof head);
  const std::string digest =
      "sha256:" + Hex(measured + sizeof head, std::min<size_t>(head.digest_size, 64));
  fmt::print("fsverity enable {}\nfsverity measure -> {}\n", file.string(), digest);
  const std::string reference = FsverityDigest(orig);
  if (!reference.empty())
    fmt::print("fsverity digest of the original plaintext -> {} ({})\n", reference,
               reference == digest ? "the same" : "DIFFERENT");
  const int w = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  fmt::print("opening it for writing now fails: {}\n",
             w < 0 ? std::generic_category().message(errno) : std::string("UNEXPECTEDLY ALLOWED"));
  if (w >= 0) ::close(w);
  return w < 0 && (reference.empty() || reference == digest);
}

int RunDemo(const DemoOptions& o) {
  std::string base = o.dir;
  if (base.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "sigilfs-demo-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return Fail(Status::FromErrno(errno, "mkdtemp"));
    base = tmpl;
  }
  const fs::path vault = fs::path(base) / "vault", mnt = fs::path(base) / "mnt";
  const fs::path sample = fs::path(base) / "sample", passfile = fs::path(base) / "passphrase";
  const std::string passphrase = "demo passphrase";
  fs::create_directories(mnt);
  std::ofstream(passfile) << passphrase << "\n";
  fs::permissions(passfile, fs::perms::owner_read | fs::perms::owner_write);

  Step("1. Create a vault (AES-256-GCM pages, Argon2id 'interactive' cost)");
  core::VaultCreateOptions opts;
  opts.kdf = crypt::Argon2ParamsFor(crypt::KdfPreset::kInteractive);
  if (Status s = core::Vault::Create(vault.string(), AsBytes(passphrase), opts); !s.ok())
    return Fail(s);
  fmt::print("sigilfs init {}   (passphrase \"{}\")\n", vault.string(), passphrase);
  auto bad = core::Vault::Unlock(vault.string(), AsBytes("not the passphrase"));
  fmt::print("a wrong passphrase is refused: sigilfs: {}\n",
             bad.ok() ? "UNEXPECTEDLY ACCEPTED" : bad.status().message());
  if (bad.ok()) return 1;

  Step("2. Mount it");
  fmt::print("sigilfs mount {} {}\n", vault.string(), mnt.string());
  const pid_t daemon = ::fork();
  if (daemon == 0) {
    ::execl("/proc/self/exe", "sigilfs", "mount", vault.c_str(), mnt.c_str(), "-f", "--passfile",
            passfile.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  if (!WaitForMount(mnt, daemon)) {
    ::kill(daemon, SIGTERM);
    return Fail(Status(Code::kIoError, "the demo mount did not come up (is /dev/fuse available?)"));
  }

  Step("3. Copy a small home-directory tree in (cp -a)");
  MakeSampleTree(sample);
  int rc = 0;
  std::error_code ec;
  fs::copy(sample, mnt, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
  if (ec) {
    rc = Fail(Status(Code::kIoError, "copy into the mount: " + ec.message()));
  } else {
    fmt::print("plaintext view ({}):\n", mnt.string());
    ListTree(mnt);
    const bool same =
        Slurp(sample / "Pictures" / "beach.raw") == Slurp(mnt / "Pictures" / "beach.raw");
    fmt::print("read back through the mount: {}\n", same ? "identical" : "DIFFERENT");
    if (!same) rc = 1;
  }

  if (rc == 0) {
    Step("4. Seal one file: an encrypted fs-verity Merkle tree, checked on every read");
    if (!SealAndMeasure(mnt / "Pictures" / "beach.raw", sample / "Pictures" / "beach.raw"))
      rc = Fail(Status(Code::kIoError, "sealing through the mount failed"));
  }

  Step("5. Unmount (every dirty page is written back first)");
  fmt::print("sigilfs unmount {}\n", mnt.string());
  const pid_t um = ::fork();
  if (um == 0) {
    ::execlp("fusermount3", "fusermount3", "-u", mnt.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(um, &status, 0);
  ::waitpid(daemon, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fmt::print("sigilfs: the daemon did not exit cleanly\n");
    rc = 1;
  }

  Step("6. What the storage holds: only ciphertext");
  fmt::print("cipher directory ({}):\n", vault.string());
  ListTree(vault);
  bool leaked = false;
  for (const auto& e : fs::recursive_directory_iterator(vault)) {
    if (e.path().filename().string().find("plan") != std::string::npos) leaked = true;
    if (e.is_regular_file() && !e.is_symlink() &&
        Slurp(e.path()).find(kMarker) != std::string::npos)
      leaked = true;
  }
  fmt::print("the marker \"{}\" (in every plaintext file) found in the cipher files or names: {}\n",
             kMarker, leaked ? "YES" : "no");
  for (const auto& e : fs::recursive_directory_iterator(vault)) {
    if (e.is_symlink() || !e.is_regular_file() ||
        e.path().filename().string().find('.') != std::string::npos)
      continue;
    const std::string bytes = Slurp(e.path()).substr(0, 48);
    const std::string hex = Hex(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    fmt::print(
        "first bytes of {}...:\n  {}\n  (magic, version, flags, file nonce, then sealed pages)\n",
        e.path().filename().string().substr(0, 16), hex);
    break;
  }
  if (leaked) rc = 1;

  if (o.keep) {
    fmt::print(
        "\nThe demo is kept in {} (mount it again with: sigilfs mount {} {} --passfile {})\n", base,
        vault.string(), mnt.string(), passfile.string());
  } else {
    fs::remove_all(base, ec);
  }
  fmt::print("\nDemo {}.\n", rc == 0 ? "finished" : "FAILED");
  return rc;
}

}  // namespace

void RegisterDemoCommand(CLI::App& app, Action& action) {
  auto o = std::make_shared<DemoOptions>();
  auto* cmd = app.add_subcommand("demo", "Run a short guided demo on a throw-away vault");
  cmd->add_option("--dir", o->dir, "Directory for the demo (default: a new temporary one)");
  cmd->add_flag("--keep", o->keep, "Keep the demo vault afterwards");
  cmd->callback([&action, o] { action = [o] { return RunDemo(*o); }; });
}

}  // namespace sigilfs::cli
