// The mount record: how `sigilfs unmount` finds the daemon serving a mount and waits for it to
// end, and how `sigilfs stats` asks that daemon alone, kept where no other user can block,
// plant, replace or answer it (docs/design/mount.md, "The mount record").
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "sigilfs/core/unique_fd.h"
#include "sigilfs/core/vault_lock.h"
#include "sigilfs/status.h"

namespace sigilfs::fuse {

// A file per mount, named for the mount's device ("major:minor"), in a directory of the mount's
// user: /run/sigilfs/mounts for root; /run/user/UID/sigilfs for another user, or
// $XDG_RUNTIME_DIR/sigilfs where there is no /run/user/UID. The directory is made 0700, and it
// and the one it is in are refused if another user owns them, group or others may write them, or
// they are symbolic links. The daemon holds an exclusive flock(2) lock on its record from before
// the mount command returns until its process ends; the lock, not the file, says that it runs,
// so a record left by a crash counts for nothing, and a reused process id cannot pass for the
// daemon. The file holds the daemon's process id and start time, for messages.
//
// Beside it, "major:minor.sock": a Unix socket on which the daemon answers `sigilfs stats`. Only
// the user (and root) may reach it, in that directory; the daemon answers only them, and the
// asker believes only a socket of the mount's user, served by a process of that user.
//
// A later mount given the same device number (they are reused, lowest first, while a lazily
// unmounted mount's daemon may still be writing back) replaces the record by rename: the older
// daemon keeps its lock on a file no name leads to, and at its end leaves the newer record be.
class MountRecord {
 public:
  MountRecord() = default;  // records nothing
  MountRecord(MountRecord&&) noexcept = default;
  MountRecord& operator=(MountRecord&&) noexcept = default;
  MountRecord(const MountRecord&) = delete;
  MountRecord& operator=(const MountRecord&) = delete;
  // Removes the record's name if it is still this record. The lock is left to the end of the
  // process: whatever the daemon does on its way out comes before `sigilfs unmount` returns.
  ~MountRecord();

  // Records this process as the daemon of the mount of `device`, for this process's user, in
  // place of any earlier record of that device. Where the user has no runtime directory (or
  // `device` is empty: the mount was not found), an error if `required`, else a MountRecord
  // that records nothing; a directory not to be trusted or a failed write is an error either way.
  static Result<MountRecord> Publish(const std::string& device, bool required);

  // Names this process in the record: the daemon after fuse_daemonize's fork, which keeps the
  // lock (it goes with the open file, which the fork shares).
  Status NameThisProcess() const;

  bool recorded() const { return fd_.get() >= 0; }

  // The listening socket beside the record (-1 where it records nothing): readable while a
  // question waits. Never blocks.
  int socket() const { return socket_.get(); }
  // Answers each question waiting on the socket with `answer()` (a few at a time: the daemon
  // calls it again when the socket is readable again). A question from another user than this
  // process's and root is closed unanswered; a slow reader gets what fits, never a wait.
  void AnswerWaiting(const std::function<std::string()>& answer) const;

 private:
  // Binds and listens on `name` in the directory, made 0600.
  Status Listen(const std::string& name);

  core::UniqueFd dir_;
  core::UniqueFd fd_;
  std::string name_;
  core::UniqueFd socket_;
  dev_t socket_dev_ = 0;  // the socket's file, removed at the end only if its name still is it
  ino_t socket_ino_ = 0;
};

// A mount's daemon, as its record shows it to `sigilfs unmount` and `sigilfs stats`.
class RecordedDaemon {
 public:
  // The record of the mount of `device` for user `uid`, if a daemon holds it now; else an error
  // that says what was found instead (no record, one no daemon holds, a directory or file not
  // to be trusted). Never waits.
  static Result<RecordedDaemon> Find(const std::string& device, uid_t uid);

  // True once the daemon has ended: nothing holds the record's lock. Never waits.
  bool Ended() const;

  // The process the record names, if it still runs.
  std::optional<core::VaultLock::Process> Process() const;

  // The daemon's answer (its stats: a JSON object), asked on the socket beside the record and
  // waited for at most `timeout`. Refused (an error, saying why): no socket (a daemon of a
  // sigilfs before `sigilfs stats`), one that is not a socket of the record's user, a server
  // that is not of that user, nothing listening, no whole answer in time, an answer past 1 MiB.
  Result<std::string> Ask(std::chrono::milliseconds timeout) const;

 private:
  // "its daemon (process N)", or "its daemon" where the record names none that runs.
  std::string Who() const;

  core::UniqueFd dir_;
  std::string dir_path_;
  std::string device_;
  uid_t uid_ = 0;
  core::UniqueFd fd_;
};

}  // namespace sigilfs::fuse
