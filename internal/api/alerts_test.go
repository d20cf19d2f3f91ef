package api

import (
	"encoding/json"
	"testing"

	"github.com/gpufleet/gpufleet/internal/httpapi"
)

// TestAlerts: team roles see their team's alerts only; acknowledging is
// recorded once, with who, and another team's alert is a 404.
func TestAlerts(t *testing.T) {
	f := newFixture(t)
	list := func(role, query string) AlertsPage {
		t.Helper()
		code, b, _ := f.call(t, role, "GET", "/api/v1/alerts"+query, "")
		var p AlertsPage
		if code != 200 || json.Unmarshal(b, &p) != nil {
			t.Fatalf("%s alerts%s: %d %s", role, query, code, b)
		}
		return p
	}
	if p := list("admin", ""); len(p.Alerts) != 2 || p.Alerts[0].Team != "b" || p.Alerts[1].Team != "a" {
		t.Errorf("admin: %+v", p)
	}
	if p := list("admin", "?limit=1"); len(p.Alerts) != 1 || p.Next == "" {
		t.Errorf("admin page of 1: %+v", p)
	} else if q := list("admin", "?limit=1&cursor="+p.Next); len(q.Alerts) != 1 || q.Alerts[0].ID == p.Alerts[0].ID || q.Next != "" {
		t.Errorf("admin second page: %+v", q)
	}
	for _, role := range []string{"team-admin", "member", "viewer"} {
		if p := list(role, ""); len(p.Alerts) != 1 || p.Alerts[0].Team != "a" || !p.Alerts[0].Open {
			t.Errorf("%s: %+v", role, p)
		}
		if p := list(role, "?team=b"); len(p.Alerts) != 0 {
			t.Errorf("%s asks for team b: %+v", role, p)
		}
	}
	code, b, _ := f.call(t, "member", "POST", "/api/v1/alerts/2/ack", "")
	if code != 404 {
		t.Errorf("member acks team b's alert: %d %s", code, b)
	}
	f.clk.Advance(60e9)
	code, b, _ = f.call(t, "member", "POST", "/api/v1/alerts/1/ack", "")
	var a AlertView
	if code != 200 || json.Unmarshal(b, &a) != nil || a.AckedBy != "u-member" || !a.Acked.Equal(t0.Add(60e9)) || !a.Open {
		t.Fatalf("ack: %d %s", code, b)
	}
	f.clk.Advance(60e9)
	if code, b, _ = f.call(t, "team-admin", "POST", "/api/v1/alerts/1/ack", ""); code != 200 || json.Unmarshal(b, &a) != nil || a.AckedBy != "u-member" {
		t.Errorf("ack again keeps the first: %d %s", code, b)
	}
	if p := list("viewer", "?open=true"); len(p.Alerts) != 1 || p.Alerts[0].AckedBy != "u-member" {
		t.Errorf("viewer after the ack: %+v", p)
	}
	code, b, _ = f.call(t, "viewer", "GET", "/api/v1/events?kind=audit.alert_acked", "")
	var ev EventsPage
	if code != 200 || json.Unmarshal(b, &ev) != nil || len(ev.Events) != 1 || ev.Events[0].Attrs["actor"] != "u-member" {
		t.Errorf("audit of the ack: %d %s", code, b)
	}
	for path, want := range map[string]int{"/api/v1/alerts/x/ack": 404, "/api/v1/alerts/999/ack": 404, "/api/v1/alerts/0/ack": 404} {
		if code, b, _ := f.call(t, "admin", "POST", path, ""); code != want {
			t.Errorf("%s: %d %s", path, code, b)
		}
	}
	code, b, _ = f.call(t, "admin", "GET", "/api/v1/alerts?open=maybe", "")
	var e httpapi.ErrorBody
	if code != 400 || json.Unmarshal(b, &e) != nil || e.Error.Field != "open" {
		t.Errorf("bad open: %d %s", code, b)
	}
}
