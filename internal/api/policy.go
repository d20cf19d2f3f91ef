package api

import (
	"net/http"

	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/policy"
)

// WithPolicy tells the server the policy its control loop runs, for GET
// /api/v1/policy and the dashboard's idle ladder (policy.Default
// otherwise).
func WithPolicy(p policy.Policy) Option { return func(s *Server) { s.policy = p } }

// PolicyView is the active policy: every knob as the policy file writes
// it, where it came from (Policy.Source) and the digest of its knobs.
type PolicyView struct {
	Policy policy.Policy `json:"policy"`
	Hash   string        `json:"hash"`
	// Label names the policy in one line, as the simulator's reports do.
	Label string `json:"label"`
}

// policyRoutes serve the active policy to every reader.
func (s *Server) policyRoutes() []httpapi.Route {
	return []httpapi.Route{
		{Pattern: "GET /api/v1/policy", Summary: "The policy the control loop runs: every knob (wait targets, billing modes, time-of-use shifting, reserved base, renting, release, idle ladder, spot, consolidation, preemption, backfill, fair share), where it came from (a preset or the --policy file) and its hash.", Handler: s.getPolicy, Roles: readers},
	}
}

func init() {
	e := apiDoc["GET /api/v1/policy"]
	e.response = PolicyView{}
	apiDoc["GET /api/v1/policy"] = e
}

func (s *Server) getPolicy(w http.ResponseWriter, _ *http.Request) {
	httpapi.WriteJSON(w, http.StatusOK, PolicyView{Policy: s.policy, Hash: s.policy.Hash(), Label: s.policy.Label()})
}
