#!/usr/bin/env bash
# Tokenizer encode throughput: sluice vs js-tiktoken and gpt-tokenizer (npm), on
# the same seeded text (10 MB by default), one core each. Prints a markdown table.
#   bench/tokenizer_bench.sh [build dir] [MB]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$root/build}")
mb=${2:-10}
work=$build/bench-tokenizer
mkdir -p "$work"
cp "$root"/bench/tokenizer/package.json "$root"/bench/tokenizer/package-lock.json \
   "$root"/bench/tokenizer/bench.mjs "$root"/tests/npm/tokenizer/corpus.mjs \
   "$root"/tests/npm/tokenizer/export.mjs "$work"/
cd "$work"
npm install --no-audit --no-fund --loglevel=error
pin=()
command -v taskset >/dev/null && pin=(taskset -c 1)
"${pin[@]}" node bench.mjs "$build/sluice" "$mb"
