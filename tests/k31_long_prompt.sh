#!/usr/bin/env bash
# K3.1 Pro's indexer key cache inside the memory plan (issue 36): an 8,192-token
# prompt through `sluice logits` on k31-tiny, run inside a memory cgroup (v1 or
# v2) of the same size as --ram-budget. Not in CI (tens of seconds on two cores;
# needs root for the cgroup). Usage: tests/k31_long_prompt.sh [BUILD_DIR] [BUDGET_MIB]
set -euo pipefail
build=${1:-build}
mib=${2:-160}
sluice=$(realpath "$build/sluice")
work=$(mktemp -d)
cg=""
cleanup() {
  [ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
"$sluice" make-model --preset k31-tiny --out "$work/model" >/dev/null
python3 -c "import random; r=random.Random(1); print(','.join(str(r.randrange(10, 440)) for _ in range(8192)))" >"$work/ids"
if [ -e /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
  cg=/sys/fs/cgroup/memory/sluice-k31-$$
  mkdir "$cg"
  echo $((mib << 20)) >"$cg/memory.limit_in_bytes"
  echo 0 >"$cg/memory.swappiness" 2>/dev/null || true
else
  cg=/sys/fs/cgroup/sluice-k31-$$
  mkdir "$cg"
  echo $((mib << 20)) >"$cg/memory.max"
  echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
fi
start=$(date +%s)
rc=0
sh -c "echo \$\$ >$cg/cgroup.procs && exec \"$sluice\" logits -m \"$work/model\" --tokens \"\$(cat $work/ids)\" \
  --ram-budget ${mib}M --out \"$work/logits.bin\" --device cpu" || rc=$?
end=$(date +%s)
size=$(stat -c %s "$work/logits.bin" 2>/dev/null || echo 0)
echo "k31-tiny, 8192-token prompt, --ram-budget ${mib}M in a ${mib} MiB cgroup: exit $rc, $size bytes of logits, $((end - start)) s"
[ "$rc" -eq 0 ] && [ "$size" -eq $((8192 * 512 * 4)) ]
