package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/reltest"
	"github.com/gpufleet/gpufleet/internal/store/postgres"
	"github.com/gpufleet/gpufleet/internal/store/postgres/pgtest"
)

// FailoverBound is how long the surviving replica may take to lead after
// the leader is killed (issue 23).
const FailoverBound = 15 * time.Second

// readyBody is /readyz's answer (api.ReadyView).
type readyBody struct {
	Replica string `json:"replica"`
	Leading bool   `json:"leading"`
	Leader  *struct {
		Replica string `json:"replica"`
		Term    int64  `json:"term"`
	} `json:"leader"`
}

// replica is one gpufleet serve process of the failover test.
type replica struct {
	cmd  *exec.Cmd
	base string
	log  string // its stderr, kept for a failure's post-mortem
}

// startReplica starts TestServeChild in dir with args, its stderr copied
// to a file, and returns it with the admin token it printed (empty when
// another process made the token first).
func startReplica(t *testing.T, dir, name string, args ...string) (*replica, string) {
	t.Helper()
	r := &replica{cmd: exec.Command(os.Args[0], "-test.run=^TestServeChild$"), log: filepath.Join(dir, name+".log")}
	r.cmd.Dir = dir
	r.cmd.Env = append(os.Environ(), serveChildEnv+"=1", serveArgsEnv+"="+strings.Join(args, "\n"))
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.cmd.Process.Kill(); _ = r.cmd.Wait(); logf.Close() })
	var token string
	sc := bufio.NewScanner(stderr)
	for r.base == "" && sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(logf, line)
		if _, tok, ok := strings.Cut(line, "admin token (shown once, store it now): "); ok {
			token = tok
		}
		if _, rest, ok := strings.Cut(line, "addr=http://"); ok {
			r.base = "http://" + strings.Fields(rest)[0]
		}
	}
	if r.base == "" {
		t.Fatalf("%s printed no address", name)
	}
	go func() { _, _ = io.Copy(logf, stderr) }()
	return r, token
}

// TestServeFailover runs two gpufleet serve replicas on one PostgreSQL
// schema with the sim provider, submits jobs through both without pause,
// and kills the leader with SIGKILL while its machines run jobs. The
// other replica leads within FailoverBound and /readyz says so; every
// job either replica acknowledged is in the store and succeeds; the dead
// leader's machines (they die with its process) are marked failed and no
// live lease keeps one, nor do two live leases share a machine; no unit
// ran twice (no two runs of a job overlap, no job exits 0 twice, and a
// unit has one run command per placement); and the jobs submitted after
// the failover run.
func TestServeFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a server and waits for the failover")
	}
	dsn, schema := pgtest.Schema(t, "failover_")
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	db := dsn + sep + "schema=" + schema
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs.log")
	// A follower tries the lock once a tick: the tick bounds the
	// takeover. GPUFLEET_FAILOVER_TICK measures another (the default 5s).
	tick := "200ms"
	if v := os.Getenv("GPUFLEET_FAILOVER_TICK"); v != "" {
		tick = v
	}
	tickD, err := time.ParseDuration(tick)
	if err != nil {
		t.Fatalf("GPUFLEET_FAILOVER_TICK: %v", err)
	}
	// Every acknowledged job must succeed within settle of the load's end.
	settle := 40*time.Second + 30*tickD
	args := []string{"--db", db, "--provider", "sim", "--tick", tick, "--sim-delay", "1s", "--log-level", "info"}
	began := time.Now()

	a, token := startReplica(t, dir, "a", args...)
	if token == "" {
		t.Fatal("no admin token")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	call := func(base, method, path, key, body string) (int, []byte, error) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	ready := func(r *replica) (readyBody, http.Header, error) {
		var rb readyBody
		code, b, err := call(r.base, "GET", "/readyz", "", "")
		if err != nil {
			return rb, nil, err
		}
		if code != 200 {
			return rb, nil, fmt.Errorf("readyz %d: %s", code, b)
		}
		// The headers are checked on a request of its own.
		req, _ := http.NewRequest("GET", r.base+"/readyz", nil)
		resp, err := client.Do(req)
		if err != nil {
			return rb, nil, err
		}
		resp.Body.Close()
		return rb, resp.Header, json.Unmarshal(b, &rb)
	}
	waitLeads := func(r *replica, within time.Duration) (readyBody, error) {
		deadline := time.Now().Add(within)
		for {
			rb, _, err := ready(r)
			if err == nil && rb.Leading {
				return rb, nil
			}
			if time.Now().After(deadline) {
				return rb, fmt.Errorf("not leading after %s (last answer %+v, %v)", within, rb, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	postMortem := func() {
		if !t.Failed() {
			return
		}
		for _, f := range []string{"a.log", "b.log"} {
			b, _ := os.ReadFile(filepath.Join(dir, f))
			lines := strings.Split(string(b), "\n")
			t.Logf("--- %s (last 40 lines)\n%s", f, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	}
	defer postMortem()

	ra, err := waitLeads(a, 20*time.Second)
	if err != nil {
		t.Fatalf("replica a: %v", err)
	}
	if want := "/" + strconv.Itoa(a.cmd.Process.Pid); !strings.HasSuffix(ra.Replica, want) || ra.Leader == nil || ra.Leader.Replica != ra.Replica {
		t.Fatalf("replica a's /readyz: %+v, want its own name (…%s) as the leader", ra, want)
	}
	b, again := startReplica(t, dir, "b", args...)
	if again != "" {
		t.Error("the second replica made an admin token of its own")
	}
	rb, hdr, err := ready(b)
	if err != nil {
		t.Fatalf("replica b: %v", err)
	}
	if rb.Leading || rb.Replica == ra.Replica || !strings.HasSuffix(rb.Replica, "/"+strconv.Itoa(b.cmd.Process.Pid)) {
		t.Fatalf("replica b's /readyz before the failover: %+v", rb)
	}
	// b names a as the leader once it has tried the lock (a tick).
	for deadline := time.Now().Add(5 * time.Second); rb.Leader == nil || rb.Leader.Replica != ra.Replica; {
		if time.Now().After(deadline) {
			t.Fatalf("replica b does not name a as the leader: %+v", rb)
		}
		time.Sleep(50 * time.Millisecond)
		if rb, hdr, err = ready(b); err != nil {
			t.Fatal(err)
		}
	}
	if hdr.Get("Gpufleet-Replica") != rb.Replica || hdr.Get("Gpufleet-Leader") != ra.Replica {
		t.Errorf("replica b's /readyz headers: replica %q leader %q", hdr.Get("Gpufleet-Replica"), hdr.Get("Gpufleet-Leader"))
	}

	if code, body, err := call(b.base, "POST", "/api/v1/teams", "", `{"id":"ml","name":"ML"}`); code != 201 {
		t.Fatalf("team through replica b: %d %s %v", code, body, err)
	}

	// The load: one job every 100 ms, through a and b in turn. Each job
	// writes a line when its run starts and one when it exits 0.
	type ack struct {
		via string
		at  time.Time
	}
	var mu sync.Mutex
	acked := map[string]ack{}
	var refusedAfterKill, failedSends int
	stopLoad := make(chan struct{})
	var killedAt time.Time
	var load sync.WaitGroup
	load.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stopLoad:
				return
			case <-time.After(100 * time.Millisecond):
			}
			id := fmt.Sprintf("j%d", n)
			r, via := a, "a"
			if n%2 == 1 {
				r, via = b, "b"
			}
			script := fmt.Sprintf("echo start %s $GPUFLEET_JOB_ID $(/bin/date +%%s%%N) >> %s; /bin/sleep 2; echo end %s $GPUFLEET_JOB_ID $(/bin/date +%%s%%N) >> %s", id, runs, id, runs)
			cmdJSON, _ := json.Marshal([]string{"/bin/sh", "-c", script})
			body := fmt.Sprintf(`{"id":%q,"team":"ml","gpus":1,"tier":"core","est_duration_seconds":3,"command":%s}`, id, cmdJSON)
			code, resp, err := call(r.base, "POST", "/api/v1/jobs", "k-"+id, body)
			mu.Lock()
			switch {
			case code == 201:
				acked[id] = ack{via: via, at: time.Now()}
			case err != nil && !killedAt.IsZero() && via == "a":
				refusedAfterKill++
			default:
				failedSends++
				t.Logf("submission of %s through %s: %d %s %v", id, via, code, resp, err)
			}
			mu.Unlock()
		}
	})
	defer func() {
		select {
		case <-stopLoad:
		default:
			close(stopLoad)
		}
		load.Wait()
	}()

	// Kill a once some runs have started on its machines and are not
	// done: the failover must deal with units in flight.
	started := func() (starts, ends map[string][]runLine) { return readRuns(t, runs) }
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, e := started()
		inFlight := 0
		for job, ss := range s {
			if len(ss) > len(e[job]) {
				inFlight++
			}
		}
		if inFlight >= 3 && len(e) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no runs in flight on replica a within 30 s (%d started, %d ended)", len(s), len(e))
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, leasesBefore := leasesOf(t, call, b.base)
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	rb, err = waitLeads(b, FailoverBound)
	takeover := time.Since(killedAt)
	if err != nil {
		t.Fatalf("replica b after the kill: %v", err)
	}
	t.Logf("replica b leads %s after the kill of replica a (bound %s)", takeover.Round(time.Millisecond), FailoverBound)
	if rb.Leader == nil || rb.Leader.Replica != rb.Replica || rb.Leader.Term != ra.Leader.Term+1 {
		t.Errorf("replica b's /readyz after the failover: %+v, want itself as the leader, term %d", rb, ra.Leader.Term+1)
	}

	// Keep submitting through b for a while, then stop and let every
	// acknowledged job finish.
	time.Sleep(3 * time.Second)
	close(stopLoad)
	load.Wait()
	mu.Lock()
	defer mu.Unlock()
	var after []string
	for id, k := range acked {
		if k.at.After(killedAt) {
			after = append(after, id)
		}
	}
	if len(after) == 0 {
		t.Fatal("no job acknowledged after the failover")
	}
	// Every acknowledged job is in the store, and succeeds.
	states := map[string]string{}
	deadline = time.Now().Add(settle)
	for {
		clear(states)
		for cursor := ""; ; {
			code, body, err := call(b.base, "GET", "/api/v1/jobs?limit=1000&cursor="+cursor, "", "")
			if err != nil || code != 200 {
				t.Fatalf("jobs: %d %s %v", code, body, err)
			}
			var page struct {
				Jobs []struct {
					ID    string `json:"id"`
					State string `json:"state"`
				} `json:"jobs"`
				Next string `json:"next"`
			}
			if err := json.Unmarshal(body, &page); err != nil {
				t.Fatal(err)
			}
			for _, j := range page.Jobs {
				states[j.ID] = j.State
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		var left []string
		for id := range acked {
			if s, ok := states[id]; !ok {
				t.Fatalf("acknowledged job %s is not in the store", id)
			} else if s != "succeeded" {
				left = append(left, id+" "+s)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			sort.Strings(left)
			for _, l := range left {
				id, _, _ := strings.Cut(l, " ")
				_, job, _ := call(b.base, "GET", "/api/v1/jobs/"+id, "", "")
				_, evs, _ := call(b.base, "GET", "/api/v1/events?limit=50&subject="+id, "", "")
				t.Logf("--- stuck job %s: %s\nevents: %s\nlog lines:\n%s", id, job, evs, grepLogs(dir, id+"-"))
			}
			t.Fatalf("%d acknowledged jobs not succeeded %s after the load stopped: %v", len(left), settle, left)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// Leases: a's machines (their provider ids carry its incarnation)
	// all ended, none live twice, none live on a dead process's machine.
	incA := map[string]bool{}
	for _, l := range leasesBefore {
		if l.ProviderID != "" {
			incA[incarnation(l.ProviderID)] = true
		}
	}
	if len(incA) != 1 {
		t.Fatalf("leases before the kill from %d incarnations, want 1 (replica a's): %v", len(incA), incA)
	}
	all, _ := leasesOf(t, call, b.base)
	live := map[string]string{}
	vanished := 0
	for _, l := range all {
		final := l.State == "released" || l.State == "failed" || l.State == "reclaimed"
		if incA[incarnation(l.ProviderID)] {
			if !final {
				t.Errorf("lease %s on replica a's machine %s is %s after the failover", l.ID, l.ProviderID, l.State)
			}
			if l.State == "failed" {
				vanished++
			}
			continue
		}
		if final || l.ProviderID == "" {
			continue
		}
		if other, dup := live[l.ProviderID]; dup {
			t.Errorf("machine %s on live leases %s and %s", l.ProviderID, other, l.ID)
		}
		live[l.ProviderID] = l.ID
	}

	// Units: one run command per placement, no overlapping runs, one
	// successful exit per job.
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	count := func(sql string) map[string]int {
		rows, err := st.Pool().Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			out[k] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	runCmds := count(`SELECT unit, count(*) FROM agent_commands WHERE kind = 'run' GROUP BY unit`)
	requeued := count(`SELECT subject, count(*) FROM events WHERE kind = 'unit.requeued' GROUP BY subject`)
	succeeded := count(`SELECT subject, count(*) FROM events WHERE kind = 'unit.succeeded' GROUP BY subject`)
	vanishedEvents := count(`SELECT kind, count(*) FROM events WHERE kind = 'lease.vanished' GROUP BY kind`)["lease.vanished"]
	requeuedUnits := 0
	for unit, n := range runCmds {
		// A placement whose machine died before its agent joined has
		// no run command: at most one per placement.
		if n > 1+requeued[unit] {
			t.Errorf("unit %s: %d run commands, %d requeues: a unit has at most one run command per placement", unit, n, requeued[unit])
		}
		if requeued[unit] > 0 {
			requeuedUnits++
		}
	}
	for unit, n := range succeeded {
		if n != 1 {
			t.Errorf("unit %s succeeded %d times", unit, n)
		}
	}
	// The runs as the jobs wrote them. A job's runs follow one another:
	// all but its last started on replica a before the kill and died
	// with it, or exited 0 there with no report of it stored before the
	// agent died with the process (the one case where a unit runs again
	// after it ran to its end: its end was never known); its last exited
	// 0 once.
	reported := count(`SELECT run_id, count(*) FROM agent_reports WHERE kind = 'job-exited' GROUP BY run_id`)
	starts, ends := readRuns(t, runs)
	killedRuns, lostExits := 0, 0
	for id := range acked {
		ss, es := starts[id], ends[id]
		if len(ss) == 0 || len(es) == 0 {
			t.Errorf("job %s succeeded with runs %v, exits %v", id, ss, es)
			continue
		}
		last := ss[len(ss)-1]
		if es[len(es)-1].run != last.run {
			t.Errorf("job %s: its last run %s is not the one that exited last (%v)", id, last.run, es)
		}
		for _, s := range ss[:len(ss)-1] {
			if !s.at.Before(killedAt) || !last.at.After(killedAt) {
				t.Errorf("job %s: run %s (started %s) beside run %s (started %s); the kill at %s", id, s.run, s.at.Format(time.StampMilli), last.run, last.at.Format(time.StampMilli), killedAt.Format(time.StampMilli))
			}
			if slices.ContainsFunc(es, func(e runLine) bool { return e.run == s.run }) {
				lostExits++
				if reported[s.run] > 0 {
					t.Errorf("job %s: run %s exited 0 and its agent reported it, yet the unit ran again as %s", id, s.run, last.run)
				}
				continue
			}
			killedRuns++
		}
	}
	if killedRuns == 0 {
		t.Error("no run died with replica a: the kill landed on no unit in flight")
	}
	if vanishedEvents == 0 || vanished == 0 {
		t.Errorf("replica a's machines: %d lease.vanished events, %d failed leases", vanishedEvents, vanished)
	}
	aAcked, bAcked := 0, 0
	for _, k := range acked {
		if k.via == "a" {
			aAcked++
		} else {
			bAcked++
		}
	}
	t.Logf("tick %s: %d jobs acknowledged (%d by a, %d by b, %d after the failover), all succeeded; %d submissions to the dead replica refused, %d others not acknowledged; "+
		"%d machines of replica a marked failed, %d runs died with it and ran again on b, %d exits lost with it (%d units requeued); takeover %s; whole test %s",
		tick, len(acked), aAcked, bAcked, len(after), refusedAfterKill, failedSends, vanished, killedRuns, lostExits, requeuedUnits, takeover.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	if failedSends > 0 {
		t.Errorf("%d submissions to a live replica not acknowledged", failedSends)
	}
	reltest.Record(t, reltest.Entry{Area: "faults", Done: "kill -9 of the leading gpufleet serve replica (PostgreSQL, sim provider) under a stream of submissions to two replicas",
		Amount: fmt.Sprintf("%d jobs acknowledged, %d runs in flight on the dead leader's machines", len(acked), killedRuns),
		Held:   fmt.Sprintf("the other replica led %s after the kill (bound %s); every acknowledged job succeeded once; no machine on two live leases; one run command per placement", takeover.Round(time.Millisecond), FailoverBound)})
}

// runLine is one line of the jobs' runs file: a run started or exited 0.
type runLine struct {
	run string
	at  time.Time
}

// readRuns reads the runs file: each job's starts and exits.
func readRuns(t *testing.T, path string) (starts, ends map[string][]runLine) {
	t.Helper()
	starts, ends = map[string][]runLine{}, map[string][]runLine{}
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue // the last line, being written
		}
		ns, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			continue
		}
		l := runLine{run: f[2], at: time.Unix(0, ns)}
		switch f[0] {
		case "start":
			starts[f[1]] = append(starts[f[1]], l)
		case "end":
			ends[f[1]] = append(ends[f[1]], l)
		}
	}
	return starts, ends
}

// failoverLease is what the failover test reads of a lease.
type failoverLease struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	ProviderID string `json:"provider_id"`
}

// leasesOf lists every lease through base, and the live ones.
func leasesOf(t *testing.T, call func(base, method, path, key, body string) (int, []byte, error), base string) (all, live []failoverLease) {
	t.Helper()
	cursor := ""
	for {
		code, body, err := call(base, "GET", "/api/v1/leases?limit=1000&cursor="+cursor, "", "")
		if err != nil || code != 200 {
			t.Fatalf("leases: %d %s %v", code, body, err)
		}
		var page struct {
			Leases []failoverLease `json:"leases"`
			Next   string          `json:"next"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Leases...)
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	for _, l := range all {
		if l.State != "released" && l.State != "failed" && l.State != "reclaimed" {
			live = append(live, l)
		}
	}
	return all, live
}

// incarnation is the sim provider's process mark in a machine's id
// (sim-INCARNATION-...), empty for other ids.
func incarnation(providerID string) string {
	f := strings.SplitN(providerID, "-", 3)
	if len(f) < 3 || f[0] != "sim" {
		return ""
	}
	return f[1]
}

// grepLogs returns the lines of a.log and b.log in dir that hold s.
func grepLogs(dir, s string) string {
	var out []string
	for _, f := range []string{"a.log", "b.log"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, s) {
				out = append(out, f+": "+line)
			}
		}
	}
	return strings.Join(out, "\n")
}
