#!/usr/bin/env bash
# Issue 38's contract: a lossless pack copied from checkpoint A to checkpoint B
# of the same layout (two tiny models of different seeds), or kept after a
# shard was edited, is never used: `run` exits non-zero naming the pack, and
# `sluice pack` rebuilds it (not "up to date"), after which B prints its own
# tokens, identical to --spine bf16.
set -euo pipefail
SLUICE=${SLUICE:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-stale-pack.XXXXXX")
trap 'rm -rf "$T"' EXIT
die() { echo "FAIL: $*" >&2; exit 1; }

"$SLUICE" make-model --preset tiny --seed 1 --out "$T/A" > /dev/null
"$SLUICE" make-model --preset tiny --seed 2 --out "$T/B" > /dev/null
touch -d '1 hour ago' "$T"/A/*.safetensors  # shards older than the pack, as after a download
"$SLUICE" pack --model "$T/A" --spine lossless > /dev/null
cp "$T/A/spine.lossless.pack" "$T/B/"
RUN=(run --tokens 448,259,309 -n 8 --temperature 0)

if "$SLUICE" "${RUN[@]}" --model "$T/B" > "$T/out" 2> "$T/err"; then die "B ran with A's pack: $(cat "$T/out")"; fi
grep -q "$T/B/spine.lossless.pack: pack is stale" "$T/err" || die "the error does not name the pack: $(cat "$T/err")"
grep -q "sluice pack --model $T/B --spine lossless" "$T/err" || die "no rebuild hint: $(cat "$T/err")"

"$SLUICE" pack --model "$T/B" --spine lossless > "$T/pack.out" 2> "$T/pack.err"
grep -q "^wrote " "$T/pack.out" || die "pack did not rebuild the stale pack: $(cat "$T/pack.out")"
grep -q "pack is stale" "$T/pack.err" || die "pack did not say why it rebuilt: $(cat "$T/pack.err")"
"$SLUICE" "${RUN[@]}" --model "$T/B" > "$T/packed" 2> /dev/null
"$SLUICE" "${RUN[@]}" --model "$T/B" --spine bf16 > "$T/bf16" 2> /dev/null
cmp -s "$T/packed" "$T/bf16" || die "B's tokens with its own pack differ from --spine bf16"
"$SLUICE" pack --model "$T/B" --spine lossless | grep -q "^up to date " || die "a fresh pack was rebuilt again"

# An edited shard (same size) makes A's own pack stale.
printf '\x11' | dd of="$(ls "$T"/A/model-00001-*.safetensors)" bs=1 seek=200000 conv=notrunc status=none
if "$SLUICE" "${RUN[@]}" --model "$T/A" --spine lossless > "$T/out" 2> "$T/err"; then die "A ran with a stale pack"; fi
grep -q "$T/A/spine.lossless.pack: pack is stale" "$T/err" || die "edited shard: $(cat "$T/err")"
"$SLUICE" pack --model "$T/A" --spine lossless | grep -q "^wrote " || die "pack did not rebuild after the edit"
echo "ok"
