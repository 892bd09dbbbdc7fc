#include "io/depth_profile.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "base/cache_file.h"
#include "base/error.h"
#include "base/stats.h"

namespace sluice {

std::string depth_profile_path() { return cache_file_path("SLUICE_DEPTH_PROFILE", "io-depth.json"); }

std::string device_of(const std::string& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return {};
  return std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
}

int choose_depth(const DepthRounds& rounds, double tolerance) {
  const auto def = rounds.find(kUnprofiledQueueDepth);
  const bool has_default = def != rounds.end() && !def->second.empty();
  const double default_best = has_default ? *std::max_element(def->second.begin(), def->second.end()) : 0;
  std::map<int, double> candidates;  // depth -> median GB/s
  for (const auto& [qd, g] : rounds) {
    if (qd <= 0 || g.empty()) continue;
    const bool beats_default = *std::min_element(g.begin(), g.end()) > default_best;
    if (!has_default || qd == kUnprofiledQueueDepth || beats_default) candidates[qd] = median(g);
  }
  double best = 0;
  for (const auto& [qd, m] : candidates) best = std::max(best, m);
  for (const auto& [qd, m] : candidates)  // ascending depth
    if (m >= best * (1 - tolerance)) return qd;
  return 0;
}

int save_depth_profile(const std::string& path, const std::string& device, const DepthRounds& rounds) {
  if (path.empty()) fail("probe", "no place to save the depth profile (set SLUICE_DEPTH_PROFILE or HOME)");
  if (device.empty()) fail(path, "no device to save a depth for");
  const int qd = choose_depth(rounds);
  if (qd <= 0) fail(path, "no measured depth to save");
  nlohmann::json j = read_cache_json(path);
  if (!j["devices"].is_object()) j["devices"] = nlohmann::json::object();
  nlohmann::json by = nlohmann::json::object(), all = nlohmann::json::object();
  for (const auto& [d, g] : rounds) {
    by[std::to_string(d)] = median(g);
    all[std::to_string(d)] = g;
  }
  j["devices"][device] = {{"queue_depth", qd}, {"gbps", median(rounds.at(qd))}, {"by_depth", by}, {"rounds", all}};
  write_cache_json(path, j);
  return qd;
}

namespace {
// The saved entry of the device holding `file`, or null.
nlohmann::json saved_entry(const std::string& file, const std::string& path) {
  if (path.empty()) return nullptr;
  const std::string dev = device_of(file);
  if (dev.empty()) return nullptr;
  const nlohmann::json j = read_cache_json(path);
  const auto devs = j.find("devices");
  if (devs == j.end() || !devs->is_object()) return nullptr;
  const auto d = devs->find(dev);
  if (d == devs->end() || !d->is_object()) return nullptr;
  return *d;
}
}  // namespace

int saved_queue_depth(const std::string& file, const std::string& path) {
  const nlohmann::json d = saved_entry(file, path);
  if (!d.is_object()) return 0;
  const auto q = d.find("queue_depth");
  if (q == d.end() || !q->is_number_integer()) return 0;
  const int qd = q->get<int>();
  return qd >= 1 && qd <= 1024 ? qd : 0;
}

double saved_gbps(const std::string& file, const std::string& path) {
  const nlohmann::json d = saved_entry(file, path);
  if (!d.is_object()) return 0;
  const auto g = d.find("gbps");
  return g != d.end() && g->is_number() && g->get<double>() > 0 ? g->get<double>() : 0;
}

}  // namespace sluice
