// The mount beacon: an abstract Unix socket per mounted device, named for the device.
#include "sigilfs/fuse/mount_beacon.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace sigilfs::fuse {
namespace {

// The socket's abstract address (a leading NUL: no file), and its length.
socklen_t AddressOf(const std::string& device, sockaddr_un* addr) {
  const std::string name = "sigilfs-mount-" + device;
  *addr = {};
  addr->sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

}  // namespace

Result<MountBeacon> MountBeacon::Listen(const std::string& device) {
  MountBeacon beacon;
  beacon.fd_ = core::UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (beacon.fd_.get() < 0) return Status::FromErrno(errno, "mount beacon socket");
  sockaddr_un addr;
  const socklen_t len = AddressOf(device, &addr);
  if (::bind(beacon.fd_.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(beacon.fd_.get(), 16) != 0)
    return Status::FromErrno(errno, "mount beacon for device " + device);
  return beacon;
}

std::optional<VaultLock::Process> MountBeacon::DaemonOf(const std::string& device, uid_t uid) {
  core::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return std::nullopt;
  sockaddr_un addr;
  const socklen_t len = AddressOf(device, &addr);
  // A listening socket takes the connection into its backlog without an accept; the peer's
  // credentials are the listener's, as of its listen().
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) return std::nullopt;
  ucred cred{};
  socklen_t cred_len = sizeof cred;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 || cred.pid <= 0 ||
      cred.uid != uid)
    return std::nullopt;
  return VaultLock::ProcessOf(cred.pid);
}

}  // namespace sigilfs::fuse
