#!/usr/bin/env python3
"""Writes a synthetic per-job GPU utilization series (id,time,utilization)
for a trace in gpufleet's generic CSV form: usage: gen.py TRACE.csv > util.csv.
Seeded. 30% of jobs are idle with bursts (0%, then 100% for 3 minutes every
15 minutes), 10% idle (2%), the rest busy at a steady 55-95%; times are
seconds from each job's first start."""
import csv, random, sys
random.seed(7)
print("id,time,utilization")
for row in csv.DictReader(open(sys.argv[1])):
    r = random.random()
    d = int(row["duration_s"])
    if r < 0.3:
        for s in range(0, d, 900):
            print(f"{row['id']},{s},100%")
            print(f"{row['id']},{s + 180},0%")
    elif r < 0.4:
        print(f"{row['id']},0,2%")
    else:
        print(f"{row['id']},0,{random.randint(55, 95)}%")
