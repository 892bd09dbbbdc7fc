#!/usr/bin/env bash
# scripts/ab_bench.sh — a same-run A/B of two builds on one model: `bench
# --json` alternating OLD and NEW, RUNS times each (the page cache dropped
# before each run when root), then each build's decode s/token and prefill
# tok/s per run and their medians. For "within noise of before" checks.
#   scripts/ab_bench.sh OLD_SLUICE NEW_SLUICE MODEL [RUNS] [BENCH ARGS...]
# Default bench args: -p 8 -n 6 --probe-seconds 1 --no-replay.
set -euo pipefail
OLD=${1:?usage: ab_bench.sh OLD_SLUICE NEW_SLUICE MODEL [RUNS] [BENCH ARGS...]}
NEW=${2:?new sluice}
MODEL=${3:?model dir}
RUNS=${4:-3}
shift $(( $# < 4 ? $# : 4 ))
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(-p 8 -n 6 --probe-seconds 1 --no-replay)
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-ab.XXXXXX")
trap 'rm -rf "$T"' EXIT
for run in $(seq "$RUNS"); do
  for side in old new; do
    bin=$OLD; [ "$side" = new ] && bin=$NEW
    if [ "$(id -u)" = 0 ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
    "$bin" bench --model "$MODEL" --json "${ARGS[@]}" 2> /dev/null > "$T/$side-$run.json"
  done
done
python3 - "$T" "$RUNS" <<'PY'
import json, statistics, sys
d, runs = sys.argv[1], int(sys.argv[2])
for side in ("old", "new"):
    js = [json.load(open(f"{d}/{side}-{r}.json")) for r in range(1, runs + 1)]
    dec = [j["decode_s_per_token"] for j in js]
    pre = [j["prefill_tok_s"] for j in js]
    print(f"{side}: decode s/token {' / '.join('%.3f' % x for x in dec)} (median {statistics.median(dec):.3f}); "
          f"prefill tok/s {' / '.join('%.2f' % x for x in pre)} (median {statistics.median(pre):.2f})")
PY
