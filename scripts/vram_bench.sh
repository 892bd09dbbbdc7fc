#!/usr/bin/env bash
# scripts/vram_bench.sh — issue 37 on a machine with a GPU: a GPU smaller
# than the model, stood in for by --vram. Binaries built with -DSLUICE_CUDA=ON.
#
#   scripts/vram_bench.sh SLUICE OUT [quick]
#
# 1. Exactness, against --device cpu (relative 1e-3 of max |logit|, argmax
#    identical): the k3-tiny fixture and nanoK3 GPU-placed (--gpu-layers 99),
#    CPU-placed (--gpu-layers 0), mixed (--gpu-layers 1) and mixed uploading
#    (--gpu-spill upload); the slice at the half and quarter --vram below.
# 2. (not quick) A k3-slice (SLICE_ARGS; 4 layers, spine 8 GB; 16 experts a
#    layer, so that every expert is in the RAM cache after the first token and
#    a step measures the spine's placement, not first-read expert I/O) made under
#    SCRATCH; --vram chosen so that half and a quarter of its spine fit (the
#    context, scratch and state measured by a first run's placement line);
#    `bench` decode steps REPS times each, interleaved, in one sitting:
#    --device cpu; --vram half / quarter as the run places it by the rates it
#    measures (the default: the fastest projection of the CPU computing the
#    rest, uploading it per call, and both at once on shares of its rows, the
#    bus adding to the CPU's memory bandwidth), the CPU computing the rest
#    (--gpu-spill cpu) and uploading it per call (--gpu-spill upload, the old
#    way); each with the driver's
#    peak VRAM in use on the card (NVML, sampled every 20 ms) and the peak RSS;
#    `sluice plan`'s projection for each beside it, this machine's card
#    measured by plan as the runs measure it.
# Logs in OUT; the last lines printed are the table.
set -uo pipefail
S=${1:?usage: vram_bench.sh SLUICE OUT [quick]} OUT=${2:?} MODE=${3:-full}
SCRATCH=${SCRATCH:-$PWD/.scratch} RAM=${RAM:-24G} REPS=${REPS:-3}
FX=${FX:-tests/fixtures/k3-tiny} NANO=${NANO:-models/nanok3}
SLICE_ARGS=${SLICE_ARGS:---preset k3-slice --layers 4 --experts 16}
mkdir -p "$OUT" "$SCRATCH"
{ nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv; free -g; nproc; } >"$OUT/gpu.txt" 2>&1
slice=$SCRATCH/slice
if [[ $MODE != quick ]]; then
  ( "$S" make-model $SLICE_ARGS --out "$slice" >"$OUT/make_slice.log" 2>&1; echo "rc=$?" >>"$OUT/make_slice.log" ) &
  maker=$!
fi

vocab() { python3 -c "import json;c=json.load(open('$1/config.json'));print(c.get('text_config',c)['vocab_size'])"; }
compare() { python3 "$(dirname "$0")/logits_close.py" "$@"; }  # A B V: relative max |d|, argmax rows
exact() {  # NAME MODEL TOKENS MODE ARGS...: --device cuda ARGS against --device cpu
  local name=$1 model=$2 toks=$3 mode=$4; shift 4
  local ref=$SCRATCH/$(basename "$model").$mode.cpu
  [[ -f $ref ]] || "$S" logits -m "$model" --tokens "$toks" --mode "$mode" --device cpu --out "$ref" 2>>"$OUT/exact.log"
  "$S" logits -m "$model" --tokens "$toks" --mode "$mode" --device cuda "$@" --out "$SCRATCH/x" 2>>"$OUT/exact.log" ||
    { echo "$name: logits failed"; return; }
  echo "$name ($*): $(compare "$ref" "$SCRATCH/x" "$(vocab "$model")")"
}
[[ -n ${SKIP_SMALL:-} ]] || {
placements=("--gpu-layers 99" "--gpu-layers 0" "--gpu-layers 1" "--gpu-layers 1 --gpu-spill upload")
ftoks=$(python3 -c "import json,glob;print(','.join(map(str,json.load(open(sorted(glob.glob('$FX/cases/*.json'))[0]))['tokens'])))")
for p in "${placements[@]}"; do
  for mode in prefill step; do exact "fixture $mode" "$FX/model" "$ftoks" $mode $p; done
done
ntoks=$(seq -s, 40 4 100)
for p in "${placements[@]}"; do exact "nanoK3 prefill" "$NANO" "$ntoks" prefill $p; done
"$S" logits -m "$FX/model" --tokens "$ftoks" --device cpu --vram 1G --out "$SCRATCH/x" 2>&1 | grep -i note | head -1
}
[[ $MODE == quick ]] && exit 0

wait $maker
tail -1 "$OUT/make_slice.log"
stoks=448,259,309,412,370,399,335,283
# The context, scratch and state on the card, and the spine, from a placement with room for everything.
line=$("$S" logits -m "$slice" --tokens 1 --device cuda --ram-budget "$RAM" --vram 1000G --out "$SCRATCH/x" 2>&1 | grep "placement:")
echo "$line" >"$OUT/placement_all.txt"
read -r VH VQ CTX < <(python3 - "$line" <<'EOF'
import re, sys
l = sys.argv[1]
g = lambda k: float(re.search(r"([0-9.]+) GB" + k, l).group(1))
spine = g(" of spine")
state = float(re.search(r"state ([0-9.]+) GB", l).group(1))
scratch = float(re.search(r"scratch ([0-9.]+) GB", l).group(1))
ctx = float(re.search(r"context ([0-9.]+) GB", l).group(1))
base = ctx + scratch + state + 0.05
print(f"{(base + spine / 2) * 1e3:.0f}MB {(base + spine / 4) * 1e3:.0f}MB {ctx * 1e3:.0f}MB")
EOF
)
echo "half $VH quarter $VQ context $CTX"
exact "slice half" "$slice" "$stoks" prefill --ram-budget "$RAM" --vram "$VH"
exact "slice quarter" "$slice" "$stoks" step --ram-budget "$RAM" --vram "$VQ"
exact "slice quarter cpu" "$slice" "$stoks" prefill --ram-budget "$RAM" --vram "$VQ" --gpu-spill cpu
exact "slice quarter split" "$slice" "$stoks" prefill --ram-budget "$RAM" --vram "$VQ" --gpu-spill split

# bench NAME ARGS...: one run, its peak VRAM (NVML, the card's used memory) and peak RSS beside its JSON.
bench() {
  local name=$1; shift
  python3 - "$name" "$OUT/bench.jsonl" "$S" bench -m "$slice" -p 8 -n 8 --probe-seconds 0.5 --ram-budget "$RAM" --json "$@" \
    >>"$OUT/bench.log" 2>&1 <<'EOF'
import json, resource, subprocess, sys, threading, time
peak = [0, 0]
stop = False
def sample():
    try:
        import pynvml
        pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
        while not stop:
            peak[0] = max(peak[0], pynvml.nvmlDeviceGetMemoryInfo(h).used)
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                peak[1] = max(peak[1], p.usedGpuMemory or 0)
            time.sleep(0.02)
    except Exception as e:
        sys.stderr.write(f"nvml: {e}\n")
t = threading.Thread(target=sample); t.start()
p = subprocess.run(sys.argv[3:], capture_output=True, text=True)
stop = True; t.join()
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
lines = p.stderr.splitlines()
sys.stderr.write(f"== {sys.argv[1]} rc {p.returncode}\n" + "\n".join([l for l in lines if "placement" in l] + lines[-6:]) + "\n")
j = json.loads(p.stdout.strip().splitlines()[-1])
j["run"] = sys.argv[1]
j["peak_rss_bytes"] = rss; j["nvml_card_used_peak"] = peak[0]; j["nvml_process_peak"] = peak[1]
open(sys.argv[2], "a").write(json.dumps(j) + "\n")
EOF
}
for rep in $(seq 1 "$REPS"); do
  (( SECONDS > ${STOP_AFTER:-420} )) && { echo "stopping after $((rep - 1)) rounds: ${SECONDS}s"; break; }
  bench cpu.$rep --device cpu
  bench half.$rep --device cuda --vram "$VH"
  bench half_upload.$rep --device cuda --vram "$VH" --gpu-spill upload
  bench half_cpu.$rep --device cuda --vram "$VH" --gpu-spill cpu
  bench quarter.$rep --device cuda --vram "$VQ"
  bench quarter_upload.$rep --device cuda --vram "$VQ" --gpu-spill upload
  bench quarter_cpu.$rep --device cuda --vram "$VQ" --gpu-spill cpu
done
disk=$(python3 -c "import json;print(max(json.loads(open('$OUT/bench.jsonl').readline())['ceiling_gbps'],0.5))")
proj() {  # VRAM [SPILL]: plan's lines, with this machine's card measured as a run measures it (no --gpu)
  "$S" plan -m "$slice" --ram "$RAM" --disk-gbps "$disk" --vram "$1" ${2:+--gpu-spill "$2"} \
    --gpu-context "$CTX" --kernel-probe --probe-seconds 3 2>/dev/null | grep -E "^(gpu|placement|with GPU)"
}
{ proj "$VH"; proj "$VH" upload; proj "$VQ"; proj "$VQ" upload; proj "$VH" cpu; proj "$VQ" cpu; } | tee "$OUT/plan.txt"
python3 - "$OUT" "$VH" "$VQ" "$RAM" <<'EOF'
import json, glob, re, sys, statistics as st
out, vh, vq, ram = sys.argv[1:]
plan = open(f"{out}/plan.txt").read().splitlines()
proj = [float(re.search(r"([0-9.]+) s/token", l).group(1)) for l in plan if l.startswith("with GPU")]
allcpu = float(re.search(r"all on the CPU ([0-9.]+)", [l for l in plan if l.startswith("with GPU")][0]).group(1))
want = {"cpu": allcpu, "half": proj[0], "half_upload": proj[1], "quarter": proj[2], "quarter_upload": proj[3],
        "half_cpu": proj[4], "quarter_cpu": proj[5]}
print(f"{'run':16} {'--vram':>8} {'step ms (3 runs)':>24} {'plan ms':>8} {'VRAM peak GB (process)':>13} {'RSS peak GB':>12} (spilled, split) calls, share")
med = {}
for name in want:
    js = [j for j in map(json.loads, open(f"{out}/bench.jsonl")) if j["run"].rsplit(".", 1)[0] == name]
    if not js: continue
    steps = [j["decode_s_per_token"] * 1e3 for j in js]
    med[name] = st.median(steps)
    vram = max(j["nvml_process_peak"] for j in js) / 1e9  # the driver's count for the process
    rss = max(j["peak_rss_bytes"] for j in js) / 1e9
    spill = [(j.get("gpu", {}).get("cpu_spill_calls", 0), j.get("gpu", {}).get("split_calls", 0),
              round(j.get("gpu", {}).get("split_share", 0), 3)) for j in js]
    v = vh if name.startswith("half") else vq if name.startswith("quarter") else "-"
    print(f"{name:16} {v:>8} {' / '.join(f'{s:.0f}' for s in steps):>24} {want[name]*1e3:8.0f} {vram:13.2f} {rss:12.2f} {spill}")
for f in ("half", "quarter"):
    for run in (f, f + "_cpu"):
        if run in med:
            print(f"{run}: {med[f + '_upload'] / med[run]:.2f}x faster than uploading per call, "
                  f"{med['cpu'] / med[run]:.2f}x faster than --device cpu (medians)")
print("where the GPU calls' time went, ms a step (medians of the runs' step medians):")
for name in want:
    js = [j for j in map(json.loads, open(f"{out}/bench.jsonl")) if j["run"].rsplit(".", 1)[0] == name and "gpu" in j]
    if not js: continue
    kinds = {k for j in js for k in j["gpu"].get("gpu_call_s_by_kind_median", {})}
    med_k = {k: st.median(j["gpu"].get("gpu_call_s_by_kind_median", {}).get(k, 0) for j in js) for k in sorted(kinds)}
    print(f"  {name:16} " + " ".join(f"{k} {v * 1e3:.1f}" for k, v in med_k.items() if v > 0))
print(f"RAM budget {ram}")
EOF
rm -rf "$SCRATCH"
