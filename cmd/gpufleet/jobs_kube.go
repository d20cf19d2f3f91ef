package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"

	"github.com/gpufleet/gpufleet/internal/client"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/kube"
	"github.com/gpufleet/gpufleet/internal/policy"
)

// kubeNow is the clock of the listing's AGE column (a test sets it).
var kubeNow = time.Now

// kubePodHeader is the table of jobs --kubernetes.
var kubePodHeader = []string{"NAMESPACE", "NAME", "TEAM", "TIER", "GPUS", "STATE", "NODE", "AGE", "WAITING"}

// kubePodStates are the states jobs --kubernetes --state takes.
var kubePodStates = []string{kube.PodWaiting, kube.PodBound, kube.PodRunning, kube.PodSucceeded, kube.PodFailed, kube.PodTerminating}

// attachJobsKube adds --kubernetes to jobs: Kubernetes mode keeps no
// store and serves no API, so its jobs are listed from the apiserver,
// the pods that name gpufleet in spec.schedulerName (docs/kubernetes.md).
// The command's --team, --tier, --state and --json apply to them.
func attachJobsKube(cmd *cobra.Command, cf *clientFlags, f *client.JobFilter, states *string) {
	var on bool
	var kubeconfig, namespace, schedulerName string
	var teams []string
	fl := cmd.Flags()
	fl.BoolVar(&on, "kubernetes", false, "list the pods gpufleet schedules on a Kubernetes cluster (serve --kubernetes) instead of asking a server")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "with --kubernetes: the kubeconfig file (default: $KUBECONFIG, else the in-cluster service account)")
	fl.StringVarP(&namespace, "namespace", "n", "", "with --kubernetes: only this namespace's pods (default all)")
	fl.StringVar(&schedulerName, "scheduler-name", kube.SchedulerName, "with --kubernetes: the spec.schedulerName of gpufleet's pods")
	fl.StringSliceVar(&teams, "kube-team", nil, "with --kubernetes: NAMESPACE=TEAM, as serve --kubernetes maps them (repeatable)")
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if !on {
			for _, name := range []string{"kubeconfig", "namespace", "scheduler-name", "kube-team"} {
				if cmd.Flags().Changed(name) {
					return usageError{fmt.Errorf("--%s needs --kubernetes", name)}
				}
			}
			return run(cmd, args)
		}
		for _, name := range []string{"server", "token", "config", "limit", "cursor", "all"} {
			if cmd.Flags().Changed(name) {
				return usageError{fmt.Errorf("--%s does not go with --kubernetes: the pods are listed from the cluster, not a server", name)}
			}
		}
		want := map[string]bool{}
		if *states != "" {
			for _, s := range strings.Split(*states, ",") {
				if !slices.Contains(kubePodStates, s) {
					return usageError{&core.FieldError{Field: "--state", Value: s, Allowed: "with --kubernetes, one of " + strings.Join(kubePodStates, ", ")}}
				}
				want[s] = true
			}
		}
		if f.Tier != "" && !slices.Contains([]string{"core", "regular", "offline"}, f.Tier) {
			return usageError{&core.FieldError{Field: "--tier", Value: f.Tier, Allowed: "core, regular or offline"}}
		}
		tm, err := kubeTeams(policy.Policy{}, teams)
		if err != nil {
			return err
		}
		cfg, _, err := kubeConfig(kubeconfig, "jobs")
		if err != nil {
			return err
		}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("jobs: kubernetes client: %w", err)
		}
		rows, err := kube.ListPods(cmd.Context(), c, namespace, kube.Options{SchedulerName: schedulerName, Teams: tm})
		if err != nil {
			return fmt.Errorf("jobs: %w", err)
		}
		kept := rows[:0]
		for _, r := range rows {
			if (f.Team == "" || r.Team == f.Team) && (f.Tier == "" || r.Tier == f.Tier) && (len(want) == 0 || want[r.State]) {
				kept = append(kept, r)
			}
		}
		if cf.json {
			return writeJSON(cmd, struct {
				Pods []kube.PodRow `json:"pods"`
			}{append([]kube.PodRow{}, kept...)})
		}
		now := kubeNow()
		out := make([][]string, 0, len(kept))
		for _, r := range kept {
			waiting := r.Waiting
			if r.Problem != "" && waiting == "" {
				waiting = r.Problem
			}
			out = append(out, []string{r.Namespace, r.Name, r.Team, r.Tier, strconv.Itoa(r.GPUs), r.State, dash(r.Node),
				duration.HumanDuration(now.Sub(r.Created)), dash(waiting)})
		}
		return table(cmd.OutOrStdout(), kubePodHeader, out)
	}
}
