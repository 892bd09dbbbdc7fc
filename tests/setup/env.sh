#!/usr/bin/env bash
# The Hugging Face tools' environment reaches the hub (nginx access log):
# HF_ENDPOINT instead of --hub, the token from $HF_HOME/token when HF_TOKEN is
# unset; --include/--exclude pick files; an unreachable hub's retries are
# reported on stderr instead of silence.
source "$(dirname "$0")/lib.sh"

make_hub "$T/hub"
start_nginx "$T/hub"
LOG=$T/nginx/access.log

step "HF_ENDPOINT and \$HF_HOME/token, with --include/--exclude"
mkdir -p "$T/hfhome"
printf '%s\n' "$TOKEN" > "$T/hfhome/token"
HF_TOKEN= HF_HOME="$T/hfhome" HF_ENDPOINT="http://127.0.0.1:$NGINX_PORT/" \
  "$SLUICE" setup --repo $REPO --dest "$T/sel" --full --include '*.json' --include 'tiktoken.*' \
  --exclude 'model.safetensors.index.json' > "$T/out"
cat "$T/out"
grep -q "GET \"/api/models/$REPO/revision/main?blobs=true\" 200 .*auth=\"Bearer $TOKEN\"" "$LOG" \
  || die "the hub at HF_ENDPOINT was not asked with the token from \$HF_HOME/token"
for f in config.json tokenizer_config.json tiktoken.model; do
  cmp -s "$MODEL/$f" "$T/sel/$f" || die "$f not installed"
done
[ ! -e "$T/sel/model.safetensors.index.json" ] || die "--exclude did not exclude the index"
if ls "$T/sel"/*.safetensors >/dev/null 2>&1; then die "--include let shards through"; fi
grep -q "resolve/$COMMIT/config.json" "$LOG" || die "files not fetched through HF_ENDPOINT"

step "without any token the hub refuses, and the message says where a token comes from"
HF_TOKEN= HF_HOME="$T/empty" HF_ENDPOINT="http://127.0.0.1:$NGINX_PORT" \
  must_fail "$SLUICE" setup --repo $REPO --dest "$T/none" --full
grep -q "HTTP 401" "$T/err" || die "no 401 reported"

step "an unreachable hub: every retry is reported, and the failure says what to check"
# A port nothing listens on: nginx's, after stopping nothing else uses it; take a fresh closed one.
closed=$((NGINX_PORT + 1))
while port_open "$closed"; do closed=$((closed + 1)); done
HF_ENDPOINT="http://127.0.0.1:$closed" must_fail "$SLUICE" setup --repo $REPO --dest "$T/down" --full \
  --retries 2 --backoff-ms 10
[ "$(grep -c 'retry [0-9] of 2' "$T/err")" = 2 ] || die "retries were not reported"
grep -q "giving up after 3 failed attempts" "$T/err" || die "no final failure"
grep -q "(is http://127.0.0.1:$closed reachable? check the network, and --hub or \$HF_ENDPOINT" "$T/err" \
  || die "the failure gives no hint"

echo "PASS"
