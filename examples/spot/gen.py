#!/usr/bin/env python3
"""Writes deadline-v100.csv: 400 synthetic one-V100 jobs over 6.5 days, all
offline, interruptible and with a deadline (slack 1.25x to 3x the run time),
in gpufleet's generic trace CSV. Seeded: the same file on every run."""
import random
random.seed(2024)
rows = ["id,submit_s,duration_s,gpus,gpu_milli,gpu_mem_mib,team,tier,interruptible,deadline_s,gpu_model,shards,user,cpu_milli,mem_mib,nodes,status"]
t = 0
for i in range(400):
    t += int(random.expovariate(1 / 1500))
    d = random.choice([2, 4, 6, 8, 12, 16, 24]) * 3600
    slack = random.choice([1.25, 1.5, 2.0, 3.0])
    rows.append(f"dl{i},{t},{d},1,1000,,team-0{i % 4},offline,true,{t + int(d * slack)},NVIDIA Tesla V100,,,,,,")
open("deadline-v100.csv", "w").write("\n".join(rows) + "\n")
