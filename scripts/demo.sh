#!/usr/bin/env bash
# The README's first command: installs dependencies, builds sluice, and runs it
# on the bundled default model, nanoK3 (models/nanok3: Kimi K3's architecture and
# checkpoint layout at 33M parameters, trained here). The RAM budget (64 MiB)
# bounds the whole process (about 18 MiB of it is the process itself); the
# model is 36 MB, so most of the spine and the experts stream from disk.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
prompt=${1:-"And the king said unto"}
echo "== sluice run on models/nanok3, streamed under a 64 MiB RAM budget for the whole process:"
echo
./build/sluice run --model models/nanok3 --ram-budget 64M --prompt "$prompt" --max-new 60 \
  --temperature 0.8 --top-p 0.95 --seed 1 --stats
echo
