#!/usr/bin/env bash
# Setup end to end against a real nginx serving the k3-tiny fixture in the hub's
# layout: Full and Stream installs, logits identical between them, reruns that
# fetch nothing, the span cache (hits, bound, corruption), verify and repair.
source "$(dirname "$0")/lib.sh"

serve_fixture
stat_field() { grep -o "\"$2\":[0-9.]*" "$1" | cut -d: -f2; }

step "full install"
m=$(log_mark)
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/full" --full --jobs 3
same_as_fixture "$T/full"
[ -f "$T/full/.sluice-setup.json" ] || die "no setup manifest"
[ ! -e "$T/full/.sluice-stream.json" ] || die "full install has a stream manifest"
[ ! -e "$T/full/.partial" ] || die "partial directory left behind"
log_since "$m" > "$T/since"
grep -q "GET \"/api/models/$REPO/revision/main?blobs=true\" 200 .*auth=\"Bearer $TOKEN\"" "$T/since" \
  || die "the file list was not asked for with ?blobs=true and the token"
grep -q "\"/$REPO/resolve/$COMMIT/config.json\" 302" "$T/since" || die "files not fetched at the pinned commit"
"$SLUICE" verify --model "$T/full"
"$SLUICE" logits --model "$T/full" --tokens $TOKENS --out "$T/full.f32" --stats 2> "$T/full.stats"
grep -q '"expert_source":"local"' "$T/full.stats" || die "full install does not read experts locally"

step "full rerun fetches nothing"
m=$(log_mark)
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/full" --full > "$T/out"
cat "$T/out"
grep -q "0 files fetched, 7 already complete" "$T/out" || die "rerun did not skip complete files"
[ "$(log_since "$m" | grep -c resolve/ || true)" = 0 ] || die "rerun downloaded files again"

step "files already in place but not in the manifest are hashed, not downloaded"
rm "$T/full/.sluice-setup.json"
m=$(log_mark)
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/full" --full > "$T/out"
grep -q "0 files fetched, 7 already complete" "$T/out" || { cat "$T/out"; die "existing files were not adopted"; }
[ "$(log_since "$m" | grep -c resolve/ || true)" = 0 ] || die "adopting made file requests"
"$SLUICE" verify --model "$T/full"

step "full install without a token is refused clearly"
HF_TOKEN= must_fail "$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/notoken" --full
grep -q "HTTP 401" "$T/err" || die "no clear 401 message"

step "stream install"
m=$(log_mark)
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/stream" --stream --jobs 2
[ -f "$T/stream/.sluice-stream.json" ] || die "no stream manifest"
for f in config.json model.safetensors.index.json tiktoken.model tokenizer_config.json; do
  cmp -s "$MODEL/$f" "$T/stream/$f" || die "stream: $f differs"
done
spine=0
for n in $(grep -o '"spine_bytes": [0-9]*' "$T/stream/.sluice-setup.json" | grep -o '[0-9]*$'); do spine=$((spine + n)); done
served=$(log_since "$m" | grep '\.safetensors" 206' | awk '{s += $4} END {print s + 0}')
[ "$served" = "$spine" ] || die "stream setup received $served shard bytes, expected exactly the $spine header+spine bytes"
for f in "$MODEL"/*.safetensors; do
  local_f=$T/stream/$(basename "$f")
  [ "$(stat -c %s "$local_f")" = "$(stat -c %s "$f")" ] || die "sparse shard has the wrong size"
  [ $(($(stat -c %b "$local_f") * 512)) -lt "$(stat -c %s "$f")" ] || die "$local_f is not sparse"
  cmp -s -n 8 "$f" "$local_f" || die "$local_f: header differs"
done
"$SLUICE" verify --model "$T/stream"

step "stream logits equal full logits; the first run fetches, the second hits the cache"
m=$(log_mark)
"$SLUICE" logits --model "$T/stream" --tokens $TOKENS --out "$T/stream1.f32" --stats 2> "$T/s1"
cat "$T/s1"
cmp "$T/full.f32" "$T/stream1.f32" || die "stream logits differ from full logits"
[ "$(stat_field "$T/s1" spans_fetched)" -gt 0 ] || die "no spans fetched"
[ "$(stat_field "$T/s1" cache_hits)" = 0 ] || die "unexpected cache hits"
[ "$(stat_field "$T/s1" spans_fetched)" = "$(stat_field "$T/s1" spans_requested)" ] || die "fetched != requested"
ranged=$(log_since "$m" | grep -c '\.safetensors" 206' || true)
[ "$ranged" = "$(stat_field "$T/s1" spans_fetched)" ] || die "expected one 206 per span, saw $ranged"
log_since "$m" > "$T/since"
grep -q 'req=[2-9]' "$T/since" || die "no keep-alive connection reuse"
m=$(log_mark)
"$SLUICE" logits --model "$T/stream" --tokens $TOKENS --out "$T/stream2.f32" --stats 2> "$T/s2"
cat "$T/s2"
cmp "$T/full.f32" "$T/stream2.f32" || die "cached stream logits differ"
[ "$(stat_field "$T/s2" network_bytes)" = 0 ] || die "second run used the network"
[ "$(stat_field "$T/s2" cache_hits)" = "$(stat_field "$T/s2" spans_requested)" ] || die "second run missed the cache"
[ "$(log_since "$m" | wc -l)" = 0 ] || die "second run made requests"
"$SLUICE" run --model "$T/stream" --tokens $TOKENS --max-new 4 --ids --stats > "$T/run.out" 2> "$T/run.stats"
"$SLUICE" run --model "$T/full" --tokens $TOKENS --max-new 4 --ids > "$T/run.full"
cmp "$T/run.out" "$T/run.full" || die "greedy tokens differ between stream and full"
grep -q network_bytes_per_token "$T/run.stats" || die "run --stats has no per-token network bytes"

step "a corrupted cache entry: verify finds it, repair deletes it, the engine refetches"
entry=$(ls "$T/stream/.span-cache" | sed -n 1p)
printf '\xff' | dd of="$T/stream/.span-cache/$entry" bs=1 seek=100 conv=notrunc status=none
must_fail "$SLUICE" verify --model "$T/stream" > "$T/v1"
grep -q "PROBLEM .*$entry.*sha256 mismatch" "$T/v1" || { cat "$T/v1"; die "verify missed the bad entry"; }
"$SLUICE" verify --model "$T/stream" --repair > "$T/v2"
grep -q "repaired: deleted" "$T/v2" || { cat "$T/v2"; die "repair did not delete"; }
[ ! -e "$T/stream/.span-cache/$entry" ] || die "bad entry still there"
"$SLUICE" verify --model "$T/stream"
entry=$(ls "$T/stream/.span-cache" | sed -n 1p)
printf '\x00\x01' | dd of="$T/stream/.span-cache/$entry" bs=1 seek=7 conv=notrunc status=none
"$SLUICE" logits --model "$T/stream" --tokens $TOKENS --out "$T/stream3.f32" --stats 2> "$T/s3"
cat "$T/s3"
cmp "$T/full.f32" "$T/stream3.f32" || die "logits differ after a corrupt entry"
[ "$(stat_field "$T/s3" cache_corrupt)" = 1 ] || die "the corrupt entry was not detected at read"
[ "$(stat_field "$T/s3" spans_fetched)" = 2 ] || die "expected the deleted and the corrupt span to be refetched"
"$SLUICE" verify --model "$T/stream"

step "a corrupted spine byte is found by verify"
cp -a "$T/stream" "$T/stream-bad"
printf '\x55' | dd of="$T/stream-bad/model-00002-of-00003.safetensors" bs=1 seek=20000 conv=notrunc status=none
must_fail "$SLUICE" verify --model "$T/stream-bad" > "$T/v3"
grep -q "PROBLEM model-00002-of-00003.safetensors: header+spine sha256" "$T/v3" || { cat "$T/v3"; die "spine corruption missed"; }

step "a bounded cache stays within its bound and still gives the same logits"
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/small" --stream --max-cache-bytes 60000 --connections 3
for i in 1 2; do
  "$SLUICE" logits --model "$T/small" --tokens $TOKENS --out "$T/small.f32" --stats 2> "$T/s4"
  cmp "$T/full.f32" "$T/small.f32" || die "bounded-cache logits differ"
done
cat "$T/s4"
used=$(cat "$T/small/.span-cache"/* | wc -c)
[ "$used" -le 60000 ] || die "span cache holds $used bytes, bound 60000"
[ "$(stat_field "$T/s4" cache_evictions)" -gt 0 ] || die "no evictions"
"$SLUICE" verify --model "$T/small"

step "stream install with --pack lossless: the spine is packed once it lands, same logits, rerun keeps the pack"
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/packed" --stream --pack lossless > "$T/out"
cat "$T/out"
grep -q "^wrote $T/packed/spine.lossless.pack: " "$T/out" || die "setup --pack did not write the pack"
"$SLUICE" verify --model "$T/packed" > "$T/v4" || { cat "$T/v4"; die "verify rejects the packed stream install"; }
"$SLUICE" logits --model "$T/packed" --spine lossless --tokens $TOKENS --out "$T/packed.f32"
cmp "$T/full.f32" "$T/packed.f32" || die "logits through the pack of a stream install differ from full logits"
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/packed" --stream --pack lossless > "$T/out"
grep -q "^up to date $T/packed/spine.lossless.pack" "$T/out" || { cat "$T/out"; die "setup --pack rerun rewrote the pack"; }
must_fail "$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/packed" --stream --pack zstd
grep -q "pack" "$T/err" || die "no clear error for an unknown --pack"

step "stream rerun fetches no shard bytes"
m=$(log_mark)
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/stream" --stream > "$T/out"
grep -q "0 files fetched, 7 already complete" "$T/out" || { cat "$T/out"; die "stream rerun refetched"; }
[ "$(log_since "$m" | grep -c resolve/ || true)" = 0 ] || die "stream rerun made file requests"

step "full setup over a stream install completes it and switches to local experts"
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/stream" --full
same_as_fixture "$T/stream"
[ ! -e "$T/stream/.sluice-stream.json" ] || die "stream manifest left behind"
[ ! -e "$T/stream/.span-cache" ] || die "span cache left behind"
"$SLUICE" logits --model "$T/stream" --tokens $TOKENS --out "$T/conv.f32" --stats 2> "$T/s5"
grep -q '"expert_source":"local"' "$T/s5" || die "converted install still streams"
cmp "$T/full.f32" "$T/conv.f32" || die "converted logits differ"
"$SLUICE" verify --model "$T/stream"

echo "setup e2e: all passed"
