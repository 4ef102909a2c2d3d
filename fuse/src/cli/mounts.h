// The mounts the mount table shows and the daemons serving them: what unmount waits for, what
// stats asks and what info names. Nothing here looks at a mount itself, whose daemon may not
// answer; a daemon is asked only through its mount record (docs/design/mount.md).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "sigilfs/core/mountinfo.h"
#include "sigilfs/fuse/mount_record.h"
#include "sigilfs/status.h"

namespace sigilfs::cli {

// The mount on `mountpoint` (the last one there, which is on top), if any.
std::optional<core::MountInfoEntry> MountOn(const std::string& mountpoint);

// The user a FUSE mount is for (its user_id option), or nullopt.
std::optional<uid_t> MountUser(const core::MountInfoEntry& m);

// The record of the daemon serving the mount on `mountpoint` (docs/design/mount.md, "The mount
// record"), found while it serves; else why there is none.
Result<fuse::RecordedDaemon> RecordOf(const std::string& mountpoint);

// What a sigilfs mount's daemon said when asked for its stats.
struct DaemonAnswer {
  enum class State {
    kAnswered,  // `stats` holds its figures
    kEnded,     // no daemon serves the mount: it is left dead, for `sigilfs unmount` to clear
    kNotAsked,  // it could not be asked or did not answer: `why` says why
  };
  State state = State::kNotAsked;
  std::string stats;  // the daemon's figures, as it sent them: a JSON object (checked)
  std::string why;    // after "sigilfs: POINT: ", or alone where it names the mount point itself
};

// Asks the daemon of sigilfs mount `m` for its stats, through its record, waiting at most
// `timeout`. Only the mount's user and root may ask; an answer is believed only from the
// record's socket, served by the mount's user, sent by the process the record names, and whole.
DaemonAnswer AskDaemon(const core::MountInfoEntry& m, std::chrono::milliseconds timeout);

// Lines naming each mount of the vault in `dir` and its mode ("/mnt/v (exclusive, process
// 1234)", "/mnt/w (shared, process 1240)"), for `sigilfs info`; none where it is not mounted.
std::vector<std::string> MountsOfVault(const std::string& dir);

}  // namespace sigilfs::cli
