// Command gpufleet keeps rented GPUs busy: it prices and plans leases,
// schedules jobs onto the cheapest GPU that does the job, and releases
// what is idle on the billing boundary. Run "gpufleet help" for the
// subcommands.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	_ "time/tzdata" // time-of-use windows name zones; do not depend on the host's tz database.
)

func main() {
	os.Exit(mainArgs(os.Args[1:], os.Stdout, os.Stderr))
}

// mainArgs is main but for the exit: run, on a context that ends at the
// first SIGINT or SIGTERM (serve then shuts down cleanly). The server
// tests' child process runs it too, so that they stop it as a user would.
func mainArgs(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, stdout, stderr)
}

// run executes one command line and returns the process exit status: 0 on
// success, 1 on a failure, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "gpufleet:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError marks an error in how the command was called.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "gpufleet",
		Short:         "Keep rented GPUs busy: plan, schedule, share and release on the billing boundary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	simCmd := newSimCmd()
	attachReplay(simCmd)
	root.AddCommand(newCatalogCmd(), newQuoteCmd(), newPlanCmd(), newServeCmd(), simCmd, newTraceCmd(), newAgentCmd(), newReportCmd(), newVersionCmd(), newBenchCmd(), newKubeReservationCmd())
	attachClient(root)
	return root
}

// writeJSON writes v as indented JSON to the command's stdout.
func writeJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
