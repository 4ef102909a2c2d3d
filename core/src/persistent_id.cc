// Node ids made from the store's file handles, and the search for the object such an id names.
#include "sigilfs/core/persistent_id.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <utility>

#include "sigilfs/core/names.h"

namespace sigilfs::core {
namespace {

constexpr int kIno32Gen = 1;  // FILEID_INO32_GEN: the 32-bit inode number, then the generation

Status Stale(const char* why) { return Status(Code::kIoError, why, ESTALE); }

}  // namespace

uint64_t PersistentId(BackingDir& at, const std::string& at_name, const struct stat& st) {
  auto handle = at.Handle(at_name);
  if (!handle.ok() || handle->type != kIno32Gen || handle->bytes.size() != 8) return 0;
  uint32_t ino = 0, gen = 0;
  std::memcpy(&ino, handle->bytes.data(), 4);
  std::memcpy(&gen, handle->bytes.data() + 4, 4);
  if (ino != st.st_ino) return 0;
  const uint64_t id = (uint64_t{gen & 0x7fffffffU} << 32) | ino;
  return id > 1 ? id : 0;  // 0 and 1 (the root) are the kernel's
}

Result<PersistentObject> OpenPersistentId(BackingDir& root, uint64_t id) {
  // The handle the id was made from, with either top bit of the generation.
  const auto ino = static_cast<uint32_t>(id);
  PersistentObject out;
  for (const uint32_t top : {0U, 0x80000000U}) {
    BackingDir::ObjectHandle handle;
    handle.type = kIno32Gen;
    handle.bytes.resize(8);
    const uint32_t gen = static_cast<uint32_t>(id >> 32) | top;
    std::memcpy(handle.bytes.data(), &ino, 4);
    std::memcpy(handle.bytes.data() + 4, &gen, 4);
    if (auto opened = root.OpenByHandle(handle); opened.ok()) {
      out.object = std::move(opened).value();
      break;
    }
  }
  if (!out.object) return Stale("no such object (or no CAP_DAC_READ_SEARCH to find it)");
  auto st = out.object->Stat("");
  auto root_st = root.Stat("");
  if (!st.ok() || !root_st.ok() || st->st_dev != root_st->st_dev || st->st_ino != ino)
    return Stale("not an object of the vault's filesystem");
  out.st = *st;
  return out;
}

std::vector<std::string> PathInVault(BackingDir& root, BackingDir& object) {
  return root.PathTo(object);
}

std::vector<std::string> FindInVault(BackingDir& root, uint64_t ino, size_t budget) {
  size_t seen = 0;
  std::deque<std::string> dirs{""};
  while (!dirs.empty() && seen < budget) {
    const std::string dir = std::move(dirs.front());
    dirs.pop_front();
    auto d = root.OpenObject(dir);
    if (!d.ok()) continue;
    std::vector<std::string> found;
    (void)(*d)->List(0, [&](const BackingEntry& e) {
      if (!IsEntryName(e.name)) return true;
      ++seen;
      if (e.ino == ino && !S_ISDIR(e.type) && e.type != 0) {
        found.push_back(e.name);
        return false;
      }
      if (S_ISDIR(e.type) || e.type == 0) dirs.push_back(dir.empty() ? e.name : dir + "/" + e.name);
      return seen < budget;
    });
    if (!found.empty()) {
      std::vector<std::string> parts;
      for (size_t at = 0; !dir.empty() && at <= dir.size();) {
        const size_t slash = std::min(dir.find('/', at), dir.size());
        parts.push_back(dir.substr(at, slash - at));
        at = slash + 1;
      }
      parts.push_back(found.front());
      return parts;
    }
  }
  return {};
}

bool IsEntryName(std::string_view stored) {
  return !NameCodec::IsReserved(stored) || NameCodec::IsLongName(stored);
}

}  // namespace sigilfs::core
