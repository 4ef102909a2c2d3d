// `sigilfs stats MOUNTPOINT`: what a mount is doing, asked of that mount's daemon alone.
#include <fmt/core.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "mounts.h"

namespace sigilfs::cli {
namespace {

// How long a daemon has to answer: it answers from a thread of its own, at once.
constexpr std::chrono::seconds kAnswerTime{5};

// `text` fit for a terminal: a control character (an escape sequence, say, from a daemon not to
// be trusted) is shown as '?'.
std::string Printable(std::string text) {
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return text;
}

// Field `key` of the answer as printable text; empty where missing.
std::string Text(const nlohmann::ordered_json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? Printable(it->get<std::string>()) : "";
}

// Field `key` of the answer as a flag; false where missing.
bool Flag(const nlohmann::ordered_json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// Field `key` of `j` as a count; 0 where missing or not one.
uint64_t Count(const nlohmann::ordered_json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

// "45 s", "3 min 20 s", "2 h 5 min", "3 d 4 h".
std::string Duration(uint64_t s) {
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {} s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{} h {} min", s / 3600, s % 3600 / 60);
  return fmt::format("{} d {} h", s / 86400, s % 86400 / 3600);
}

std::string Mib(uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

// The answer for a reader (docs/design/mount.md, "Stats", says what each figure counts).
void PrintStats(const core::MountInfoEntry& m, const nlohmann::ordered_json& j) {
  fmt::print("mount point:   {}\n", m.mount_point);
  fmt::print("vault:         {} ({})\n", Text(j, "vault"),
             Flag(j, "shared") ? "shared" : "exclusive");
  fmt::print("daemon:        process {}, up {}\n", Count(j, "pid"),
             Duration(Count(j, "uptime_seconds")));
  fmt::print("memory:        {} resident (at most {}), {} locked\n",
             Mib(Count(j, "memory_resident_bytes")), Mib(Count(j, "memory_peak_bytes")),
             Mib(Count(j, "memory_locked_bytes")));
  const std::string transport = Text(j, "transport");
  fmt::print("transport:     {} ({})", transport, Text(j, "transport_why"));
  if (transport == "uring")
    fmt::print(", {} of {}", Counted(Count(j, "uring_queues"), "queue", "queues"),
               Counted(Count(j, "uring_queue_depth"), "entry", "entries"));
  fmt::print("\n");
  fmt::print("requests:      {:>10} {:>10}\n", "/dev/fuse", "io_uring");
  fmt::print("  {:<12} {:>10} {:>10}\n", "all", Count(j, "requests_dev"),
             Count(j, "requests_uring"));
  if (const auto kinds = j.find("requests"); kinds != j.end() && kinds->is_object())
    for (const auto& [kind, by] : kinds->items())
      fmt::print("  {:<12} {:>10} {:>10}\n", Printable(kind), Count(by, "dev"), Count(by, "uring"));
  fmt::print("pages:         {} cached, {} dirty; {} decrypted, {} encrypted\n",
             Count(j, "pages_cached"), Count(j, "pages_dirty"), Count(j, "pages_decrypted"),
             Count(j, "pages_encrypted"));
  if (const uint64_t failing = Count(j, "writeback_failing_files"); failing == 0)
    fmt::print("write-back:    no errors outstanding\n");
  else
    fmt::print(
        "write-back:    failing for {}: changes not stored yet (a full disk?); each such file "
        "reports it at its next fsync or close\n",
        Counted(failing, "file", "files"));
  if (const uint64_t skipped = Count(j, "names_skipped"); skipped == 0)
    fmt::print("names skipped: 0\n");
  else
    fmt::print(
        "names skipped: {} (names that do not decrypt, left out of listings; the daemon's log "
        "names each)\n",
        skipped);
  fmt::print("nodes:         {} ({} remembered for file handles)\n", Count(j, "nodes"),
             Count(j, "nodes_remembered"));
}

int RunStats(const std::string& mountpoint, bool json) {
  const auto say = [](const std::string& line) {
    std::fprintf(stderr, "sigilfs: %s\n", line.c_str());
    return 1;
  };
  const auto mount = MountOn(mountpoint);
  if (!mount || (mount->type != "fuse.sigilfs" && mount->type != "fuse.sigilfs-reverse"))
    return say(mountpoint + " is not a sigilfs mount");
  if (mount->type == "fuse.sigilfs-reverse")
    return say(mountpoint + " is an encrypted view (sigilfs reverse), which keeps no stats");
  const DaemonAnswer answer = AskDaemon(*mount, kAnswerTime);
  if (answer.state != DaemonAnswer::State::kAnswered) return say(answer.why);
  // In the daemon's order.
  const nlohmann::ordered_json stats = nlohmann::ordered_json::parse(answer.stats, nullptr, false);
  if (json) {
    // Dumped again, not passed on: escapes whatever a string holds.
    fmt::print("{}\n", stats.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  } else {
    PrintStats(*mount, stats);
  }
  return 0;
}

}  // namespace

void RegisterStatsCommand(CLI::App& app, Action& action) {
  auto mountpoint = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("stats", "Show what a mount is doing, as its daemon tells");
  cmd->add_option("MOUNTPOINT", *mountpoint, "The mount point")->required();
  cmd->add_flag("--json", *json,
                "Print the daemon's figures as one JSON object (also what --stats-file writes)");
  cmd->footer(
      "Asks the mount's daemon alone, through its mount record (only the mount's user and root\n"
      "may): its transport and why, requests by kind and by transport, cached and dirty pages,\n"
      "write-backs failing, names left out of listings, memory and uptime. A daemon that has\n"
      "ended is named with the command that clears its mount (sigilfs unmount).");
  cmd->callback([&action, mountpoint, json] {
    action = [mountpoint, json] { return RunStats(*mountpoint, *json); };
  });
}

}  // namespace sigilfs::cli
