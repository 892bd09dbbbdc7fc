// base/error.h — the one error type the library throws.
//
// The library never prints and never exits: it throws sluice::Error with a
// one-line message that names the file (or request) and the problem. The CLI
// catches it, prints "sluice: <message>" on stderr and exits non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace sluice {

struct Error : std::runtime_error {
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// "path: what" — the common shape of a message about a file.
[[noreturn]] inline void fail(const std::string& where, const std::string& what) {
  throw Error(where.empty() ? what : where + ": " + what);
}

}  // namespace sluice
