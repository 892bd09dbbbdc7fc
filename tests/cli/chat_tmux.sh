#!/usr/bin/env bash
# The interactive chat on a real terminal (tmux): a line edited with the
# arrow/backspace keys is sent as edited, a pasted block of three lines is one
# turn, /reset forgets the conversation, /help answers without the model,
# Ctrl-C at the prompt clears the line and keeps the conversation, /save FILE
# writes it, and /exit quits. Greedy replies on nanoK3 are compared with `run --chat`.
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
pane_has '/save FILE' || die "/help does not list /save"
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

# 6. Ctrl-C at the prompt drops the half-typed line and keeps the chat: the next
#    message is sent alone, after the history; /save writes the conversation
#    since /reset (four turns).
tmux send-keys -t "$S" -l 'words to drop'
# Ctrl-C only once readline shows the words: the terminal driver flushes its
# unread input on an interrupt, so words still queued would vanish unseen.
wait_for pane_has '> words to drop' || die "the typed words were not echoed at the prompt"
tmux send-keys -t "$S" C-c
fresh_prompt() {  # the last line drawn is an empty prompt, after the dropped words
  snap
  local last
  last=$(grep -v '^ *$' "$T/pane" | tail -n 1) || return 1
  [[ $last =~ ^\>\ *$ ]] && grep -q 'words to drop' "$T/pane"
}
wait_for fresh_prompt || die "Ctrl-C at the prompt did not give a fresh prompt"
tmux send-keys -t "$S" -l 'Hello'
tmux send-keys -t "$S" Enter
wait_for turns_are 5 || die "no reply after Ctrl-C at the prompt (did it quit?)"
tmux send-keys -t "$S" -l "/save $T/chat.json"
tmux send-keys -t "$S" Enter
wait_for pane_has 'saved 8 messages' || die "/save did not report 8 messages"
python3 - "$T/chat.json" "$PASTE" <<'PY' || die "the saved conversation is wrong: $(cat "$T/chat.json")"
import json, sys
m = json.load(open(sys.argv[1]))["messages"]
assert [x["role"] for x in m] == ["user", "assistant"] * 4, m
assert [x["content"] for x in m[0::2]] == [sys.argv[2], "Hello", "Hello", "Hello"], m
PY
tmux send-keys -t "$S" -l "/save $T/no/such/dir/chat.json"
tmux send-keys -t "$S" Enter
wait_for pane_has 'sluice: /save: ' || die "a failed /save said nothing"
tmux send-keys -t "$S" -l '/exit'
tmux send-keys -t "$S" Enter
wait_for pane_has 'EXITED-0' || die "/exit did not quit cleanly"
echo "PASS"
