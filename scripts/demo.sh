#!/usr/bin/env bash
# The README's first command: installs dependencies, builds sluice, and runs it
# on the bundled default model, nanoK3 (models/nanok3: Kimi K3's architecture and
# checkpoint layout at 33M parameters, trained here). The RAM budget (16 MiB)
# is below the model's 36 MB, so the spine and the experts stream from disk.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
prompt=${1:-"And the king said unto"}
echo "== sluice run on models/nanok3, streamed under a 16 MiB RAM budget:"
echo
./build/sluice run --model models/nanok3 --ram-budget 16M --prompt "$prompt" --max-new 60 \
  --temperature 0.8 --top-p 0.95 --seed 1 --stats
echo
