#!/usr/bin/env bash
# `kill -9` during setup, then a rerun: finished files are not downloaded
# again (checked in nginx's access log), the interrupted one resumes from
# where its partial download stopped, and the result is whole. Full mode and
# stream mode. The first run goes through the fault proxy, which holds one
# transfer halfway (a long stall) so that the kill lands mid-transfer; the
# rerun talks to nginx directly and its access log shows what was fetched.
source "$(dirname "$0")/lib.sh"
PROXY=${PROXY:?}

make_hub "$T/hub"
start_nginx "$T/hub"
LOG=$T/nginx/access.log
S1=model-00001-of-00003.safetensors
S3=model-00003-of-00003.safetensors
size_of() { stat -c %s "$MODEL/$1"; }
file_size() { stat -c %s "$1" 2>/dev/null || echo 0; }

# wait_for SECONDS CONDITION...: polls until the condition holds.
wait_for() {
  local limit=$1
  shift
  for i in $(seq $((limit * 20))); do "$@" && return 0; sleep 0.05; done
  return 1
}

step "full: kill -9 while the second file downloads, then rerun"
start_proxy hold1 "match=cdn/*$S3,stall=60000,times=1"
"$SLUICE" setup --repo $REPO --hub "http://127.0.0.1:$PROXY_PORT" --dest "$T/full" --full --jobs 1 --stall-timeout 120 \
  > "$T/run1" 2>&1 &
pid=$!
PIDS+=("$pid")
part_started() { [ -e "$T/full/$S1" ] && [ "$(file_size "$T/full/.partial/$S3.part")" = $(($(size_of $S3) / 2)) ]; }
wait_for 20 part_started || die "the first file never finished (or the second never started)"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
stop_proxy
have=$(file_size "$T/full/.partial/$S3.part")
echo "killed with $S3 at $have of $(size_of $S3) bytes"
[ "$have" -lt "$(size_of $S3)" ] || die "killed too late"
[ ! -e "$T/full/$S3" ] || die "an interrupted file was installed"
mark=$(wc -l < "$LOG")
"$SLUICE" setup --repo $REPO --hub "http://127.0.0.1:$NGINX_PORT" --dest "$T/full" --full
rerun=$(tail -n +$((mark + 1)) "$LOG")
grep -q "$S1" <<< "$rerun" && die "the rerun downloaded the finished $S1 again"
grep -q "\"/cdn/.*$S3\" 206 $(($(size_of $S3) - have)) \"bytes=$have-" <<< "$rerun" \
  || { echo "$rerun"; die "the rerun did not resume $S3 from byte $have"; }
same_as_fixture "$T/full"
"$SLUICE" verify --model "$T/full"

step "stream: kill -9 during the spine download, then rerun"
# S3's ranged requests: two for the header, then one per spine run; hold the second run.
start_proxy hold2 "match=cdn/*$S3,ranged=yes,skip=3,stall=60000,times=1"
"$SLUICE" setup --repo $REPO --hub "http://127.0.0.1:$PROXY_PORT" --dest "$T/stream" --stream --jobs 1 --stall-timeout 120 \
  > "$T/run2" 2>&1 &
pid=$!
PIDS+=("$pid")
spine_started() { [ -e "$T/stream/$S1" ] && [ -e "$T/stream/.partial/$S3.sparse.json" ]; }
wait_for 20 spine_started || die "the first shard never finished (or the second never started)"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
stop_proxy
[ ! -e "$T/stream/$S3" ] || die "killed too late"
[ ! -e "$T/stream/.sluice-stream.json" ] || die "an interrupted stream install looks complete"
mark=$(wc -l < "$LOG")
"$SLUICE" setup --repo $REPO --hub "http://127.0.0.1:$NGINX_PORT" --dest "$T/stream" --stream
rerun=$(tail -n +$((mark + 1)) "$LOG")
grep -q "$S1" <<< "$rerun" && die "the rerun fetched the finished $S1 again"
spine3=$(grep -A8 "\"$S3\": {" "$T/stream/.sluice-setup.json" | grep -o '"spine_bytes": [0-9]*' | grep -o '[0-9]*$')
got3=$(echo "$rerun" | grep "/cdn/.*$S3\" 206" | awk '{s += $4} END {print s + 0}')
echo "rerun fetched $got3 of $S3's $spine3 header+spine bytes"
[ "$got3" -lt "$spine3" ] || die "the rerun fetched all of $S3's spine again"
"$SLUICE" verify --model "$T/stream"
"$SLUICE" logits --model "$MODEL" --tokens $TOKENS --out "$T/ref.f32"
"$SLUICE" logits --model "$T/stream" --tokens $TOKENS --out "$T/stream.f32"
cmp "$T/ref.f32" "$T/stream.f32" || die "logits differ after an interrupted stream setup"

echo "setup kill9: all passed"
