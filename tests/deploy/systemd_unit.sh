#!/usr/bin/env bash
# deploy/sluice.service is a unit systemd accepts without a single warning
# (`systemd-analyze verify` only warns about unknown keys and bad values, so
# any output fails the test), its MemoryMax sits above its --ram-budget, and
# every flag its ExecStart passes is one `sluice serve` has. Needs no running
# systemd (works in a container). systemd-analyze comes with Debian's
# `systemd` package (scripts/install-deps.sh); without it the test is skipped.
set -euo pipefail
SLUICE=${SLUICE:?}
SRC=${SRC:?}
UNIT=$SRC/deploy/sluice.service
die() { echo "FAIL: $*" >&2; exit 1; }
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze not found"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-unit-test.XXXXXX")
trap 'rm -rf "$T"' EXIT

# verify checks that ExecStart's program exists: point it at the built binary.
sed "s|/usr/local/bin/sluice|$SLUICE|" "$UNIT" > "$T/sluice.service"
grep -q "^ExecStart=$SLUICE serve " "$T/sluice.service" || die "ExecStart does not run sluice serve"
(cd "$T" && SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no "$T/sluice.service") > "$T/out" 2>&1 \
  || die "systemd-analyze verify failed: $(cat "$T/out")"
[ ! -s "$T/out" ] || die "systemd-analyze verify warned: $(cat "$T/out")"

# MemoryMax above the budget (the unit's own default, in the same units).
value() { sed -n "s/^$1=//p" "$UNIT" | tail -n 1; }
budget=$(value 'Environment=SLUICE_RAM_BUDGET')
max=$(value MemoryMax)
[ -n "$budget" ] && [ -n "$max" ] || die "no SLUICE_RAM_BUDGET or MemoryMax in the unit"
grep -q -- '--ram-budget ${SLUICE_RAM_BUDGET}' "$UNIT" || die "ExecStart does not pass --ram-budget"
[ "$(numfmt --from=iec "$max")" -gt "$(numfmt --from=iec "$budget")" ] \
  || die "MemoryMax=$max is not above --ram-budget $budget"

# The flags ExecStart passes exist.
"$SLUICE" serve --help > "$T/help" 2>&1 || die "sluice serve --help failed"
for flag in $(sed -n 's/^ExecStart=//p' "$UNIT" | grep -oE -- '(^| )-{1,2}[a-z][a-z-]*'); do
  grep -qE -- "(^|[ ,])$flag([ ,=]|$)" "$T/help" || die "sluice serve has no flag $flag"
done
echo "PASS"
