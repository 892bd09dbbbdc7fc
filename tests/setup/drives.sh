#!/usr/bin/env bash
# `setup --full --drives`: the routed experts go from the hub straight to a
# stripe over two drives, DEST keeps the header and the spine. Each shard byte
# is fetched once (nginx's access log); the logits are the fixture's; the
# install is a full one (setup manifest "full", no stream manifest) whose
# stripe is moved (--no-stripe refused); verify checks each shard's sha256
# through the drives; a rerun fetches nothing. A hub serving a damaged expert
# (its bytes no longer the listed sha256): setup fails naming the shard and
# keeps no stripe; the hub mended, the rerun fetches only that shard's experts.
source "$(dirname "$0")/lib.sh"

serve_fixture
served_since() { log_since "$1" | grep '\.safetensors" 206' | awk '{s += $4} END {print s + 0}'; }
shard_bytes=0
for f in "$MODEL"/*.safetensors; do shard_bytes=$((shard_bytes + $(stat -c %s "$f"))); done
D="$T/d1:1,$T/d2:1"

"$SLUICE" logits --model "$MODEL" --tokens $TOKENS --out "$T/want.f32" 2>/dev/null
"$SLUICE" logits --model "$MODEL" --tokens $TOKENS --mode step --out "$T/want.step.f32" 2>/dev/null

step "setup --full --drives"
m=$(log_mark)
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/m" --full --drives "$D" --jobs 2 > "$T/out"
cat "$T/out"
grep -q "matches the hub's" "$T/out" || die "no sha256 check through the drives"
served=$(served_since "$m")
[ "$served" = "$shard_bytes" ] || die "shards: $served bytes served, expected each of the $shard_bytes once"
grep -q '"moved": true' "$T/m/stripe.json" || die "the stripe is not moved"
[ ! -e "$T/m/.sluice-stream.json" ] || die "a stream manifest is left"
grep -q '"mode": "full"' "$T/m/.sluice-setup.json" || die "the setup manifest does not say full"
ls "$T"/d1/sluice-stripe-m/*.spans "$T"/d2/sluice-stripe-m/*.spans > /dev/null || die "no drive files"
for f in "$MODEL"/*.safetensors; do
  cmp -s "$f" "$T/m/$(basename "$f")" && die "$(basename "$f") holds its experts in DEST"
done

step "logits through the drives are the fixture's"
"$SLUICE" logits --model "$T/m" --tokens $TOKENS --out "$T/got.f32" 2>/dev/null
cmp "$T/want.f32" "$T/got.f32" || die "prefill logits differ"
"$SLUICE" logits --model "$T/m" --tokens $TOKENS --mode step --out "$T/got.step.f32" 2>/dev/null
cmp "$T/want.step.f32" "$T/got.step.f32" || die "step logits differ"
must_fail "$SLUICE" logits --model "$T/m" --tokens $TOKENS --out "$T/x.f32" --no-stripe
grep -q "moved" "$T/err" || die "--no-stripe not refused clearly"

step "verify reads each shard's experts from the drives"
"$SLUICE" verify --model "$T/m" > "$T/verify"
cat "$T/verify"
[ "$(grep -c 'moved there' "$T/verify")" = 3 ] || die "not every shard checked through the drives"

step "rerun fetches nothing"
m=$(log_mark)
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/m" --full --drives "$D" > "$T/out"
grep -q "0 files written" "$T/out" || { cat "$T/out"; die "the rerun wrote drive files"; }
[ "$(served_since "$m")" = 0 ] || die "the rerun fetched shard bytes"
"$SLUICE" logits --model "$T/m" --tokens $TOKENS --out "$T/got.f32" 2>/dev/null
cmp "$T/want.f32" "$T/got.f32" || die "logits differ after the rerun"

step "a damaged expert on the hub: refused, then fetched again"
S2=model-00002-of-00003.safetensors
cdn=$T/hub/cdn/$REPO/resolve/main/$S2
cp "$cdn" "$T/s2.good"
# The first byte of the first routed expert tensor in shard 2.
at=$(python3 - "$cdn" <<'PY'
import json, struct, sys
with open(sys.argv[1], 'rb') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    h = json.loads(f.read(n))
print(8 + n + min(v['data_offsets'][0] for k, v in h.items() if '.experts.' in k and 'shared' not in k))
PY
)
printf '\x5a' | dd of="$cdn" bs=1 seek="$at" conv=notrunc status=none
must_fail "$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/bad" --full --drives "$T/b1:1,$T/b2:1"
grep -q "$S2: sha256 read through the drives differs" "$T/err" || die "the damaged shard was not named"
[ ! -e "$T/bad/stripe.json" ] || die "a stripe over a damaged expert was kept"
cp "$T/s2.good" "$cdn"
m=$(log_mark)
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/bad" --full --drives "$T/b1:1,$T/b2:1" > "$T/out"
cat "$T/out"
served=$(served_since "$m")
[ "$served" -gt 0 ] && [ "$served" -lt "$shard_bytes" ] || die "the rerun fetched $served bytes (only shard 2's experts are missing)"
"$SLUICE" logits --model "$T/bad" --tokens $TOKENS --out "$T/got.f32" 2>/dev/null
cmp "$T/want.f32" "$T/got.f32" || die "logits differ after the mended rerun"
echo "setup --drives: ok"
