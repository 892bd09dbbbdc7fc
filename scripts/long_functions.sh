#!/usr/bin/env bash
# Lists the functions longer than a limit (default 120 lines, the style guide's
# bound), longest first: "LINES FILE:LINE NAME". Universal Ctags finds each
# function's first and last line (lambdas too, as __anon...). src/kernels/ is
# left out: its SIMD and CUDA bodies are long by nature (docs/kernels.md).
# Usage: scripts/long_functions.sh [LIMIT] [DIR...]   (default: src)
# Exit status 1 when any function is over the limit.
set -eu
limit=${1:-120}
shift || true
dirs=("${@:-src}")
command -v ctags > /dev/null || { echo "long_functions: needs Universal Ctags (apt install universal-ctags)" >&2; exit 2; }
long=$(find "${dirs[@]}" -path '*/kernels' -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print |
  sort | xargs ctags --languages=C++ --map-C++=+.cu --c++-kinds=f --fields=+ne --output-format=u-ctags -o - |
  awk -F'\t' -v limit="$limit" '
    { line = 0; end = 0
      for (i = 4; i <= NF; i++) {
        if ($i ~ /^line:/) line = substr($i, 6)
        if ($i ~ /^end:/) end = substr($i, 5)
      }
      if (line > 0 && end - line + 1 > limit) printf "%d %s:%d %s\n", end - line + 1, $2, line, $1
    }' | sort -rn)
[[ -z "$long" ]] && exit 0
echo "$long"
exit 1
