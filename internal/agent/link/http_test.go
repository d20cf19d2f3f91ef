package link

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHTTPErrors: each failure says which request failed and why: a
// server that hangs is cut off at the timeout, an error reply is decoded,
// garbage is reported, and a batch acknowledged short is not taken for
// sent (the spool would forget records the server lacks).
func TestHTTPErrors(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			w.WriteHeader(401)
			w.Write([]byte(`{"error":{"code":"unauthenticated","message":"missing bearer token"}}`))
			return
		}
		switch r.URL.Path {
		case "/api/v1/agent/heartbeat":
			<-release
		case "/api/v1/agent/events":
			w.WriteHeader(400)
			w.Write([]byte(`{"error":{"code":"invalid_argument","field":"records[0].seq","message":"records[0].seq 0: want above 0"}}`))
		case "/api/v1/agent/samples":
			w.Write([]byte(`{"applied": 1}`))
		case "/api/v1/agent/commands":
			w.Write([]byte(`<html>proxy error</html>`))
		}
	}))
	defer srv.Close()
	defer close(release)
	up := &HTTP{URL: srv.URL, Token: "secret", Agent: "n1", Timeout: 100 * time.Millisecond}
	ctx := context.Background()

	start := time.Now()
	err := up.Heartbeat(ctx, Heartbeat{})
	if err == nil || !strings.HasPrefix(err.Error(), "POST /api/v1/agent/heartbeat: ") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hanging server: %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("the timeout took %s", el)
	}

	err = up.SendEvents(ctx, []Record{{Seq: 1, Kind: KindEvent}})
	var he *Error
	if !errors.As(err, &he) || he.Status != 400 || he.Field != "records[0].seq" ||
		err.Error() != "POST /api/v1/agent/events: 400 invalid_argument (field records[0].seq): records[0].seq 0: want above 0" {
		t.Errorf("error reply: %v", err)
	}

	err = up.SendSamples(ctx, []Record{{Seq: 1, Kind: KindSample}, {Seq: 2, Kind: KindSample}})
	if err == nil || !strings.Contains(err.Error(), "acknowledged records up to 1 of a batch ending at 2") {
		t.Errorf("short acknowledgement: %v", err)
	}

	_, err = up.FetchCommands(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "GET /api/v1/agent/commands: decode reply") {
		t.Errorf("garbage reply: %v", err)
	}

	bad := &HTTP{URL: srv.URL, Token: "wrong", Agent: "n1"}
	err = bad.SendEvents(ctx, []Record{{Seq: 1, Kind: KindEvent}})
	if !errors.As(err, &he) || he.Status != 401 || he.Code != "unauthenticated" {
		t.Errorf("bad token: %v", err)
	}
	unreachable := &HTTP{URL: "http://127.0.0.1:1", Token: "secret", Agent: "n1", Timeout: time.Second}
	if err := unreachable.Heartbeat(ctx, Heartbeat{}); err == nil || !strings.HasPrefix(err.Error(), "POST /api/v1/agent/heartbeat: ") {
		t.Errorf("unreachable: %v", err)
	}
}
