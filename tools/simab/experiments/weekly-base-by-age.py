#!/usr/bin/env python3
"""Weeks for the oldest machines: an offline check of a "base" rule.

Reads a `gpufleet sim --leases` CSV and re-prices the idc-chengdu V100
leases as if, at each daily renewal, a lease took a week (500) when it
was among the alpha share of the fewest machines the fleet held over the
last W days, counting older leases first (and at least minage days old),
else a day (80). A week taken runs whole, past the lease's end if need
be. The machines and the work stay as they were (no feedback on
placement): it measures whether lease age tells which machines stay.

    python3 weekly-base-by-age.py leases.csv
"""
import csv
import datetime
import sys

DAY = 86400


def ts(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


rows = [r for r in csv.DictReader(open(sys.argv[1])) if "v100x8" in r["offer"]]
leases = sorted((ts(r["start"]), ts(r["start"]) + float(r["billed_h"]) * 3600) for r in rows)
t0 = min(s for s, _ in leases)
t1 = max(e for _, e in leases)
hours = [t0 + h * 3600 for h in range(int((t1 - t0) / 3600) + 2)]
size = [sum(1 for s, e in leases if s <= t < e) for t in hours]


def fewest(t, window):
    i = int((t - t0) / 3600)
    return min(size[max(0, i - int(window / 3600)):i + 1])


def bill(alpha, window, minage):
    total = 0
    for s, e in leases:
        t = s
        while t < e - 1:
            older = sum(1 for s2, e2 in leases if s2 < s and e2 > t)
            if (t - s) / DAY >= minage and older < alpha * fewest(t, window):
                total, t = total + 500, t + 7 * DAY
            else:
                total, t = total + 80, t + DAY
    return total


print("all by the day", bill(0, DAY, 0))
for window in (2 * DAY, 4 * DAY, 7 * DAY):
    for alpha in (0.5, 0.7, 0.85, 1.0):
        for minage in (0, 2):
            print(f"window {window // DAY} d, share {alpha}, min age {minage} d: {bill(alpha, window, minage)}")
