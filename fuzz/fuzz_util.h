// fuzz/fuzz_util.h — shared by the fuzz targets (libFuzzer entry points).
//
// A target calls one parser on the input; sluice::Error (the parser's "this
// input is bad" answer) is expected and swallowed, anything else escapes and
// is a finding: an uncaught exception, a sanitizer report, a hang, a blow-up.
#pragma once
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace sluice::fuzz {

// A folder of this process's own for targets that read files by name (made once).
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/sluice-fuzz-XXXXXX";
    if (!mkdtemp(tmpl)) __builtin_trap();
    return std::string(tmpl);
  }();
  return dir;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Inputs with two parts (a tokenizer's two files): split at the first "\n=====\n".
inline std::pair<std::string_view, std::string_view> split2(std::string_view s) {
  const size_t at = s.find("\n=====\n");
  if (at == std::string_view::npos) return {s, {}};
  return {s.substr(0, at), s.substr(at + 7)};
}

// An in-memory regular file holding `bytes`, reachable by path (/proc/self/fd/N).
struct MemFile {
  int fd = -1;
  std::string path;
  explicit MemFile(std::string_view bytes) {
    fd = memfd_create("sluice-fuzz", MFD_CLOEXEC);
    if (fd < 0) __builtin_trap();
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) __builtin_trap();
      done += size_t(n);
    }
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  ~MemFile() { ::close(fd); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
};

}  // namespace sluice::fuzz
