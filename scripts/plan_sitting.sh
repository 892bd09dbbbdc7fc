#!/usr/bin/env bash
# scripts/plan_sitting.sh — issue 15's check of `sluice plan` against `sluice
# bench` on one model (docs/benchmarks.md, "`sluice plan` against `bench`").
#
#   scripts/plan_sitting.sh SLUICE MODEL OUT [SITTINGS]
#
# SITTINGS rounds (default 3) over BUDGETS (default "4G 8G 12G"): each round
# benches every budget (`bench -m MODEL --ram-budget B -p 16 -n 6 --json`) and
# then plans it (`plan --model MODEL --ram B --disk-gbps <that bench's
# replay_gbps> ...`, bench's -p 16 chunk and its probe and replay buffers as
# --reserve). The routing's properties the plan cannot know — the expert
# cache's hit rate, the guesses' recall and their wasted bytes per missed
# byte — come from the previous round's bench at that budget, so the first
# round only measures them. The compute floor is the plan's own choice: the
# engine's saved runs (`bench --ram-budget B --save-compute`, spine resident)
# where they match this machine's threads and kernels, else the kernel probe.
# Appends each bench's JSON to OUT/bench.json; prints, and appends to
# OUT/sittings.txt, one line per plan with projected / measured.
set -uo pipefail
S=${1:?usage: plan_sitting.sh SLUICE MODEL OUT [SITTINGS]} MODEL=${2:?} OUT=${3:?} SITTINGS=${4:-3}
BUDGETS=${BUDGETS:-4G 8G 12G} RESERVE=${RESERVE:-175472640}
mkdir -p "$OUT"

# The routing properties a plan takes from a bench JSON (stdin), as plan options.
routing() {
  python3 -c '
import json, sys
j = json.load(sys.stdin)
b = j["bytes_per_token"]
touched = j["compute_mix_bytes"]["mxfp4"]
hit = min(1.0, b["cache_hit"] / touched) if touched > 0 else 0.0
missed = touched * (1 - hit)
waste = min(10.0, j.get("prefetch_wasted_bytes_per_token", 0) / missed) if missed > 0 else 0.0
print("--hit-rate %.3f --guess-waste %.3f --guess-recall %.3f" % (hit, waste, j.get("prefetch_recall", 0) or 0))'
}

declare -A previous
for s in $(seq 1 "$SITTINGS"); do
  for b in $BUDGETS; do
    "$S" bench -m "$MODEL" --ram-budget "$b" -p 16 -n 6 --json >"$OUT/run.json" 2>>"$OUT/bench.log" || {
      echo "sitting $s $b: bench failed (see $OUT/bench.log)"; continue; }
    cat "$OUT/run.json" >>"$OUT/bench.json"
    read -r step compute boundary replay < <(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(j["decode_s_per_token"], j["decode_compute_s_per_token"], j.get("token_boundary_s_per_token", 0), j["replay_gbps"])' "$OUT/run.json")
    if [[ -n ${previous[$b]:-} ]]; then
      plan=$("$S" plan --model "$MODEL" --ram "$b" --disk-gbps "$replay" --spine bf16 -b 16 --reserve "$RESERVE" \
          --probe-seconds 2 ${previous[$b]} 2>&1)
      projected=$(sed -n 's/^projected *\([0-9.]*\) s\/token.*/\1/p' <<<"$plan")
      [[ -n $projected ]] || { echo "sitting $s $b: plan gave no projection: $plan"; continue; }
      source=$(sed -n 's/^compute floor [0-9.]* s per token: //p' <<<"$plan")
      echo "sitting $s $(date -u +%H:%M) $b: replay $replay GB/s  step $step s  compute $compute s  boundary $boundary s" \
        " projected $projected s  projected/step $(python3 -c "print('%.2f' % ($projected / $step))")  (${previous[$b]}; $source)" |
        tee -a "$OUT/sittings.txt"
    else
      echo "sitting $s $(date -u +%H:%M) $b: replay $replay GB/s  step $step s  compute $compute s (routing measured for the next round)" |
        tee -a "$OUT/sittings.txt"
    fi
    previous[$b]=$(routing <"$OUT/run.json")
  done
done
rm -f "$OUT/run.json"
