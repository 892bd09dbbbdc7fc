#!/usr/bin/env bash
# Builds sluice and runs the whole test suite twice: a release build, then an
# ASan+UBSan build. Installs what it needs first (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
# -O1 without debug info: sanitizer builds compile several times slower than release ones.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O1 -DSLUICE_SANITIZE=ON
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"
# Every parser's fuzz target for a short budget under ASan+UBSan (scripts/fuzz.sh;
# ~10 s each, two at a time); prints the targets and executions.
./scripts/fuzz.sh --seconds 10
