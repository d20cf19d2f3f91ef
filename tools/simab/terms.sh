#!/usr/bin/env bash
# terms.sh replays the Helios excerpt (seed 1) under the AWS catalog with
# its longer committed plans cut back: all of them (all); none longer than
# a week (to-week: the monthly plans dropped);
# daily terms only (daily: weekly and monthly dropped too). For each it
# prints the LP bound, the price bound, what gpufleet pays and its idle
# share. The LP bound under daily terms only is what foresight buys
# without any term longer than a day: the part of the distance to the
# full bound that longer terms make (docs/simulator.md, "Why the 1.25×
# target is out of reach of an online policy on this excerpt").
#
#   tools/simab/terms.sh [REV_OR_BINARY]
#
# REV_OR_BINARY defaults to HEAD. Needs jq.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/simab/lib.sh
bin="$(binary t "${1:-HEAD}")"
helios=../shared/data/helios-venus-excerpt-dirlab/helios_data_training.csv
full=examples/aws-pricebook/catalog.yaml
# without MODES writes the catalog without the plans whose mode is one of
# MODES (a |-separated list): a plan is a "- mode:" or "- {mode:" item at
# the plans' indentation, with its continuation lines below it.
without() {
  awk -v drop="^($1)\$" '
    match($0, /^      - \{?mode: [a-z-]+/) {
      m = substr($0, RSTART, RLENGTH); sub(/.*mode: /, "", m)
      skip = (m ~ drop)
      if (skip) next
    }
    skip && /^        / { next }
    { skip = 0; print }' "$full"
}
without monthly >"$work/to-week.yaml"
without 'weekly|monthly' >"$work/daily.yaml"
printf '%-10s %11s %11s %11s %8s %6s\n' terms "LP bound" "price bound" gpufleet "×LP" idle
for c in all to-week daily; do
  cat="$full"
  [ "$c" = all ] || cat="$work/$c.yaml"
  "$bin" catalog list --catalog "$cat" >/dev/null
  "$bin" sim --quiet --policy gpufleet --trace "$helios" --format helios --catalog "$cat" --seed 1 --json - |
    jq -r --arg c "$c" '.lower_bound as $b | .policies[0] |
      [$c, ($b.cost | round), ($b.price_bound | round), (.cost | round),
       (.cost / $b.cost * 1000 | round / 1000), "\(.idle_share * 1000 | round / 10)%"] | @tsv' |
    awk -F'\t' '{ printf "%-10s %11s %11s %11s %8s %6s\n", $1, $2, $3, $4, $5, $6 }'
done
