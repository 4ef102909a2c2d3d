// A progress line for long commands (import, export, fsck, verity enable and verify, home setup):
// bytes and files done, the rate and, when the total is known, the time left. Drawn on standard
// error, only when it is a terminal; nothing otherwise, or with --quiet.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/progress.h"
#include "sigilfs/core/volume.h"

namespace sigilfs::cli {

class ProgressLine {
 public:
  // `what` starts the line ("import"); totals of 0 are unknown.
  ProgressLine(std::string what, uint64_t total_bytes, uint64_t total_files, bool quiet);
  ~ProgressLine();  // clears a line still drawn (an error message may follow)
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool shown() const { return shown_; }
  // Whether a line would be drawn: standard error is a terminal and not `quiet` (totals are
  // worth walking for only then).
  static bool WouldShow(bool quiet);
  void AddBytes(uint64_t bytes);
  void AddFile();
  // A callback for the library's ByteProgress.
  core::ByteProgress Bytes() {
    return [this](uint64_t bytes) { AddBytes(bytes); };
  }
  // Clears the line (it is drawn again at the next update), for a message to take its place.
  void Clear();
  // Leaves the final line ("import: 1.2 GiB, 345 files in 0:12 (98.2 MiB/s)").
  void Done();

  // "1.5 GiB", "12.0 MiB", "512 B".
  static std::string Size(uint64_t bytes);

 private:
  using Clock = std::chrono::steady_clock;
  void Draw(bool last);

  const std::string what_;
  const uint64_t total_bytes_, total_files_;
  const bool shown_;
  const Clock::time_point start_;
  std::mutex mu_;
  Clock::time_point drawn_;
  uint64_t bytes_ = 0, files_ = 0;
  bool done_ = false;
  bool visible_ = false;  // a line is drawn and not ended or cleared
};

// What a walk of store directory `dir` finds below it, for a progress line's totals: the
// non-directory entries and, through `size_of`, the regular files' sizes. Entries `skip` names
// (the vault's own) and what cannot be read are left out.
struct Totals {
  uint64_t bytes = 0, files = 0;
};
Totals MeasureStore(core::BackingDir& dir,
                    const std::function<uint64_t(core::BackingDir&, const std::string&,
                                                 const struct stat&)>& size_of,
                    const std::function<bool(const std::string&)>& skip = {});

// The same for a vault directory of `volume` (its store `dir`): plaintext sizes from the
// cipher sizes, the vault's own entries left out, no name decrypted.
Totals MeasureVault(core::Volume& volume, core::BackingDir& dir);

}  // namespace sigilfs::cli
