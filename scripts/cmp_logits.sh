#!/usr/bin/env bash
# cmp_logits.sh OLD_SLUICE NEW_SLUICE — do two builds give cmp-identical logits?
#
# `sluice logits` of each build on: the k3-tiny fixture (every case's tokens),
# nanoK3 (models/nanok3), and two checkpoints OLD's make-model writes (seeded:
# the same bytes every time) — a k31-tiny (K3.1 Pro's sparse attention) and a
# small k3-slice (real K3 dimensions, 2 layers, 8 experts, an 8192 vocabulary).
# Each in --mode prefill and step, with the spine resident and streamed (the
# smallest --ram-budget in MiB above the working minimum that opens, checked
# to stream).
# Prints one line per run and exits 1 on any difference.
#
# Environment: WORK (default /tmp/cmp_logits: the made checkpoints, kept for
# reruns, and the logits files), FIXTURE (default tests/fixtures/k3-tiny),
# DEVICE (default cpu: passed as --device to both builds' logits; cuda on a
# GPU machine with CUDA builds), SKIP (model names not to run, e.g. k31-tiny
# where the two builds run an op on different devices on purpose).
set -u
old=${1:?usage: cmp_logits.sh OLD_SLUICE NEW_SLUICE}
new=${2:?usage: cmp_logits.sh OLD_SLUICE NEW_SLUICE}
root=$(cd "$(dirname "$0")/.." && pwd)
work=${WORK:-/tmp/cmp_logits}
fixture=${FIXTURE:-$root/tests/fixtures/k3-tiny}
mkdir -p "$work/out"
bad=0
device=${DEVICE:-cpu}

tokens_of() {  # a case file's token ids, comma-separated
  python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["tokens"])))' "$1"
}

make_model() {  # make_model NAME ARGS...: written once by OLD, reused after
  local dir=$work/$1
  shift
  if [[ ! -f $dir/done ]]; then
    rm -rf "$dir"
    "$old" make-model "$@" --seed 7 --out "$dir" >/dev/null || { echo "make-model $* failed"; exit 1; }
    touch "$dir/done"
  fi
}

# A budget (MiB) at which OLD opens DIR with the spine streamed: from the
# working minimum its refusal of 1M names, up in steps of 1 MiB.
streamed_budget() {
  local dir=$1 toks=$2 min b
  min=$("$old" logits --model "$dir" --tokens "$toks" --out "$work/out/probe.f32" --ram-budget 1M 2>&1 |
          sed -nE 's/.*try --ram-budget ([0-9]+)M$/\1/p')
  [[ -n $min ]] || return 1
  for ((b = min; b < min + 64; b++)); do
    if "$old" logits --model "$dir" --tokens "$toks" --out "$work/out/probe.f32" --ram-budget "${b}M" \
         2>"$work/out/probe.err" >/dev/null; then
      grep -q 'the rest streamed' "$work/out/probe.err" && { echo "${b}M"; return; }
      return 1  # opens with the spine resident: it never streams here
    fi
  done
  return 1
}

compare() {  # compare NAME DIR TOKENS
  local name=$1 dir=$2 toks=$3 budget mode spine flags
  [[ " ${SKIP:-} " == *" ${name%%.*} "* ]] && { echo "skip $name"; return; }
  budget=$(streamed_budget "$dir" "$toks") || { echo "FAIL $name: no budget above the working minimum streams the spine"; bad=1; return; }
  for spine in resident streamed; do
    flags=()
    [[ $spine == streamed ]] && flags=(--ram-budget "$budget")
    for mode in prefill step; do
      local tag=$name.$spine.$mode
      "$old" logits --model "$dir" --tokens "$toks" --mode "$mode" --device "$device" "${flags[@]}" --out "$work/out/$tag.old.f32" \
        2>"$work/out/$tag.old.err" || { echo "FAIL $tag: old run failed"; bad=1; continue; }
      "$new" logits --model "$dir" --tokens "$toks" --mode "$mode" --device "$device" "${flags[@]}" --out "$work/out/$tag.new.f32" \
        2>"$work/out/$tag.new.err" || { echo "FAIL $tag: new run failed"; bad=1; continue; }
      if [[ $spine == streamed ]] && ! grep -q 'the rest streamed' "$work/out/$tag.new.err"; then
        echo "FAIL $tag: the new run did not stream at --ram-budget $budget"
        bad=1
      elif cmp -s "$work/out/$tag.old.f32" "$work/out/$tag.new.f32"; then
        echo "same $tag ($(stat -c %s "$work/out/$tag.new.f32") bytes${flags[*]:+, ${flags[*]}})"
      else
        echo "DIFF $tag"
        bad=1
      fi
    done
  done
}

for case in "$fixture"/cases/*.json; do
  compare "k3-tiny.$(basename "$case" .json)" "$fixture/model" "$(tokens_of "$case")"
done
header=$(tokens_of "$fixture/cases/header.json")
compare nanok3 "$root/models/nanok3" "$header"
make_model k31-tiny --preset k31-tiny
compare k31-tiny "$work/k31-tiny" "$header"
make_model k3-slice --preset k3-slice --layers 2 --experts 8 --vocab 8192
compare k3-slice "$work/k3-slice" "$(tokens_of "$fixture/cases/short.json")"
exit $bad
