// The record of a vault's unfinished imports: lines of keyed hashes in sigilfs.imports.
#include "unfinished_imports.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

#include "sigilfs/core/unique_fd.h"
#include "sigilfs/crypt/bytes.h"
#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/kdf.h"

namespace sigilfs::cli {
namespace {

// Its name has a '.', as the vault's own files do: no listing of the vault shows it.
constexpr char kFileName[] = "sigilfs.imports";

}  // namespace

std::string UnfinishedImports::Path() const { return volume_.vault().dir() + "/" + kFileName; }

Result<std::string> UnfinishedImports::LineOf(const std::string& source, const std::string& target,
                                              bool contents) const {
  std::string info = "sigilfs unfinished import";
  for (const std::string& part : {source, target, std::string(contents ? "contents" : "entry")})
    info += std::string(1, '\0') + part;
  SIGILFS_ASSIGN_OR_RETURN(
      crypt::SecureBytes mac,
      crypt::HkdfSha256(volume_.vault().keys().reverse.span(), {}, AsBytes(info), 16));
  return crypt::HexEncode(mac.span());
}

Result<std::string> UnfinishedImports::Read() const {
  core::UniqueFd fd(::open(Path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::string();  // nothing unfinished
    return Status::FromErrno(errno, Path());
  }
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd.get(), buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, Path());
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

bool UnfinishedImports::Has(const std::string& line) const {
  auto text = Read();
  std::istringstream lines(text.ok() ? *text : std::string());
  for (std::string l; std::getline(lines, l);)
    if (l == line) return true;
  return false;
}

Status UnfinishedImports::Add(const std::string& line) const {
  if (Has(line)) return Status::Ok();
  SIGILFS_ASSIGN_OR_RETURN(std::string text, Read());
  return Write(text + line + "\n");
}

Status UnfinishedImports::Remove(const std::string& line) const {
  SIGILFS_ASSIGN_OR_RETURN(std::string text, Read());
  std::istringstream lines(text);
  std::string kept;
  for (std::string l; std::getline(lines, l);)
    if (l != line && !l.empty()) kept += l + "\n";
  if (kept.empty()) {
    if (::unlink(Path().c_str()) != 0 && errno != ENOENT) return Status::FromErrno(errno, Path());
    return Status::Ok();
  }
  return Write(kept);
}

Status UnfinishedImports::Write(const std::string& text) const {
  // Whole or not at all: a temporary, flushed, renamed over the old record.
  const std::string dir = volume_.vault().dir(), path = Path(), temp = path + ".new";
  {
    core::UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (fd.get() < 0) return Status::FromErrno(errno, temp);
    // A root import into a user's vault: the record is the vault owner's, as its lock file is.
    if (struct stat root; ::geteuid() == 0 && ::stat(dir.c_str(), &root) == 0)
      (void)!::fchown(fd.get(), root.st_uid, root.st_gid);
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
        ::fsync(fd.get()) != 0) {
      Status s = Status::FromErrno(errno, temp);
      ::unlink(temp.c_str());
      return s;
    }
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    Status s = Status::FromErrno(errno, path);
    ::unlink(temp.c_str());
    return s;
  }
  core::UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() < 0 || ::fsync(d.get()) != 0) return Status::FromErrno(errno, dir);
  return Status::Ok();
}

}  // namespace sigilfs::cli
