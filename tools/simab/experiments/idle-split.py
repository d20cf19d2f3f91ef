#!/usr/bin/env python3
"""Paid and allocated GPU-hours before and after an instant, from a
`gpufleet sim --csv` time series (each sample holding until the next).

    python3 idle-split.py SERIES.csv 2024-01-21T04:31:21Z

The Helios excerpt's last job is submitted at 2024-01-21T04:31:21Z (the
sum of the trace's interval column, 1,744,281 s after 2024-01-01).
"""
import csv
import datetime as dt
import sys

def at(s):
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))

rows = list(csv.DictReader(open(sys.argv[1])))
cut = at(sys.argv[2])
modes = ("gpus_on_demand", "gpus_spot", "gpus_daily", "gpus_weekly", "gpus_monthly")
acc = {"before": [0.0, 0.0], "after": [0.0, 0.0]}
for a, b in zip(rows, rows[1:]):
    t0, t1 = at(a["at"]), at(b["at"])
    paid = sum(int(a[k]) for k in modes)
    alloc = int(a["allocated_gpus"])
    for s, e, key in ((t0, min(t1, cut), "before"), (max(t0, cut), t1, "after")):
        h = (e - s).total_seconds() / 3600
        if h > 0:
            acc[key][0] += paid * h
            acc[key][1] += alloc * h
for key, (paid, alloc) in acc.items():
    share = 100 * (paid - alloc) / paid if paid else 0
    print(f"{key}: paid {paid:.0f} GPU-h, allocated {alloc:.0f}, idle {paid - alloc:.0f} ({share:.1f}%)")
