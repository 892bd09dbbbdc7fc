#!/usr/bin/env bash
# scripts/cuda_check.sh — GPU against CPU on a machine with a GPU and a CUDA
# build of sluice (issue 16's exactness checks; docs/benchmarks.md has a run).
#
#   scripts/cuda_check.sh SLUICE FIXTURE_DIR NANOK3_DIR [SLICE_DIR]
#
# 1. every k3-tiny fixture case (FIXTURE_DIR/cases/*.json), prefill and step:
#    `sluice logits --device cuda` vs `--device cpu`: max |Δlogit| <= 1e-3 and
#    the same argmax at every position;
# 2. nanoK3: greedy ids (`run --ids -n 24`) identical on 20 prompts (the
#    first 20 lines of heldout.txt, 60 characters each);
# 3. nanoK3 held-out perplexity within 0.1 %;
# 4. SLICE_DIR (a k3-slice, optional): logits of 8 tokens, prefill, within
#    1e-3 of the CPU's relative to the largest |logit|, same argmax.
# Prints one line per check and "cuda_check: all passed" (exit 0) or exits 1.
set -uo pipefail
S=${1:?usage: cuda_check.sh SLUICE FIXTURE_DIR NANOK3_DIR [SLICE_DIR]}
FX=${2:?} NANO=${3:?} SLICE=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# compare A B V TOL REL: max |Δ| (relative to max |A| when REL=1) and argmax per row of V floats
compare() {
  python3 - "$@" <<'EOF'
import sys, numpy as np
a = np.fromfile(sys.argv[1], '<f4'); b = np.fromfile(sys.argv[2], '<f4')
V, tol, rel = int(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "1"
if a.size != b.size or a.size % V or not np.isfinite(a).all() or not np.isfinite(b).all():
    print(f"sizes {a.size} {b.size} or non-finite"); sys.exit(1)
a = a.reshape(-1, V); b = b.reshape(-1, V)
d = float(np.abs(a - b).max())
if rel: d /= float(np.abs(a).max())
same = int((a.argmax(1) == b.argmax(1)).sum())
print(f"max |d| {'(relative) ' if rel else ''}{d:.3g}, argmax equal {same}/{a.shape[0]}")
sys.exit(0 if d <= tol and same == a.shape[0] else 1)
EOF
}

V=$(python3 -c "import json;c=json.load(open('$FX/model/config.json'));print(c.get('text_config',c)['vocab_size'])")
for f in "$FX"/cases/*.json; do
  name=$(basename "$f" .json)
  toks=$(python3 -c "import json;print(','.join(map(str,json.load(open('$f'))['tokens'])))")
  for mode in prefill step; do
    for dev in cpu cuda; do
      "$S" logits -m "$FX/model" --tokens "$toks" --mode $mode --device $dev --out "$tmp/$name.$mode.$dev" \
        2>>"$tmp/log" || { echo "logits $name $mode $dev failed:"; tail -3 "$tmp/log"; fail=1; }
    done
    if r=$(compare "$tmp/$name.$mode.cpu" "$tmp/$name.$mode.cuda" "$V" 1e-3 0); then
      echo "fixture $name $mode: $r"
    else
      echo "FAIL fixture $name $mode: $r"; fail=1
    fi
  done
done

same=0
for i in $(seq 1 20); do
  p=$(grep -v "^[[:space:]]*$" "$NANO/heldout.txt" | sed -n "${i}p" | cut -c1-60)
  a=$("$S" run -m "$NANO" --prompt "$p" -n 24 --temperature 0 --ids --device cpu 2>>"$tmp/log")
  b=$("$S" run -m "$NANO" --prompt "$p" -n 24 --temperature 0 --ids --device cuda 2>>"$tmp/log")
  if [[ -n $a && $a == "$b" ]]; then same=$((same + 1)); else echo "nanoK3 prompt $i differs: [$a] vs [$b]"; fi
done
echo "nanoK3 greedy: $same/20 prompts identical"
((same == 20)) || fail=1

pc=$("$S" perplexity -m "$NANO" -f "$NANO/heldout.txt" --device cpu 2>>"$tmp/log" | tail -1)
pg=$("$S" perplexity -m "$NANO" -f "$NANO/heldout.txt" --device cuda 2>>"$tmp/log" | tail -1)
if python3 - "$pc" "$pg" <<'EOF'
import sys, re
a = float(re.search(r"perplexity: ([0-9.eE+-]+)", sys.argv[1]).group(1))
b = float(re.search(r"perplexity: ([0-9.eE+-]+)", sys.argv[2]).group(1))
print(f"nanoK3 perplexity cpu {a:.6f} cuda {b:.6f} relative difference {abs(a-b)/a:.2e}")
sys.exit(0 if abs(a - b) / a <= 1e-3 else 1)
EOF
then :; else echo "FAIL perplexity: [$pc] [$pg]"; fail=1; fi

if [[ -n $SLICE ]]; then
  VS=$(python3 -c "import json;c=json.load(open('$SLICE/config.json'));print(c.get('text_config',c)['vocab_size'])")
  for dev in cpu cuda; do
    "$S" logits -m "$SLICE" --tokens 448,259,309,412,370,399,335,283 --device $dev --out "$tmp/slice.$dev" \
      2>>"$tmp/log" || { echo "slice logits $dev failed:"; tail -3 "$tmp/log"; fail=1; }
  done
  if r=$(compare "$tmp/slice.cpu" "$tmp/slice.cuda" "$VS" 1e-3 1); then echo "k3-slice: $r"; else echo "FAIL k3-slice: $r"; fail=1; fi
fi
grep -m1 "device: cuda" "$tmp/log" || true
if ((fail)); then echo "cuda_check: FAILED"; exit 1; fi
echo "cuda_check: all passed"
