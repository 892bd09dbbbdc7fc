#!/usr/bin/env bash
# The interactive chat on a real terminal (tmux): a line edited with the
# arrow/backspace keys is sent as edited, a pasted block of three lines is one
# turn, /reset forgets the conversation, /help answers without the model, and
# /exit quits. Greedy replies on nanoK3 are compared with `run --chat`.
set -euo pipefail
SLUICE=${SLUICE:?}
SRC=${SRC:?}
MODEL=$SRC/models/nanok3
command -v tmux >/dev/null || { echo "FAIL: tmux not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-chat-test.XXXXXX")
S=sluice-chat-$$
export TMUX_TMPDIR=$T  # a private tmux server, gone with the test
cleanup() { tmux kill-server 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
die() { echo "FAIL: $*" >&2; echo "--- pane:" >&2; cat "$T/pane" >&2 2>/dev/null || true; exit 1; }

ARGS=(--model "$MODEL" -n 12 --temperature 0 --stats)
# The references: single chat turns, as --chat sends them.
"$SLUICE" run "${ARGS[@]}" --chat "Hello" > "$T/ref1.out" 2> "$T/ref1.err"
printf -v PASTE 'line one\nline two\nline three'
"$SLUICE" run "${ARGS[@]}" --chat "$PASTE" > "$T/ref3.out" 2> "$T/ref3.err"
prompt_of() { grep -o 'prompt [0-9]* tokens' "$1" | head -n 1; }
P1=$(prompt_of "$T/ref1.err")
P3=$(prompt_of "$T/ref3.err")
[ -n "$P1" ] && [ -n "$P3" ] && [ "$P1" != "$P3" ] || die "reference prompts: '$P1' '$P3'"

snap() { tmux capture-pane -p -J -S - -t "$S" > "$T/pane" 2>/dev/null || true; }
turns() { snap; grep -c '^sluice: prompt ' "$T/pane" || true; }
wait_for() {  # wait_for COMMAND...: until it succeeds, 60 s at most
  for _ in $(seq 600); do "$@" && return 0; sleep 0.1; done
  return 1
}
turns_are() { [ "$(turns)" = "$1" ]; }
pane_has() { snap; grep -q -- "$1" "$T/pane"; }

tmux -f /dev/null new-session -d -s "$S" -x 200 -y 50 "$SLUICE run ${ARGS[*]} 2>&1; echo EXITED-\$?; sleep 30"
wait_for pane_has '^> ' || die "no prompt"

# 1. Type "Helo x", then edit: BSpace twice, Left, insert "l", End, Enter -> "Hello".
tmux send-keys -t "$S" -l 'Helo x'
tmux send-keys -t "$S" BSpace BSpace Left l End Enter
wait_for turns_are 1 || die "the edited line gave no reply"
grep -q "prompt ${P1#prompt } " "$T/pane" || die "the edited line was not 'Hello' ($P1 expected)"
grep -qF "$(head -n 1 "$T/ref1.out")" "$T/pane" || die "the reply differs from run --chat Hello"

# 2. /help answers without the model.
tmux send-keys -t "$S" -l '/help'
tmux send-keys -t "$S" Enter
wait_for pane_has '/reset  forget' || die "/help did not list the commands"
[ "$(turns)" = 1 ] || die "/help went to the model"

# 3. /reset, then paste three lines at once (bracketed paste): one turn, a fresh conversation.
tmux send-keys -t "$S" -l '/reset'
tmux send-keys -t "$S" Enter
wait_for pane_has 'conversation reset' || die "/reset not acknowledged"
tmux set-buffer -b paste "$PASTE"
tmux paste-buffer -p -b paste -t "$S"
tmux send-keys -t "$S" Enter
wait_for turns_are 2 || die "the pasted block gave no reply"
sleep 1
[ "$(turns)" = 2 ] || die "the pasted block was more than one turn"
grep "^sluice: prompt " "$T/pane" | tail -n 1 | grep -q "${P3}" \
  || die "the pasted turn is not the three lines in a fresh conversation ($P3 expected)"

# 4. Without /reset the next turn carries the history: a longer prompt than the fresh one.
tmux send-keys -t "$S" -l 'Hello'
tmux send-keys -t "$S" Enter
wait_for turns_are 3 || die "no third reply"
n=$(grep "^sluice: prompt " "$T/pane" | tail -n 1 | grep -o 'prompt [0-9]*' | cut -d' ' -f2)
[ "$n" -gt "${P1//[!0-9]/}" ] || die "the third turn did not carry the history ($n tokens)"

# 5. Up arrow recalls the last line (history) and sends it again; /exit quits with status 0.
tmux send-keys -t "$S" Up Enter
wait_for turns_are 4 || die "Up did not recall the last line"
tmux send-keys -t "$S" -l '/exit'
tmux send-keys -t "$S" Enter
wait_for pane_has 'EXITED-0' || die "/exit did not quit cleanly"
echo "PASS"
