#!/usr/bin/env bash
# scripts/drives_bench.sh — drives of known read rates on one machine, and
# bench over a model striped on 1, 2 and 4 of them and an unequal pair
# (issue 35's proof). Each drive is a loop device (O_DIRECT backing) on an
# image file, ext4, with a blkio read limit (cgroup v1
# blkio.throttle.read_bps_device; cgroup v2: io.max "rbps="). Run as root;
# everything it makes is removed on exit (mounts, loop devices, limits, images).
#   scripts/drives_bench.sh SLUICE MODEL_DIR [RATE_MB_S] [RUNS] [BENCH ARGS...]
# Env: WORK (default /var/tmp/sluice-drives), DRIVE_GB (image size, default:
# the model's experts plus 2 GB), OUT (bench JSONs kept there, one per run:
# SET-RUN.json; default: not kept), SETS (default "1-drive 2-drive 4-drive
# unequal"; also 2-copies, 4-copies, unequal-copies: the same drives with
# `stripe --copies 2`; 4-mirror: four drives, --copies 4; spine-1, spine-2,
# spine-4: `stripe --spine` on 1, 2 and 4 drives, the experts with 1, 2 and 2
# copies: give a --ram-budget that streams part of the spine). Prints one line
# per run; with a striped spine the drives' bytes include the spine's.
set -euo pipefail
SLUICE=${1:?usage: drives_bench.sh SLUICE MODEL_DIR [RATE_MB_S] [RUNS] [BENCH ARGS...]}
MODEL=${2:?model dir}
RATE=${3:-100}
RUNS=${4:-3}
shift $(( $# < 4 ? $# : 4 ))
BENCH_ARGS=("$@")
[ ${#BENCH_ARGS[@]} -gt 0 ] || BENCH_ARGS=(-p 4 -n 6 --probe-seconds 4)
WORK=${WORK:-/var/tmp/sluice-drives}
[ "$(id -u)" = 0 ] || { echo "drives_bench.sh: needs root (losetup, mount, blkio limits)" >&2; exit 1; }

V1=/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device
limit() {  # limit DEV BYTES_PER_S (0: none)
  local mm; mm=$(lsblk -dno MAJ:MIN "$1" | tr -d ' ')
  if [ -w "$V1" ]; then echo "$mm $2" > "$V1"
  else
    local v2=/sys/fs/cgroup/io.max; [ "$2" = 0 ] && echo "$mm rbps=max" > "$v2" || echo "$mm rbps=$2" > "$v2"
  fi
}

DEVS=()
cleanup() {
  for i in 0 1 2 3; do
    mountpoint -q "$WORK/mnt/d$i" 2>/dev/null && umount "$WORK/mnt/d$i"
  done
  for d in "${DEVS[@]}"; do limit "$d" 0 2>/dev/null || true; losetup -d "$d" 2>/dev/null || true; done
  rm -rf "$WORK"
  rm -f "$MODEL/stripe.json"
}
trap cleanup EXIT
mkdir -p "$WORK/mnt"

# Room for a copy of every expert and the whole spine (stripe --spine on one drive).
model_gb=$(( $(du -sb "$MODEL" | cut -f1) / 1000000000 + 1 ))
DRIVE_GB=${DRIVE_GB:-$((model_gb + 2))}
for i in 0 1 2 3; do
  truncate -s "${DRIVE_GB}G" "$WORK/d$i.img"
  dev=$(losetup --direct-io=on --show -f "$WORK/d$i.img")
  DEVS+=("$dev")
  mkfs.ext4 -q -F "$dev"
  mkdir -p "$WORK/mnt/d$i"
  mount "$dev" "$WORK/mnt/d$i"
done

R=$((RATE * 1000000))
# O_DIRECT reads through a limited loop device must run at the limit: check once.
limit "${DEVS[0]}" "$R"
"$SLUICE" probe --make-file "$WORK/mnt/d0/probe" --make-gb 1 --qd 16 --seconds 3 | tee "$WORK/probe.txt"

run_set() {  # run_set NAME COPIES RATE_MB_S...   (SPINE=--spine: the spine too)
  local name=$1 copies=$2; shift 2
  local drives="" i=0
  for d in "${DEVS[@]}"; do limit "$d" 0; done
  for r in "$@"; do
    limit "${DEVS[$i]}" $((r * 1000000))
    drives+="${drives:+,}$WORK/mnt/d$i:$r"
    i=$((i + 1))
  done
  "$SLUICE" stripe --model "$MODEL" --drives "$drives" --copies "$copies" ${SPINE:-} > /dev/null
  for run in $(seq "$RUNS"); do
    sync; echo 3 > /proc/sys/vm/drop_caches
    "$SLUICE" bench --model "$MODEL" --json "${BENCH_ARGS[@]}" 2> /dev/null > "$WORK/b.json"
    [ -z "${OUT:-}" ] || { mkdir -p "$OUT"; cp "$WORK/b.json" "$OUT/$name-$run.json"; }
    python3 - "$name" "$run" "$WORK/b.json" <<'PY'
import json, sys
name, run, path = sys.argv[1], sys.argv[2], sys.argv[3]
j = json.load(open(path))
d = j.get("drives", [])
got = sum(x["gbps"] for x in d)
ceil = sum(x["ceiling_gbps"] for x in d)
spine = j.get("bytes_per_token", {}).get("spine", 0) / 1e9
print(f"{name:8s} run {run}: decode {j['decode_s_per_token']:.3f} s/token (compute {j.get('decode_compute_s_per_token', 0):.3f}, "
      f"spine streamed {spine:.2f} GB/token), drives read {got:.3f} GB/s over "
      f"{len(d)} drives (ceilings {' + '.join('%.3f' % x['ceiling_gbps'] for x in d)} = {ceil:.3f}), "
      f"io_efficiency {j['io_efficiency']:.3f}", flush=True)
PY
  done
}

for set in ${SETS:-1-drive 2-drive 4-drive unequal}; do
  case $set in
    1-drive) run_set 1-drive 1 "$RATE" ;;
    2-drive) run_set 2-drive 1 "$RATE" "$RATE" ;;
    4-drive) run_set 4-drive 1 "$RATE" "$RATE" "$RATE" "$RATE" ;;
    unequal) run_set unequal 1 "$RATE" $((RATE / 2)) ;;
    2-copies) run_set 2-copies 2 "$RATE" "$RATE" ;;
    4-copies) run_set 4-copies 2 "$RATE" "$RATE" "$RATE" "$RATE" ;;
    unequal-copies) run_set unequal-copies 2 "$RATE" $((RATE / 2)) ;;
    4-mirror) run_set 4-mirror 4 "$RATE" "$RATE" "$RATE" "$RATE" ;;
    spine-1) SPINE=--spine run_set spine-1 1 "$RATE" ;;
    spine-2) SPINE=--spine run_set spine-2 2 "$RATE" "$RATE" ;;
    spine-4) SPINE=--spine run_set spine-4 2 "$RATE" "$RATE" "$RATE" "$RATE" ;;
    *) echo "drives_bench.sh: unknown set $set" >&2; exit 1 ;;
  esac
done
