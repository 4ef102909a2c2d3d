// Internal: a FUSE request that its reply consumes, for both servers (the mount, the reverse view).
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <cstdint>
#include <utility>
#include <vector>

#include "libfuse.h"
#include "log.h"
#include "uring_transport.h"

namespace sigilfs::fuse {

// libfuse frees a request inside every fuse_reply_*, whether the kernel took the reply or not
// (an interrupted caller, an aborted connection). So a request is reached only through this
// object, and only until a reply:
// - what a handler needs after its reply (the server it serves, who called) is captured when
//   the request arrives, and stays valid;
// - every reply is `&&`-qualified (`std::move(r).Entry(e)`), so a reply reads as the end of the
//   request, and clang-tidy's bugprone-use-after-move flags any use of `r` after it;
// - the handle itself is cleared by the reply: a second reply, or a late question about the
//   caller's groups, finds nothing to touch and says so in the log;
// - a handler that returns without a reply is answered with EIO by Serve (below), so no
//   request is left holding a caller (or, over io_uring, a ring entry).
// Each reply returns whether the kernel took it: false when it no longer waited, in which case
// the handler gives back what the reply would have handed over (a lookup reference, a handle).
template <typename Server>
class Request {
 public:
  // The caller as the kernel described it (the calling thread's ids, its umask for creates).
  struct Caller {
    uid_t uid = 0;
    gid_t gid = 0;
    pid_t pid = 0;
    mode_t umask = 0;
  };

  explicit Request(fuse_req_t req)
      : req_(req), server_(*static_cast<Server*>(fuse_req_userdata(req))) {
    const fuse_ctx* ctx = fuse_req_ctx(req);
    caller_ = {ctx->uid, ctx->gid, ctx->pid, ctx->umask};
    if constexpr (requires { server_.Touch(); }) server_.Touch();  // for an idle unmount
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() = default;

  // The server this request came to: still valid after the reply.
  Server& server() const { return server_; }
  const Caller& caller() const { return caller_; }
  bool replied() const { return req_ == nullptr; }

  // The caller's supplementary groups (libfuse reads them from /proc). Empty once replied to.
  std::vector<gid_t> Groups() const {
    if (Live("groups") == nullptr) return {};
    std::vector<gid_t> groups(32);
    for (;;) {
      const int n = fuse_req_getgroups(req_, static_cast<int>(groups.size()), groups.data());
      if (n < 0) return {};  // unknown: only uid and gid count
      if (static_cast<size_t>(n) <= groups.size()) {
        groups.resize(static_cast<size_t>(n));
        return groups;
      }
      groups.resize(static_cast<size_t>(n));
    }
  }

  // Directory entries for a READDIR or READDIRPLUS reply being built.
  size_t AddDirentry(char* buf, size_t size, const char* name, const struct stat* st,
                     off_t next) const {
    return fuse_add_direntry(Live("a listing"), buf, size, name, st, next);
  }
  size_t AddDirentryPlus(char* buf, size_t size, const char* name, const fuse_entry_param* e,
                         off_t next) const {
    return fuse_add_direntry_plus(Live("a listing"), buf, size, name, e, next);
  }

  // Where to make a Buf reply's payload of `size` bytes: the transport's place for it where it
  // has one (over io_uring, the ring entry's own buffer, so the payload goes to the kernel
  // without another copy), else `fallback`, grown to `size`. Valid until the reply.
  uint8_t* ReplySpace(size_t size, std::vector<uint8_t>& fallback) const {
    if (void* in_place = req_ == nullptr ? nullptr : UringTransport::ReplySpace(size))
      return static_cast<uint8_t*>(in_place);
    if (fallback.size() < size) fallback.resize(size);
    return fallback.data();
  }

  // The replies. Each ends the request.
  bool Err(int error) && {
    return Reply([&](fuse_req_t q) { return fuse_reply_err(q, error); });
  }
  bool Entry(const fuse_entry_param& e) && {
    return Reply([&](fuse_req_t q) { return fuse_reply_entry(q, &e); });
  }
  bool Create(const fuse_entry_param& e, const fuse_file_info* fi) && {
    return Reply([&](fuse_req_t q) { return fuse_reply_create(q, &e, fi); });
  }
  bool Attr(const struct stat& st, double timeout) && {
    return Reply([&](fuse_req_t q) { return fuse_reply_attr(q, &st, timeout); });
  }
  bool Readlink(const char* target) && {
    return Reply([&](fuse_req_t q) { return fuse_reply_readlink(q, target); });
  }
  bool Open(const fuse_file_info* fi) && {
    return Reply([&](fuse_req_t q) { return fuse_reply_open(q, fi); });
  }
  bool Write(size_t count) && {
    return Reply([&](fuse_req_t q) { return fuse_reply_write(q, count); });
  }
  bool Buf(const void* data, size_t size) && {
    return Reply(
        [&](fuse_req_t q) { return fuse_reply_buf(q, static_cast<const char*>(data), size); });
  }
  bool Statfs(const struct statvfs& st) && {
    return Reply([&](fuse_req_t q) { return fuse_reply_statfs(q, &st); });
  }
  bool Xattr(size_t size) && {
    return Reply([&](fuse_req_t q) { return fuse_reply_xattr(q, size); });
  }
  bool Lseek(off_t at) && {
    return Reply([&](fuse_req_t q) { return fuse_reply_lseek(q, at); });
  }
  bool Ioctl(int result, const void* data, size_t size) && {
    return Reply([&](fuse_req_t q) { return fuse_reply_ioctl(q, result, data, size); });
  }
  // FORGET and BATCH_FORGET: nothing reaches the kernel, but libfuse frees the request.
  void None() && {
    if (fuse_req_t q = Take(); q != nullptr) fuse_reply_none(q);
  }

 private:
  // The handle, for a use before the reply; null (and logged) after it.
  fuse_req_t Live(const char* what) const {
    if (req_ == nullptr) Log("request: %s asked for after the reply; ignored", what);
    return req_;
  }
  fuse_req_t Take() {
    fuse_req_t req = req_;
    req_ = nullptr;
    if (req == nullptr) Log("request: a second reply; ignored");
    return req;
  }
  // fuse_reply_* return 0, or a negative errno when the kernel did not take the reply. A second
  // reply (refused by Take: libfuse would crash on it) did not reach the kernel either.
  template <typename F>
  bool Reply(F send) {
    fuse_req_t q = Take();
    return q != nullptr && send(q) == 0;
  }

  fuse_req_t req_;
  Server& server_;
  Caller caller_;
};

// A handler `void Op(Request<S>&, Args...)` as the libfuse operation
// `void (fuse_req_t, Args...)`: the request is wrapped before the handler runs, and answered
// with EIO if the handler returned without a reply.
template <auto Op>
struct Serve;
template <typename S, typename... Args, void (*Op)(Request<S>&, Args...)>
struct Serve<Op> {
  static void Call(fuse_req_t req, Args... args) {
    Request<S> r(req);
    Op(r, args...);
    if (!r.replied()) {
      Log("request: a handler returned without a reply; answered with EIO");
      std::move(r).Err(EIO);
    }
  }
};

}  // namespace sigilfs::fuse
