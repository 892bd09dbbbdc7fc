#!/usr/bin/env bash
# scripts/k3_gpu_table.sh — docs/k3-on-your-machine.md's GPU table: `sluice
# plan --preset k3` for 24/32/48/80/141 GB cards beside 64-256 GiB of RAM.
#
#   scripts/k3_gpu_table.sh SLUICE [plan flags, e.g. --cores 16 --probe-seconds 1]
#
# One markdown row per RAM size, one cell per card: spine layers on the GPU,
# the projected s/token (--gpu-spill by the rates), and beside the row the
# CPU alone. Disk 7 GB/s, lossless spine, the hit rate plan justifies.
set -euo pipefail
S=${1:?usage: k3_gpu_table.sh SLUICE [plan flags]}; shift
cards=(4090 5090 6000ada h100 h200)
printf '| RAM | CPU alone |'; for c in "${cards[@]}"; do printf ' %s |' "$c"; done; echo
printf '|---|---|'; for c in "${cards[@]}"; do printf -- '---|'; done; echo
for ram in 64G 128G 256G; do
  row="| $ram |"
  cpu=""
  for c in "${cards[@]}"; do
    out=$("$S" plan --preset k3 --ram "$ram" --disk-gbps 7 --spine lossless --gpu "$c" "$@" 2>/dev/null)
    line=$(grep '^with GPU' <<<"$out")
    s=$(sed -E 's/^with GPU +([0-9.]+) s\/token.*/\1/' <<<"$line")
    [[ -z $cpu ]] && cpu=$(sed -E 's/.*all on the CPU ([0-9.]+) s\/token.*/\1/' <<<"$line")
    gpu=$(grep '^placement' <<<"$out" | sed -E 's/.*on the GPU: ([^(]*) \(([0-9.]+) GB of spine.*/\1, \2 GB/; s/ of [0-9]+//')
    spill=$(grep -q "uploaded per call" <<<"$out" && echo ", rest uploaded" || echo "")
    grep -q "(split:" <<<"$out" && spill=", rest split with the CPU"
    row+=" $s s ($gpu$spill) |"
  done
  echo "| $ram | $cpu s |${row#| $ram |}"
done
