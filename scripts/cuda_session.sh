#!/usr/bin/env bash
# scripts/cuda_session.sh — one full GPU session in one command (GPU time is
# scarce): the GPU tests, the GPU-vs-CPU exactness checks, a k3-slice larger
# than the RAM expert cache with its logits compared across the VRAM expert
# tier's settings, `bench` resident and streamed on the GPU and the CPU, and
# the kernel bench. Run from the repository root on a machine with a GPU,
# binaries built with -DSLUICE_CUDA=ON in BUILD:
#
#   scripts/cuda_session.sh BUILD OUT [quick]
#
# Logs go to OUT (one file per step); the last lines printed are a summary.
# `quick`: only the GPU tests and the kernel bench. The k3-slice (4 layers x
# 128 experts, 17.1 GB) is made under SCRATCH (default .scratch here: on the
# machine's disk, so its expert reads are O_DIRECT disk reads, not tmpfs).
# STREAM_BUDGET (default 11G) is the --ram-budget of the streamed case: the
# spine resident (8.0 GB), the RAM expert cache about half of the 6.7 GB of experts.
set -uo pipefail
B=${1:?usage: cuda_session.sh BUILD OUT [quick]} OUT=${2:?} MODE=${3:-full}
SCRATCH=${SCRATCH:-$PWD/.scratch} STREAM_BUDGET=${STREAM_BUDGET:-11G} RESIDENT_BUDGET=${RESIDENT_BUDGET:-16G}
SLICE_ARGS=${SLICE_ARGS:---preset k3-slice --layers 4 --experts 128}  # another model: a smoke test of this script
mkdir -p "$OUT" "$SCRATCH"
summary=()
step() {  # step NAME SECONDS CMD...: runs CMD (at most SECONDS), log in OUT/NAME.log, one summary line
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-16s rc=%d %4ds  %s' "$name" "$rc" $((SECONDS - t0)) "$(tail -1 "$OUT/$name.log" | cut -c1-160)")")
}
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv
  df -h "$SCRATCH"; free -g; nproc; uname -r; } >"$OUT/gpu.txt" 2>&1

step cuda_tests 90 "$B/sluice_cuda_tests"
if [[ $MODE == quick ]]; then
  step bench_cuda 120 "$B/bench_cuda" --quick
  printf '%s\n' "${summary[@]}"
  exit 0
fi
# The slice is made while the checks run (disk and cores to spare).
slice=$SCRATCH/slice
( t0=$SECONDS; "$B/sluice" make-model $SLICE_ARGS --out "$slice" >"$OUT/make_slice.log" 2>&1
  echo "rc=$? $((SECONDS - t0))s $(du -sh "$slice" | cut -f1)" >>"$OUT/make_slice.log" ) &
maker=$!
# The CUDA entry in the main test binary (the VRAM tier, pinned host memory,
# the expert source's hooks) and the whole-process budget test.
step entry_tests 150 "$B/sluice_tests" \
  --gtest_filter='*cuda*:*Cuda*:DeviceBackend.*:Cli.Device*:Cli.PeakRssStaysWithinTheBudget:ExpertSource.*'
step check 300 scripts/cuda_check.sh "$B/sluice" tests/fixtures/k3-tiny models/nanok3
wait $maker
summary+=("$(printf '%-16s %s' make_slice "$(tail -1 "$OUT/make_slice.log")")")

# Exactness on the slice: CPU vs GPU (relative 1e-3, same argmax); and the GPU
# with the VRAM tier on (default), capped (evicting) and off, the RAM cache
# holding part of the experts: every output bitwise the same.
toks=448,259,309,412,370,399,335,283
lg() { "$B/sluice" logits -m "$slice" --tokens $toks "$@" 2>>"$OUT/slice_logits.log"; }
slice_check() {
  lg --device cpu --out "$SCRATCH/l.cpu"
  lg --device cuda --out "$SCRATCH/l.cuda"
  lg --device cuda --ram-budget "$STREAM_BUDGET" --out "$SCRATCH/l.cuda.tier"
  lg --device cuda --ram-budget "$STREAM_BUDGET" --vram-experts 1G --out "$SCRATCH/l.cuda.1g"
  lg --device cuda --ram-budget "$STREAM_BUDGET" --vram-experts 0 --out "$SCRATCH/l.cuda.off"
  for v in tier 1g off; do cmp "$SCRATCH/l.cuda" "$SCRATCH/l.cuda.$v" && echo "slice logits cuda == cuda ($v): bitwise"; done
  python3 - "$SCRATCH/l.cpu" "$SCRATCH/l.cuda" "$(python3 -c "import json;c=json.load(open('$slice/config.json'));print(c.get('text_config',c)['vocab_size'])")" <<'EOF'
import sys, numpy as np
a = np.fromfile(sys.argv[1], '<f4'); b = np.fromfile(sys.argv[2], '<f4'); V = int(sys.argv[3])
a = a.reshape(-1, V); b = b.reshape(-1, V)
d = float(np.abs(a - b).max()) / float(np.abs(a).max())
same = int((a.argmax(1) == b.argmax(1)).sum())
print(f"slice cpu vs cuda: max |d| (relative) {d:.3g}, argmax equal {same}/{a.shape[0]}", "ok" if d <= 1e-3 and same == a.shape[0] else "FAIL")
EOF
}
export -f lg slice_check
export B slice toks OUT SCRATCH STREAM_BUDGET
timeout 200 bash -c slice_check >"$OUT/slice_check.log" 2>&1
summary+=("$(printf '%-16s %s' slice_check "$(tr '\n' ';' <"$OUT/slice_check.log" | cut -c1-300)")")

# bench, each run's peak RSS beside its JSON (python's RUSAGE_CHILDREN).
bench() {  # bench NAME ARGS...
  local name=$1; shift
  local t0=$SECONDS
  timeout 240 python3 - "$OUT/$name.json" "$B/sluice" bench -m "$slice" -p 16 -n 8 --probe-seconds 2 --json "$@" \
    >"$OUT/$name.log" 2>&1 <<'EOF'
import json, resource, subprocess, sys
p = subprocess.run(sys.argv[2:], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
sys.stderr.write(p.stderr[-3000:])
try:
    j = json.loads(p.stdout.strip().splitlines()[-1])
except Exception:
    print(f"rc {p.returncode}: no JSON"); sys.exit(1)
j["peak_rss_bytes"] = peak
open(sys.argv[1], "w").write(json.dumps(j))
g = j.get("gpu", {})
print(f"rc {p.returncode} step {j['decode_s_per_token']*1e3:.1f} ms ({j['decode_tok_s']:.2f} tok/s), "
      f"floor {g.get('floor_s_median', 0)*1e3:.1f} ms x{g.get('step_over_floor_median', 0):.2f} "
      f"{','.join(sorted(set(g.get('floor_tier_per_step', []))))}; disk {j['ceiling_gbps']:.2f} GB/s "
      f"h2d {g.get('pinned_h2d_gbs', 0):.1f} hbm {g.get('hbm_read_gbs', 0):.0f} (GEMV mxfp4 "
      f"{g.get('mxfp4_gemv_of_hbm', 0):.2f} bf16 {g.get('bf16_gemv_of_hbm', 0):.2f} of it); per token disk "
      f"{j['bytes_per_token']['expert']/1e6:.0f} MB h2d {g.get('h2d_bytes_per_token', 0)/1e6:.0f} MB; "
      f"in GPU calls {g.get('gpu_call_s_median', 0)*1e3:.1f} ms ({g.get('gpu_calls_per_token', 0):.0f} calls); "
      f"RSS {peak/2**30:.2f} GiB of {j['ram_budget']/2**30:.2f}")
EOF
  summary+=("$(printf '%-16s %4ds %s' "$name" $((SECONDS - t0)) "$(tail -1 "$OUT/$name.log" | cut -c1-300)")")
}
bench bench_cuda_streamed --device cuda --ram-budget "$STREAM_BUDGET" --vram-experts 0
bench bench_cuda_resident --device cuda --ram-budget "$RESIDENT_BUDGET"
# The same with the checkpoint layout and the row kernels for MXFP4 (not fragment order).
SLUICE_CUDA_MXFP4=rows bench bench_cuda_resident_rows --device cuda --ram-budget "$RESIDENT_BUDGET"
bench bench_cpu_streamed --device cpu --ram-budget "$STREAM_BUDGET"
bench bench_cuda_tier2g --device cuda --ram-budget "$STREAM_BUDGET" --vram-experts 2G
step bench_cuda 150 "$B/bench_cuda" --quick
rm -rf "$SCRATCH"
printf '%s\n' "${summary[@]}"
