package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/gpufleet/internal/kube"
	"github.com/gpufleet/gpufleet/internal/kubetest"
	"github.com/gpufleet/gpufleet/internal/policy"
)

func TestServeKubeFlags(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	// A kubeconfig that loads (its server is never reached: the flags
	// are refused first).
	kubeconfigFile := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigFile, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badTeams := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(badTeams, []byte("kubernetes:\n  teams:\n    speech: \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"serve", "--kube-team", "a=b"}, "--kube-team needs --kubernetes"},
		{[]string{"serve", "--kubernetes", "--kube-team", "a"}, `--kube-team: invalid value "a": want NAMESPACE=TEAM`},
		{[]string{"serve", "--kubernetes"}, "no --kubeconfig, no KUBECONFIG, and not in a cluster"},
		{[]string{"serve", "--kubernetes", "--kube-team", "Speech_Lab=nlp"}, `--kube-team: kubernetes.teams.Speech_Lab: invalid value "Speech_Lab": want a namespace name`},
		{[]string{"serve", "--kube-api-qps", "50"}, "--kube-api-qps needs --kubernetes"},
		{[]string{"serve", "--kubernetes", "--kubeconfig", kubeconfigFile, "--kube-api-qps", "0"}, `--kube-api-qps: invalid value "0": want requests per second, > 0`},
		{[]string{"serve", "--kubernetes", "--kubeconfig", kubeconfigFile, "--kube-api-burst", "0"}, `--kube-api-burst: invalid value "0": want requests, 1..200000`},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.err) {
			t.Errorf("gpufleet %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.err)
		}
	}
	// A bad map in the policy file is the file's error, with its line.
	code, _, stderr := runCLI(t, "serve", "--kubernetes", "--policy", badTeams)
	if want := `bad.yaml:3: kubernetes.teams.speech: invalid value "": want a team name`; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("serve --kubernetes --policy bad.yaml: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
}

// syncBuffer is a bytes.Buffer safe for the command's logger and the
// test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeKubernetes runs `gpufleet serve --kubernetes` with KUBECONFIG
// pointing at a real test cluster: a GPU pod that names gpufleet is bound
// to the KWOK node, and runs.
func TestServeKubernetes(t *testing.T) {
	c := kubetest.Start(t)
	c.AddNodes(t, "gpu", 1, map[string]string{kube.LabelGPUProduct: "NVIDIA-L4"},
		corev1.ResourceList{kube.ResourceGPU: resource.MustParse("2")})
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	// The namespace-to-team map from the policy file, a flag over it.
	pol := filepath.Join(t.TempDir(), "kube.yaml")
	if err := os.WriteFile(pol, []byte("kubernetes:\n  teams:\n    default: infra\n    speech: nlp\n  quotas:\n    infra:\n      NVIDIA-L4: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"serve", "--kubernetes", "--addr", "127.0.0.1:0", "--tick", "250ms",
			"--policy", pol, "--kube-team", "speech=speech-lab"}, &out, &errb)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve --kubernetes exited %d: %s", code, errb.String())
		}
	})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "infer"},
		Spec: corev1.PodSpec{SchedulerName: kube.SchedulerName, Containers: []corev1.Container{{Name: "main", Image: "busybox",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: resource.MustParse("1")}}}}}}
	if _, err := c.Client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.Client.CoreV1().Pods("default").Get(context.Background(), "infer", metav1.GetOptions{})
		if err == nil && got.Spec.NodeName == "gpu-0" && got.Status.Phase == corev1.PodRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod not running on gpu-0 within 30 s; serve's log:\n%s", errb.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Team infra (namespace default) may hold 1 L4 GPU: a second pod
	// waits on the quota though the node has room.
	p2 := p.DeepCopy()
	p2.Name, p2.ResourceVersion = "infer-2", ""
	if _, err := c.Client.CoreV1().Pods("default").Create(context.Background(), p2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		got, err := c.Client.CoreV1().Pods("default").Get(context.Background(), "infer-2", metav1.GetOptions{})
		if err == nil && got.Spec.NodeName != "" {
			t.Fatalf("infer-2 bound to %s over team infra's quota of 1 L4 GPU", got.Spec.NodeName)
		}
		var msg string
		if err == nil {
			for _, c := range got.Status.Conditions {
				if c.Type == corev1.PodScheduled {
					msg = c.Message
				}
			}
		}
		if strings.Contains(msg, "quota") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("infer-2 not waiting on its quota within 30 s (condition %q); serve's log:\n%s", msg, errb.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// /metrics, on the health address, says so too.
	_, rest, ok := strings.Cut(errb.String(), "metrics=")
	if !ok {
		t.Fatalf("serve's log names no metrics address:\n%s", errb.String())
	}
	resp, err := http.Get(strings.Fields(rest)[0])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`gpufleet_kube_pods{state="bound",tier="regular"} 1`, `gpufleet_kube_pods{state="waiting",tier="regular"} 1`,
		`gpufleet_kube_gpus{model="NVIDIA-L4",state="allocatable"} 2`, "process_cpu_seconds_total"} {
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET /metrics: %d, no %q in:\n%s", resp.StatusCode, want, body)
		}
	}
	if log := errb.String(); !strings.Contains(log, "kubeconfig=KUBECONFIG") || !strings.Contains(log, `teams="default=infra,speech=speech-lab"`) || !strings.Contains(log, `quotas="infra:NVIDIA-L4=1"`) || !strings.Contains(log, "api_qps=100 api_burst=200") {
		t.Errorf("serve's log does not say the kubeconfig came from KUBECONFIG and the teams are the file's under the flag's:\n%s", log)
	}
}

// The file's map, then the flags over it key by key.
func TestKubeTeams(t *testing.T) {
	pol := policy.Default()
	pol.Kubernetes.Teams = map[string]string{"vision": "cv", "speech": "nlp"}
	got, err := kubeTeams(pol, []string{"speech=audio", "robotics=rl"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"vision": "cv", "speech": "audio", "robotics": "rl"}, got); diff != "" {
		t.Errorf("teams (-want +got):\n%s", diff)
	}
	if pol.Kubernetes.Teams["speech"] != "nlp" {
		t.Error("the flags changed the policy's own map")
	}
	if got, err := kubeTeams(policy.Default(), nil); err != nil || len(got) != 0 {
		t.Errorf("no file section, no flag: %v, %v; want an empty map", got, err)
	}
}

// TestKubeReservation: the reservation pod's command writes the device
// the device plugin gave it on its own pod, then holds it until stopped;
// without its pod's name, or with more than one device, it refuses.
func TestKubeReservation(t *testing.T) {
	t.Setenv("POD_NAME", "")
	t.Setenv("POD_NAMESPACE", "")
	if code, _, stderr := runCLI(t, "kube-reservation"); code != 2 || !strings.Contains(stderr, "POD_NAMESPACE and POD_NAME must be set") {
		t.Errorf("kube-reservation without its pod: exit %d, stderr %q; want 2 and the variables named", code, stderr)
	}
	c := kubetest.Start(t)
	c.AddNodes(t, "gpu", 1, map[string]string{kube.LabelGPUProduct: "NVIDIA-L4"}, corev1.ResourceList{kube.ResourceGPU: resource.MustParse("2")})
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kube.ReservationNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := kube.ReservationPod(kube.Options{}, "gpu-gpu-0-0", "gpu-0")
	if _, err := c.Client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	t.Setenv("POD_NAME", p.Name)
	t.Setenv("POD_NAMESPACE", p.Namespace)
	t.Setenv("NVIDIA_VISIBLE_DEVICES", "GPU-0,GPU-1")
	if code, _, stderr := runCLI(t, "kube-reservation"); code != 1 || !strings.Contains(stderr, `NVIDIA_VISIBLE_DEVICES "GPU-0,GPU-1": want the one GPU`) {
		t.Errorf("kube-reservation with two devices: exit %d, stderr %q; want 1 and the value refused", code, stderr)
	}
	t.Setenv("NVIDIA_VISIBLE_DEVICES", "GPU-8983c66a")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int)
	go func() { done <- run(ctx, []string{"kube-reservation"}, &out, &errb) }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, err := c.Client.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err == nil && got.Annotations[kube.KeyGPUID] == "GPU-8983c66a" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s on the reservation pod within 10 s; stderr: %s", kube.KeyGPUID, errb.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case code := <-done:
		t.Fatalf("kube-reservation exited %d after reporting; it should hold the GPU until stopped: %s", code, errb.String())
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("kube-reservation stopped: exit %d: %s", code, errb.String())
	}
}
