#!/usr/bin/env bash
# horizon.sh replays the Helios excerpt once and then N times back to back
# (gpufleet sim --repeat) under the AWS, the monthly-only and the demo
# catalog, and prints for each the LP bound, the price bound (every
# GPU-second at the cheapest admissible price: no idle, no term), what
# gpufleet pays and its idle share. A policy that chose its committed
# terms as well as the bound does would keep its distance to the bound as
# the horizon grows; the bound falls towards the price bound as longer
# terms fill (docs/simulator.md, "Over a longer horizon").
#
#   tools/simab/horizon.sh [REV_OR_BINARY [MAX_REPEAT]]
#
# REV_OR_BINARY defaults to HEAD, MAX_REPEAT to 3 (1, 2 ... MAX_REPEAT).
# Needs jq.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/simab/lib.sh
bin="$(binary h "${1:-HEAD}")"
max="${2:-3}"
helios=../shared/data/helios-venus-excerpt-dirlab/helios_data_training.csv
printf '%-8s %6s %11s %11s %11s %8s %8s %6s\n' catalog repeat "LP bound" "price bound" gpufleet "×LP" "×price" idle
for c in aws monthly demo; do
  cat=()
  [ "$c" = aws ] && cat=(--catalog examples/aws-pricebook/catalog.yaml)
  [ "$c" = monthly ] && cat=(--catalog examples/aws-pricebook/catalog-monthly.yaml)
  for n in $(seq 1 "$max"); do
    "$bin" sim --quiet --policy gpufleet --trace "$helios" --format helios "${cat[@]}" --seed 1 --repeat "$n" --json - |
      jq -r --arg c "$c" --arg n "$n" '.lower_bound as $b | .policies[0] |
        [$c, $n, ($b.cost | round), ($b.price_bound | round), (.cost | round),
         (.cost / $b.cost * 1000 | round / 1000), (.cost / $b.price_bound * 1000 | round / 1000),
         "\(.idle_share * 1000 | round / 10)%"] | @tsv' |
      awk -F'\t' '{ printf "%-8s %6s %11s %11s %11s %8s %8s %6s\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
  done
done
