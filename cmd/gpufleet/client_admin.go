package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/client"
)

// when renders a time for a table: "-" for none.
func when(t time.Time) string {
	if t.IsZero() || t.Year() <= 1 {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// addPageFlags adds a listing's --limit and --cursor.
func addPageFlags(cmd *cobra.Command, limit *int, cursor *string) {
	cmd.Flags().IntVar(limit, "limit", 0, "page size (default 100)")
	cmd.Flags().StringVar(cursor, "cursor", "", "the page after this cursor")
}

// printPage writes one page of a listing: page itself with --json, else
// the table, and on stderr how to ask for the next page when there is one
// (hint: more ways to get it, such as "--all").
func printPage(cmd *cobra.Command, cf clientFlags, page any, header []string, rows [][]string, next, hint string) error {
	if cf.json {
		return writeJSON(cmd, page)
	}
	if err := table(cmd.OutOrStdout(), header, rows); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "more: --cursor %s%s\n", next, hint)
	}
	return nil
}

func newLeasesCmd() *cobra.Command {
	var cf clientFlags
	var f client.PageFilter
	var states string
	cmd := &cobra.Command{
		Use:   "leases",
		Short: "List the fleet's leases, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if states != "" {
				f.States = strings.Split(states, ",")
			}
			p, err := c.ListLeases(cmd.Context(), f)
			if err != nil {
				return err
			}
			rows := [][]string{}
			for _, l := range p.Leases {
				rows = append(rows, []string{l.ID, l.OfferID, l.Mode, l.State, dash(l.ProviderID), when(l.Start), when(l.End)})
			}
			return printPage(cmd, cf, p, []string{"ID", "OFFER", "MODE", "STATE", "MACHINE", "START", "END"}, rows, p.Next, "")
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&states, "state", "", "only these states, comma-separated")
	addPageFlags(cmd, &f.Limit, &f.Cursor)
	return cmd
}

func newNodesCmd() *cobra.Command {
	var cf clientFlags
	var f client.PageFilter
	var states string
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "List the machines' agents: state, lease, GPUs and jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if states != "" {
				f.States = strings.Split(states, ",")
			}
			p, err := c.ListNodes(cmd.Context(), f)
			if err != nil {
				return err
			}
			rows := [][]string{}
			for _, n := range p.Nodes {
				rows = append(rows, []string{n.ID, n.State, dash(n.Lease), dash(n.Offer), strconv.Itoa(len(n.GPUs)), dash(strings.Join(n.Jobs, ",")), when(n.LastSeen), dash(n.Binding)})
			}
			return printPage(cmd, cf, p, []string{"ID", "STATE", "LEASE", "OFFER", "GPUS", "JOBS", "LAST SEEN", "BINDING"}, rows, p.Next, "")
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&states, "state", "", "only these states (ok, suspect, down), comma-separated")
	addPageFlags(cmd, &f.Limit, &f.Cursor)
	return cmd
}

func newTeamsCmd() *cobra.Command {
	var cf clientFlags
	list := func(cmd *cobra.Command, _ []string) error {
		c, err := cf.client()
		if err != nil {
			return err
		}
		teams, err := c.ListTeams(cmd.Context())
		if err != nil {
			return err
		}
		if cf.json {
			return writeJSON(cmd, map[string]any{"teams": teams})
		}
		rows := [][]string{}
		for _, t := range teams {
			rows = append(rows, []string{t.ID, t.Name, dash(t.Cohort), strconv.FormatInt(t.Weight, 10), string(t.MonthlyBudget)})
		}
		return table(cmd.OutOrStdout(), []string{"ID", "NAME", "COHORT", "WEIGHT", "MONTHLY BUDGET"}, rows)
	}
	cmd := &cobra.Command{Use: "teams", Short: "List teams (admin); teams create makes one", Args: cobra.NoArgs, RunE: list}
	cf.add(cmd)
	var ccf clientFlags
	var req api.TeamRequest
	create := &cobra.Command{
		Use:   "create ID",
		Short: "Create a team (admin)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := ccf.client()
			if err != nil {
				return err
			}
			req.ID = args[0]
			if req.Name == "" {
				req.Name = req.ID
			}
			t, err := c.CreateTeam(cmd.Context(), req)
			if err != nil {
				return err
			}
			if ccf.json {
				return writeJSON(cmd, t)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "team %s created\n", t.ID)
			return nil
		},
	}
	ccf.add(create)
	create.Flags().StringVar(&req.Name, "name", "", "display name (default: the id)")
	create.Flags().StringVar(&req.Cohort, "cohort", "", "quota cohort")
	create.Flags().Int64Var(&req.Weight, "weight", 0, "fair-share weight (default 1)")
	create.Flags().StringVar(&req.MonthlyBudget, "monthly-budget", "", "monthly budget in the catalog's currency")
	create.Flags().Int64Var(&req.UnitLimit, "unit-limit", 0, "most units (shards) the team's unfinished jobs may have together (default 10000)")
	cmd.AddCommand(create)
	return cmd
}

func newTokensCmd() *cobra.Command {
	var cf clientFlags
	var f client.TokenFilter
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "List tokens, never their secrets (admin; team-admin for its team); tokens create, tokens revoke",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			toks, err := c.ListTokens(cmd.Context(), f)
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(cmd, api.TokensPage{Tokens: toks})
			}
			rows := [][]string{}
			for _, t := range toks {
				state := "active"
				if !t.Active {
					state = "revoked"
					if t.Revoked.IsZero() || t.Revoked.Year() <= 1 {
						state = "expired"
					}
				}
				rows = append(rows, []string{t.ID, dash(t.Prefix), dash(t.User), dash(t.Team), t.Role, dash(t.Name), when(t.Created), when(t.LastUsed), state})
			}
			return table(cmd.OutOrStdout(), []string{"ID", "PREFIX", "USER", "TEAM", "ROLE", "NAME", "CREATED", "LAST USED", "STATE"}, rows)
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&f.Team, "team", "", "only this team's tokens")
	cmd.Flags().StringVar(&f.User, "user", "", "only this user's tokens")
	cmd.Flags().BoolVar(&f.ActiveOnly, "active", false, "only tokens that still work")

	var ccf clientFlags
	var req api.TokenRequest
	var expires string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token; its secret is printed once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := ccf.client()
			if err != nil {
				return err
			}
			if expires != "" {
				d, err := time.ParseDuration(expires)
				if err != nil || d <= 0 {
					return usageError{fmt.Errorf("--expires %q: want a positive duration such as 720h", expires)}
				}
				req.Expires = time.Now().Add(d).UTC().Truncate(time.Second)
			}
			t, err := c.CreateToken(cmd.Context(), req)
			if err != nil {
				return err
			}
			if ccf.json {
				return writeJSON(cmd, t)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "token %s (%s, team %s): the secret is shown this once\n", t.ID, t.Role, dash(t.Team))
			fmt.Fprintln(cmd.OutOrStdout(), t.Secret)
			return nil
		},
	}
	ccf.add(create)
	create.Flags().StringVar(&req.User, "user", "", "owner (created if new; none for agent tokens)")
	create.Flags().StringVar(&req.Team, "team", "", "team (default for a team-admin: its own)")
	create.Flags().StringVar(&req.Role, "role", "member", "admin, team-admin, member, viewer or agent")
	create.Flags().StringVar(&req.Name, "name", "", "what the token is for")
	create.Flags().StringVar(&expires, "expires", "", "lifetime (720h); default never")
	var rcf clientFlags
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: refused from its next request on",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := rcf.client()
			if err != nil {
				return err
			}
			t, err := c.RevokeToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if rcf.json {
				return writeJSON(cmd, t)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s revoked at %s\n", t.ID, when(t.Revoked))
			return nil
		},
	}
	rcf.add(revoke)
	cmd.AddCommand(create, revoke)
	return cmd
}
