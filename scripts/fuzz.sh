#!/usr/bin/env bash
# Builds the fuzz targets (fuzz/, under ASan+UBSan, each from only the sources
# its parser needs) and runs every one for a time budget over its seed corpus.
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--target NAME] [--engine libfuzzer|driver]
# --seconds: per target (default 10). With clang + libFuzzer (Debian's clang)
# the runs are coverage guided and new inputs go to build-fuzz/corpus/<target>
# (the seeds in fuzz/corpus stay as they are); without, fuzz/driver.cpp runs a
# deterministic mutation loop over the same harness. A finding stops the run
# with the sanitizer's report and the crashing input in build-fuzz/.
# Prints the counts (targets, executions) at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=10 jobs=$(nproc) only="" engine=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --target) only="$2"; shift 2 ;;
    --engine) engine="$2"; shift 2 ;;
    *) echo "usage: $0 [--seconds N] [--jobs J] [--target NAME] [--engine libfuzzer|driver]" >&2; exit 2 ;;
  esac
done
if [ -z "$engine" ]; then
  engine=driver
  if command -v clang++ >/dev/null 2>&1 &&
     echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
       clang++ -x c++ -fsanitize=fuzzer - -o /tmp/sluice-fuzz-probe.$$ >/dev/null 2>&1; then
    engine=libfuzzer
  fi
  rm -f /tmp/sluice-fuzz-probe.$$
fi
out=build-fuzz
cxx=g++
[ "$engine" = libfuzzer ] && cxx=clang++
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S fuzz -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_COMPILER="$cxx" \
  -DSLUICE_FUZZ_ENGINE="$engine" "${launcher[@]}" >/dev/null
t0=$(date +%s)
cmake --build "$out" -j"$jobs" >"$out/build.log" 2>&1 || { echo "fuzz: the build failed ($out/build.log):"; grep -E "error|FAILED" "$out/build.log" | head -20; exit 1; }
echo "fuzz: built with $engine in $(( $(date +%s) - t0 )) s"

targets=()
for d in fuzz/corpus/*/; do
  t=$(basename "$d")
  [ -n "$only" ] && [ "$t" != "$only" ] && continue
  targets+=("$t")
done
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_one() {  # target -> prints "<target> <executions>", exits non-zero on a finding
  local t=$1
  local log="$out/$t.log" work="$out/corpus/$t"
  mkdir -p "$work"
  local args=(-max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048)
  if [ "$engine" = libfuzzer ]; then
    args+=(-artifact_prefix="$out/$t-" -print_final_stats=1 "$work" "fuzz/corpus/$t")
  else
    args+=("fuzz/corpus/$t")
  fi
  if ! (cd . && "$out/fuzz_$t" "${args[@]}") >"$log" 2>&1; then
    echo "fuzz: FINDING in $t (log: $log)" >&2
    tail -40 "$log" >&2
    return 1
  fi
  local n
  n=$(grep -aEo 'stat::number_of_executed_units: *[0-9]+|Done [0-9]+ runs' "$log" | grep -aEo '[0-9]+' | tail -1)
  echo "$t ${n:-0}"
}
export -f run_one
export out engine seconds
results=$(printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}') || {
  echo "fuzz: failed" >&2; exit 1; }
echo "$results" | sed 's/^/fuzz:   /'
total=$(echo "$results" | awk '{s += $2} END {print s}')
echo "fuzz: ${#targets[@]} targets, $total executions, ${seconds} s each, no findings"
