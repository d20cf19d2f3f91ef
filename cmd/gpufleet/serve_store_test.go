package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/client"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store/postgres/pgtest"
)

// serveWith runs "gpufleet serve --addr 127.0.0.1:0 args..." until the
// test ends and returns the admin token it printed ("" when none), its
// base URL and a stop function that waits for a clean exit.
func serveWith(t *testing.T, args ...string) (token, base string, stop func()) {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), io.Discard, pw)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var lines []string
	for base == "" && sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if _, tok, ok := strings.Cut(line, "admin token (shown once, store it now): "); ok {
			token = tok
		}
		if _, rest, ok := strings.Cut(line, "addr=http://"); ok {
			base = "http://" + strings.Fields(rest)[0]
		}
	}
	if base == "" {
		cancel()
		t.Fatalf("serve printed no address:\n%s", strings.Join(lines, "\n"))
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d", code)
			}
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
	}
	t.Cleanup(stop)
	return token, base, stop
}

// TestServePostgres runs "gpufleet serve --db postgres://...?schema=S"
// and drives it over HTTP: the tables are in S (and only S holds the
// job), a restart on the same URL keeps the job and prints no second
// admin token.
func TestServePostgres(t *testing.T) {
	t.Chdir(t.TempDir())
	db, schema := pgServeURL(t, "gpufleet_serve_")
	token, base, stop := serveWith(t, "--db", db)
	if !strings.HasPrefix(token, "gpf_") {
		t.Fatalf("no admin token printed: %q", token)
	}
	ctx := context.Background()
	c, err := client.New(base, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTeam(ctx, api.TeamRequest{ID: "ml", Name: "ML"}); err != nil {
		t.Fatal(err)
	}
	if _, created, err := c.SubmitJob(ctx, api.JobRequest{ID: "train-pg", Team: "ml", GPUs: 1, EstDurationSeconds: 600}, "k-pg"); err != nil || !created {
		t.Fatalf("submit: %v %v", created, err)
	}
	p, err := c.ListJobs(ctx, client.JobFilter{Team: "ml"})
	if err != nil || len(p.Jobs) != 1 || p.Jobs[0].ID != "train-pg" {
		t.Fatalf("jobs: %+v %v", p, err)
	}
	conn, err := pgx.Connect(ctx, pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+schema+".jobs WHERE id = 'train-pg'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the job in schema %s: %d %v", schema, n, err)
	}
	stop()
	again, base2, _ := serveWith(t, "--db", db)
	if again != "" {
		t.Error("a second admin token was printed on restart")
	}
	c2, _ := client.New(base2, token, nil)
	if j, err := c2.GetJob(ctx, "train-pg"); err != nil || j.Team != "ml" {
		t.Errorf("job after restart: %+v %v", j, err)
	}
	if _, created, err := c2.SubmitJob(ctx, api.JobRequest{ID: "train-pg", Team: "ml", GPUs: 1, EstDurationSeconds: 600}, "k-pg"); err != nil || created {
		t.Errorf("keyed retry after restart: created %v, %v", created, err)
	}
}

func TestSplitSchema(t *testing.T) {
	for _, tc := range []struct {
		in, dsn, schema, errField string
	}{
		{"postgres://u@h:5432/db?sslmode=disable&schema=fleet", "postgres://u@h:5432/db?sslmode=disable", "fleet", ""},
		{"postgres://u@h/db?search_path=fleet", "postgres://u@h/db", "fleet", ""},
		{"postgres://u@h/db", "postgres://u@h/db", "", ""},
		{"postgres://u@h/db?schema=a&search_path=b", "", "", "--db search_path"},
		{"postgres://u@h/db?search_path=a,public", "", "", "--db search_path"},
	} {
		dsn, schema, err := splitSchema(tc.in)
		var fe *core.FieldError
		switch {
		case tc.errField != "":
			if !errors.As(err, &fe) || fe.Field != tc.errField {
				t.Errorf("%s: %v, want a field error for %s", tc.in, err, tc.errField)
			}
		case err != nil || dsn != tc.dsn || schema != tc.schema:
			t.Errorf("%s: %q %q %v, want %q %q", tc.in, dsn, schema, err, tc.dsn, tc.schema)
		}
	}
	// These must fail before anything is created (in the default schema
	// above all).
	if code, _, errs := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--db", "postgres://127.0.0.1:5432/test?sslmode=disable&schema=x;y"); code != 1 || !strings.Contains(errs, "--db") {
		t.Errorf("a query that does not parse: %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--db", pgtest.DSN()+"&schema=Bad-DROP"); code != 1 || !strings.Contains(strings.ToLower(errs), "schema") {
		t.Errorf("a schema that is not an identifier: %d %q", code, errs)
	}
}

// pgServeURL is a --db URL for serve on a fresh PostgreSQL schema (named
// with prefix, dropped when t ends), and the schema.
func pgServeURL(t *testing.T, prefix string) (url, schema string) {
	t.Helper()
	dsn, schema := pgtest.Schema(t, prefix)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "schema=" + schema, schema
}
