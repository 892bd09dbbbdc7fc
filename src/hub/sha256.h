// hub/sha256.h — incremental SHA-256 (and the git blob SHA-1) through OpenSSL's EVP API.
//
// Setup hashes every byte as it arrives and compares the hex digest with the
// hub's LFS oid (sha256) or, for small non-LFS files, with the git blob id
// (sha1 of "blob <size>\0" + content). The span cache records a SHA-256 per
// span. Digests are lower-case hex strings everywhere.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace sluice {

enum class HashKind { sha256, sha1 };

class Hasher {
 public:
  explicit Hasher(HashKind kind = HashKind::sha256);
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  void update(const void* data, size_t n);
  // The hex digest of everything fed so far; the hasher restarts empty afterwards.
  std::string finish_hex();
  void reset();

 private:
  HashKind kind_;
  void* ctx_ = nullptr;  // EVP_MD_CTX
};

std::string sha256_hex(const void* data, size_t n);

// SHA-256 of bytes [0, limit) of the file at `path` (the whole file when limit is ~0).
// Throws naming the file if it cannot be read or is shorter than limit.
std::string sha256_file(const std::string& path, uint64_t limit = ~uint64_t(0));

// Feeds bytes [offset, offset + length) of the open file `fd` (named `path` in errors) to `h`.
void hash_file_range(int fd, const std::string& path, uint64_t offset, uint64_t length, Hasher& h);

// True for 40 (sha1) or 64 (sha256) lower-case hex digits, as expected.
bool is_hex_digest(const std::string& s, HashKind kind);

}  // namespace sluice
