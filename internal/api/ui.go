package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/dashboard"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/readmodel"
	"github.com/gpufleet/gpufleet/internal/store"
)

// mountUI serves the web dashboard's embedded assets on mux: the page at
// GET / and its scripts and styles under GET /ui/.
func (s *Server) mountUI(mux *http.ServeMux) {
	h := dashboard.Handler()
	mux.Handle("GET /{$}", h)
	mux.Handle("GET /ui/", h)
}

// uiRoutes are the JSON routes only the dashboard needs: the overview, the
// GPU heatmap and the live leases with their next billing boundary.
func (s *Server) uiRoutes() []httpapi.Route {
	return []httpapi.Route{
		{Pattern: "GET /api/v1/overview", Summary: "The dashboard's figures: spend today and this month, idle spend, utilization, fleet by billing mode, queue per tier and team, budgets, open alerts and idle GPUs (a team token sees its own team's queue, budget and alerts).", Handler: s.overview, Roles: readers},
		{Pattern: "GET /api/v1/overview/heatmap", Summary: "Mean GPU utilization per GPU and time bucket over the last hours (1..168, default 6), from the agents' samples.", Handler: s.heatmap, Roles: readers},
		{Pattern: "GET /api/v1/overview/leases", Summary: "Live leases with their next billing boundary and the seconds left to it.", Handler: s.boundaryLeases, Roles: readers},
	}
}

func init() {
	// The OpenAPI document describes these routes like the others.
	doc := func(pattern string, response any, params ...string) {
		e := apiDoc[pattern]
		e.response, e.params = response, params
		apiDoc[pattern] = e
	}
	doc("GET /api/v1/overview", readmodel.Overview{})
	doc("GET /api/v1/overview/heatmap", readmodel.Heatmap{}, "hours")
	doc("GET /api/v1/overview/leases", BoundaryLeases{})
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	p, _ := httpapi.PrincipalFrom(r.Context())
	team := ""
	if p.Role != store.RoleAdmin {
		team = p.Team
	}
	ov, err := readmodel.BuildOverview(r.Context(), s.store, s.catalog, s.clock.Now(), team, s.policy.Idle)
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, ov)
}

func (s *Server) heatmap(w http.ResponseWriter, r *http.Request) {
	hours := 6
	if v := r.URL.Query().Get("hours"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 168 {
			httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "hours", "hours: want 1..168")
			return
		}
		hours = n
	}
	hm, err := readmodel.BuildHeatmap(r.Context(), s.store, s.clock.Now(), hours)
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, hm)
}

// BoundaryLeases is the response of GET /api/v1/overview/leases.
type BoundaryLeases struct {
	AsOf   time.Time       `json:"as_of"`
	Leases []BoundaryLease `json:"leases"`
}

// BoundaryLease is a live lease and its next billing boundary: the end of
// the time already paid for (billing.PaidUntil), where releasing an idle
// machine costs nothing more.
type BoundaryLease struct {
	Lease    LeaseView `json:"lease"`
	GPUModel string    `json:"gpu_model"`
	GPUs     int       `json:"gpus"`
	// Committed is set for a lease on a committed term (daily, weekly,
	// monthly), which is never released inside its term.
	Committed bool `json:"committed"`
	// NextBoundary is zero (and SecondsLeft 0) before the machine launches.
	NextBoundary time.Time `json:"next_boundary"`
	SecondsLeft  int64     `json:"seconds_left"`
	// Busy is set while a unit runs on it.
	Busy bool `json:"busy"`
}

func (s *Server) boundaryLeases(w http.ResponseWriter, r *http.Request) {
	now := s.clock.Now().UTC()
	live, err := s.store.Leases().ListLiveLeases(r.Context())
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	running, err := s.store.Units().ListRunning(r.Context())
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	busy := map[string]bool{}
	for _, u := range running {
		for _, p := range u.Parts {
			busy[p.LeaseID] = true
		}
	}
	out := BoundaryLeases{AsOf: now, Leases: []BoundaryLease{}}
	for i := len(live) - 1; i >= 0; i-- { // newest first, as /leases
		l := &live[i]
		bl := BoundaryLease{Lease: NewLeaseView(l), Busy: busy[l.ID]}
		if o, err := s.catalog.Offer(l.OfferID); err == nil {
			bl.GPUModel, bl.GPUs = o.GPUModel, o.GPUs
			if p, ok := o.Plan(l.Mode); ok {
				bl.Committed = p.Committed()
				if !l.Start.IsZero() && !l.Start.After(now) {
					paid, err := billing.PaidUntil(p, l.Start, now)
					if err != nil {
						s.internal(w, r, err)
						return
					}
					bl.NextBoundary = paid.UTC()
					bl.SecondsLeft = int64(paid.Sub(now) / time.Second)
				}
			}
		}
		out.Leases = append(out.Leases, bl)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}
