package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// newVersionCmd prints what this binary is; the SSH provider runs it on a
// host to check that the gpufleet it copied there runs.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print gpufleet's version, commit and platform",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
}

// versionLine is "gpufleet VERSION [COMMIT[+dirty]] GOOS/GOARCH" from the
// build info.
func versionLine() string {
	v, rev := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
				if len(rev) > 12 {
					rev = rev[:12]
				}
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" && dirty {
			rev += "+dirty"
		}
	}
	if rev != "" {
		return fmt.Sprintf("gpufleet %s %s %s/%s", v, rev, runtime.GOOS, runtime.GOARCH)
	}
	return fmt.Sprintf("gpufleet %s %s/%s", v, runtime.GOOS, runtime.GOARCH)
}
