package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/gpufleet/gpufleet/internal/client"
)

// attachClient adds the commands that talk to a running server (submit,
// jobs, job, cancel, logs, leases, nodes, teams, tokens, report usage) to
// root. "report usage" joins the report group if there is one.
func attachClient(root *cobra.Command) {
	root.AddCommand(newSubmitCmd(), newJobsCmd(), newJobCmd(), newCancelCmd(), newLogsCmd(),
		newLeasesCmd(), newNodesCmd(), newTeamsCmd(), newTokensCmd())
	for _, c := range root.Commands() {
		if c.Name() == "report" {
			c.AddCommand(newUsageCmd())
			return
		}
	}
	rep := &cobra.Command{Use: "report", Short: "Reports", Args: cobra.NoArgs}
	rep.AddCommand(newUsageCmd())
	root.AddCommand(rep)
}

// Environment variables the client commands read.
const (
	envURL   = "GPUFLEET_URL"
	envToken = "GPUFLEET_TOKEN"
)

// clientFlags are the flags every client command has.
type clientFlags struct {
	server, token, config string
	json                  bool
}

func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", "", "server URL (else $"+envURL+", else server: in the config file)")
	cmd.Flags().StringVar(&f.token, "token", "", "API token (else $"+envToken+", else token: in the config file)")
	cmd.Flags().StringVar(&f.config, "config", "", "config file (default ~/.config/gpufleet/config.yaml)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print the API's JSON instead of a table")
}

// clientConfig is the client config file: where the server is and which
// token to use.
type clientConfig struct {
	Server string `yaml:"server"`
	Token  string `yaml:"token"`
}

// defaultClientConfig is ~/.config/gpufleet/config.yaml (the user
// config directory of the platform).
func defaultClientConfig() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "gpufleet", "config.yaml")
}

// client resolves the server and token, each on its own: a flag wins
// over the environment, which wins over the config file.
func (f *clientFlags) client() (*client.Client, error) {
	server, token := f.server, f.token
	if server == "" {
		server = os.Getenv(envURL)
	}
	if token == "" {
		token = os.Getenv(envToken)
	}
	if server == "" || token == "" {
		path, explicit := f.config, f.config != ""
		if !explicit {
			path = defaultClientConfig()
		}
		cfg, err := readClientConfig(path)
		switch {
		case errors.Is(err, os.ErrNotExist) && !explicit:
		case err != nil:
			return nil, usageError{err}
		}
		if server == "" {
			server = cfg.Server
		}
		if token == "" {
			token = cfg.Token
		}
	}
	if server == "" {
		return nil, usageError{fmt.Errorf("no server: give --server, set %s, or put server: in %s", envURL, orDefault(f.config))}
	}
	if token == "" {
		return nil, usageError{fmt.Errorf("no token: give --token, set %s, or put token: in %s", envToken, orDefault(f.config))}
	}
	c, err := client.New(server, token, nil)
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

func orDefault(path string) string {
	if path != "" {
		return path
	}
	return "~/.config/gpufleet/config.yaml"
}

func readClientConfig(path string) (clientConfig, error) {
	var cfg clientConfig
	if path == "" {
		return cfg, os.ErrNotExist
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("config %s: %w (allowed keys: server, token)", path, yamlMessage(err, data))
	}
	return cfg, nil
}

// yamlMessage makes yaml's errors read as ours and name the field: "line
// 3: field gpu not found in type main.jobFile" becomes "line 3: unknown
// field gpu", and "line 2: cannot unmarshal !!str `two` into int" gets
// the key on that line of data in front: "line 2: gpus: ...".
func yamlMessage(err error, data []byte) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	keys := map[int]string{}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) == nil && len(doc.Content) > 0 && doc.Content[0].Kind == yaml.MappingNode {
		m := doc.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			keys[m.Content[i+1].Line] = m.Content[i].Value
		}
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		if a, b, ok := strings.Cut(m, "field "); ok {
			if name, _, ok := strings.Cut(b, " not found in type"); ok {
				m = a + "unknown field " + name
			}
		} else if line, rest, ok := strings.Cut(m, ": "); ok {
			var n int
			if _, err := fmt.Sscanf(line, "line %d", &n); err == nil && keys[n] != "" {
				m = line + ": " + keys[n] + ": " + rest
			}
		}
		msgs[i] = m
	}
	return errors.New(strings.Join(msgs, "; "))
}

// table writes rows under header, aligned.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
