#!/usr/bin/env bash
# render.sh shows what the Grafana dashboard (deploy/grafana/gpufleet.json)
# would draw, without Grafana: it runs a gpufleet serve on the simulated
# provider, a Prometheus (Debian's prometheus package) that scrapes it
# with deploy/prometheus/rules.yaml loaded, submits a few jobs, and
# prints every panel query's value as promtool evaluates it, then the
# alerts. DCGM panels are empty: no DCGM exporter runs here.
#
#   tools/dashboard/render.sh [WAIT_SECONDS]
#
# WAIT_SECONDS (default 90) is how long the jobs run before the queries.
set -euo pipefail
cd "$(dirname "$0")/../.."
wait_s="${1:-90}"
for cmd in prometheus promtool curl python3; do
  command -v "$cmd" >/dev/null || { echo "render.sh needs $cmd (apt-get install prometheus curl python3)"; exit 1; }
done
dir="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
go build -o "$dir/gpufleet" ./cmd/gpufleet
"$dir/gpufleet" serve --addr 127.0.0.1:18480 --db "$dir/g.db" --sim-delay 5s --tick 1s >"$dir/serve.log" 2>&1 &
pids+=($!)
cat >"$dir/prom.yml" <<YAML
global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: [$PWD/deploy/prometheus/rules.yaml]
scrape_configs:
  - job_name: gpufleet
    static_configs: [{targets: ['127.0.0.1:18480']}]
YAML
prometheus --config.file="$dir/prom.yml" --storage.tsdb.path="$dir/tsdb" --web.listen-address=127.0.0.1:18490 >"$dir/prom.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do grep -q 'gpf_' "$dir/serve.log" 2>/dev/null && break; sleep 0.2; done
token="$(grep -o 'gpf_[A-Za-z0-9_-]*' "$dir/serve.log" | head -n1)"
# Submit once Prometheus has scraped the counters at 0, so that rates
# show the submissions.
for _ in $(seq 1 60); do
  promtool query instant http://127.0.0.1:18490 'up{job="gpufleet"} == 1' 2>/dev/null | grep -q '=> 1' && break
  sleep 0.5
done
sleep 3
api() { curl -sf -o /dev/null -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -X POST "http://127.0.0.1:18480$1" -d "$2"; }
api /api/v1/teams '{"id":"ml","name":"ML","monthly_budget":"100"}'
for i in 1 2 3; do
  api /api/v1/jobs "{\"id\":\"train-$i\",\"team\":\"ml\",\"user\":\"alice\",\"tier\":\"core\",\"gpus\":1,\"est_duration_seconds\":600}"
done
api /api/v1/jobs '{"id":"batch","team":"ml","user":"alice","tier":"offline","gpus":8,"est_duration_seconds":600}'
echo "4 jobs submitted; waiting ${wait_s}s"
sleep "$wait_s"
python3 - deploy/grafana/gpufleet.json <<'PY' >"$dir/exprs.tsv"
import json, sys
for p in json.load(open(sys.argv[1]))["panels"]:
    for t in p.get("targets", []):
        print(p["title"] + "\t" + t["expr"])
PY
while IFS=$'\t' read -r title expr; do
  echo "== $title: $expr"
  promtool query instant http://127.0.0.1:18490 "$expr" || true
done <"$dir/exprs.tsv"
echo "== alerts"
promtool query instant http://127.0.0.1:18490 'ALERTS' || true
