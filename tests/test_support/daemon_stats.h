// Test helper: the mount daemon's stats file (--stats-file), asked for with SIGUSR1 and read.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "test_support/process.h"

namespace sigilfs::test {

// Counter `name` of the stats JSON, or -1 (no such counter, or no stats).
inline long long StatsCounter(const std::string& json, const std::string& name) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return -1;
  const auto it = j.find(name);
  return it != j.end() && it->is_number_integer() ? it->get<long long>() : -1;
}

// Makes the daemon `pid` write its stats file `path` now and returns it ("" if it did not
// within 5 s). Written whole by a rename, so it is never read half done.
inline std::string RequestStats(pid_t pid, const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (::kill(pid, SIGUSR1) != 0) return "";
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > end) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ReadAll(path);
}

// Asks for the stats until counter `name` equals `want` (the kernel's FORGETs, say, arrive when
// they arrive), at most 5 s; returns the last stats read.
inline std::string WaitForStat(pid_t pid, const std::string& path, const std::string& name,
                               long long want) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::string json = RequestStats(pid, path);
  while (StatsCounter(json, name) != want && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    json = RequestStats(pid, path);
  }
  return json;
}

}  // namespace sigilfs::test
