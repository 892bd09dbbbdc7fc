#!/usr/bin/env bash
# scripts/k31_cuda.sh — issue 36 on a machine with a GPU: K3.1 Pro's sparse
# attention on the CUDA entry against the CPU, and bench beside K3 on the
# same slice dimensions. Binaries built with -DSLUICE_CUDA=ON.
#
#   scripts/k31_cuda.sh SLUICE OUT [quick]
#
# 1. k31-tiny (top-k 16): `logits` of 600 tokens (the selection active from
#    position 16), prefill and step, --device cuda against --device cpu:
#    relative 1e-3 of max |logit|, argmax identical; the GPU's dsa_calls > 0.
# 2. (not quick) k31-slice and k3-slice, SLICE_DIMS (default 4 layers, 16
#    experts: one MLA layer, K3.1's real 32 × 128 indexer and top-k 2048),
#    made under SCRATCH: the k31-slice's logits of CTX tokens (default 2304:
#    the selection active for the last 256) on both devices, compared as in 1;
#    (SKIP_EXACT=1: not), then `bench -p CTX -n 8` on each model and device, the decode step at a
#    context past top-k: REPS runs interleaved on the GPU, CPU_REPS on the CPU.
# Logs in OUT; the last lines printed are the summary.
set -uo pipefail
S=${1:?usage: k31_cuda.sh SLUICE OUT [quick]} OUT=${2:?} MODE=${3:-full}
SCRATCH=${SCRATCH:-$PWD/.scratch} CTX=${CTX:-2304} REPS=${REPS:-2} CPU_REPS=${CPU_REPS:-1} RAM=${RAM:-48G}
SLICE_DIMS=${SLICE_DIMS:---layers 4 --experts 16}
mkdir -p "$OUT" "$SCRATCH"
summary=()
say() { summary+=("$*"); echo "$*" >>"$OUT/summary.txt"; }

vocab() { python3 -c "import json;c=json.load(open('$1/config.json'));print(c.get('text_config',c)['vocab_size'])"; }
compare() { python3 "$(dirname "$0")/logits_close.py" "$@"; }  # A B V: relative max |d|, argmax rows
ids() { python3 -c "import random;r=random.Random($2);print(','.join(str(r.randrange(3,$1)) for _ in range($3)))"; }
exact() {  # NAME MODEL TOKENS MODE: --device cuda against --device cpu
  local name=$1 m=$2 toks=$3 mode=$4
  "$S" logits -m "$m" --tokens "$toks" --mode "$mode" --device cpu --out "$SCRATCH/$name.cpu" >"$OUT/$name.cpu.log" 2>&1 ||
    { say "$name: cpu run failed"; return 1; }
  "$S" logits -m "$m" --tokens "$toks" --mode "$mode" --device cuda --stats --out "$SCRATCH/$name.cuda" \
    >"$OUT/$name.cuda.log" 2>&1 || { say "$name: cuda run failed"; return 1; }
  local dsa
  dsa=$(grep -o '"dsa_calls": *[0-9]*' "$OUT/$name.cuda.log" | tail -1 | grep -o '[0-9]*$')
  say "$name: $(compare "$SCRATCH/$name.cpu" "$SCRATCH/$name.cuda" "$(vocab "$m")"), GPU dsa_calls ${dsa:-?}"
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; free -g; nproc; } >"$OUT/gpu.txt" 2>&1
tiny=$SCRATCH/k31-tiny
"$S" make-model --preset k31-tiny --out "$tiny" >"$OUT/make_tiny.log" 2>&1
V=$(vocab "$tiny")
t600=$(ids "$V" 1 600)
exact k31tiny.prefill "$tiny" "$t600" prefill
exact k31tiny.step "$tiny" "$(ids "$V" 2 80)" step
if [[ $MODE != quick ]]; then
  s31=$SCRATCH/k31-slice s3=$SCRATCH/k3-slice
  "$S" make-model --preset k31-slice $SLICE_DIMS --out "$s31" >"$OUT/make_k31.log" 2>&1 &
  "$S" make-model --preset k3-slice $SLICE_DIMS --out "$s3" >"$OUT/make_k3.log" 2>&1
  wait
  [[ -n ${SKIP_EXACT:-} ]] || exact k31slice.prefill "$s31" "$(ids "$(vocab "$s31")" 3 "$CTX")" prefill
  for r in $(seq "$REPS"); do
    for m in k3-slice k31-slice; do
      devs=cuda
      [[ $r -le $CPU_REPS ]] && devs="cuda cpu"
      for dev in $devs; do
        "$S" bench -m "$SCRATCH/$m" --device "$dev" -p "$CTX" -n 8 --ram-budget "$RAM" --probe-seconds 0 --no-replay \
          --json >"$OUT/bench.$m.$dev.$r.json" 2>"$OUT/bench.$m.$dev.$r.log"
        say "bench $m $dev run $r: rc=$? $(python3 -c "
import json,sys
j=json.load(open('$OUT/bench.$m.$dev.$r.json'))
print('prefill', round(j['prefill_tok_s'],1), 'tok/s; decode step', round(1000*j['decode_s_per_token'],1), 'ms')
" 2>&1 | tail -1)"
      done
    done
  done
fi
echo "---- summary"
printf '%s\n' "${summary[@]}"
