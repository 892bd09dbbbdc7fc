#!/usr/bin/env bash
# Installs the openai npm client (pinned in package.json / package-lock.json) from
# the npm registry into WORKDIR and runs the end-to-end tests of `sluice serve`
# with node's built-in test runner. Fails, never skips, when node/npm are missing
# or the install fails.
#   run.sh <sluice binary> <model dir> <workdir> [sanitized 0|1]
set -euo pipefail
sluice=$(realpath "$1")
model=$(realpath "$2")
work=$3
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "FAIL: node not found (scripts/install-deps.sh installs it)"; exit 1; }
command -v npm >/dev/null || { echo "FAIL: npm not found (scripts/install-deps.sh installs it)"; exit 1; }
mkdir -p "$work"
cp "$here"/package.json "$here"/package-lock.json "$here"/*.mjs "$work"/
cd "$work"
if ! npm ci --no-audit --no-fund --loglevel=error >npm-install.log 2>&1; then
  cat npm-install.log
  echo "FAIL: npm install of the openai client failed"
  exit 1
fi
# The build says whether it is sanitized (CMake's SLUICE_SANITIZE). Without it, look
# at the binary's libraries, read whole first: `ldd | grep -q` under pipefail fails
# whenever grep's early exit makes ldd die of SIGPIPE, and the tests then ran an
# ASan binary as if it were a release one (CI failed so once).
sanitized=${4:-}
if [ -z "$sanitized" ]; then
  libs=$(ldd "$sluice" 2>/dev/null || true)
  case "$libs" in *libasan*) sanitized=1 ;; *) sanitized=0 ;; esac
fi
export SLUICE_SANITIZED=$sanitized
export SLUICE_BINARY="$sluice" SLUICE_MODEL="$model" SLUICE_NANOK3="$here/../../models/nanok3"
exec node --test --test-concurrency=1 --test-timeout=180000 ./*.test.mjs
