#!/usr/bin/env bash
# Installs js-tiktoken (pinned in package.json / package-lock.json) from the npm
# registry into WORKDIR and runs the parity test against the sluice binary.
# Fails, never skips, when node/npm are missing or the install fails.
#   run_parity.sh <sluice binary> <workdir>
set -euo pipefail
sluice=$(realpath "$1")
work=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "FAIL: node not found (scripts/install-deps.sh installs it)"; exit 1; }
command -v npm >/dev/null || { echo "FAIL: npm not found (scripts/install-deps.sh installs it)"; exit 1; }
mkdir -p "$work"
cp "$here"/package.json "$here"/package-lock.json "$here"/*.mjs "$work"/
cd "$work"
if ! npm install --no-audit --no-fund --loglevel=error >npm-install.log 2>&1; then
  cat npm-install.log
  echo "FAIL: npm install of js-tiktoken failed"
  exit 1
fi
exec node parity.mjs "$sluice"
