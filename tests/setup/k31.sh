#!/usr/bin/env bash
# Setup of a Kimi K3.1 Pro repository (issue 36, docs/k31-spec.md §1-2): a
# k31-tiny checkpoint (KimiK31ForConditionalGeneration, dsa_config, indexer
# tensors) served in the hub's layout installs full and stream, opens, and
# both installs give the same logits over a prompt longer than its top-k.
source "$(dirname "$0")/lib.sh"

"$SLUICE" make-model --preset k31-tiny --out "$T/k31" > /dev/null
MODEL=$T/k31
REPO=sluice-test/k31-tiny
make_hub "$T/hub"
start_nginx "$T/hub"
HUB=http://127.0.0.1:$NGINX_PORT
PROMPT=$TOKENS,$TOKENS,$TOKENS,$TOKENS  # 40 tokens: past top-k 16

step "full install of a K3.1 Pro layout"
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/full" --full --jobs 2
same_as_fixture "$T/full"
grep -q '"KimiK31ForConditionalGeneration"' "$T/full/config.json" || die "not the K3.1 layout"
grep -q '"dsa_config"' "$T/full/config.json" || die "no dsa_config"
"$SLUICE" verify --model "$T/full"
"$SLUICE" logits --model "$T/full" --tokens $PROMPT --out "$T/full.f32"

step "stream install gives the same logits"
"$SLUICE" setup --repo $REPO --hub "$HUB" --dest "$T/stream" --stream --jobs 2
"$SLUICE" logits --model "$T/stream" --tokens $PROMPT --out "$T/stream.f32"
cmp "$T/full.f32" "$T/stream.f32" || die "stream install's logits differ from the full install's"
echo "PASS"
