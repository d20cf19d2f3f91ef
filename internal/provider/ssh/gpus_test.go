package ssh

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestParseSMI(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []GPU
		err      string
	}{
		{name: "two H100s", in: "0, NVIDIA H100 80GB HBM3, 81559, GPU-aaa\n1, NVIDIA H100 80GB HBM3, 81559, GPU-bbb\n",
			want: []GPU{{0, "NVIDIA H100 80GB HBM3", 81559, "GPU-aaa"}, {1, "NVIDIA H100 80GB HBM3", 81559, "GPU-bbb"}}},
		{name: "CRLF and blank lines", in: "\r\n0, Tesla T4, 15360, GPU-t\r\n\n",
			want: []GPU{{0, "Tesla T4", 15360, "GPU-t"}}},
		{name: "a comma in the name", in: "0, Weird, Name, 1024, GPU-w",
			want: []GPU{{0, "Weird,Name", 1024, "GPU-w"}}},
		{name: "none", in: "", want: nil},
		{name: "too few fields", in: "0, NVIDIA A10G, 23028", err: "line 1"},
		{name: "bad index", in: "x, NVIDIA A10G, 23028, GPU-1", err: "index"},
		{name: "no memory (driver not loaded)", in: "0, NVIDIA A10G, [N/A], GPU-1", err: "memory.total"},
		{name: "empty name", in: "0, , 23028, GPU-1", err: "empty GPU name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSMI(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("-want +got:\n%s", d)
			}
		})
	}
}

func FuzzParseSMI(f *testing.F) {
	f.Add("0, NVIDIA H100 80GB HBM3, 81559, GPU-aaa\n1, NVIDIA H100 80GB HBM3, 81559, GPU-bbb\n")
	f.Add("0, a,b,c, 1, u")
	f.Add("\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		gpus, err := ParseSMI(in)
		if err != nil {
			return
		}
		for _, g := range gpus {
			if g.Index < 0 || g.MemMiB <= 0 || g.Name == "" {
				t.Fatalf("%q parsed to %+v", in, g)
			}
		}
	})
}

func TestMatchOffer(t *testing.T) {
	offers := []core.Offer{
		{ID: "aws/p5", GPUModel: "NVIDIA H100", GPUs: 8},
		{ID: "lab/h100x2", GPUModel: "NVIDIA H100", GPUs: 2},
		{ID: "lab/h100x2-b", GPUModel: "H100", GPUs: 2},
		{ID: "gcp/t4", GPUModel: "NVIDIA T4 Tensor Core", GPUs: 1},
		{ID: "slice", GPUModel: "NVIDIA T4", GPUs: 1, SliceMilli: 250},
	}
	gpus := func(n int, name string) []GPU {
		var g []GPU
		for i := range n {
			g = append(g, GPU{Index: i, Name: name, MemMiB: 1000})
		}
		return g
	}
	for _, tc := range []struct {
		name string
		gpus []GPU
		want string
		err  string
	}{
		{"eight H100s", gpus(8, "NVIDIA H100 80GB HBM3"), "aws/p5", ""},
		{"a T4 by its driver name", gpus(1, "Tesla T4"), "gcp/t4", ""},
		{"two H100s: two offers", gpus(2, "NVIDIA H100 80GB HBM3"), "", "lab/h100x2, lab/h100x2-b"},
		{"four H100s: none", gpus(4, "NVIDIA H100 80GB HBM3"), "", "no offer"},
		{"an A100 is no A10G", gpus(1, "NVIDIA A100-SXM4-40GB"), "", "no offer"},
		{"no GPU", nil, "", "no GPU"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MatchOffer(tc.gpus, offers)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if err := CheckOffer(nil, &offers[0]); !errors.Is(err, ErrNoGPU) {
		t.Errorf("no GPUs: %v", err)
	}
	if err := CheckOffer(gpus(8, "NVIDIA A100"), &offers[0]); err == nil || !strings.Contains(err.Error(), "A100") {
		t.Errorf("A100s as H100s: %v", err)
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
user: ubuntu
identity_file: keys/id
known_hosts: known_hosts
poll_interval: 2s
agent_args: [--heartbeat-interval, 1s]
hosts:
  - address: 10.0.0.5
    offer: lab/h100x8
  - name: b
    address: 10.0.0.6:2222
    user: root
    fake_gpus: 2
    offer: lab/h100x2
    agent_args: [--log-level, debug]
`), "/etc/gpufleet")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{PollInterval: 2e9, Hosts: []Host{
		{Address: "10.0.0.5", User: "ubuntu", IdentityFile: "/etc/gpufleet/keys/id", KnownHosts: "/etc/gpufleet/known_hosts", Offer: "lab/h100x8",
			AgentArgs: []string{"--heartbeat-interval", "1s"}},
		{Name: "b", Address: "10.0.0.6:2222", User: "root", IdentityFile: "/etc/gpufleet/keys/id", KnownHosts: "/etc/gpufleet/known_hosts", Offer: "lab/h100x2", FakeGPUs: 2,
			AgentArgs: []string{"--heartbeat-interval", "1s", "--log-level", "debug"}},
	}}
	if d := cmp.Diff(want, cfg, cmp.Comparer(func(a, b func() (string, string, error)) bool { return true })); d != "" {
		t.Errorf("-want +got:\n%s", d)
	}
	if h := cfg.withDefaults().Hosts[0]; h.Address != "10.0.0.5:22" || h.Name != "10.0.0.5:22" || h.RemoteDir != DefaultRemoteDir || h.Supervisor != SupervisorAuto {
		t.Errorf("defaults: %+v", h)
	}
	for text, field := range map[string]string{
		"hosts: []":                                                                             "hosts",
		"hosts: [{address: a, user: u}]":                                                        "known_hosts",
		"hosts: [{address: a, known_hosts: k}]":                                                 "user",
		"hosts: [{user: u, known_hosts: k}]":                                                    "address",
		"hosts: [{address: a, user: u, known_hosts: k, fake_gpus: -1}]":                         "fake_gpus",
		"hosts: [{address: a, user: u, known_hosts: k, supervisor: init}]":                      "supervisor",
		"hosts: [{address: a, user: u, known_hosts: k, remote_dir: '$X'}]":                      "remote_dir",
		"hosts: [{address: a, user: u, known_hosts: k}, {address: a, user: u, known_hosts: k}]": "name",
		"poll_interval: soon\nhosts: [{address: a, user: u, known_hosts: k}]":                   "poll_interval",
		"hosts: [{address: a, user: u, known_hosts: k, insecure: true}]":                        "insecure",
	} {
		if _, err := ParseConfig([]byte(text), "/"); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: %v, want an error naming %s", text, err, field)
		}
	}
}
