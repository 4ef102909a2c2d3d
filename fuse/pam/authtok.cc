// The kept password as PAM data whose cleanup wipes it (on pam_end, replacement or drop).
#include "authtok.h"

#include <string.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

namespace sigilfs::pam {
namespace {

constexpr char kDataName[] = "sigilfs_password";

// One allocation, locked and wiped as a whole: the size, then the bytes and a NUL.
struct Kept {
  uid_t uid;  // whose password it is
  size_t size;
  char* bytes() { return reinterpret_cast<char*>(this + 1); }
  const char* bytes() const { return reinterpret_cast<const char*>(this + 1); }
};

size_t AllocationSize(size_t size) { return sizeof(Kept) + size + 1; }

void Wipe(pam_handle_t*, void* data, int) {
  auto* kept = static_cast<Kept*>(data);
  if (kept == nullptr) return;
  const size_t total = AllocationSize(kept->size);
  ::explicit_bzero(kept, total);
  ::munlock(kept, total);
  std::free(kept);
}

}  // namespace

void KeepPassword(pam_handle_t* pamh, std::string_view password, uid_t uid, const Log& log) {
  const size_t total = AllocationSize(password.size());
  auto* kept = static_cast<Kept*>(std::malloc(total));
  if (kept == nullptr) {
    log.Error("out of memory: the home will not be mounted");
    return;
  }
  std::memset(static_cast<void*>(kept), 0, total);
  // Locked before the password is copied in. Best effort: a failure to lock (RLIMIT_MEMLOCK)
  // only means it might reach swap.
  (void)::mlock(kept, total);
  kept->uid = uid;
  kept->size = password.size();
  std::memcpy(kept->bytes(), password.data(), password.size());
  kept->bytes()[password.size()] = '\0';
  if (pam_set_data(pamh, kDataName, kept, Wipe) != PAM_SUCCESS) {
    Wipe(pamh, kept, 0);
    log.Error("cannot keep the password for the session: the home will not be mounted");
  }
}

std::string_view KeptPassword(pam_handle_t* pamh, uid_t uid) {
  const void* data = nullptr;
  if (pam_get_data(pamh, kDataName, &data) != PAM_SUCCESS || data == nullptr) return {};
  const auto* kept = static_cast<const Kept*>(data);
  if (kept->uid != uid) return {};
  return {kept->bytes(), kept->size};
}

void DropPassword(pam_handle_t* pamh) {
  const void* data = nullptr;
  // Replacing the data runs the old entry's cleanup (PAM_DATA_REPLACE), which wipes it.
  if (pam_get_data(pamh, kDataName, &data) == PAM_SUCCESS && data != nullptr)
    pam_set_data(pamh, kDataName, nullptr, nullptr);
}

}  // namespace sigilfs::pam
