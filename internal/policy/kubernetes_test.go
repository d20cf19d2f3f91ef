package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The kubernetes section maps namespaces to teams; it round-trips
// through Marshal, shows in the JSON form (GET /api/v1/policy) only when
// set, and changes the hash: a team decides fair share and quotas.
func TestParseKubernetesTeams(t *testing.T) {
	p, err := Parse("k.yaml", []byte("kubernetes:\n  teams:\n    speech: nlp\n    vision-2: vision\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"speech": "nlp", "vision-2": "vision"}, p.Kubernetes.Teams); diff != "" {
		t.Errorf("kubernetes.teams (-want +got):\n%s", diff)
	}
	b, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("k.yaml", b)
	if err != nil {
		t.Fatalf("Parse(Marshal) = %v\n%s", err, b)
	}
	if diff := cmp.Diff(p.Kubernetes, back.Kubernetes); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	j, _ := json.Marshal(p)
	if !strings.Contains(string(j), `"kubernetes":{"teams":{"speech":"nlp","vision-2":"vision"}}`) {
		t.Errorf("JSON form lacks the section: %s", j)
	}
	d := Default()
	if j, _ := json.Marshal(d); strings.Contains(string(j), "kubernetes") {
		t.Errorf("JSON form of a policy without the section names it: %s", j)
	}
	if b, _ := Marshal(d); strings.Contains(string(b), "kubernetes") {
		t.Errorf("YAML form of a policy without the section names it:\n%s", b)
	}
	if p.Hash() == d.Hash() {
		t.Error("a namespace's team left the hash as the default's")
	}
	empty, err := Parse("e.yaml", []byte("kubernetes:\n  teams: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if empty.Hash() != d.Hash() {
		t.Errorf("an empty kubernetes.teams hashes %s, the default %s: they decide alike", empty.Hash(), d.Hash())
	}
}

func TestParseKubernetesErrors(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"namespace not a DNS label", "kubernetes:\n  teams:\n    Speech_Lab: nlp\n",
			`k.yaml:3: kubernetes.teams.Speech_Lab: invalid value "Speech_Lab": want a namespace name: 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit`},
		{"namespace ends with a dash", "kubernetes:\n  teams:\n    speech-: nlp\n",
			`k.yaml:3: kubernetes.teams.speech-: invalid value "speech-": want a namespace name`},
		{"namespace too long", "kubernetes:\n  teams:\n    " + strings.Repeat("a", 64) + ": nlp\n",
			`k.yaml:3: kubernetes.teams.` + strings.Repeat("a", 64) + `: invalid value "` + strings.Repeat("a", 64) + `": want a namespace name`},
		{"empty team", "kubernetes:\n  teams:\n    speech: \"\"\n",
			`k.yaml:3: kubernetes.teams.speech: invalid value "": want a team name of 1 to 100 characters on one line, no leading or trailing space`},
		{"team with a newline", "kubernetes:\n  teams:\n    speech: \"nlp\\nx\"\n",
			`k.yaml:3: kubernetes.teams.speech: invalid value "nlp\nx": want a team name`},
		{"team a list", "kubernetes:\n  teams:\n    speech: [nlp]\n",
			`k.yaml:3: kubernetes.teams.speech: invalid value "": want a single value`},
		{"unknown key", "kubernetes:\n  team:\n    speech: nlp\n",
			`k.yaml:2: kubernetes.team: unknown key in kubernetes "team": want one of teams`},
		{"teams a list", "kubernetes:\n  teams: [speech]\n",
			`k.yaml:2: kubernetes.teams: invalid value "": want a mapping`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("k.yaml", []byte(tc.file))
			var pe *core.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse = %v; want a *core.ParseError", err)
			}
			if got := err.Error(); !strings.HasPrefix(got, tc.want) {
				t.Errorf("error:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	// Validate says the same of a hand-made policy.
	p := Default()
	p.Kubernetes.Teams = map[string]string{"ok": "a", "Bad": "b"}
	if err := p.Validate(); err == nil || !strings.HasPrefix(err.Error(), `kubernetes.teams.Bad: invalid value "Bad"`) {
		t.Errorf("Validate = %v; want kubernetes.teams.Bad named", err)
	}
}

// Quotas: whole GPUs per model per team, read from the file, checked,
// and turned into the engine's teams (each its own cohort).
func TestParseKubernetesQuotas(t *testing.T) {
	p, err := Parse("q.yaml", []byte("kubernetes:\n  quotas:\n    nlp:\n      NVIDIA-A100-SXM4-80GB: 32\n      Tesla-V100-SXM2-32GB: 8\n    vision:\n      NVIDIA-L4: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []core.Team{
		{ID: "nlp", Weight: 1, Quotas: []core.Quota{{GPUClass: "NVIDIA-A100-SXM4-80GB", Guaranteed: 32 * core.WholeGPU}, {GPUClass: "Tesla-V100-SXM2-32GB", Guaranteed: 8 * core.WholeGPU}}},
		{ID: "vision", Weight: 1, Quotas: []core.Quota{{GPUClass: "NVIDIA-L4"}}},
	}
	if diff := cmp.Diff(want, p.Kubernetes.QuotaTeams()); diff != "" {
		t.Errorf("QuotaTeams (-want +got):\n%s", diff)
	}
	if p.Hash() == Default().Hash() {
		t.Error("quotas left the hash as the default's")
	}
	b, _ := Marshal(p)
	if back, err := Parse("q.yaml", b); err != nil || !cmp.Equal(p.Kubernetes, back.Kubernetes) {
		t.Errorf("round trip: %v, %+v", err, back.Kubernetes)
	}
	for _, tc := range []struct{ file, want string }{
		{"kubernetes:\n  quotas:\n    nlp:\n      A100: -1\n", `q.yaml:4: kubernetes.quotas.nlp.A100: invalid value "-1": want a GPU model and a count of whole GPUs 0..1000000`},
		{"kubernetes:\n  quotas:\n    nlp: {}\n", `q.yaml:3: kubernetes.quotas.nlp: invalid value "": want GPU models and the whole GPUs of each the team may hold`},
		{"kubernetes:\n  quotas:\n    nlp:\n      A100: lots\n", `q.yaml:4: kubernetes.quotas.nlp.A100: invalid value "lots": want a whole number`},
		{"kubernetes:\n  quotas:\n    \" nlp\":\n      A100: 1\n", `q.yaml:3: kubernetes.quotas. nlp: invalid value " nlp": want a team name`},
	} {
		_, err := Parse("q.yaml", []byte(tc.file))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v; want %s", tc.file, err, tc.want)
		}
	}
}
