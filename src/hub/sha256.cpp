#include "hub/sha256.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <openssl/evp.h>

#include "base/error.h"
#include "base/file_io.h"

namespace sluice {

namespace {

const EVP_MD* md_of(HashKind k) { return k == HashKind::sha256 ? EVP_sha256() : EVP_sha1(); }

}  // namespace

Hasher::Hasher(HashKind kind) : kind_(kind) {
  EVP_MD_CTX* c = EVP_MD_CTX_new();
  if (!c || EVP_DigestInit_ex(c, md_of(kind_), nullptr) != 1) {
    EVP_MD_CTX_free(c);
    throw Error("OpenSSL: cannot initialise a digest");
  }
  ctx_ = c;
}

Hasher::~Hasher() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Hasher::update(const void* data, size_t n) {
  if (n && EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n) != 1) throw Error("OpenSSL: digest update failed");
}

void Hasher::reset() {
  if (EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), md_of(kind_), nullptr) != 1)
    throw Error("OpenSSL: cannot initialise a digest");
}

std::string Hasher::finish_hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len) != 1) throw Error("OpenSSL: digest final failed");
  static const char* hex = "0123456789abcdef";
  std::string s(size_t(len) * 2, '0');
  for (unsigned i = 0; i < len; i++) {
    s[2 * i] = hex[md[i] >> 4];
    s[2 * i + 1] = hex[md[i] & 15];
  }
  reset();
  return s;
}

std::string sha256_hex(const void* data, size_t n) {
  Hasher h;
  h.update(data, n);
  return h.finish_hex();
}

void hash_file_range(int fd, const std::string& path, uint64_t offset, uint64_t length, Hasher& h) {
  read_range(fd, offset, length, path, [&](const uint8_t* p, size_t n) { h.update(p, n); });
}

std::string sha256_file(const std::string& path, uint64_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(path, std::string("cannot stat: ") + std::strerror(err));
  }
  uint64_t n = limit == ~uint64_t(0) ? uint64_t(st.st_size) : limit;
  Hasher h;
  try {
    hash_file_range(fd, path, 0, n, h);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return h.finish_hex();
}

bool is_hex_digest(const std::string& s, HashKind kind) {
  if (s.size() != (kind == HashKind::sha256 ? 64u : 40u)) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace sluice
