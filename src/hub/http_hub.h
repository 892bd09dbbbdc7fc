// hub/http_hub.h — the Hugging Face hub's HTTP layout, and any server laid out like it.
//
//   file list: GET {hub}/api/models/{org}/{name}/revision/{rev}?blobs=true
//              -> {"sha": commit, "siblings": [{"rfilename", "size", "blobId",
//                  "lfs": {"sha256", "size"}}]}
//   a file:    GET {hub}/{org}/{name}/resolve/{rev}/{file}   (may redirect to a CDN)
//
// Every name from the server is checked before it becomes a local path: a
// relative path of plain components (no "..", no absolute paths, no control
// characters), so a hostile file list cannot write outside the destination.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

struct HubFile {
  std::string name;     // rfilename: a checked relative path
  uint64_t size = 0;
  std::string sha256;   // LFS oid (lower-case hex), empty for files not in LFS
  std::string git_blob; // git blob id (sha1 hex) of the file, empty if unknown or the file is in LFS
};

struct HubRevision {
  std::string commit;            // the commit the revision resolved to ("" if the server did not say)
  std::vector<HubFile> files;    // in the server's order
};

struct HubRepo {
  std::string hub;       // e.g. "https://huggingface.co", no trailing slash
  std::string repo;      // "org/name"
  std::string revision;  // branch, tag or commit
};

// Checks "org/name" (letters, digits, '.', '_', '-'); throws naming the value otherwise.
void check_repo_id(const std::string& repo);
// True if `name` is a safe relative path (see above).
bool is_safe_relative_path(const std::string& name);
// A name whose first component is one of sluice's bookkeeping files or folders
// in a model directory (.sluice-*.json, .partial, .span-cache): a hub may not
// list it.
bool is_reserved_name(const std::string& name);

std::string hub_api_url(const HubRepo& r);
// The URL of `file` at `revision` (pass a commit to pin the bytes).
std::string hub_file_url(const HubRepo& r, const std::string& revision, const std::string& file);

// Parses the revision API's JSON; `where` names the source in errors.
HubRevision parse_hub_revision(std::string_view json, const std::string& where);

}  // namespace sluice
