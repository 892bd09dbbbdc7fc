#!/usr/bin/env bash
# docs/k3-on-your-machine.md's table: `sluice plan --preset k3` for 64/128/256/512 GiB
# machines, each spine (bf16, lossless, int8), with no cache hits and with the hit rate
# nanoK3's routing gives a cache of the same share of experts (cache-sim, heat policy;
# the doc's "Hit rate" lists them). The kernels are measured by each plan on this
# machine with all its cores, so run it on an idle machine of the size you mean.
#   scripts/k3_table.sh SLUICE [EXTRA PLAN ARGS...]    -> the markdown rows on stdout
set -euo pipefail
sluice=${1:?usage: k3_table.sh SLUICE [plan args...]}
shift
extra=("$@")

# The nanoK3 hit rate at the cache share each machine gives (docs/k3-on-your-machine.md).
nano_hit() {  # ram spine
  case "$1/$2" in
    64G/int8) echo 0.023 ;;
    128G/int8) echo 0.178 ;;
    128G/*) echo 0.077 ;;
    256G/int8) echo 0.287 ;;
    256G/*) echo 0.286 ;;
    512G/int8) echo 0.525 ;;
    512G/*) echo 0.481 ;;
    *) echo 0 ;;
  esac
}

# One plan's figures, tab-separated: resident, streamed, cache, experts, io, compute, critical, projected.
figures() {
  awk '
    /^resident / { r = ($6 ~ /all/) ? "all" : $2 " GB" }
    /^expert cache/ { c = $3 " GB (" substr($0, index($0, "(") + 1, index($0, "%") - index($0, "(") - 1) "%)" }
    /^per token/ { s = $5 + $9; e = $12 }
    /^I\/O floor/ { io = $3 }
    /^compute floor/ { cf = $3 }
    /^critical path/ { cp = $3 }
    /^projected/ { p = $2 }
    END { printf "%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\n", r, s, c, e, io, cf, cp, p }'
}

echo "| RAM / disk | spine | spine resident | streamed per token: spine + head | expert cache (share of experts) | hit rate: none / nanoK3 | experts read per token | I/O floor | compute floor | critical path | **projected** |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for ram in 64G 128G 256G 512G; do
  disk=14
  [ "$ram" = 64G ] && disk=7
  for spine in bf16 lossless int8; do
    args=(plan --preset k3 --ram "$ram" --disk-gbps "$disk" --spine "$spine" "${extra[@]}")
    IFS=$'\t' read -r res str cache exp io cf cp proj < <("$sluice" "${args[@]}" --hit-rate 0 | figures)
    hit=$(nano_hit "$ram" "$spine")
    if [ "$hit" = 0 ]; then
      printf '| %s / %s GB/s | %s | %s | %s GB | %s | none | %s GB | %s s | %s s | %s s | **%s s/token** |\n' \
        "$ram" "$disk" "$spine" "$res" "$str" "$cache" "$exp" "$io" "$cf" "$cp" "$proj"
      continue
    fi
    IFS=$'\t' read -r _ _ _ exp2 io2 cf2 cp2 proj2 < <("$sluice" "${args[@]}" --hit-rate "$hit" | figures)
    printf '| %s / %s GB/s | %s | %s | %s GB | %s | 0 / %s | %s / %s GB | %s / %s s | %s / %s s | %s / %s s | **%s / %s s/token** |\n' \
      "$ram" "$disk" "$spine" "$res" "$str" "$cache" "$hit" "$exp" "$exp2" "$io" "$io2" "$cf" "$cf2" "$cp" "$cp2" \
      "$proj" "$proj2"
  done
done
