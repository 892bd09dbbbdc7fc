#!/usr/bin/env bash
# The layering rule: a folder of src/ includes only itself and the folders
# below it. The order (docs/design.md draws it; CMakeLists.txt links the same):
#   base <- checkpoint <- io <- hub
#   base <- kernels
#   checkpoint, io, hub, kernels <- pack (spine packs; hub for sha256)
#   checkpoint, io, kernels, pack <- model (the interface: model/model.h)
#   model <- k3 (an architecture) <- arch (opens a directory as its architecture)
#   model, arch <- engine (also hub: stream installs)
#   base <- text
#   engine, text <- serve <- cli
# Above the model interface, engine/, serve/ and cli/ never include an
# architecture's folder (k3/): they see a model through model/ and arch/ only,
# except the headers named in arch_allowed (none).
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
  [model]="base checkpoint io kernels pack"
  [k3]="base checkpoint io kernels pack model"
  [arch]="base checkpoint io kernels pack model k3"
  [engine]="base checkpoint io hub kernels pack model arch"
  [text]="base"
  [serve]="base checkpoint io hub kernels pack model arch engine text"
  [cli]="base checkpoint io hub kernels pack model arch engine text serve"
)
architectures=" k3 "
above_model=" engine serve cli "
arch_allowed=()  # "k3/some.h" entries an upper folder may still include
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
    target=$(sed -E 's/.*#[[:space:]]*include[[:space:]]*"([A-Za-z0-9_]+)\/.*/\1/' <<< "${rest#*:}")
    if [[ "$architectures" == *" $target "* && "$above_model" == *" $folder "* ]]; then
      header=$(sed -E 's/.*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<< "${rest#*:}")
      if [[ " ${arch_allowed[*]} " != *" $header "* ]]; then
        echo "layering: ${file#"$src"/}:$line: src/$folder/ includes $header, an architecture's internals (use model/ and arch/)"
        bad=1
      fi
    elif [[ "$allowed" != *" $target "* ]]; then
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
