#!/usr/bin/env python3
"""What whole weeks would save if each V100 lease's life were known.

Reads a `gpufleet sim --leases` CSV and prices every idc-chengdu V100
lease (its billed days, from the billed_h column) as whole weeks (500)
and the rest as days (80) or one more week, whichever is less: an
oracle that knows how long each machine will be held. Prints the bill
those leases have in the log, the oracle's, and the bill by the day.

    python3 weekly-oracle.py leases.csv
"""
import csv
import sys

DAY, WEEK = 80, 500

rows = [r for r in csv.DictReader(open(sys.argv[1])) if "v100x8" in r["offer"]]
cur = sum(float(r["cost"]) for r in rows)
oracle = daily = 0
for r in rows:
    days = round(float(r["billed_h"]) / 24)
    weeks, rest = divmod(days, 7)
    oracle += WEEK * weeks + min(DAY * rest, WEEK)
    daily += DAY * days
print(f"in the log {cur:.0f}  oracle weeks {oracle}  all by the day {daily}  oracle saves {cur - oracle:.0f}")
