#!/usr/bin/env bash
# ab.sh compares the replay speed of two builds of gpufleet on one trace,
# interleaving their runs so that both see the same machine: on a shared
# 2-core machine one binary's time varies by 10% and more from run to run,
# so a change of a few percent shows only in the fastest of several
# interleaved runs (docs/simulator.md, Speed).
#
#   tools/simab/ab.sh OLD_REV_OR_BINARY NEW_REV_OR_BINARY [RUNS] [TRACE]
#
# A revision (anything git rev-parse takes, e.g. HEAD~1 or main) is built
# into a temporary directory from a clean worktree; a path to an
# executable is used as is. RUNS defaults to 6; TRACE to a synthetic
# 100,000-job trace made once with "gpufleet trace gen --jobs 100000
# --seed 1". Each run replays the trace under the gpufleet policy without
# the LP bound and reports its CPU seconds; the summary gives, per build,
# the fastest and the mean, and the bills of both (they must agree for a
# change meant to decide nothing differently).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
runs="${3:-6}"
. tools/simab/lib.sh
a="$(binary a "$1")"
b="$(binary b "$2")"
trace="${4:-}"
if [ -z "$trace" ]; then
  trace="$work/s100k.csv"
  "$b" trace gen --jobs 100000 --seed 1 -o "$trace"
fi

for i in $(seq "$runs"); do
  for side in a b; do
    bin="$a"; [ "$side" = b ] && bin="$b"
    out="$work/out"
    /usr/bin/time -f '%U %e' -o "$work/time" "$bin" sim --trace "$trace" --format csv --policy gpufleet --no-lp --quiet >"$out"
    bill="$(awk '$1 == "gpufleet" { print $2; exit }' "$out")"
    read -r cpu wall <"$work/time"
    echo "$side $cpu $wall $bill"
  done
done | tee "$work/runs" | awk '{ printf "run %-2d %s: %6.2f s CPU %6.2f s wall  bill %s\n", int((NR+1)/2), $1, $2, $3, $4 }'

awk -v a="$1" -v b="$2" '
  { n[$1]++; s[$1] += $2; if (!($1 in m) || $2 < m[$1]) m[$1] = $2; bill[$1] = $4 }
  END {
    printf "a (%s): fastest %.2f s CPU, mean %.2f s over %d runs\n", a, m["a"], s["a"]/n["a"], n["a"]
    printf "b (%s): fastest %.2f s CPU, mean %.2f s over %d runs\n", b, m["b"], s["b"]/n["b"], n["b"]
    printf "b/a: fastest %.3f, mean %.3f\n", m["b"]/m["a"], (s["b"]/n["b"])/(s["a"]/n["a"])
    if (bill["a"] != bill["b"]) { printf "bills differ: a %s, b %s\n", bill["a"], bill["b"]; exit 1 }
    printf "same bill: %s\n", bill["a"]
  }' "$work/runs"
