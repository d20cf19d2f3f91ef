package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestCursor(t *testing.T) {
	for _, seq := range []int64{0, 1, 42, 1 << 62} {
		got, ok, err := DecodeCursor("jobs", EncodeCursor("jobs", seq))
		if err != nil || !ok || got != seq {
			t.Errorf("round trip of %d: %d %v %v", seq, got, ok, err)
		}
	}
	if _, ok, err := DecodeCursor("jobs", ""); ok || err != nil {
		t.Errorf("empty cursor: ok %v err %v, want the start", ok, err)
	}
	for _, bad := range []string{"!!", EncodeCursor("events", 3), "am9iczp4", "am9iczotMQ"} { // jobs:x, jobs:-1
		var fe *core.FieldError
		if _, _, err := DecodeCursor("jobs", bad); !errors.As(err, &fe) || fe.Field != "cursor" {
			t.Errorf("DecodeCursor(%q): %v, want a cursor field error", bad, err)
		}
	}
}

func TestPageLimit(t *testing.T) {
	for _, tc := range []struct {
		in, want int
		err      bool
	}{{0, DefaultLimit, false}, {1, 1, false}, {MaxLimit, MaxLimit, false}, {-1, 0, true}, {MaxLimit + 1, 0, true}} {
		got, err := PageLimit(tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("PageLimit(%d) = %d, %v", tc.in, got, err)
		}
	}
}

func TestLeasePredecessors(t *testing.T) {
	for _, tc := range []struct {
		to   core.LeaseState
		want []core.LeaseState
	}{
		{core.LeaseRequested, []core.LeaseState{core.LeaseRequested}},
		{core.LeaseProvisioning, []core.LeaseState{core.LeaseRequested, core.LeaseProvisioning}},
		{core.LeaseReady, []core.LeaseState{core.LeaseRequested, core.LeaseProvisioning, core.LeaseReady, core.LeaseDraining}},
		{core.LeaseReleased, []core.LeaseState{core.LeaseRequested, core.LeaseProvisioning, core.LeaseReady, core.LeaseDraining, core.LeaseReleased}},
	} {
		if d := cmp.Diff(tc.want, LeasePredecessors(tc.to)); d != "" {
			t.Errorf("LeasePredecessors(%s) (-want +got):\n%s", tc.to, d)
		}
	}
}

func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{{"plain", true}, {"ünï©ødé 𝔘", true}, {"'; DROP TABLE x; --", true}, {"a\x00b", false}, {"\xff", false}, {strings.Repeat("x", MaxTextLen+1), false}} {
		if err := CheckText("f", tc.v); (err == nil) != tc.ok {
			t.Errorf("CheckText(%.20q) = %v, want ok %v", tc.v, err, tc.ok)
		}
	}
	if err := CheckID("id", strings.Repeat("x", MaxIDLen+1)); err == nil {
		t.Error("CheckID accepted an overlong id")
	}
}

func TestRoles(t *testing.T) {
	for _, r := range Roles {
		if got, err := ParseRole(string(r)); err != nil || got != r {
			t.Errorf("ParseRole(%s) = %s, %v", r, got, err)
		}
	}
	if _, err := ParseRole("superuser"); err == nil {
		t.Error("ParseRole accepted superuser")
	}
	if RoleAdmin.TeamScoped() || RoleAgent.TeamScoped() || !RoleMember.TeamScoped() {
		t.Error("TeamScoped: admins and agents span teams, members do not")
	}
}

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		s, h, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if seen[s] || HashToken(s) != h || !strings.HasPrefix(s, TokenPrefix) {
			t.Fatalf("token %q: repeated, or hash or prefix wrong", s)
		}
		seen[s] = true
	}
}

func TestErrors(t *testing.T) {
	if err := Conflict("job %q exists", "j"); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), `job "j" exists`) {
		t.Errorf("Conflict: %v", err)
	}
	if err := NotFound("job", "j"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `job "j"`) {
		t.Errorf("NotFound: %v", err)
	}
}
