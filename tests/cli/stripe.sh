#!/usr/bin/env bash
# Issue 35's contracts, as a user runs them: `stripe` writes DIR/stripe.json
# and says "up to date" the second time; logits read through the stripe with
# no flag are the shards' bits (--no-stripe); damage is found by verify and
# repaired by verify --repair; a killed run (kill -9) and a full disk
# (ulimit -f) leave the model usable and the next run resumes; bench --json
# has one drives entry per drive; a drive failing mid-run falls back to the
# shards, naming the file.
set -euo pipefail
SLUICE=${SLUICE:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-stripe.XXXXXX")
trap 'rm -rf "$T"' EXIT
die() { echo "FAIL: $*" >&2; exit 1; }

"$SLUICE" make-model --preset tiny --seed 3 --out "$T/m" > /dev/null
LOGITS=(logits --model "$T/m" --tokens 448,259,309,17,5)
"$SLUICE" "${LOGITS[@]}" --out "$T/plain.f32" 2> /dev/null

# A full disk (no file may grow past 16 KB): the stripe fails naming a file, no manifest, the model still runs.
if (ulimit -f 16; "$SLUICE" stripe --model "$T/m" --drives "$T/d1:1,$T/d2:1") > "$T/full.out" 2> "$T/full.err"; then
  die "stripe succeeded on a full disk"
fi
grep -q "sluice-stripe-m" "$T/full.err" || die "full disk: the error does not name the file: $(cat "$T/full.err")"
[ ! -e "$T/m/stripe.json" ] || die "full disk left a manifest"
"$SLUICE" "${LOGITS[@]}" --out "$T/after-full.f32" 2> /dev/null
cmp -s "$T/plain.f32" "$T/after-full.f32" || die "logits differ after a full disk"

# kill -9 part way (whenever it lands), then the next run finishes.
"$SLUICE" stripe --model "$T/m" --drives "$T/d1:1,$T/d2:1" > /dev/null 2>&1 &
pid=$!
sleep 0.05
kill -9 $pid 2> /dev/null || true
wait $pid 2> /dev/null || true
"$SLUICE" "${LOGITS[@]}" --out "$T/after-kill.f32" 2> /dev/null
cmp -s "$T/plain.f32" "$T/after-kill.f32" || die "logits differ after kill -9"
"$SLUICE" stripe --model "$T/m" --drives "$T/d1:1,$T/d2:1" > "$T/s1" || die "stripe failed: $(cat "$T/s1")"
[ -s "$T/m/stripe.json" ] || die "no stripe.json"
if find "$T/d1" "$T/d2" -name '*.tmp.*' | grep -q .; then die "temps left behind"; fi
"$SLUICE" stripe --model "$T/m" --drives "$T/d1:1,$T/d2:1" | grep -q "up to date" || die "second run is not up to date"

"$SLUICE" "${LOGITS[@]}" --out "$T/striped.f32" 2> /dev/null
"$SLUICE" "${LOGITS[@]}" --out "$T/nostripe.f32" --no-stripe 2> /dev/null
cmp -s "$T/striped.f32" "$T/nostripe.f32" || die "striped logits differ from --no-stripe"
# A streamed spine: the model's spine is ~3 MiB, so only budgets within a few
# MiB of the smallest it opens at stream it, and the process baseline is
# measured in each run (ASan's is larger and varies by a few MiB): budgets in
# 1 MiB steps around the suggested one, until a run opens with the spine streamed.
min=$( ("$SLUICE" "${LOGITS[@]}" --out "$T/min.f32" --ram-budget 1M 2>&1 > /dev/null || true) |
  sed -n 's/.*try --ram-budget \([0-9]*\)M.*/\1/p')
[ -n "$min" ] || die "no smallest budget suggested"
streamed=""
for b in $(seq $((min - 6)) $((min + 6))); do
  "$SLUICE" "${LOGITS[@]}" --out "$T/streamed.f32" --ram-budget ${b}M 2> "$T/streamed.err" || continue
  if grep -q "streamed through" "$T/streamed.err"; then streamed=$b; break; fi
done
[ -n "$streamed" ] || die "no budget near ${min}M streamed the spine: $(grep 'memory plan' "$T/streamed.err")"
cmp -s "$T/striped.f32" "$T/streamed.f32" || die "striped logits with a streamed spine differ"

# A drive failing mid-run (every read of one of its files fails): the experts
# it holds are read from the shards, with a warning naming the file; same bits.
f=$(ls "$T"/d2/sluice-stripe-m/*.spans | head -1)
SLUICE_FAULT_READ="eio:$f:0+$(stat -c %s "$f")" "$SLUICE" "${LOGITS[@]}" --out "$T/failing.f32" 2> "$T/failing.err" ||
  die "a failing drive failed the run: $(cat "$T/failing.err")"
grep -q "$f.*from the shards" "$T/failing.err" || die "no warning naming the failing drive's file: $(cat "$T/failing.err")"
cmp -s "$T/striped.f32" "$T/failing.f32" || die "logits differ with a failing drive"

# The stripe is really read: zero the experts on drive 2 and the logits change; verify names the drive.
for f in "$T"/d2/sluice-stripe-m/*.spans; do
  head -c $(( $(stat -c %s "$f") - 16 )) /dev/zero | dd of="$f" conv=notrunc status=none  # the spans, not the trailer
done
"$SLUICE" "${LOGITS[@]}" --out "$T/damaged.f32" 2> /dev/null
if cmp -s "$T/striped.f32" "$T/damaged.f32"; then die "damaged stripe files were not read"; fi
if "$SLUICE" verify --model "$T/m" > "$T/v.out" 2>&1; then die "verify passed a damaged stripe"; fi
grep -q "$T/d2/sluice-stripe-m" "$T/v.out" || die "verify does not name the drive's file: $(cat "$T/v.out")"
"$SLUICE" verify --model "$T/m" --repair > "$T/r.out" 2>&1 || die "verify --repair failed: $(cat "$T/r.out")"
"$SLUICE" verify --model "$T/m" > /dev/null 2>&1 || die "verify fails after --repair"

# A drive gone: a warning naming it, the shards' bytes.
rm -rf "$T/d2"
"$SLUICE" "${LOGITS[@]}" --out "$T/gone.f32" 2> "$T/gone.err"
grep -q "drive $T/d2" "$T/gone.err" || die "no warning naming the missing drive: $(cat "$T/gone.err")"
cmp -s "$T/striped.f32" "$T/gone.f32" || die "logits differ with a drive gone"

# bench: one drives entry per drive.
"$SLUICE" stripe --model "$T/m" --drives "$T/d1:1,$T/d2:1" > /dev/null
"$SLUICE" bench --model "$T/m" --json --prompt-tokens 4 --decode 3 --probe-seconds 0.2 > "$T/bench.json" 2> /dev/null
python3 -c "
import json,sys
j=json.load(open('$T/bench.json'))
d=j['drives']
assert len(d)==2, d
assert all(isinstance(x['bytes_per_token'],(int,float)) for x in d), d
assert all(x['ceiling_gbps']>0 for x in d), d
" || die "bench drives: $(head -c 600 "$T/bench.json")"
echo ok
