#!/usr/bin/env bash
# Checks that tests/layering.sh can fail: on copies of a tiny src/ tree it
# must pass the clean tree and catch an architecture's header included above
# the model interface, and an upward include.
# Usage: layering_selftest.sh LAYERING_SH
set -u
check=${1:?usage: layering_selftest.sh LAYERING_SH}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

tree() {  # a clean tree: engine sees a model through model/ and arch/
  rm -rf "$tmp/src"
  mkdir -p "$tmp/src"/{base,model,k3,arch,engine}
  echo '#pragma once' > "$tmp/src/base/bytes.h"
  echo '#include "base/bytes.h"' > "$tmp/src/model/model.h"
  echo '#include "model/model.h"' > "$tmp/src/k3/model.h"
  echo '#include "k3/model.h"' > "$tmp/src/arch/open.cpp"
  printf '#include "arch/open.h"\n#include "model/model.h"\n' > "$tmp/src/engine/session.cpp"
  echo '#include "k3/model.h"' > "$tmp/src/engine/session_test.cpp"  # tests may look inside
}

expect() {  # expect WANT_RC PATTERN WHAT
  local out rc
  out=$(bash "$check" "$tmp/src" 2>&1)
  rc=$?
  if [[ $rc -ne $1 ]] || ! grep -qE "$2" <<< "$out"; then
    echo "FAIL: $3: exit $rc, output: $out"
    fails=1
  fi
}

tree
expect 0 '^$' "a clean tree passes"

tree
echo '#include "k3/model.h"' >> "$tmp/src/engine/session.cpp"
expect 1 'engine/session.cpp:3: src/engine/ includes k3/model.h, an architecture' "engine including k3/"

tree
mkdir -p "$tmp/src/cli"
echo '#  include "k3/state.h"' > "$tmp/src/cli/cmd.h"
expect 1 'cli/cmd.h:1: src/cli/ includes k3/state.h' "cli including k3/ (spaced #include)"

tree
echo '#include "engine/session.h"' >> "$tmp/src/model/model.h"
expect 1 'model/model.h:2: src/model/ includes engine/, which is not below it' "an upward include"

exit $fails
