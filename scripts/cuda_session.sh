#!/usr/bin/env bash
# scripts/cuda_session.sh — one full GPU session in one command (GPU time is
# scarce): the GPU tests, the GPU-vs-CPU exactness checks, the kernel bench,
# the CUDA entry's host memory, and `bench --device cuda|cpu` on a k3-slice.
# Run from the repository root on a machine with a GPU, binaries built with
# -DSLUICE_CUDA=ON in BUILD:
#
#   scripts/cuda_session.sh BUILD OUT [quick]
#
# Logs go to OUT (one file per step); the last lines printed are a summary.
# `quick`: only the GPU tests and the kernel bench.
set -uo pipefail
B=${1:?usage: cuda_session.sh BUILD OUT [quick]} OUT=${2:?} MODE=${3:-full}
mkdir -p "$OUT"
summary=()
step() {  # step NAME CMD...: runs CMD, log in OUT/NAME.log, one summary line
  local name=$1; shift
  local t0=$SECONDS
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-12s rc=%d %4ds  %s' "$name" "$rc" $((SECONDS - t0)) "$(tail -1 "$OUT/$name.log" | cut -c1-150)")")
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv >"$OUT/gpu.txt" 2>&1

step cuda_tests "$B/sluice_cuda_tests"
step bench_cuda "$B/bench_cuda"
if [[ $MODE == quick ]]; then printf '%s\n' "${summary[@]}"; exit 0; fi

# The CUDA entry in the main test binary, and the whole-process budget test.
step entry_tests "$B/sluice_tests" --gtest_filter='*cuda*:*Cuda*:DeviceBackend.*:Cli.Device*:Cli.PeakRssStaysWithinTheBudget'

# Host memory of the CUDA entry: the plan's baseline and the peak RSS of the
# same run on cpu and on cuda (a small model, made here).
tmp=$(mktemp -d)
"$B/sluice" make-model --preset tiny --seed 7 --layers 6 --experts 64 --hidden 256 --moe-inter 256 --latent 128 \
  --dense-inter 1024 --vocab 4352 --out "$tmp/m" >/dev/null 2>&1
rss() {
  python3 - "$@" <<'EOF'
import re, resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
base = re.search(r"process baseline ([0-9.]+ [KMG]i?B)", p.stderr)
print(f"rc {p.returncode} peak RSS {peak:.1f} MiB, plan baseline {base.group(1) if base else '?'}: {' '.join(sys.argv[2:4])} {sys.argv[-1]}")
EOF
}
for dev in cpu cuda; do
  rss "$B/sluice" run -m "$tmp/m" --tokens 5,6,7,8,9,10,11,12 -n 16 --ids --device $dev >>"$OUT/rss.log" 2>&1
done
summary+=("$(printf '%-12s %s' rss "$(tr '\n' ';' <"$OUT/rss.log")")")

# End to end on a k3-slice (2 layers x 16 experts, 8.2 GB, made here): the
# exactness check against the CPU, then bench on the GPU and on the CPU.
"$B/sluice" make-model --preset k3-slice --layers 2 --experts 16 --out "$tmp/slice" >/dev/null 2>&1
step slice_check scripts/cuda_check.sh "$B/sluice" tests/fixtures/k3-tiny models/nanok3 "$tmp/slice"
for dev in cuda cpu; do
  step bench_$dev "$B/sluice" bench -m "$tmp/slice" -p 16 -n 6 --probe-seconds 2 --json --device $dev
done
rm -rf "$tmp"
printf '%s\n' "${summary[@]}"
