# fleet-by-day.py BASE.csv NEW.csv compares two `gpufleet sim --csv` series of
# the Helios excerpt day by day: the committed machines held (daily and
# weekly terms, daily mean), those on weeks, and the load in machines
# (allocated GPUs / 8), and sums the machine-days held
# (docs/simulator.md, "Weeks at the fleet's floor").
import csv,datetime as dt,sys
def load(f):
    rows=list(csv.DictReader(open(f)))
    t0=dt.datetime(2024,1,1); by={}
    for r in rows:
        t=dt.datetime.strptime(r['at'],'%Y-%m-%dT%H:%M:%SZ'); d=(t-t0).days
        by.setdefault(d,[]).append(((int(r['gpus_daily'])+int(r['gpus_weekly']))/8, int(r['gpus_weekly'])/8, int(r['allocated_gpus'])/8))
    return {d:(sum(x[0] for x in v)/len(v), sum(x[1] for x in v)/len(v), sum(x[2] for x in v)/len(v)) for d,v in by.items()}
a=load(sys.argv[1]); b=load(sys.argv[2])
ta=tb=0
for d in sorted(a):
    x=a[d]; y=b.get(d,(0,0,0))
    ta+=x[0]; tb+=y[0]
    print(f"{d:3d} base held {x[0]:6.1f} alloc {x[2]:6.1f} | new held {y[0]:6.1f} (wk {y[1]:5.1f}) alloc {y[2]:6.1f} | diff {y[0]-x[0]:+6.1f}")
print('machine-days', round(ta), round(tb))
