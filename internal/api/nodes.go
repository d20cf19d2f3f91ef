package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/httpapi"
	"github.com/gpufleet/gpufleet/internal/store"
)

// The routes users call about the agents: the node listing and a job's
// log. The agents' own routes are the agent protocol's (internal/agentapi).

// nodeRoutes are the node listing, built from the agents' heartbeats, and
// a job's log, uploaded by the agents.
func (s *Server) nodeRoutes() []httpapi.Route {
	return []httpapi.Route{
		{Pattern: "GET /api/v1/nodes", Summary: "The machines' agents: state (ok, suspect, down), lease, GPUs, jobs; a team role sees the nodes running its team's jobs.", Handler: s.listNodes, Roles: readers},
		{Pattern: "GET /api/v1/jobs/{id}/logs", Summary: "A job's output from offset (bytes), its last tail bytes, or its last lines lines; another team's job is a 404.", Handler: s.jobLogs, Roles: readers},
	}
}

func init() {
	doc := func(pattern string, response any, params ...string) {
		e := apiDoc[pattern]
		e.response, e.params = response, params
		apiDoc[pattern] = e
	}
	doc("GET /api/v1/nodes", NodesPage{}, "state", "limit", "cursor")
	doc("GET /api/v1/jobs/{id}/logs", LogView{}, "offset", "tail", "lines", "limit")
}

// NodeView is the JSON form of a node agent.
type NodeView struct {
	ID       string           `json:"id"`
	Lease    string           `json:"lease,omitempty"`
	Offer    string           `json:"offer,omitempty"`
	State    string           `json:"state"`
	StateAt  time.Time        `json:"state_at"`
	Joined   time.Time        `json:"joined"`
	LastSeen time.Time        `json:"last_seen"`
	Version  string           `json:"version,omitempty"`
	Source   string           `json:"source,omitempty"`
	GPUs     []store.AgentGPU `json:"gpus"`
	// Jobs are the units running on the node's lease (a team role sees
	// its team's only).
	Jobs    []string `json:"jobs"`
	Backlog int64    `json:"backlog"`
	// Binding says what the node serves: its lease, or, bound to none,
	// whether it waits for work as a machine of its offer or why it
	// can get none ("unbound: no offer ...").
	Binding string `json:"binding"`
}

// binding is NodeView.Binding of agent a.
func binding(a *store.Agent) string {
	switch {
	case a.LeaseID != "":
		return "lease " + a.LeaseID
	case a.State == store.AgentDown:
		return "unbound: the agent is down"
	case a.OfferID == "":
		return "unbound: no offer (to take work, start the agent with --offer OFFER, or pin it to an offer in the static provider's file)"
	default:
		return "free: a machine of " + a.OfferID + ", waiting for work"
	}
}

// NodesPage is the response of GET /api/v1/nodes.
type NodesPage struct {
	Nodes []NodeView `json:"nodes"`
	Next  string     `json:"next,omitempty"`
}

// LogView is a stretch of a job's log: Text starts at byte Start; End is
// the log's length so far (read on from Start+len(Text)).
type LogView struct {
	Job   string `json:"job"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Text  string `json:"text"`
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, _ := httpapi.PrincipalFrom(r.Context())
	f := store.AgentFilter{Cursor: q.Get("cursor")}
	if !parseStates(w, q.Get("state"), store.ParseAgentState, &f.States) {
		return
	}
	if !parseLimit(w, q.Get("limit"), &f.Limit) {
		return
	}
	page, err := s.store.Agents().ListAgents(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	// What runs where: the live units by lease, with their jobs' teams.
	units, err := s.store.Units().ListLiveUnits(r.Context())
	if err != nil {
		s.storeError(w, r, err, "")
		return
	}
	type jobInfo struct {
		team   string
		shards int
	}
	jobOf := map[string]jobInfo{}
	onLease := map[string][]string{}
	for i := range units {
		u := &units[i]
		if u.State != core.JobRunning && u.State != core.JobCheckpointing {
			continue
		}
		ji, ok := jobOf[u.JobID]
		if !ok {
			j, err := s.store.Jobs().GetJob(r.Context(), u.JobID)
			if err != nil {
				s.storeError(w, r, err, "")
				return
			}
			ji = jobInfo{j.Team, j.Shards}
			jobOf[u.JobID] = ji
		}
		if !p.SeesTeam(ji.team) {
			continue
		}
		for _, part := range u.Parts {
			onLease[part.LeaseID] = append(onLease[part.LeaseID], u.Key(ji.shards))
		}
	}
	out := NodesPage{Nodes: []NodeView{}, Next: page.Next}
	for _, a := range page.Items {
		jobs := onLease[a.LeaseID]
		if a.LeaseID == "" {
			jobs = nil
		}
		if p.Role != store.RoleAdmin && len(jobs) == 0 {
			continue // a team role sees the nodes that run its jobs
		}
		sort.Strings(jobs)
		v := NodeView{ID: a.ID, Lease: a.LeaseID, Offer: a.OfferID, State: string(a.State), StateAt: a.StateAt.UTC(), Joined: a.Joined.UTC(),
			LastSeen: a.LastSeen.UTC(), Version: a.Version, Source: a.Source, GPUs: nonNilGPUs(a.GPUs), Jobs: append([]string{}, jobs...), Backlog: a.Backlog, Binding: binding(&a)}
		out.Nodes = append(out.Nodes, v)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func nonNilGPUs(g []store.AgentGPU) []store.AgentGPU {
	if g == nil {
		return []store.AgentGPU{}
	}
	return g
}

func (s *Server) jobLogs(w http.ResponseWriter, r *http.Request) {
	j, ok := s.visibleJob(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	num := func(name, unit string) (int64, bool) {
		v := q.Get(name)
		if v == "" {
			return 0, true
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", name, fmt.Sprintf("%s %q: want a whole number of %s >= 0", name, v, unit))
			return 0, false
		}
		return n, true
	}
	offset, ok1 := num("offset", "bytes")
	tail, ok2 := num("tail", "bytes")
	limit, ok3 := num("limit", "bytes")
	lines, ok4 := num("lines", "lines")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return
	}
	given := 0
	for _, name := range []string{"offset", "tail", "lines"} {
		if q.Get(name) != "" {
			given++
		}
	}
	if given > 1 {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "tail", "offset, tail and lines: give one of them")
		return
	}
	if tail > store.MaxLogRead || limit > store.MaxLogRead {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "limit", fmt.Sprintf("tail and limit: at most %d bytes", store.MaxLogRead))
		return
	}
	if lines > MaxTailLines {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_argument", "lines", fmt.Sprintf("lines %d: at most %d", lines, MaxTailLines))
		return
	}
	var lr store.LogRead
	var err error
	switch {
	case lines > 0:
		lr, err = tailLines(r.Context(), s.store.JobLogs(), j.ID, int(lines))
	case tail > 0:
		lr, err = s.store.JobLogs().TailLog(r.Context(), j.ID, int(tail))
	default:
		lr, err = s.store.JobLogs().ReadLog(r.Context(), j.ID, offset, int(limit))
	}
	if err != nil {
		s.storeError(w, r, err, "offset")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, LogView{Job: j.ID, Start: lr.Start, End: lr.End, Text: string(lr.Data)})
}

// MaxTailLines is the most lines one ?lines= read asks for.
const MaxTailLines = 100000

// tailLines returns the job's last n lines: the log read backwards from
// its end in growing chunks until n line breaks are found, the log's
// start is reached, or store.MaxLogRead bytes were read. A log's final
// line counts whether or not it ends in a newline. At the byte bound the
// text is cut to begin at a line, so a caller never sees half a line
// first; Start says where it begins.
func tailLines(ctx context.Context, logs store.JobLogs, jobID string, n int) (store.LogRead, error) {
	size := 64 << 10
	lr, err := logs.TailLog(ctx, jobID, size)
	if err != nil {
		return store.LogRead{}, err
	}
	data, start := lr.Data, lr.Start
	for {
		if cut, ok := lastLines(data, n); ok {
			return store.LogRead{Data: data[cut:], Start: start + int64(cut), End: lr.End}, nil
		}
		if start == 0 || len(data) >= store.MaxLogRead {
			break
		}
		size = min(2*size, store.MaxLogRead-len(data))
		from := max(start-int64(size), 0)
		prev, err := logs.ReadLog(ctx, jobID, from, int(start-from))
		if err != nil {
			return store.LogRead{}, err
		}
		if prev.Start >= start {
			break // retention removed what came before
		}
		head := prev.Data[:min(int64(len(prev.Data)), start-prev.Start)]
		data = append(append(make([]byte, 0, len(head)+len(data)), head...), data...)
		start = prev.Start
		if prev.Start > from {
			break // retention: this is the oldest left
		}
	}
	if cut, ok := lastLines(data, n); ok {
		return store.LogRead{Data: data[cut:], Start: start + int64(cut), End: lr.End}, nil
	}
	if start > 0 {
		// Bounded or cut by retention: begin at the first whole line.
		if i := bytes.IndexByte(data, '\n'); i >= 0 && i+1 < len(data) {
			data, start = data[i+1:], start+int64(i+1)
		}
	}
	return store.LogRead{Data: data, Start: start, End: lr.End}, nil
}

// lastLines returns where the last n lines of data begin, and false when
// data holds fewer than n line breaks before them (more is needed, or
// the whole of data is fewer lines).
func lastLines(data []byte, n int) (int, bool) {
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if data[i] == '\n' {
			n--
			if n == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}
