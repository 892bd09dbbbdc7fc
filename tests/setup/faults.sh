#!/usr/bin/env bash
# Setup under faults, injected by the fault proxy (fault_proxy.cpp) in front of
# nginx: an interrupted transfer resumed by a rerun and within a run, 5xx and
# stalls (retried), a server that ignores Range (full: restarted from byte 0;
# stream: refused), short 206 responses, a hub down at run time (retries shown,
# a hint on failure), a corrupted byte (not installed), and a full disk (clear
# error, nothing half-written).
source "$(dirname "$0")/lib.sh"
PROXY=${PROXY:?}

make_hub "$T/hub"
start_nginx "$T/hub"
FAST=(--backoff-ms 20 --stall-timeout 1)
S1=model-00001-of-00003.safetensors
S2=model-00002-of-00003.safetensors
S3=model-00003-of-00003.safetensors
size_of() { stat -c %s "$MODEL/$1"; }
setup_via() {  # setup_via PORT DEST MODE ARGS...
  local port=$1 dest=$2 mode=$3
  shift 3
  "$SLUICE" setup --repo $REPO --hub "http://127.0.0.1:$port" --dest "$dest" "$mode" "${FAST[@]}" "$@"
}
"$SLUICE" logits --model "$MODEL" --tokens $TOKENS --out "$T/ref.f32"

step "interrupted transfer, then a rerun resumes it by Range"
# The cut transfer's resume is refused too, so this run gives up (a resume
# that makes progress is always retried).
start_proxy p1 "match=cdn/*$S1,cut=400000,times=1" "match=cdn/*$S1,status=503"
must_fail setup_via "$PROXY_PORT" "$T/a" --full --retries 1
grep -q "$S1" "$T/err" || die "the error does not name the file"
[ ! -e "$T/a/$S1" ] || die "an interrupted file was installed"
[ "$(stat -c %s "$T/a/.partial/$S1.part")" = 400000 ] || die "partial download not kept"
cmp -s "$MODEL/$S2" "$T/a/$S2" || die "the other files should have completed"
"$SLUICE" verify --model "$T/a" > "$T/v" || true
grep -q "note    .partial/$S1.part: partial download, 400000 of" "$T/v" || { cat "$T/v"; die "verify does not report the partial"; }
stop_proxy
start_proxy p2
setup_via "$PROXY_PORT" "$T/a" --full
grep -q "cdn/.*$S1 range=bytes=400000-[0-9]* status=206 sent=$(($(size_of $S1) - 400000))" "$T/p2.log" \
  || { cat "$T/p2.log"; die "the rerun did not resume from byte 400000"; }
[ "$(grep -c "cdn/.*$S2" "$T/p2.log" || true)" = 0 ] || die "the rerun fetched a complete file again"
same_as_fixture "$T/a"
"$SLUICE" verify --model "$T/a"
stop_proxy

step "a transfer cut twice resumes within one run"
start_proxy p3 "match=cdn/*$S2,cut=300000,times=2"
setup_via "$PROXY_PORT" "$T/b" --full
grep -q "$S2 range=bytes=300000-[0-9]* status=206 sent=300000 fault=cut" "$T/p3.log" || { cat "$T/p3.log"; die "no resume at 300000"; }
grep -q "$S2 range=bytes=600000-[0-9]* status=206" "$T/p3.log" || { cat "$T/p3.log"; die "no resume at 600000"; }
same_as_fixture "$T/b"
stop_proxy

step "5xx answers and a stalled transfer are retried"
start_proxy p4 "match=/api/,status=503,times=2" "match=cdn/*$S3,status=500,times=2" "match=cdn/*$S1,stall=2500,times=1"
setup_via "$PROXY_PORT" "$T/c" --full
[ "$(grep -c "/api/.*status=503" "$T/p4.log")" = 2 ] || die "API 503s not seen"
[ "$(grep -c "$S3.*status=500" "$T/p4.log")" = 2 ] || die "file 500s not seen"
grep -q "$S1 range=bytes=$(($(size_of $S1) / 2))-[0-9]* status=206" "$T/p4.log" || { cat "$T/p4.log"; die "the stalled transfer did not resume"; }
same_as_fixture "$T/c"
stop_proxy

step "too many failures in a row: a clear error"
start_proxy p5 "match=cdn/*$S3,status=503"
must_fail setup_via "$PROXY_PORT" "$T/d" --full --retries 2
grep -q "giving up after 3 failed attempts in a row: HTTP 503" "$T/err" || die "no clear give-up message"
[ ! -e "$T/d/$S3" ] || die "installed a file that never arrived"
stop_proxy

step "a server that ignores Range: full mode restarts the file from byte 0"
start_proxy p6 "match=cdn/*$S1,cut=200000,times=1" "match=cdn/*$S1,ignore_range=1"
setup_via "$PROXY_PORT" "$T/e" --full
grep -q "$S1 range=bytes=200000-[0-9]* status=200 sent=$(size_of $S1) fault=ignore_range" "$T/p6.log" || { cat "$T/p6.log"; die "no 200 answer to the resume"; }
same_as_fixture "$T/e"
"$SLUICE" verify --model "$T/e"

step "a server that ignores Range: stream mode refuses"
must_fail setup_via "$PROXY_PORT" "$T/f" --stream
grep -q "ignores Range requests" "$T/err" || die "no clear refusal"
[ ! -e "$T/f/.sluice-stream.json" ] || die "a refused stream install looks complete"
stop_proxy

step "short 206 answers are completed by further requests"
start_proxy p7 "match=cdn/*safetensors,ranged=yes,short=1000,times=6"
setup_via "$PROXY_PORT" "$T/g" --stream
[ "$(grep -c "fault=short" "$T/p7.log")" = 6 ] || die "short answers not injected"
"$SLUICE" logits --model "$T/g" --tokens $TOKENS --out "$T/g.f32" --stats 2> "$T/g.stats"
cmp "$T/ref.f32" "$T/g.f32" || die "logits differ after short answers"
stop_proxy

step "stream run time: 5xx, stalls and short answers on span requests are retried"
rm -rf "$T/g/.span-cache"
start_proxy p8 "match=cdn/*safetensors,ranged=yes,status=503,times=3" \
  "match=cdn/*safetensors,ranged=yes,stall=2500,skip=3,times=1" "match=cdn/*safetensors,ranged=yes,short=100,skip=4,times=2"
sed -i "s/127.0.0.1:[0-9]*/127.0.0.1:$PROXY_PORT/g" "$T/g/.sluice-stream.json"
sed -i 's/"stall_timeout_s": [0-9]*/"stall_timeout_s": 1/; s/"backoff_ms": [0-9]*/"backoff_ms": 20/' "$T/g/.sluice-stream.json"
"$SLUICE" logits --model "$T/g" --tokens $TOKENS --out "$T/g2.f32" --stats 2> "$T/g2.stats"
cat "$T/g2.stats"
cmp "$T/ref.f32" "$T/g2.f32" || die "logits differ after run-time faults"
[ "$(grep -o '"retries":[0-9]*' "$T/g2.stats" | cut -d: -f2)" -ge 5 ] || die "retries not counted"
stop_proxy

step "stream run time: a server that ignores Range is refused"
rm -rf "$T/g/.span-cache"
start_proxy p9 "match=cdn/*safetensors,ranged=yes,ignore_range=1"
sed -i "s/127.0.0.1:[0-9]*/127.0.0.1:$PROXY_PORT/g" "$T/g/.sluice-stream.json"
must_fail "$SLUICE" logits --model "$T/g" --tokens $TOKENS --out "$T/g3.f32"
grep -q "ignores Range requests" "$T/err" || die "no clear refusal at run time"
[ ! -e "$T/g3.f32" ] || die "logits written despite the failure"
stop_proxy

step "stream run time: a hub that is down: each wait is reported, the failure says what to check"
# The manifest still names the proxy's port, closed now.
rm -rf "$T/g/.span-cache"
must_fail "$SLUICE" logits --model "$T/g" --tokens $TOKENS --out "$T/g4.f32"
grep -q "^sluice: experts: http://127.0.0.1:$PROXY_PORT/.*; retry 1 of [0-9]* in " "$T/err" \
  || die "no retry line while the hub was down: $(cat "$T/err")"
grep -q "giving up after .*check the network.*HF_ENDPOINT.*\.sluice-stream\.json" "$T/err" \
  || die "the failure gives no hint: $(cat "$T/err")"
[ ! -e "$T/g4.f32" ] || die "logits written despite the failure"

step "a corrupted byte: sha256 mismatch, the file is not installed"
start_proxy p10 "match=cdn/*$S2,corrupt=1000000,times=1"
must_fail setup_via "$PROXY_PORT" "$T/h" --full
grep -q "$S2: sha256 mismatch: expected $(sha256_of "$MODEL/$S2")" "$T/err" || die "no sha256 mismatch message"
[ ! -e "$T/h/$S2" ] || die "a corrupted file was installed"
[ ! -e "$T/h/.partial/$S2.part" ] || die "the corrupted download was kept"
cmp -s "$MODEL/$S1" "$T/h/$S1" || die "the other files should be installed"
setup_via "$PROXY_PORT" "$T/h" --full
same_as_fixture "$T/h"
stop_proxy

step "disk full on a small tmpfs"
mkdir -p "$T/small"
if mount -t tmpfs -o size=2m tmpfs "$T/small" 2> "$T/mount.err"; then
  MOUNTS+=("$T/small")
  must_fail "$SLUICE" setup --repo $REPO --hub "http://127.0.0.1:$NGINX_PORT" --dest "$T/small/m" --full
  grep -q "not enough free space: this setup needs" "$T/err" || die "no clear free-space message"
  [ -z "$(ls "$T/small/m")" ] && [ ! -e "$T/small/m/.partial" ] || die "the refused setup wrote files: $(ls -A "$T/small/m")"
  must_fail "$SLUICE" setup --repo $REPO --hub "http://127.0.0.1:$NGINX_PORT" --dest "$T/small/m" --full \
    --skip-space-check --jobs 1
  grep -q "No space left on device" "$T/err" || die "no clear disk-full message"
  # Nothing half-written: every installed file is whole and recorded.
  for f in "$T/small/m"/*; do
    [ -e "$f" ] || continue
    cmp -s "$f" "$MODEL/$(basename "$f")" || die "half-written file $f"
    grep -q "\"$(basename "$f")\": {" "$T/small/m/.sluice-setup.json" || die "$f not recorded"
  done
  [ ! -e "$T/small/m/$S2" ] && [ ! -e "$T/small/m/$S3" ] || die "files that cannot fit are there"
  must_fail "$SLUICE" verify --model "$T/small/m" > "$T/v"
  grep -q "PROBLEM $S2: missing" "$T/v" || { cat "$T/v"; die "verify does not report the missing file"; }
  # With room again, a rerun resumes the partial downloads and completes.
  mount -o remount,size=16m "$T/small"
  "$SLUICE" setup --repo $REPO --hub "http://127.0.0.1:$NGINX_PORT" --dest "$T/small/m" --full
  same_as_fixture "$T/small/m"
  "$SLUICE" verify --model "$T/small/m"
  umount "$T/small"
  MOUNTS=()
else
  echo "SKIP disk-full sub-case: cannot mount a tmpfs here ($(cat "$T/mount.err"))"
fi

echo "setup faults: all passed"
