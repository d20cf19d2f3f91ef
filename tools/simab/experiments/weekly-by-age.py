#!/usr/bin/env python3
"""What renewing daily V100 terms as weekly ones would have changed.

Reads `gpufleet sim --leases` CSVs and, for each N, re-prices every daily
idc-chengdu V100 lease as if it had been renewed on the weekly plan
(500 a week against 80 a day) once it had lived N days: N days at the
daily price, then whole weeks until the lease ended. The machines and the
work on them stay as they were; only the bill of each lease changes.

    python3 weekly-by-age.py L1.csv [L2.csv ...]
"""
import csv
import math
import sys

DAY, WEEK = 80, 500

for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    total = sum(float(r["cost"]) for r in rows)
    out = []
    for n in (2, 3, 5, 7, 10):
        change = 0
        for r in rows:
            if r["mode"] != "daily" or "v100" not in r["offer"]:
                continue
            days = round(float(r["billed_h"]) / 24)
            if days > n:
                change += DAY * n + WEEK * math.ceil((days - n) / 7) - DAY * days
        out.append(f"N={n}: {change:+.0f} ({100 * change / total:+.2f}%)")
    print(path, f"{total:.2f}", "  ".join(out))
