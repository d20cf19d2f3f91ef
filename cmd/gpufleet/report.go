package main

import "github.com/spf13/cobra"

// newReportCmd groups the reports.
func newReportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Reports: the audit of spend, idle spend and right-sizing (from the store), usage (from the server)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newAuditCmd())
	return cmd
}
