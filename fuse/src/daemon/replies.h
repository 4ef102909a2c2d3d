// Replies and handlers every server builds alike: an errno from a Status, a sized answer, and
// the forgets.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "request.h"
#include "sigilfs/fuse/errno_map.h"
#include "sigilfs/status.h"

namespace sigilfs::fuse {

// A failure as its errno (ErrnoFor: the one place a Status becomes one).
template <typename S>
void ReplyError(Request<S>& r, const Status& s) {
  std::move(r).Err(ErrnoFor(s));
}
// Success or failure, for a request whose success carries nothing.
template <typename S>
void ReplyStatus(Request<S>& r, const Status& s) {
  std::move(r).Err(s.ok() ? 0 : ErrnoFor(s));
}

// getxattr and listxattr's answer: its size when asked for none (`size` 0), else the bytes
// (ERANGE if they do not fit).
template <typename S>
void ReplySized(Request<S>& r, const void* data, size_t length, size_t size) {
  if (size == 0) return (void)std::move(r).Xattr(length);
  if (length > size) return (void)std::move(r).Err(ERANGE);
  std::move(r).Buf(data, length);
}

// FORGET and BATCH_FORGET, for a server with Forget(node id, lookups): the kernel lets go of
// lookup references and waits for no reply.
template <typename S>
void Forget(Request<S>& r, fuse_ino_t ino, uint64_t n) {
  r.server().Forget(ino, n);
  std::move(r).None();
}
template <typename S>
void ForgetMulti(Request<S>& r, size_t count, fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; ++i) r.server().Forget(forgets[i].ino, forgets[i].nlookup);
  std::move(r).None();
}

// A server's operations table: `add(ops)` registers its handlers; the forgets, alike for every
// server with a node table, are registered here.
template <typename S, typename Add>
fuse_lowlevel_ops OperationsOf(Add add) {
  fuse_lowlevel_ops ops{};
  ops.forget = Serve<Forget<S>>::Call;
  ops.forget_multi = Serve<ForgetMulti<S>>::Call;
  add(ops);
  return ops;
}

}  // namespace sigilfs::fuse
