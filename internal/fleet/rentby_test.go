package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Work whose deadline or p99 wait target is at risk (Demand.RentBy
// reached) is rented for at once, whatever its tier's wait target says;
// before RentBy the wait target holds.
func TestAcquireRentsAheadForWorkAtRisk(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rentBy time.Time
		rent   bool
	}{
		{"no latest start: the offline wait target holds", time.Time{}, false},
		{"rent-by later: it still waits", now.Add(time.Minute), false},
		{"rent-by reached: rented now", now, true},
		{"rent-by passed: rented now", now.Add(-time.Hour), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := demandFor("a", core.TierOffline, time.Hour, false)
			d.Since = now.Add(-10 * time.Minute) // the offline target is an hour
			d.Unit.Job.Deadline = now.Add(2 * time.Hour)
			d.RentBy, d.StartBy = tc.rentBy, tc.rentBy.Add(8*time.Minute)
			acq := Acquire(now, []Demand{d}, nil, offers(), nil, 0, nil, nil, Config{})
			if got := len(acq) == 1; got != tc.rent {
				t.Fatalf("rented = %v; want %v (%+v)", got, tc.rent, acq)
			}
			if tc.rent && !strings.Contains(acq[0].Reason, "at risk: it must start by") {
				t.Errorf("reason %q does not say the work is at risk", acq[0].Reason)
			}
		})
	}
}
