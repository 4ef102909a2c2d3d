// The progress line of long commands: redrawn in place at most five times a second.
#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "sigilfs/core/names.h"

namespace sigilfs::cli {
namespace {

constexpr auto kRedraw = std::chrono::milliseconds(200);

// "0:07", "1:02:03".
std::string Duration(double seconds) {
  const auto s = static_cast<uint64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

ProgressLine::ProgressLine(std::string what, uint64_t total_bytes, uint64_t total_files, bool quiet)
    : what_(std::move(what)),
      total_bytes_(total_bytes),
      total_files_(total_files),
      shown_(WouldShow(quiet)),
      start_(Clock::now()),
      drawn_(start_ - kRedraw) {}  // the first update draws at once

ProgressLine::~ProgressLine() {
  if (visible_) std::fputs("\r\033[K", stderr);
}

bool ProgressLine::WouldShow(bool quiet) { return !quiet && ::isatty(STDERR_FILENO) == 1; }

std::string ProgressLine::Size(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t u = 0;
  for (; v >= 1024 && u + 1 < std::size(units); ++u) v /= 1024;
  return fmt::format("{:.1f} {}", v, units[u]);
}

void ProgressLine::AddBytes(uint64_t bytes) {
  if (!shown_) return;
  std::lock_guard lock(mu_);
  bytes_ += bytes;
  if (Clock::now() - drawn_ >= kRedraw) Draw(false);
}

void ProgressLine::AddFile() {
  if (!shown_) return;
  std::lock_guard lock(mu_);
  ++files_;
  if (Clock::now() - drawn_ >= kRedraw) Draw(false);
}

void ProgressLine::Clear() {
  if (!shown_) return;
  std::lock_guard lock(mu_);
  if (visible_) std::fputs("\r\033[K", stderr);
  visible_ = false;
}

void ProgressLine::Done() {
  if (!shown_ || done_) return;
  std::lock_guard lock(mu_);
  Draw(true);
  done_ = true;
}

void ProgressLine::Draw(bool last) {
  const auto now = Clock::now();
  drawn_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = seconds > 0 ? static_cast<double>(bytes_) / seconds : 0;
  std::string line = what_ + ": " + Size(bytes_);
  if (!last && total_bytes_ > 0)
    line += fmt::format(" of {} ({}%)", Size(total_bytes_),
                        std::min<uint64_t>(100, bytes_ * 100 / total_bytes_));
  if (files_ > 0 || total_files_ > 0) {
    line += fmt::format(", {}", files_);
    if (!last && total_files_ > 0) line += fmt::format(" of {}", total_files_);
    line += files_ == 1 && (last || total_files_ == 0) ? " file" : " files";
  }
  if (last) {
    line += fmt::format(" in {} ({}/s)", Duration(seconds), Size(static_cast<uint64_t>(rate)));
  } else {
    line += fmt::format(", {}/s", Size(static_cast<uint64_t>(rate)));
    if (total_bytes_ > bytes_ && rate > 0 && seconds >= 1)
      line += ", " + Duration(static_cast<double>(total_bytes_ - bytes_) / rate) + " left";
  }
  std::fprintf(stderr, "\r%s\033[K%s", line.c_str(), last ? "\n" : "");
  visible_ = !last;
  std::fflush(stderr);
}

Totals MeasureStore(core::BackingDir& dir,
                    const std::function<uint64_t(core::BackingDir&, const std::string&,
                                                 const struct stat&)>& size_of,
                    const std::function<bool(const std::string&)>& skip) {
  Totals totals;
  std::vector<std::string> subdirs;
  (void)dir.List(0, [&](const core::BackingEntry& e) {
    if (skip && skip(e.name)) return true;
    if (e.type == S_IFDIR) {
      subdirs.push_back(e.name);
      return true;
    }
    ++totals.files;
    if (e.type == S_IFREG || e.type == 0) {
      if (auto st = dir.Stat(e.name); st.ok() && S_ISREG(st->st_mode))
        totals.bytes += size_of(dir, e.name, *st);
    }
    return true;
  });
  for (const std::string& name : subdirs) {
    auto sub = dir.OpenDir(name);
    if (!sub.ok()) continue;
    const Totals inner = MeasureStore(**sub, size_of, skip);
    totals.bytes += inner.bytes;
    totals.files += inner.files;
  }
  return totals;
}

Totals MeasureVault(core::Volume& volume, core::BackingDir& dir) {
  return MeasureStore(
      dir,
      [&volume](core::BackingDir& d, const std::string& stored, const struct stat& st) {
        auto size = volume.PlainSize(d, stored, st);
        return size.ok() ? *size : 0;
      },
      [](const std::string& stored) { return core::NameCodec::IsReserved(stored); });
}

}  // namespace sigilfs::cli
