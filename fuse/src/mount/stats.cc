// The mount's figures, gathered from the page layer, the node table, the transport and /proc.
#include "stats.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "../daemon/device_io.h"
#include "../daemon/log.h"
#include "filesystem.h"

namespace sigilfs::fuse {
namespace {

// This process's memory from /proc/self/status, in bytes: "VmRSS" (resident now), "VmHWM" (the
// most it was), "VmLck" (locked: where the keys are). 0 where the line is missing.
struct Memory {
  uint64_t resident = 0;
  uint64_t peak = 0;
  uint64_t locked = 0;
};
Memory OwnMemory() {
  Memory m;
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "VmRSS:") m.resident = kib * 1024;
    if (key == "VmHWM:") m.peak = kib * 1024;
    if (key == "VmLck:") m.locked = kib * 1024;
  }
  return m;
}

}  // namespace

std::string MountStats(Filesystem& fs, const std::string& mountpoint,
                       std::chrono::steady_clock::time_point started) {
  nlohmann::ordered_json j;
  j["mount_point"] = mountpoint;
  j["vault"] = fs.volume().vault().dir();
  j["pid"] = ::getpid();
  j["uptime_seconds"] =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started)
          .count();
  j["shared"] = fs.shared();

  const TransportStats transport = DeviceIoStats();
  j["transport"] = transport.transport;
  j["transport_asked"] = transport.asked;
  j["transport_why"] = transport.why;
  j["requests_dev"] = transport.dev_requests;
  j["requests_uring"] = transport.uring_requests;
  j["uring_queues"] = transport.queues;
  j["uring_queue_depth"] = transport.depth;
  nlohmann::ordered_json kinds = nlohmann::ordered_json::object();
  for (const TransportStats::Kind& kind : transport.kinds)
    kinds[kind.name] = {{"dev", kind.dev}, {"uring", kind.uring}};
  j["requests"] = std::move(kinds);

  const core::PageLayer& pages = fs.volume().pages();
  j["pages_cached"] = pages.cached_pages();
  j["pages_dirty"] = pages.dirty_pages();
  j["writeback_failing_files"] = pages.failing_files();
  j["names_skipped"] = fs.skipped_names();
  const Memory memory = OwnMemory();
  j["memory_resident_bytes"] = memory.resident;
  j["memory_peak_bytes"] = memory.peak;
  j["memory_locked_bytes"] = memory.locked;

  const core::PageStats counters = pages.counters().Snapshot();
  for (size_t i = 0; i < counters.size(); ++i)
    j[core::PageCounterName(static_cast<core::PageCounter>(i))] = counters[i];
  const NodeStats nodes = fs.node_stats();
  j["nodes"] = nodes.nodes;
  j["nodes_remembered"] = nodes.remembered;
  j["handle_lookups"] = nodes.handle_lookups;
  j["getattrs"] = nodes.getattrs;
  j["getxattrs"] = nodes.getxattrs;
  j["lookups"] = nodes.lookups;
  j["open_dirs"] = nodes.open_dirs;
  return j.dump(2) + "\n";
}

void WriteStatsFile(const std::string& json, const std::string& path) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "we");
  bool written = f != nullptr;
  if (written) {
    written = std::fwrite(json.data(), 1, json.size(), f) == json.size();
    written = std::fclose(f) == 0 && written;
  }
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0)
    Log("stats file %s: %s", path.c_str(), std::generic_category().message(errno).c_str());
}

}  // namespace sigilfs::fuse
