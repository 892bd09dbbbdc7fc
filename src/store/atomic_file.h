// store/atomic_file.h — files that appear whole or not at all.
//
// Written to "<path>.tmp-<pid>" in the same directory, fsync'ed, then renamed
// over <path>. A full disk or any write error removes the temp file and throws
// naming the path; the old file (if any) is left untouched.
#pragma once
#include <cstddef>
#include <string>

namespace sluice {

void write_file_atomic(const std::string& path, const void* data, size_t size);

}  // namespace sluice
