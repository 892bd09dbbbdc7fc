// base/read_file.h — reads a whole small file from a model directory, safely.
//
// Model files come from anywhere (a hub, a careless copy). Only a regular file
// is read: a FIFO, device or directory in its place is refused at once (opened
// non-blocking, so a FIFO with no writer cannot hang the open), and a file
// larger than max_bytes is refused before anything is allocated.
#pragma once
#include <cstdint>
#include <string>

namespace sluice {

// The whole file, or sluice::Error "path: problem" (missing, not a regular
// file, larger than max_bytes, I/O error).
std::string read_regular_file(const std::string& path, uint64_t max_bytes);

// Opens `path` read-only for pread; refuses anything but a regular file the
// same way. The caller closes the descriptor.
int open_regular_file(const std::string& path, int extra_flags = 0);

}  // namespace sluice
