// Translates FUSE requests into Filesystem calls and results into replies (errno in one place).
#include "lowlevel.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/fsverity.h>
#include <sys/ioctl.h>
#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "../daemon/device_io.h"
#include "../daemon/log.h"
#include "../daemon/replies.h"
#include "filesystem.h"
#include "sigilfs/core/acl.h"
#include "sigilfs/core/source.h"
#include "sigilfs/fuse/errno_map.h"

namespace sigilfs::fuse {

namespace acl = core::acl;
namespace {

static_assert(kSetMode == FUSE_SET_ATTR_MODE && kSetUid == FUSE_SET_ATTR_UID &&
              kSetGid == FUSE_SET_ATTR_GID && kSetSize == FUSE_SET_ATTR_SIZE &&
              kSetAtime == FUSE_SET_ATTR_ATIME && kSetMtime == FUSE_SET_ATTR_MTIME &&
              kSetAtimeNow == FUSE_SET_ATTR_ATIME_NOW && kSetMtimeNow == FUSE_SET_ATTR_MTIME_NOW);

// Attributes and names are cached by the kernel for a second: every change goes through this
// daemon, which invalidates nothing it has not told the kernel about.
constexpr double kTimeout = 1.0;

std::atomic<fuse_session*> g_session{nullptr};  // see SetSession

using Req = Request<Filesystem>;

// Whether a handle was opened for writing.
bool Writer(const fuse_file_info* fi) { return (fi->flags & O_ACCMODE) != O_RDONLY; }

// The node `ino` names. Null, with ESTALE answered, for one the daemon does not know (a node
// id it never gave, or one it forgot): the request ends there.
std::shared_ptr<Inode> NodeOr(Req& r, fuse_ino_t ino) {
  std::shared_ptr<Inode> inode = r.server().Get(ino);
  if (inode == nullptr) std::move(r).Err(ESTALE);
  return inode;
}

Caller CallerOf(const Req& r) {
  Caller caller;
  caller.uid = r.caller().uid;
  caller.gid = r.caller().gid;
  caller.umask = r.caller().umask;  // sent with create, mkdir and mknod; 0 for the others
  return caller;
}

// The caller with its supplementary groups, read (by libfuse, from /proc) only if a rule asks:
// before the reply, since they are the request's (after it, none are known).
Caller CallerWithGroups(const Req& r) {
  Caller caller = CallerOf(r);
  caller.groups = [&r] { return r.Groups(); };
  return caller;
}

// Whether the calling thread holds CAP_FSETID, from its effective capabilities in /proc (the
// kernel sends the pid of the calling thread). Unreadable (the thread is gone, or outside this
// daemon's pid namespace): only root is taken to hold it.
bool HasFsetid(const Req::Caller& who) {
  constexpr int kCapFsetid = 4;
  std::ifstream status("/proc/" + std::to_string(who.pid) + "/status");
  std::string line;
  while (who.pid > 0 && std::getline(status, line)) {
    if (line.compare(0, 7, "CapEff:") != 0) continue;
    try {
      return ((std::stoull(line.substr(7), nullptr, 16) >> kCapFsetid) & 1) != 0;
    } catch (const std::exception&) {
      break;
    }
  }
  return who.uid == 0;
}

fuse_entry_param EntryParam(Filesystem& fs, const Entry& entry) {
  fuse_entry_param e{};
  e.ino = fs.NodeId(*entry.inode);
  e.generation = entry.inode->generation;
  e.attr = entry.attr;
  e.attr_timeout = entry.damaged ? 0.0 : kTimeout;
  e.entry_timeout = kTimeout;
  return e;
}

void ReplyEntry(Req& r, Result<Entry> found) {
  if (!found.ok()) return ReplyError(r, found.status());
  Filesystem& fs = r.server();
  const fuse_entry_param e = EntryParam(fs, *found);
  if (!std::move(r).Entry(e)) fs.Forget(e.ino, 1);  // the kernel never got it
}

void ReplyAttr(Req& r, Result<struct stat> st) {
  if (!st.ok()) return ReplyError(r, st.status());
  std::move(r).Attr(*st, kTimeout);
}

// Clears set-ID bits as a change by `caller` must, and makes the kernel drop the mode it
// caches, which would otherwise still say set-user-ID to an exec of the changed file for up to
// a second. Attributes only (offset -1): no page is touched, so this is safe before the reply.
void ClearSetId(Filesystem& fs, fuse_ino_t ino, Inode& inode, const Caller& caller) {
  auto changed = fs.ClearSetId(inode, caller);
  if (!changed.ok()) {
    Log("clearing set-ID bits: %s", changed.status().ToString().c_str());
    return;
  }
  fuse_session* se = g_session.load();
  if (changed->has_value() && se != nullptr) fuse_lowlevel_notify_inval_inode(se, ino, -1, 0);
}

// A write, truncate or O_TRUNC open the kernel flagged (device_io.h): a caller without
// CAP_FSETID.
void ClearSetIdIfAsked(const Req& r, fuse_ino_t ino, Inode& inode) {
  if (RequestClearsSetId()) ClearSetId(r.server(), ino, inode, CallerWithGroups(r));
}

void Init(void* userdata, fuse_conn_info* conn) {
  // Request data arrives in memory (not through a pipe), so large writes are sealed straight
  // from the request buffer without a copy.
  conn->want &= ~FUSE_CAP_SPLICE_READ;
  if ((conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) != 0) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  // No dropping of a file's cached pages whenever a GETATTR shows its mtime moved (libfuse
  // asks for it by default). The drop races a page-cache write: it can take the page a write
  // has just copied in, before the write reaches the daemon, and a read then caches the page
  // as the daemon still has it, zeros past the old end; followers of a growing log read
  // records as zeros. Every change of the data comes through this kernel, and the daemon
  // tells it itself where the cache must go: a direct write (Write), data a failed write-back
  // gave up (ForgetGivenUp).
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  // File handles (open_by_handle_at, NFS export) of nodes the kernel forgot: it asks for them
  // as LOOKUP(node id, "."), and for a directory's parent as LOOKUP(node id, "..").
  if ((conn->capable & FUSE_CAP_EXPORT_SUPPORT) != 0) conn->want |= FUSE_CAP_EXPORT_SUPPORT;
  auto& fs = *static_cast<Filesystem*>(userdata);
  // The kernel keeps the smaller of this and the mount's read_ahead_kb, which the daemon raises
  // before it serves this request (daemon.cc).
  if (fs.max_readahead() > conn->max_readahead)
    conn->max_readahead = static_cast<unsigned>(fs.max_readahead());
  // POSIX ACLs. The daemon keeps them (sealed attributes), gives new entries their inherited
  // ones and makes the mode follow them, as ext4 does in posix_acl_create, posix_acl_chmod and
  // posix_acl_update_mode; the umask must reach it unapplied (FUSE_DONT_MASK), since it applies
  // only where no default ACL is inherited. Without FUSE_CAP_POSIX_ACL the kernel passes ACL
  // attributes through and checks no permission against them; with it the kernel checks
  // permissions against them itself (it turns default_permissions on) and caches them, and then
  // fetches a directory's attributes again after each change in it: a GETATTR per file created,
  // one request in nine for `cp -a`. So the kernel takes them only where it checks
  // permissions at all (MountOptions::kernel_acls).
  if (fs.wants_acls() && (conn->capable & FUSE_CAP_DONT_MASK) != 0) {
    conn->want |= FUSE_CAP_DONT_MASK;
    if (fs.wants_kernel_acls() && (conn->capable & FUSE_CAP_POSIX_ACL) != 0)
      conn->want |= FUSE_CAP_POSIX_ACL;
    fs.set_acls(true);
  }
}

void Destroy(void* userdata) { static_cast<Filesystem*>(userdata)->FlushAll(); }

void Lookup(Req& r, fuse_ino_t parent, const char* name) {
  Filesystem& fs = r.server();
  // "." and ".." never name entries (no directory lists them): the kernel sends them only to
  // resolve file handles, and then "." comes with a node id it may not hold.
  if (std::strcmp(name, ".") == 0) return ReplyEntry(r, fs.DoLookupHandle(parent));
  const std::shared_ptr<Inode> dir = NodeOr(r, parent);
  if (dir == nullptr) return;
  if (std::strcmp(name, "..") == 0) return ReplyEntry(r, fs.DoLookupParent(*dir));
  fs.CountLookup();
  Result<Entry> found = fs.DoLookup(*dir, name);
  if (!found.ok() && ErrnoFor(found.status()) == ENOENT && !fs.shared()) {
    // A name that is not there is cached as such for as long as one that is (node id 0): names
    // change only through this kernel, which drops the negative entry when it makes the name.
    // Probes of missing names (a compiler's include path, $PATH, imports, build tools) then cost
    // one request per second instead of one each. (A create with O_EXCL, as `cp` and `tar`
    // make, and mkdir still ask: the kernel revalidates the entry for them.) In shared mode
    // other hosts make names, so a missing one is asked for again each time.
    fuse_entry_param none{};
    none.entry_timeout = kTimeout;
    std::move(r).Entry(none);
    return;
  }
  ReplyEntry(r, std::move(found));
}

void Getattr(Req& r, fuse_ino_t ino, fuse_file_info*) {
  r.server().CountGetattr();
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  ReplyAttr(r, r.server().DoGetattr(*inode));
}

void Setattr(Req& r, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  if ((to_set & FUSE_SET_ATTR_SIZE) != 0) ClearSetIdIfAsked(r, ino, *inode);
  ReplyAttr(r, r.server().DoSetattr(*inode, *attr, to_set));
}

void Readlink(Req& r, fuse_ino_t ino) {
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  auto target = r.server().DoReadlink(*inode);
  if (!target.ok()) return ReplyError(r, target.status());
  std::move(r).Readlink(target->c_str());
}

void Mknod(Req& r, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  const std::shared_ptr<Inode> dir = NodeOr(r, parent);
  if (dir == nullptr) return;
  ReplyEntry(r, r.server().DoMknod(*dir, name, mode, rdev, CallerOf(r)));
}

void Mkdir(Req& r, fuse_ino_t parent, const char* name, mode_t mode) {
  const std::shared_ptr<Inode> dir = NodeOr(r, parent);
  if (dir == nullptr) return;
  ReplyEntry(r, r.server().DoMkdir(*dir, name, mode, CallerOf(r)));
}

void Symlink(Req& r, const char* target, fuse_ino_t parent, const char* name) {
  const std::shared_ptr<Inode> dir = NodeOr(r, parent);
  if (dir == nullptr) return;
  ReplyEntry(r, r.server().DoSymlink(*dir, name, target, CallerOf(r)));
}

void Link(Req& r, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  const std::shared_ptr<Inode> dir = NodeOr(r, new_parent);
  if (dir == nullptr) return;
  ReplyEntry(r, r.server().DoLink(*inode, *dir, new_name));
}

void Unlink(Req& r, fuse_ino_t parent, const char* name) {
  const std::shared_ptr<Inode> dir = NodeOr(r, parent);
  if (dir == nullptr) return;
  ReplyStatus(r, r.server().DoUnlink(*dir, name));
}

void Rmdir(Req& r, fuse_ino_t parent, const char* name) {
  const std::shared_ptr<Inode> dir = NodeOr(r, parent);
  if (dir == nullptr) return;
  ReplyStatus(r, r.server().DoRmdir(*dir, name));
}

void Rename(Req& r, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
            const char* new_name, unsigned int flags) {
  const std::shared_ptr<Inode> from = NodeOr(r, parent);
  if (from == nullptr) return;
  const std::shared_ptr<Inode> to = NodeOr(r, new_parent);
  if (to == nullptr) return;
  ReplyStatus(r, r.server().DoRename(*from, name, *to, new_name, flags));
}

void Open(Req& r, fuse_ino_t ino, fuse_file_info* fi) {
  Filesystem& fs = r.server();
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  Status s = fs.DoOpen(*inode, fi->flags);
  if (!s.ok()) return ReplyError(r, s);
  if ((fi->flags & O_TRUNC) != 0) ClearSetIdIfAsked(r, ino, *inode);
  // All changes reach the kernel's page cache through this mount, so it stays valid; unless
  // other mounts change the vault too: then an open starts from what the vault holds.
  fi->keep_cache = fs.shared() ? 0 : 1;
  if (!std::move(r).Open(fi)) (void)fs.DoRelease(*inode, Writer(fi));
}

void Create(Req& r, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  Filesystem& fs = r.server();
  const std::shared_ptr<Inode> dir = NodeOr(r, parent);
  if (dir == nullptr) return;
  auto made = fs.DoCreate(*dir, name, mode, fi->flags, CallerOf(r));
  if (!made.ok()) return ReplyError(r, made.status());
  if ((fi->flags & O_TRUNC) != 0 && RequestClearsSetId()) {
    // An existing file, opened with O_TRUNC.
    auto changed = fs.ClearSetId(*made->inode, CallerWithGroups(r));
    if (changed.ok() && changed->has_value())
      made->attr.st_mode = (made->attr.st_mode & S_IFMT) | **changed;
  }
  const fuse_entry_param e = EntryParam(fs, *made);
  fi->keep_cache = fs.shared() ? 0 : 1;
  if (!std::move(r).Create(e, fi)) {
    (void)fs.DoRelease(*made->inode, Writer(fi));
    fs.Forget(e.ino, 1);
  }
}

void Read(Req& r, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info*) {
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  // Decrypted straight into the reply's place where the transport has one (a ring entry's
  // buffer): a 1 MiB read over io_uring then costs no extra copy (cold reads ran a third slower
  // than over /dev/fuse with it).
  thread_local std::vector<uint8_t> buffer;
  uint8_t* out = r.ReplySpace(size, buffer);
  auto n = r.server().DoRead(*inode, static_cast<uint64_t>(offset), MutableByteSpan(out, size));
  if (!n.ok()) return ReplyError(r, n.status());
  std::move(r).Buf(out, *n);
}

void WriteBuf(Req& r, fuse_ino_t ino, fuse_bufvec* bufv, off_t offset, fuse_file_info* fi) {
  const size_t length = fuse_buf_size(bufv);
  std::vector<iovec> iov;
  std::vector<char> copy;
  bool in_memory = true;
  for (size_t i = bufv->idx; i < bufv->count; ++i)
    in_memory = in_memory && (bufv->buf[i].flags & FUSE_BUF_IS_FD) == 0;
  if (in_memory) {
    for (size_t i = bufv->idx; i < bufv->count; ++i) {
      const fuse_buf& b = bufv->buf[i];
      const size_t skip = i == bufv->idx ? bufv->off : 0;
      iov.push_back({static_cast<char*>(b.mem) + skip, b.size - skip});
    }
  } else {
    // Data still in a pipe: copy it out once (splice reads are turned off, so this is rare).
    copy.resize(length);
    fuse_bufvec dst = FUSE_BUFVEC_INIT(length);
    dst.buf[0].mem = copy.data();
    const ssize_t got = fuse_buf_copy(&dst, bufv, static_cast<fuse_buf_copy_flags>(0));
    if (got < 0) {
      std::move(r).Err(static_cast<int>(-got));
      return;
    }
    iov.push_back({copy.data(), static_cast<size_t>(got)});
  }
  core::IovecSource source(iov);
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  auto n = r.server().DoWrite(*inode, static_cast<uint64_t>(offset), source, length,
                              (fi->flags & O_APPEND) != 0);
  if (!n.ok()) return ReplyError(r, n.status());
  ClearSetIdIfAsked(r, ino, *inode);
  // A direct write went past the kernel's page cache, which it makes drop the range's pages
  // when the write starts, and, for a synchronous write only, when it ends. For an asynchronous
  // one (Linux AIO, io_uring) pages a buffered read brought in meanwhile, from the file as it
  // was, would stay cached (keep_cache: an open does not drop them either). So the daemon has
  // the kernel drop them before it replies, when the data is stored and the writer not yet
  // told. A direct write's sender holds no page lock of the file (a page-cache write does, until
  // the reply: those are never invalidated here), so this waits at most for reads in flight,
  // which other threads serve.
  fuse_session* se = g_session.load();
  if (se != nullptr && *n > 0 && RequestIsDirectWrite(fi))
    fuse_lowlevel_notify_inval_inode(se, ino, offset, static_cast<off_t>(*n));
  std::move(r).Write(*n);
}

// The daemon gave up what a full disk (or a failing one) would not store: the file is shorter
// than the kernel thinks, or holds older bytes. Only the daemon knows, and without
// auto_inval_data the kernel asks for the size again only when a read goes past the size it
// has, so it is told: its pages and attributes of the file go, and so do its entries for the
// file's names, so that the next open looks the file up and takes the size from the answer.
// (Reading within a size it still takes for true, the kernel would fill what the daemon no
// longer has with zeros.)
void ForgetGivenUp(Filesystem& fs, fuse_ino_t ino, Inode& inode) {
  fuse_session* se = g_session.load();
  if (se == nullptr) return;
  fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
  for (const Filesystem::KernelName& n : fs.NamesOf(inode))
    fuse_lowlevel_notify_inval_entry(se, n.parent, n.name.data(), n.name.size());
}

void Flush(Req& r, fuse_ino_t ino, fuse_file_info*) {
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  bool gave_up = false;
  const Status s = r.server().DoFlush(*inode, &gave_up);
  // Before the reply: close returns only once the kernel has let go, so that the closer, and
  // whoever it tells, reads what is stored. The closing process holds no page or directory
  // lock of the file here.
  if (gave_up) ForgetGivenUp(r.server(), ino, *inode);
  ReplyStatus(r, s);
}

void Fallocate(Req& r, fuse_ino_t ino, int mode, off_t offset, off_t length, fuse_file_info*) {
  if (offset < 0 || length <= 0) return (void)std::move(r).Err(EINVAL);
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  const Status s = r.server().DoFallocate(*inode, mode, static_cast<uint64_t>(offset),
                                          static_cast<uint64_t>(length));
  if (!s.ok()) return ReplyError(r, s);
  // fallocate changes the file as a write does, and clears set-ID bits as one (ext4 does, in
  // file_modified). Under FUSE_HANDLE_KILLPRIV_V2 the kernel leaves that to the daemon without
  // flagging the request, so whether the caller holds CAP_FSETID is looked up here, and only
  // for a file that has such bits.
  Caller caller = CallerWithGroups(r);
  caller.fsetid = [who = r.caller()] { return HasFsetid(who); };
  ClearSetId(r.server(), ino, *inode, caller);
  std::move(r).Err(0);
}

// Only SEEK_DATA and SEEK_HOLE reach the filesystem; the kernel answers the others itself. It
// passes negative offsets on: ENXIO, as ext4 and tmpfs answer (no data or hole there).
void Lseek(Req& r, fuse_ino_t ino, off_t offset, int whence, fuse_file_info*) {
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return (void)std::move(r).Err(EINVAL);
  if (offset < 0) return (void)std::move(r).Err(ENXIO);
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  auto at = r.server().DoSeekData(*inode, static_cast<uint64_t>(offset), whence == SEEK_DATA);
  if (!at.ok()) return ReplyError(r, at.status());
  std::move(r).Lseek(static_cast<off_t>(*at));
}

void Fsync(Req& r, fuse_ino_t ino, int datasync, fuse_file_info*) {
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  ReplyStatus(r, r.server().DoFsync(*inode, datasync != 0));
}

void Release(Req& r, fuse_ino_t ino, fuse_file_info* fi) {
  Filesystem& fs = r.server();
  // Held until after the notification: once replied to, the kernel may forget the node, and
  // its id (the node's address) must not be reused by another before the notification names it.
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  const Status s = fs.DoRelease(*inode, Writer(fi));
  ReplyStatus(r, s);
  // The last write-back failed (a full disk; a writer saw it at its close) and the pages it
  // could not store went with the file's contents. After the reply, so the kernel is not
  // waiting on this request while it invalidates.
  if (!s.ok()) ForgetGivenUp(fs, ino, *inode);
}

// The fs-verity ioctls (Linux 6.10 and later forward them with their payload), and the inode
// flags word so that lsattr shows sealed files. Others are not supported.
void EnableVerity(Req& r, Inode& inode, const void* in_buf, size_t in_bufsz) {
  fsverity_enable_arg arg{};
  if (in_bufsz < sizeof arg) return (void)std::move(r).Err(EINVAL);
  std::memcpy(&arg, in_buf, sizeof arg);
  // salt_ptr and sig_ptr are the caller's addresses: the salt itself follows the struct.
  if (arg.version != 1 || arg.__reserved1 != 0) return (void)std::move(r).Err(EINVAL);
  for (uint64_t reserved : arg.__reserved2)
    if (reserved != 0) return (void)std::move(r).Err(EINVAL);
  // As the kernel: an algorithm or block size it does not know is EINVAL; SHA-512 and the other
  // power-of-two block sizes it knows, which sigilfs does not seal with, are EOPNOTSUPP.
  const bool power_of_two = arg.block_size != 0 && (arg.block_size & (arg.block_size - 1)) == 0;
  if ((arg.hash_algorithm != FS_VERITY_HASH_ALG_SHA256 &&
       arg.hash_algorithm != FS_VERITY_HASH_ALG_SHA512) ||
      !power_of_two || arg.block_size < 1024 || arg.block_size > 65536)
    return (void)std::move(r).Err(EINVAL);
  if (arg.hash_algorithm != FS_VERITY_HASH_ALG_SHA256 || arg.block_size != core::kPageSize)
    return (void)std::move(r).Err(EOPNOTSUPP);
  if (arg.salt_size > core::verity::kMaxSaltSize) return (void)std::move(r).Err(EMSGSIZE);
  if (arg.sig_size != 0) return (void)std::move(r).Err(EOPNOTSUPP);  // no built-in signatures
  if (in_bufsz < sizeof arg + arg.salt_size) return (void)std::move(r).Err(EINVAL);
  const ByteSpan salt(static_cast<const uint8_t*>(in_buf) + sizeof arg, arg.salt_size);
  auto digest = r.server().DoEnableVerity(inode, salt);
  if (!digest.ok()) return ReplyError(r, digest.status());
  std::move(r).Ioctl(0, nullptr, 0);
}

void MeasureVerity(Req& r, Inode& inode, const void* in_buf, size_t in_bufsz, size_t out_bufsz) {
  fsverity_digest head{};
  if (in_bufsz < sizeof head) return (void)std::move(r).Err(EINVAL);
  std::memcpy(&head, in_buf, sizeof head);
  auto descriptor = r.server().DoVerityDescriptor(inode);
  if (!descriptor.ok()) return ReplyError(r, descriptor.status());
  // digest_size comes in as the room the caller has.
  if (head.digest_size < core::verity::kDigestSize ||
      out_bufsz < sizeof head + core::verity::kDigestSize)
    return (void)std::move(r).Err(EOVERFLOW);
  std::array<uint8_t, sizeof(fsverity_digest) + core::verity::kDigestSize> out{};
  head.digest_algorithm = FS_VERITY_HASH_ALG_SHA256;
  head.digest_size = core::verity::kDigestSize;
  std::memcpy(out.data(), &head, sizeof head);
  const auto digest = core::verity::FileDigest(*descriptor);
  std::memcpy(out.data() + sizeof head, digest.data(), digest.size());
  std::move(r).Ioctl(0, out.data(), out.size());
}

void Ioctl(Req& r, fuse_ino_t ino, unsigned int cmd, void*, fuse_file_info*, unsigned flags,
           const void* in_buf, size_t in_bufsz, size_t out_bufsz) {
  if ((flags & FUSE_IOCTL_COMPAT) != 0) return (void)std::move(r).Err(ENOSYS);
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  switch (cmd) {
    case FS_IOC_ENABLE_VERITY:
      return EnableVerity(r, *inode, in_buf, in_bufsz);
    case FS_IOC_MEASURE_VERITY:
      return MeasureVerity(r, *inode, in_buf, in_bufsz, out_bufsz);
    case static_cast<unsigned int>(FS_IOC_GETFLAGS): {
      // The kernel asks for an int (4 bytes), whatever the ioctl number says.
      if (out_bufsz < sizeof(int)) return (void)std::move(r).Err(EINVAL);
      const int value =
          (flags & FUSE_IOCTL_DIR) == 0 && r.server().DoIsSealed(*inode) ? FS_VERITY_FL : 0;
      std::move(r).Ioctl(0, &value, sizeof value);
      return;
    }
    default:
      std::move(r).Err(ENOTTY);
  }
}

void Setxattr(Req& r, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags) {
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  // Setting an access ACL drops set-group-ID unless the caller is in the file's group.
  const Caller caller = acl::kAccessName == name ? CallerWithGroups(r) : CallerOf(r);
  ReplyStatus(
      r, r.server().DoSetxattr(
             *inode, name, ByteSpan(reinterpret_cast<const uint8_t*>(value), size), flags, caller));
}

void Getxattr(Req& r, fuse_ino_t ino, const char* name, size_t size) {
  r.server().CountGetxattr();
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  auto value = r.server().DoGetxattr(*inode, name);
  if (!value.ok()) return ReplyError(r, value.status());
  ReplySized(r, value->data(), value->size(), size);
}

void Listxattr(Req& r, fuse_ino_t ino, size_t size) {
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  auto names = r.server().DoListxattr(*inode);
  if (!names.ok()) return ReplyError(r, names.status());
  ReplySized(r, names->data(), names->size(), size);
}

void Removexattr(Req& r, fuse_ino_t ino, const char* name) {
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  ReplyStatus(r, r.server().DoRemovexattr(*inode, name));
}

Filesystem::DirHandle* HandleOf(fuse_file_info* fi) {
  return reinterpret_cast<Filesystem::DirHandle*>(fi->fh);  // NOLINT(performance-no-int-to-ptr)
}

void Opendir(Req& r, fuse_ino_t ino, fuse_file_info* fi) {
  Filesystem& fs = r.server();
  const std::shared_ptr<Inode> inode = NodeOr(r, ino);
  if (inode == nullptr) return;
  auto h = fs.DoOpendir(*inode);
  if (!h.ok()) return ReplyError(r, h.status());
  fi->fh = reinterpret_cast<uint64_t>(*h);
  if (!std::move(r).Open(fi)) fs.DoReleasedir(*h);
}

// Readdir and readdirplus: one listing, entries added by `add` (which returns the bytes it
// needed, more than what was left when the reply is full). False if no listing reached the
// kernel (an error reply, or a reply the kernel no longer waited for).
template <typename Add>
bool ReplyListing(Req& r, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info* fi, Add add) {
  std::vector<char> buf(size);
  size_t used = 0;
  Filesystem::DirHandle* h = HandleOf(fi);
  Status s = r.server().volume().List(
      *h->listing, h->iv, static_cast<uint64_t>(offset),
      [&](const core::DirEntry& e) {
        const size_t n = add(e, buf.data() + used, size - used);
        if (n > size - used) return false;  // full: the kernel asks again from this entry
        used += n;
        return true;
      },
      [&r, ino](const std::string& stored, const Status& why) {
        if (const std::shared_ptr<Inode> dir = r.server().Get(ino))
          r.server().NoteSkippedName(*dir, stored, why);
      });
  if (!s.ok() && used == 0) {
    ReplyError(r, s);
    return false;
  }
  return std::move(r).Buf(buf.data(), used);
}

void Readdir(Req& r, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info* fi) {
  ReplyListing(r, ino, size, offset, fi, [&r](const core::DirEntry& e, char* at, size_t left) {
    struct stat st {};
    st.st_ino = e.ino;
    st.st_mode = static_cast<mode_t>(e.type) << 12;
    return r.AddDirentry(at, left, e.name.c_str(), &st, e.next_offset);
  });
}

// Entries with their attributes, so `ls -l`, tar, rsync and rm -r need no lookup per name. Each
// entry handed over is a lookup reference the kernel will forget; one that does not fit is
// given back at once. "." and "..", and entries that vanished meanwhile, go without (node id 0
// tells the kernel to look them up itself).
void Readdirplus(Req& r, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info* fi) {
  Filesystem& fs = r.server();
  const std::shared_ptr<Inode> dir = NodeOr(r, ino);
  if (dir == nullptr) return;
  core::BackingDir& listing = *HandleOf(fi)->listing;
  std::vector<fuse_ino_t> handed;  // lookup references in the reply
  const bool sent =
      ReplyListing(r, ino, size, offset, fi, [&](const core::DirEntry& e, char* at, size_t left) {
        fuse_entry_param p{};
        p.attr.st_ino = e.ino;
        p.attr.st_mode = static_cast<mode_t>(e.type) << 12;
        if (e.stored != "." && e.stored != "..") {
          auto entry = fs.DoLookupStored(*dir, listing, e.stored);
          if (entry.ok()) p = EntryParam(fs, *entry);
        }
        const size_t n = r.AddDirentryPlus(at, left, e.name.c_str(), &p, e.next_offset);
        if (p.ino != 0) {
          if (n > left)
            fs.Forget(p.ino, 1);
          else
            handed.push_back(p.ino);
        }
        return n;
      });
  // The kernel never saw them: give the references back, as ReplyEntry does.
  if (!sent)
    for (fuse_ino_t id : handed) fs.Forget(id, 1);
}

void Releasedir(Req& r, fuse_ino_t, fuse_file_info* fi) {
  r.server().DoReleasedir(HandleOf(fi));
  std::move(r).Err(0);
}

// A directory's data is its entries: fsync and fdatasync make the same of it durable.
void Fsyncdir(Req& r, fuse_ino_t, int /*datasync*/, fuse_file_info* fi) {
  ReplyStatus(r, HandleOf(fi)->listing->Sync());
}

void Statfs(Req& r, fuse_ino_t) {
  auto st = r.server().DoStatfs();
  if (!st.ok()) return ReplyError(r, st.status());
  std::move(r).Statfs(*st);
}

fuse_lowlevel_ops MakeOperations(bool xattrs) {
  return OperationsOf<Filesystem>([xattrs](fuse_lowlevel_ops& ops) {
    ops.init = Init;
    ops.destroy = Destroy;
    ops.lookup = Serve<Lookup>::Call;
    ops.getattr = Serve<Getattr>::Call;
    ops.setattr = Serve<Setattr>::Call;
    ops.readlink = Serve<Readlink>::Call;
    ops.mknod = Serve<Mknod>::Call;
    ops.mkdir = Serve<Mkdir>::Call;
    ops.symlink = Serve<Symlink>::Call;
    ops.link = Serve<Link>::Call;
    ops.unlink = Serve<Unlink>::Call;
    ops.rmdir = Serve<Rmdir>::Call;
    ops.rename = Serve<Rename>::Call;
    ops.open = Serve<Open>::Call;
    ops.create = Serve<Create>::Call;
    ops.read = Serve<Read>::Call;
    ops.write_buf = Serve<WriteBuf>::Call;
    ops.flush = Serve<Flush>::Call;
    ops.fsync = Serve<Fsync>::Call;
    ops.fallocate = Serve<Fallocate>::Call;
    ops.lseek = Serve<Lseek>::Call;
    ops.release = Serve<Release>::Call;
    ops.opendir = Serve<Opendir>::Call;
    ops.readdir = Serve<Readdir>::Call;
    ops.readdirplus = Serve<Readdirplus>::Call;
    ops.releasedir = Serve<Releasedir>::Call;
    ops.fsyncdir = Serve<Fsyncdir>::Call;
    ops.statfs = Serve<Statfs>::Call;
    ops.ioctl = Serve<Ioctl>::Call;
    if (xattrs) {
      ops.setxattr = Serve<Setxattr>::Call;
      ops.getxattr = Serve<Getxattr>::Call;
      ops.listxattr = Serve<Listxattr>::Call;
      ops.removexattr = Serve<Removexattr>::Call;
    }
  });
}

}  // namespace

void SetSession(fuse_session* se) { g_session.store(se); }

const fuse_lowlevel_ops& Operations(bool xattrs) {
  static const fuse_lowlevel_ops kWith = MakeOperations(true);
  static const fuse_lowlevel_ops kWithout = MakeOperations(false);
  return xattrs ? kWith : kWithout;
}

}  // namespace sigilfs::fuse
