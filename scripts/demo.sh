#!/usr/bin/env bash
# The README's first command: installs dependencies, builds sluice, and runs it
# on the bundled default model.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
model=tests/fixtures/k3-tiny/model
echo "== greedy continuation of a 10-token prompt on $model (token ids):"
./build/sluice run --model "$model" --tokens 448,259,309,412,370,399,335,283,72,307 --max-new 16 --ids
