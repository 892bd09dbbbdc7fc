#!/usr/bin/env bash
# The layering rule: a folder of src/ includes only itself and the folders
# below it. The order (docs/design.md draws it; CMakeLists.txt links the same):
#   base <- checkpoint <- io <- hub
#   base <- kernels
#   checkpoint, io, hub, kernels <- pack (spine packs; hub for sha256)
#   checkpoint, io, kernels, pack <- k3 <- engine (also hub: stream installs)
#   base <- text
#   engine, text <- serve <- cli
# Tests (*_test.cpp) may reach up: they check a folder through the layers
# above it. A test helper in src/ (*test_util.h) keeps its folder's layering;
# one that reaches up lives in tests/support/. Only tests include a helper.
# Usage: layering.sh SRC_DIR   (exit 1 and one line per upward include)
set -u
src=${1:?usage: layering.sh SRC_DIR}
declare -A below=(
  [base]=""
  [checkpoint]="base"
  [io]="base checkpoint"
  [hub]="base checkpoint io"
  [kernels]="base"
  [pack]="base checkpoint io hub kernels"
  [k3]="base checkpoint io kernels pack"
  [engine]="base checkpoint io hub kernels pack k3"
  [text]="base"
  [serve]="base checkpoint io hub kernels pack k3 engine text"
  [cli]="base checkpoint io hub kernels pack k3 engine text serve"
)
bad=0
for dir in "$src"/*/; do
  folder=$(basename "$dir")
  if [[ ! -v below[$folder] ]]; then
    echo "layering: src/$folder/ has no place in the order (add it to tests/layering.sh)"
    bad=1
    continue
  fi
  allowed=" $folder ${below[$folder]} "
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    target=$(sed -E 's/.*#include "([A-Za-z0-9_]+)\/.*/\1/' <<< "${rest#*:}")
    if [[ "$allowed" != *" $target "* ]]; then
      echo "layering: ${file#"$src"/}:$line: src/$folder/ includes $target/, which is not below it"
      bad=1
    fi
  done < <(grep -rnE '^\s*#\s*include "[A-Za-z0-9_]+/' "$dir" --include='*.h' --include='*.cpp' \
             --include='*.cu' --include='*.cuh' | grep -vE '_test\.cpp:')
done
while IFS= read -r hit; do
  echo "layering: ${hit#"$src"/}: only tests include a test helper"
  bad=1
done < <(grep -rnE '^\s*#\s*include "[A-Za-z0-9_/]*test_util\.h"' "$src" --include='*.h' --include='*.cpp' \
           --include='*.cu' --include='*.cuh' | grep -vE '(_test\.cpp|test_util\.h):')
exit $bad
