#include "hub/http_hub.h"

#include <set>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_parse.h"
#include "hub/http_client.h"
#include "hub/setup_manifest.h"
#include "hub/sha256.h"

namespace sluice {

namespace {

bool repo_part_ok(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 96) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace

void check_repo_id(const std::string& repo) {
  size_t slash = repo.find('/');
  if (slash == std::string::npos || !repo_part_ok(repo.substr(0, slash)) || !repo_part_ok(repo.substr(slash + 1)))
    fail("--repo", "'" + repo + "' is not ORG/NAME (letters, digits, '.', '_', '-')");
}

bool is_safe_relative_path(const std::string& name) {
  if (name.empty() || name.size() > 1024 || name.front() == '/') return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string::npos) slash = name.size();
    std::string part = name.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f || c == '\\') return false;
  return true;
}

bool is_reserved_name(const std::string& name) {
  const std::string first = name.substr(0, name.find('/'));
  return first == kSetupManifestName || first == kStreamManifestName || first == kPartialDirName ||
         first == kSpanCacheDirName || first.rfind(".sluice", 0) == 0;
}

std::string hub_api_url(const HubRepo& r) {
  return r.hub + "/api/models/" + r.repo + "/revision/" + url_escape(r.revision, false) + "?blobs=true";
}

std::string hub_file_url(const HubRepo& r, const std::string& revision, const std::string& file) {
  return r.hub + "/" + r.repo + "/resolve/" + url_escape(revision, false) + "/" + url_escape(file, true);
}

HubRevision parse_hub_revision(std::string_view json, const std::string& where) {
  const nlohmann::json doc = parse_json(json, where, 8);
  if (!doc.is_object()) fail(where, "the file list is not a JSON object");
  std::set<std::string> names;
  HubRevision rev;
  if (auto sha = doc.find("sha"); sha != doc.end() && sha->is_string()) {
    rev.commit = sha->get<std::string>();
    if (!is_hex_digest(rev.commit, HashKind::sha1)) fail(where, "'sha' is not a 40-digit commit id");
  }
  auto sib = doc.find("siblings");
  if (sib == doc.end() || !sib->is_array()) fail(where, "no 'siblings' array (was ?blobs=true honoured?)");
  for (const auto& s : *sib) {
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string())
      fail(where, "a sibling without 'rfilename'");
    HubFile f;
    f.name = s["rfilename"].get<std::string>();
    if (!is_safe_relative_path(f.name)) fail(where, "unsafe file name '" + f.name + "'");
    if (is_reserved_name(f.name))
      fail(where, "file name '" + f.name + "' collides with sluice's own bookkeeping files");
    const auto* lfs = s.contains("lfs") && s["lfs"].is_object() ? &s["lfs"] : nullptr;
    if (s.contains("size") && s["size"].is_number_unsigned()) f.size = s["size"].get<uint64_t>();
    else if (lfs && lfs->contains("size") && (*lfs)["size"].is_number_unsigned()) f.size = (*lfs)["size"].get<uint64_t>();
    else fail(where, "'" + f.name + "' has no size (was ?blobs=true honoured?)");
    if (lfs) {
      if (!lfs->contains("sha256") || !(*lfs)["sha256"].is_string())
        fail(where, "'" + f.name + "' is in LFS but has no lfs.sha256");
      f.sha256 = (*lfs)["sha256"].get<std::string>();
      if (!is_hex_digest(f.sha256, HashKind::sha256)) fail(where, "'" + f.name + "' has a malformed lfs.sha256");
      if (lfs->contains("size") && (*lfs)["size"].is_number_unsigned() && (*lfs)["size"].get<uint64_t>() != f.size)
        fail(where, "'" + f.name + "' has size and lfs.size that disagree");
    } else if (s.contains("blobId") && s["blobId"].is_string()) {
      f.git_blob = s["blobId"].get<std::string>();
      if (!is_hex_digest(f.git_blob, HashKind::sha1)) fail(where, "'" + f.name + "' has a malformed blobId");
    }
    if (!names.insert(f.name).second) fail(where, "'" + f.name + "' is listed twice");
    rev.files.push_back(std::move(f));
  }
  if (rev.files.empty()) fail(where, "the repository has no files");
  return rev;
}

}  // namespace sluice
