#include "hub/setup_manifest.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/json_parse.h"

namespace sluice {

namespace {

using nlohmann::json;

bool read_json_file(const std::string& path, json* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  if (json_too_deep(ss.str(), 16)) fail(path, "not a valid JSON object (nested too deeply)");
  *out = json::parse(ss.str(), nullptr, false);
  if (out->is_discarded() || !out->is_object()) fail(path, "not a valid JSON object");
  return true;
}

void write_json_file(const std::string& path, const json& j) {
  std::string text = j.dump(1) + "\n";
  write_file_atomic(path, text);
}

template <typename T>
T get_or(const json& j, const char* key, T dflt, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    fail(path, std::string("field '") + key + "' has the wrong type");
  }
}

}  // namespace

bool read_setup_manifest(const std::string& dir, SetupManifest* out) {
  const std::string path = dir + "/" + kSetupManifestName;
  json j;
  if (!read_json_file(path, &j)) return false;
  SetupManifest m;
  m.hub = get_or<std::string>(j, "hub", "", path);
  m.repo = get_or<std::string>(j, "repo", "", path);
  m.revision = get_or<std::string>(j, "revision", "", path);
  m.commit = get_or<std::string>(j, "commit", "", path);
  m.mode = get_or<std::string>(j, "mode", "", path);
  auto planned = j.find("planned");
  if (planned != j.end()) {
    if (!planned->is_object()) fail(path, "'planned' is not an object");
    for (auto it = planned->begin(); it != planned->end(); ++it) {
      if (!it->is_object()) fail(path, "planned entry '" + it.key() + "' is not an object");
      PlannedFile f;
      f.size = get_or<uint64_t>(*it, "size", 0, path);
      f.sha256 = get_or<std::string>(*it, "sha256", "", path);
      f.git_blob = get_or<std::string>(*it, "git_blob", "", path);
      f.spine_only = get_or<bool>(*it, "spine_only", false, path);
      m.planned[it.key()] = f;
    }
  }
  auto files = j.find("files");
  if (files != j.end()) {
    if (!files->is_object()) fail(path, "'files' is not an object");
    for (auto it = files->begin(); it != files->end(); ++it) {
      if (!it->is_object()) fail(path, "entry '" + it.key() + "' is not an object");
      ManifestFile f;
      f.size = get_or<uint64_t>(*it, "size", 0, path);
      f.sha256 = get_or<std::string>(*it, "sha256", "", path);
      f.git_blob = get_or<std::string>(*it, "git_blob", "", path);
      f.checked = get_or<std::string>(*it, "checked", "", path);
      f.spine_only = get_or<bool>(*it, "spine_only", false, path);
      f.spine_sha256 = get_or<std::string>(*it, "spine_sha256", "", path);
      f.spine_bytes = get_or<uint64_t>(*it, "spine_bytes", 0, path);
      m.files[it.key()] = f;
    }
  }
  *out = std::move(m);
  return true;
}

void write_setup_manifest(const std::string& dir, const SetupManifest& m) {
  json files = json::object();
  for (const auto& [name, f] : m.files) {
    json e = {{"size", f.size}, {"sha256", f.sha256}, {"checked", f.checked}};
    if (!f.git_blob.empty()) e["git_blob"] = f.git_blob;
    if (f.spine_only) {
      e["spine_only"] = true;
      e["spine_sha256"] = f.spine_sha256;
      e["spine_bytes"] = f.spine_bytes;
    }
    files[name] = e;
  }
  json planned = json::object();
  for (const auto& [name, f] : m.planned) {
    json e = {{"size", f.size}};
    if (!f.sha256.empty()) e["sha256"] = f.sha256;
    if (!f.git_blob.empty()) e["git_blob"] = f.git_blob;
    if (f.spine_only) e["spine_only"] = true;
    planned[name] = e;
  }
  json j = {{"format", 1},     {"hub", m.hub},         {"repo", m.repo},   {"revision", m.revision},
            {"commit", m.commit}, {"mode", m.mode}, {"planned", planned}, {"files", files}};
  write_json_file(dir + "/" + kSetupManifestName, j);
}

bool stream_manifest_exists(const std::string& dir) {
  struct stat st;
  return ::stat((dir + "/" + kStreamManifestName).c_str(), &st) == 0;
}

const StreamShard* find_stream_shard(const StreamManifest& m, const std::string& name) {
  for (const StreamShard& s : m.shards)
    if (s.name == name) return &s;
  return nullptr;
}

StreamManifest read_stream_manifest(const std::string& dir) {
  const std::string path = dir + "/" + kStreamManifestName;
  json j;
  if (!read_json_file(path, &j)) fail(path, "cannot open");
  StreamManifest m;
  m.hub = get_or<std::string>(j, "hub", "", path);
  m.repo = get_or<std::string>(j, "repo", "", path);
  m.revision = get_or<std::string>(j, "revision", "", path);
  m.commit = get_or<std::string>(j, "commit", "", path);
  m.max_cache_bytes = get_or<uint64_t>(j, "max_cache_bytes", 0, path);
  m.connections = get_or<int>(j, "connections", 8, path);
  m.stall_timeout_s = get_or<int>(j, "stall_timeout_s", 30, path);
  m.retries = get_or<int>(j, "retries", 6, path);
  m.backoff_ms = get_or<int>(j, "backoff_ms", 250, path);
  if (m.connections < 1 || m.connections > 256) fail(path, "'connections' must be 1..256");
  if (m.stall_timeout_s < 1 || m.retries < 0 || m.backoff_ms < 0) fail(path, "bad timeout/retry settings");
  auto shards = j.find("shards");
  if (shards == j.end() || !shards->is_array() || shards->empty()) fail(path, "no 'shards' list");
  for (const auto& s : *shards) {
    if (!s.is_object()) fail(path, "a shard entry is not an object");
    StreamShard sh;
    sh.name = get_or<std::string>(s, "name", "", path);
    sh.url = get_or<std::string>(s, "url", "", path);
    sh.size = get_or<uint64_t>(s, "size", 0, path);
    sh.sha256 = get_or<std::string>(s, "sha256", "", path);
    sh.local = get_or<bool>(s, "local", false, path);
    if (sh.name.empty() || sh.url.empty()) fail(path, "a shard entry without 'name' or 'url'");
    m.shards.push_back(sh);
  }
  return m;
}

void write_stream_manifest(const std::string& dir, const StreamManifest& m) {
  json shards = json::array();
  for (const StreamShard& s : m.shards) {
    json e = {{"name", s.name}, {"url", s.url}, {"size", s.size}, {"sha256", s.sha256}};
    if (s.local) e["local"] = true;
    shards.push_back(e);
  }
  json j = {{"format", 1},
            {"hub", m.hub},
            {"repo", m.repo},
            {"revision", m.revision},
            {"commit", m.commit},
            {"max_cache_bytes", m.max_cache_bytes},
            {"connections", m.connections},
            {"stall_timeout_s", m.stall_timeout_s},
            {"retries", m.retries},
            {"backoff_ms", m.backoff_ms},
            {"shards", shards}};
  write_json_file(dir + "/" + kStreamManifestName, j);
}

std::string stream_progress_json(uint64_t size, const std::string& header_sha256, size_t runs_done) {
  return json{{"size", size}, {"header_sha256", header_sha256}, {"runs_done", runs_done}}.dump();
}

size_t read_stream_progress(std::string_view text, uint64_t size, const std::string& header_sha256, size_t runs) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return 0;
  const auto sha = j.find("header_sha256"), sz = j.find("size"), done = j.find("runs_done");
  if (sha == j.end() || !sha->is_string() || *sha != header_sha256) return 0;
  if (sz == j.end() || !sz->is_number_unsigned() || sz->get<uint64_t>() != size) return 0;
  if (done == j.end() || !done->is_number_unsigned()) return 0;
  return size_t(std::min<uint64_t>(done->get<uint64_t>(), runs));
}

}  // namespace sluice
