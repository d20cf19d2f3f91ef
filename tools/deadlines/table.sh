#!/bin/sh
# Decision quality (docs/simulator.md, issue 24): replays the Helios
# excerpt under the AWS, the monthly-only and the demo catalog, a
# deadline-bearing synthetic trace under the same three, and the
# Philly-derived deadline case, every policy beside the LP bound, and
# prints one markdown table: cost, × bound, idle share, p99 wait per tier
# and overall, deadline misses. A second table is gpufleet on the Helios
# excerpt under the AWS catalog at seeds 1-5 (the simulated provider's
# delays and reclaims), against the same bound: the LP does not depend on
# the seed.
#
#   sh tools/deadlines/table.sh [PHILLY_CSV] > table.md
#
# PHILLY_CSV is DIR-LAB's Philly/training_data/philly_data_training.csv
# (github.com/DIR-LAB/Gen-Parallel-Workloads); without it that row is left
# out. Needs jq. Work files go to ${OUT:-/tmp/gpufleet-deadlines}; GEN, if
# set, is the gpufleet binary that generates the synthetic trace (to
# replay it on a build without trace gen --deadlines).
set -eu
philly=${1:-}
out=${OUT:-/tmp/gpufleet-deadlines}
mkdir -p "$out"
bin=$out/gpufleet
go build -o "$bin" ./cmd/gpufleet
helios=../shared/data/helios-venus-excerpt-dirlab/helios_data_training.csv
aws=examples/aws-pricebook/catalog.yaml
monthly=examples/aws-pricebook/catalog-monthly.yaml
"${GEN:-$bin}" trace gen --jobs 10000 --seed 1 --deadlines 30 --quiet -o "$out/synthetic-d30.csv"
run() { # name, then sim's arguments
	name=$1
	shift
	"$bin" sim --quiet --json "$out/$name.json" "$@" >/dev/null
}
run helios-aws --trace "$helios" --format helios --catalog "$aws"
run helios-monthly --trace "$helios" --format helios --catalog "$monthly"
run helios-demo --trace "$helios" --format helios
synthetic() { # name, then sim's further arguments
	name=$1
	shift
	run "$name" --trace "$out/synthetic-d30.csv" --format csv --profile examples/deadlines/trace-profile.yaml "$@"
}
synthetic synthetic-aws --catalog "$aws"
synthetic synthetic-monthly --catalog "$monthly"
synthetic synthetic-demo
for seed in 2 3 4 5; do
	run "helios-aws-seed$seed" --trace "$helios" --format helios --catalog "$aws" --policy gpufleet --no-lp --seed "$seed"
done
set -- helios-aws helios-monthly helios-demo synthetic-aws synthetic-monthly synthetic-demo
if [ -n "$philly" ]; then
	run philly-demo --trace "$philly" --format philly --profile examples/deadlines/philly-profile.yaml
	set -- "$@" philly-demo
fi
# jq's helpers for both tables: a tier's p99 wait, money with commas.
defs='def p99(t): (.waits_by_tier[t].p99_s // 0 | tostring) + " s";
  def commas: if length <= 3 then . else (.[:-3] | commas) + "," + .[-3:] end;
  def money: (. * 100 | round) as $c | (($c / 100 | floor | tostring | commas) + "." + ((100 + $c % 100) | tostring)[1:]);'
echo '| replay | policy | cost | × bound | idle share | p99 wait core / regular / offline | p99 wait, all | deadline misses |'
echo '|---|---|---:|---:|---:|---:|---:|---:|'
for name in "$@"; do
	jq -r --arg name "$name" "$defs"'
	  .lower_bound.cost as $lb
	  | .policies[]
	  | "| \($name) | \(.policy) | \(.cost | money) | \(if $lb > 0 then (.cost / $lb * 1000 | round / 1000 | tostring) else "" end) | \(.idle_share * 1000 | round / 10 | tostring)% | \(p99("core")) / \(p99("regular")) / \(p99("offline")) | \(.wait_p99_s) s | \(.deadline_misses) |"
	' "$out/$name.json"
	jq -r --arg name "$name" "$defs"'"| \($name) | LP bound | \(.lower_bound.cost | money) | 1 | | | | |"' "$out/$name.json"
done
echo
echo '| Helios, AWS catalog, seed | cost | × bound | idle share | idle share before the last submission | p99 wait core / regular / offline | p99 wait, all | deadline misses |'
echo '|---|---:|---:|---:|---:|---:|---:|---:|'
for seed in 1 2 3 4 5; do
	f=$out/helios-aws-seed$seed.json
	[ "$seed" = 1 ] && f=$out/helios-aws.json
	jq -r --arg seed "$seed" --slurpfile lp "$out/helios-aws.json" "$defs"'
	  $lp[0].lower_bound.cost as $lb
	  | .policies[] | select(.policy == "gpufleet")
	  | "| \($seed) | \(.cost | money) | \(.cost / $lb * 1000 | round / 1000 | tostring) | \(.idle_share * 1000 | round / 10 | tostring)% | \(.idle_share_arriving * 1000 | round / 10 | tostring)% | \(p99("core")) / \(p99("regular")) / \(p99("offline")) | \(.wait_p99_s) s | \(.deadline_misses) |"
	' "$f"
done
