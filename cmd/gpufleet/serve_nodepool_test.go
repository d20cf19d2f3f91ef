package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/gpufleet/internal/kube"
	"github.com/gpufleet/gpufleet/internal/kubetest"
	"github.com/gpufleet/gpufleet/internal/provider/kubenodes"
)

func TestServeNodePoolFlags(t *testing.T) {
	// A kubeconfig of a cluster that is not there: the flags are checked
	// before anything is asked of it.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"+
		"users: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kc)
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"serve", "--node-pool", "gf"}, "--node-pool needs --kubernetes"},
		{[]string{"serve", "--node-pool-force"}, "--node-pool-force needs --kubernetes"},
		{[]string{"serve", "--kubernetes", "--node-pool-start", "true"}, "--node-pool-start needs --node-pool"},
		{[]string{"serve", "--kubernetes", "--node-pool", "gf", "--node-pool-start", "true"}, "--node-pool-start and --node-pool-stop go together"},
		{[]string{"serve", "--kubernetes", "--node-pool", "gf", "--node-pool-drain-timeout", "0s"}, `--node-pool-drain-timeout: invalid value "0s"`},
		{[]string{"serve", "--kubernetes", "--node-pool", "gf", "--node-pool-offer", "nope"}, `--node-pool-offer: invalid value "nope"`},
		{[]string{"serve", "--kubernetes", "--node-pool", "GF"}, `--node-pool: pool: invalid value "GF"`},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.err) {
			t.Errorf("gpufleet %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.err)
		}
	}
}

// TestServeKubeNodePool runs `gpufleet serve --kubernetes --node-pool`
// on a real test cluster with no GPU node: a waiting GPU pod makes it
// create a node of the offer named (KWOK runs it), and binds the pod
// there.
func TestServeKubeNodePool(t *testing.T) {
	c := kubetest.Start(t)
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"serve", "--kubernetes", "--addr", "127.0.0.1:0", "--tick", "250ms",
			"--wait-target", "core=0s,regular=0s,offline=0s",
			"--node-pool", "gf", "--node-pool-offer", "aws/us-east-1/g5.xlarge"}, &out, &errb)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve --kubernetes --node-pool exited %d: %s", code, errb.String())
		}
	})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "infer"},
		Spec: corev1.PodSpec{SchedulerName: kube.SchedulerName, NodeSelector: map[string]string{kube.LabelGPUProduct: "NVIDIA-A10G"},
			Containers: []corev1.Container{{Name: "main", Image: "busybox",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: resource.MustParse("1")}}}}}}
	if _, err := c.Client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.Client.CoreV1().Pods("default").Get(context.Background(), "infer", metav1.GetOptions{})
		if err == nil && got.Spec.NodeName == "gf-l1" && got.Status.Phase == corev1.PodRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod not running on a new node gf-l1 within 30 s; serve's log:\n%s", errb.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), "gf-l1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[kubenodes.LabelPool] != "gf" || n.Annotations[kubenodes.AnnotationOffer] != "aws/us-east-1/g5.xlarge" || n.Labels[kube.LabelGPUProduct] != "NVIDIA-A10G" {
		t.Errorf("gf-l1: labels %v, annotations %v", n.Labels, n.Annotations)
	}
	if log := errb.String(); !strings.Contains(log, "node pool: the engine rents and releases nodes") || !strings.Contains(log, "node acquired") {
		t.Errorf("serve's log does not say the pool is on and the node acquired:\n%s", log)
	}
}
