#!/bin/sh
# Deadlines and tail waits (docs/simulator.md): replays the Helios excerpt
# under the AWS and the demo catalog, a deadline-bearing synthetic trace
# under both, and the Philly-derived deadline case, every policy beside the
# LP bound, and prints one markdown table: cost, × bound, idle share, p99
# wait per tier and overall, deadline misses.
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
"${GEN:-$bin}" trace gen --jobs 10000 --seed 1 --deadlines 30 --quiet -o "$out/synthetic-d30.csv"
run() { # name, then sim's arguments
	name=$1
	shift
	"$bin" sim --quiet --json "$out/$name.json" "$@" >/dev/null
}
run helios-aws --trace "$helios" --format helios --catalog "$aws"
run helios-demo --trace "$helios" --format helios
run synthetic-aws --trace "$out/synthetic-d30.csv" --format csv --profile examples/deadlines/trace-profile.yaml --catalog "$aws"
run synthetic-demo --trace "$out/synthetic-d30.csv" --format csv --profile examples/deadlines/trace-profile.yaml
set -- helios-aws helios-demo synthetic-aws synthetic-demo
if [ -n "$philly" ]; then
	run philly-demo --trace "$philly" --format philly --profile examples/deadlines/philly-profile.yaml
	set -- "$@" philly-demo
fi
echo '| replay | policy | cost | × bound | idle share | p99 wait core / regular / offline | p99 wait, all | deadline misses |'
echo '|---|---|---:|---:|---:|---:|---:|---:|'
for name in "$@"; do
	jq -r --arg name "$name" '
	  def p99(t): (.waits_by_tier[t].p99_s // 0 | tostring) + " s";
	  def commas: if length <= 3 then . else (.[:-3] | commas) + "," + .[-3:] end;
	  def money: (. * 100 | round) as $c | (($c / 100 | floor | tostring | commas) + "." + ((100 + $c % 100) | tostring)[1:]);
	  .lower_bound.cost as $lb
	  | .policies[]
	  | "| \($name) | \(.policy) | \(.cost | money) | \(if $lb > 0 then (.cost / $lb * 1000 | round / 1000 | tostring) else "" end) | \(.idle_share * 1000 | round / 10 | tostring)% | \(p99("core")) / \(p99("regular")) / \(p99("offline")) | \(.wait_p99_s) s | \(.deadline_misses) |"
	' "$out/$name.json"
	jq -r --arg name "$name" 'def commas: if length <= 3 then . else (.[:-3] | commas) + "," + .[-3:] end;
	  (.lower_bound.cost * 100 | round) as $c | "| \($name) | LP bound | \($c / 100 | floor | tostring | commas).\((100 + $c % 100) | tostring | .[1:]) | 1 | | | | |"' "$out/$name.json"
done
