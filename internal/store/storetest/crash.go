package storetest

import (
	"bufio"
	"context"
	"fmt"
	"github.com/gpufleet/gpufleet/internal/reltest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/store"
)

// CrashEnv is set in the child process of RunCrash.
const CrashEnv = "GPUFLEET_STORETEST_CRASH_CHILD"

// CrashChild is the body of the child process: it submits jobs (and lease
// intents) as fast as it can and prints each id once the store has
// acknowledged it, until it is killed. A backend's test calls it from a
// test that runs only when CrashEnv is set.
func CrashChild(s store.Store) {
	c := context.Background()
	if err := s.Teams().CreateTeam(c, team("crash")); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	for i := 0; ; i++ {
		id := fmt.Sprintf("c%d", i)
		if _, _, err := s.Jobs().SubmitJob(c, job(id, "crash"), "k"+id); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		if err := s.Leases().CreateLease(c, intent("L"+id)); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("ack", id)
	}
}

// RunCrash starts the test binary again as a child running test (whose
// body calls CrashChild when CrashEnv is set) with env, kills it with
// SIGKILL once it has acknowledged some submissions, then checks with
// reopen that every acknowledged job and lease intent is there, each
// once, and that a repeated submission is recognised.
func RunCrash(t *testing.T, test string, env []string, reopen func(t *testing.T) store.Store) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), CrashEnv+"=1"), env...)
	out, err := cmd.StdoutPipe()
	ok(t, err, "child stdout")
	cmd.Stderr = os.Stderr
	ok(t, cmd.Start(), "start child")
	var acked []string
	lines := bufio.NewScanner(out)
	deadline := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	defer deadline.Stop()
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "error" {
			t.Fatalf("child: %s", lines.Text())
		}
		if f[0] == "ack" {
			acked = append(acked, f[1])
			if len(acked) == 300 {
				_ = cmd.Process.Signal(syscall.SIGKILL) // mid-stream, no Close
			}
		}
	}
	_ = cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("child acknowledged only %d submissions before it ended", len(acked))
	}
	s := reopen(t)
	c := ctx(t)
	for _, id := range acked {
		if _, err := s.Jobs().GetJob(c, id); err != nil {
			t.Errorf("acknowledged job %s lost in the crash: %v", id, err)
		}
		if _, err := s.Leases().GetLease(c, "L"+id); err != nil {
			t.Errorf("acknowledged lease intent L%s lost in the crash: %v", id, err)
		}
	}
	// The client retries the last one: recognised, not doubled.
	last := acked[len(acked)-1]
	j, created, err := s.Jobs().SubmitJob(c, job("retry", "crash"), "k"+last)
	ok(t, err, "retry after the crash")
	if created || j.ID != last {
		t.Errorf("retry of %s after the crash: created %v id %s", last, created, j.ID)
	}
	all := allJobs(t, s, store.JobFilter{Team: "crash"}, store.MaxLimit)
	if len(all) < len(acked) || len(all) > len(acked)+1 { // +1: submitted, not yet acknowledged
		t.Errorf("%d jobs after the crash, %d acknowledged", len(all), len(acked))
	}
	live, err := s.Leases().ListLiveLeases(c)
	ok(t, err, "live leases")
	if len(live) < len(acked) {
		t.Errorf("%d lease intents after the crash, %d acknowledged", len(live), len(acked))
	}
	t.Logf("%d submissions acknowledged before SIGKILL, all found after reopening", len(acked))
	reltest.Record(t, reltest.Entry{Area: "faults", Done: "a process killed with SIGKILL mid-stream of job submissions and lease intents, the store reopened",
		Amount: fmt.Sprintf("%d acknowledged submissions, each with a lease intent", len(acked)),
		Held:   "every acknowledged job and lease intent found once; the retried last one recognised by its key"})
}
