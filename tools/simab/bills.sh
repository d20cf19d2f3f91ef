#!/usr/bin/env bash
# bills.sh compares what two builds of gpufleet's policy pay on many
# replays: a policy change moves single replays by several percent either
# way (the term a wait rents decides what later work backfills), so it is
# judged on the average over many, not on any one (docs/simulator.md,
# "Long work waits for a term, and a renewal must pay").
#
#   tools/simab/bills.sh OLD_REV_OR_BINARY NEW_REV_OR_BINARY [SET]
#
# A revision is built from a clean worktree; a path to an executable is
# used as is. SET is named (the Helios excerpt at seeds 1-5 under the AWS
# catalog, under the demo and the monthly-only catalog; generated traces
# with and without deadlines; Philly when PHILLY names its CSV), unseen
# (generated traces the policy was not tuned on: 10,000 jobs at seeds 2,
# 4, 5, 6, 8, 9, 10, 12, with deadlines at 13-15, and 3,000 jobs at seeds
# 1-8, each under the AWS and the demo catalog), long (the Helios excerpt
# and two generated traces replayed three times back to back, sim
# --repeat 3: a horizon over which weekly and monthly terms can pay) or
# all (named and unseen, the default).
# Each replay is gpufleet sim --quiet --no-lp --policy gpufleet; the
# output is one line per replay (bill, idle share, deadline misses, for
# each build) and, per set, the mean change of the bill, its standard
# deviation and how many replays the new build pays less on. Needs jq.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
set_="${3:-all}"
case "$set_" in named | unseen | long | all) ;; *) echo "SET: want named, unseen, long or all, not $set_" >&2; exit 2 ;; esac
. tools/simab/lib.sh
a="$(binary a "$1")"
b="$(binary b "$2")"

helios=../shared/data/helios-venus-excerpt-dirlab/helios_data_training.csv
aws=examples/aws-pricebook/catalog.yaml
monthly=examples/aws-pricebook/catalog-monthly.yaml
deadlines=examples/deadlines/trace-profile.yaml
gen() { # gen NAME ARGS...: a generated trace, made once by the new build
  local f="$work/$1.csv"; shift
  [ -f "$f" ] || "$b" trace gen --quiet -o "$f" "$@"
  echo "$f"
}
one() { # one BIN SIM-ARGS...: "bill idle misses"
  local bin=$1; shift
  "$bin" sim --quiet --no-lp --policy gpufleet --json - "$@" |
    jq -r '.policies[0] | "\(.cost | round) \(.idle_share * 1000 | round / 10)% \(.deadline_misses)"'
}
row() { # row SET NAME SIM-ARGS...
  local s=$1 name=$2; shift 2
  echo "$s $name $(one "$a" "$@") $(one "$b" "$@")"
}

{
  if [ "$set_" = named ] || [ "$set_" = all ]; then
    for seed in 1 2 3 4 5; do
      row named "helios-aws-s$seed" --trace "$helios" --format helios --catalog "$aws" --seed "$seed"
    done
    row named helios-demo --trace "$helios" --format helios
    row named helios-monthly --trace "$helios" --format helios --catalog "$monthly"
    d30="$(gen d30 --jobs 10000 --seed 1 --deadlines 30)"
    for c in aws demo monthly; do
      cat=(); [ "$c" = aws ] && cat=(--catalog "$aws"); [ "$c" = monthly ] && cat=(--catalog "$monthly")
      row named "d30-$c" --trace "$d30" --format csv --profile "$deadlines" "${cat[@]}"
    done
    for spec in "10k-s1 10000 1" "10k-s3 10000 3" "20k-s7 20000 7"; do
      read -r name jobs seed <<<"$spec"
      f="$(gen "$name" --jobs "$jobs" --seed "$seed")"
      row named "$name-aws" --trace "$f" --format csv --catalog "$aws"
      row named "$name-demo" --trace "$f" --format csv
    done
    d15="$(gen d15 --jobs 15000 --seed 11 --deadlines 30)"
    row named d15-s11-aws --trace "$d15" --format csv --profile "$deadlines" --catalog "$aws"
    row named d15-s11-monthly --trace "$d15" --format csv --profile "$deadlines" --catalog "$monthly"
    if [ -n "${PHILLY:-}" ]; then
      row named philly-demo --trace "$PHILLY" --format philly --profile examples/deadlines/philly-profile.yaml
    fi
  fi
  if [ "$set_" = unseen ] || [ "$set_" = all ]; then
    for seed in 2 4 5 6 8 9 10 12 13 14 15; do
      if [ "$seed" -ge 13 ]; then
        f="$(gen "u10k-s$seed" --jobs 10000 --seed "$seed" --deadlines 30)"
        prof=(--profile "$deadlines")
      else
        f="$(gen "u10k-s$seed" --jobs 10000 --seed "$seed")"
        prof=()
      fi
      row unseen "10k-s$seed-aws" --trace "$f" --format csv "${prof[@]}" --catalog "$aws"
      row unseen "10k-s$seed-demo" --trace "$f" --format csv "${prof[@]}"
    done
    for seed in 1 2 3 4 5 6 7 8; do
      f="$(gen "u3k-s$seed" --jobs 3000 --seed "$seed")"
      row unseen "3k-s$seed-aws" --trace "$f" --format csv --catalog "$aws"
      row unseen "3k-s$seed-demo" --trace "$f" --format csv
    done
  fi
  if [ "$set_" = long ]; then
    for seed in 1 2; do
      row long "helios-aws-s$seed-x3" --trace "$helios" --format helios --catalog "$aws" --seed "$seed" --repeat 3
    done
    row long helios-demo-x3 --trace "$helios" --format helios --repeat 3
    row long helios-monthly-x3 --trace "$helios" --format helios --catalog "$monthly" --repeat 3
    f="$(gen 10k-s1 --jobs 10000 --seed 1)"
    row long 10k-s1-aws-x3 --trace "$f" --format csv --catalog "$aws" --repeat 3
    row long 10k-s1-demo-x3 --trace "$f" --format csv --repeat 3
    d30="$(gen d30 --jobs 10000 --seed 1 --deadlines 30)"
    row long d30-aws-x3 --trace "$d30" --format csv --profile "$deadlines" --catalog "$aws" --repeat 3
    row long d30-monthly-x3 --trace "$d30" --format csv --profile "$deadlines" --catalog "$monthly" --repeat 3
  fi
} | tee "$work/rows" | awk '{ printf "%-7s %-18s %9s %6s %4s  %9s %6s %4s  %+6.2f%%\n", $1, $2, $3, $4, $5, $6, $7, $8, 100 * ($6 / $3 - 1) }'

awk '
  { r = $6 / $3 - 1; n[$1]++; s[$1] += r; q[$1] += r * r; if (r < 0) w[$1]++ }
  END {
    for (k in n) {
      m = s[k] / n[k]
      sd = n[k] > 1 ? sqrt((q[k] - n[k] * m * m) / (n[k] - 1)) : 0
      printf "%s: %d replays, bill %+.2f%% on average (sd %.2f%%), %d lower\n", k, n[k], 100 * m, 100 * sd, w[k]
    }
  }' "$work/rows"
