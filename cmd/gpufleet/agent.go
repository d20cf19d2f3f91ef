package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/agent"
	"github.com/gpufleet/gpufleet/internal/agent/gpu"
	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/agent/runner"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/spf13/cobra"
)

// agentVersion is what agents report in their heartbeats.
const agentVersion = "gpufleet-agent/dev"

func newAgentCmd() *cobra.Command {
	var imdsMode string // --imds (agent_imds.go)
	var (
		serverURL, token, joinToken, source, dataDir, id, offer, lease, ckptSignal, dcgmURL, smiPath string
		catalogPath, logLevel                                                                        string
		sampleEvery, beatEvery, grace, termGrace, timeout                                            time.Duration
		logJSON                                                                                      bool
		board                                                                                        gpu.Board
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: report this machine's GPUs and run the jobs the server places here",
		Long: `Run the node agent on a GPU machine: it joins the server with an agent token,
heartbeats, samples the GPUs (NVML, nvidia-smi, a DCGM exporter, or a fake
source), runs the jobs the server places here (each a process group with
CUDA_VISIBLE_DEVICES, its checkpoint directory in GPUFLEET_CHECKPOINT_DIR),
passes on checkpoint and stop requests (checkpoint signal, grace, SIGTERM,
SIGKILL), and streams the jobs' output. Samples and job events wait on disk
under --data-dir while the server is unreachable and are sent in order when it
returns. The token may come from GPUFLEET_TOKEN instead of --token.

A machine a provider rented joins with its lease's one-time join token
(--join-token, or GPUFLEET_JOIN_TOKEN): the server answers the join with the
agent's own credential, which the agent keeps in --data-dir (owner-only) and
uses from then on, also across its restarts; the join token is spent.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if joinToken == "" {
				joinToken = os.Getenv("GPUFLEET_JOIN_TOKEN")
			}
			if token == "" && joinToken == "" {
				token = os.Getenv("GPUFLEET_TOKEN")
			}
			if joinToken != "" {
				if token != "" {
					return usageError{&core.FieldError{Field: "join-token", Value: "", Allowed: "one of --token and --join-token"}}
				}
				token = joinToken
			}
			switch {
			case serverURL == "":
				return usageError{&core.FieldError{Field: "server", Value: "", Allowed: "the server's URL, e.g. http://10.0.0.1:8080"}}
			case !strings.HasPrefix(serverURL, "http://") && !strings.HasPrefix(serverURL, "https://"):
				return usageError{&core.FieldError{Field: "server", Value: serverURL, Allowed: "an http:// or https:// URL"}}
			case token == "":
				return usageError{&core.FieldError{Field: "token", Value: "", Allowed: "an agent token (--token or GPUFLEET_TOKEN) or a lease's join token (--join-token or GPUFLEET_JOIN_TOKEN)"}}
			case !slices.Contains(gpu.Names, source):
				return usageError{&core.FieldError{Field: "gpu-source", Value: source, Allowed: strings.Join(gpu.Names, ", ")}}
			case dataDir == "":
				return usageError{&core.FieldError{Field: "data-dir", Value: "", Allowed: "a directory for the outbox, job logs and checkpoints"}}
			}
			if source == "fake" {
				b, err := fakeBoard(cmd, catalogPath, offer, board)
				if err != nil {
					return err
				}
				board = b
			}
			var sig = runner.Config{}.CheckpointSignal
			if ckptSignal != "" {
				s, err := runner.ParseSignal(ckptSignal)
				if err != nil {
					return usageError{err}
				}
				sig = s
			}
			if id == "" {
				h, err := os.Hostname()
				if err != nil {
					return fmt.Errorf("agent: --agent-id not given and no hostname: %w", err)
				}
				id = h
			}
			log, err := newLogger(cmd.ErrOrStderr(), logJSON, logLevel)
			if err != nil {
				return err
			}
			epoch, err := agent.SpoolEpoch(dataDir)
			if err != nil {
				return fmt.Errorf("agent: data dir %s: %w", dataDir, err)
			}
			up := &link.HTTP{URL: serverURL, Token: token, Agent: id, Epoch: epoch, Timeout: timeout}
			// The credential a join got, kept for the token given: a
			// restarted agent sends it, not the spent join token.
			cred := agentCredential{dir: dataDir, given: token}
			if secret, err := cred.load(); err != nil {
				return fmt.Errorf("agent: %w", err)
			} else if secret != "" {
				up.Token = secret
			}
			up.OnCredential = cred.save
			cfg := agent.Config{
				AgentID: id, LeaseID: lease, OfferID: offer, Version: agentVersion, DataDir: dataDir,
				GPUSource: source, GPU: gpu.Options{DCGMURL: dcgmURL, SMIPath: smiPath, FakeBoard: board}, Uplink: up,
				SampleInterval: sampleEvery, HeartbeatInterval: beatEvery,
				CheckpointSignal: sig, Grace: grace, TermGrace: termGrace, Logger: log,
			}
			if cfg.Spot, err = spotNotices(cmd.Context(), imdsMode, log); err != nil {
				return err
			}
			return agent.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&imdsMode, "imds", "auto", "spot interruption notices from EC2's instance metadata (IMDSv2): auto (when it answers within 1 s), off, or its URL")
	f.StringVar(&serverURL, "server", "", "the gpufleet server's URL (http://host:8080)")
	f.StringVar(&token, "token", "", "an agent token (or GPUFLEET_TOKEN)")
	f.StringVar(&joinToken, "join-token", "", "a lease's one-time join token (or GPUFLEET_JOIN_TOKEN): the bootstrap a provider hands its machine")
	f.StringVar(&source, "gpu-source", "auto", "where GPU readings come from: "+strings.Join(gpu.Names, ", "))
	f.StringVar(&dataDir, "data-dir", "/var/lib/gpufleet-agent", "the outbox, job logs and checkpoints")
	f.StringVar(&id, "agent-id", "", "this agent's name (the hostname if empty)")
	f.StringVar(&offer, "offer", "", "the catalog offer this machine is (joins the static pool as one)")
	f.StringVar(&lease, "lease", "", "the lease this machine is, when the provider told it (otherwise the server binds it)")
	f.StringVar(&ckptSignal, "checkpoint-signal", "USR1", "the signal that asks a job to checkpoint")
	f.StringVar(&dcgmURL, "dcgm-url", "", "a DCGM exporter's metrics URL (for --gpu-source dcgm or auto)")
	f.StringVar(&smiPath, "nvidia-smi", "", "nvidia-smi's path (PATH lookup if empty)")
	f.DurationVar(&sampleEvery, "sample-interval", 10*time.Second, "time between GPU samples")
	f.DurationVar(&beatEvery, "heartbeat-interval", 10*time.Second, "time between heartbeats and command fetches")
	f.DurationVar(&grace, "grace", 30*time.Second, "how long a stopping job has after the checkpoint signal before SIGTERM")
	f.DurationVar(&termGrace, "term-grace", 10*time.Second, "how long after SIGTERM before SIGKILL")
	f.DurationVar(&timeout, "timeout", link.DefaultTimeout, "bound on each request to the server")
	f.BoolVar(&logJSON, "log-json", false, "log as JSON lines instead of text")
	f.StringVar(&logLevel, "log-level", "info", "the least level logged: debug, info, warn or error")
	f.StringVar(&catalogPath, "catalog", "", "the catalog --offer is looked up in to size the fake GPU source (the embedded demo catalog if empty)")
	f.IntVar(&board.Count, "fake-gpus", 0, "the fake GPU source's GPU count (default: the --offer's, else 1)")
	f.StringVar(&board.Model, "fake-gpu-model", "", "the fake GPU source's GPU model (default: the --offer's, else an H100 80GB)")
	f.Int64Var(&board.MemMiB, "fake-gpu-mem-mib", 0, "the fake GPU source's memory per GPU in MiB (default: the --offer's, else 81559)")
	return cmd
}

// fakeBoard sizes --gpu-source fake: the --offer's GPUs from the catalog,
// each --fake-gpu* flag given overriding its field, gpu.DefaultBoard's
// value for what neither says. An --offer the catalog lacks is a usage
// error unless the flags size the board.
func fakeBoard(cmd *cobra.Command, catalogPath, offer string, flags gpu.Board) (gpu.Board, error) {
	b := gpu.DefaultBoard
	sized := cmd.Flags().Changed("fake-gpus")
	if offer != "" {
		c, err := loadCatalog(catalogPath)
		if err != nil {
			return b, usageError{err}
		}
		if o, err := c.Offer(offer); err == nil {
			b = gpu.Board{Count: o.GPUs, Model: o.GPUModel, MemMiB: o.GPUMemMiB}
		} else if !sized {
			return b, usageError{&core.FieldError{Field: "offer", Value: offer,
				Allowed: "an offer of the catalog (--catalog) to size the fake GPU source, or --fake-gpus"}}
		}
	}
	if sized {
		b.Count = flags.Count
	}
	if cmd.Flags().Changed("fake-gpu-model") {
		b.Model = flags.Model
	}
	if cmd.Flags().Changed("fake-gpu-mem-mib") {
		b.MemMiB = flags.MemMiB
	}
	if err := b.Validate(); err != nil {
		return b, usageError{err}
	}
	return b, nil
}

// agentCredential is the file in an agent's data directory that keeps
// the credential its join got: the hash of the token the agent was
// started with, then the credential. It is used only when the agent is
// started with that same token again (a data directory reused with a new
// token starts over).
type agentCredential struct {
	dir, given string
}

func (c agentCredential) path() string { return filepath.Join(c.dir, "credential") }

func (c agentCredential) load() (string, error) {
	b, err := os.ReadFile(c.path())
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("credential: %w", err)
	}
	hash, secret, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok || hash != c.hash() {
		return "", nil
	}
	return secret, nil
}

func (c agentCredential) hash() string {
	h := store.HashToken(c.given)
	return hex.EncodeToString(h[:])
}

// save keeps secret for the token given, owner-only, replacing the file
// atomically.
func (c agentCredential) save(secret string) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	tmp := c.path() + ".tmp"
	if err := os.WriteFile(tmp, []byte(c.hash()+" "+secret+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.path())
}
