package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/gpufleet/gpufleet/internal/kube"
)

// newKubeReservationCmd is what a reservation pod's container runs
// (docs/kubernetes.md, GPU sharing): it writes the GPU the device plugin
// gave the pod (NVIDIA_VISIBLE_DEVICES) on its own pod, then holds the
// GPU until the pod is deleted.
func newKubeReservationCmd() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:    "kube-reservation",
		Short:  "Run as a GPU reservation pod's container: report the GPU the device plugin gave it, then hold it",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
			if ns == "" || name == "" {
				return usageError{fmt.Errorf("kube-reservation: POD_NAMESPACE and POD_NAME must be set (the downward API of the reservation pod gpufleet makes)")}
			}
			cfg, _, err := kubeConfig(kubeconfig, "kube-reservation")
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("kube-reservation: kubernetes client: %w", err)
			}
			if err := kube.ReportReservation(cmd.Context(), client, ns, name, os.Getenv("NVIDIA_VISIBLE_DEVICES")); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "reported GPU %s on %s/%s; holding it\n", os.Getenv("NVIDIA_VISIBLE_DEVICES"), ns, name)
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "the kubeconfig file (default: $KUBECONFIG, else the in-cluster service account)")
	return cmd
}
