// The mount's figures as one JSON object: what `sigilfs stats` shows and the stats file holds.
#pragma once

#include <chrono>
#include <string>

namespace sigilfs::fuse {

class Filesystem;

// The figures of the mount on `mountpoint` that `fs` serves, served since `started`: who serves
// it and for how long, its transport and why, requests by kind and by transport, the page
// cache, write-backs failing, names left out of listings, the daemon's memory, the page
// layer's and the node table's counters (docs/design/mount.md, "Stats"). Never waits on a
// request: nothing here takes a lock a request holds for long.
std::string MountStats(Filesystem& fs, const std::string& mountpoint,
                       std::chrono::steady_clock::time_point started);

// Writes `json` to `path` whole (a temporary file, then a rename), so a reader never sees half
// of it; a failure is logged.
void WriteStatsFile(const std::string& json, const std::string& path);

}  // namespace sigilfs::fuse
