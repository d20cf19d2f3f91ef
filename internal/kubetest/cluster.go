package kubetest

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KWOKNodeAnnotation marks the nodes KWOK manages; AddNodes sets it. A
// node without it is left alone, and so are the pods bound to it.
const (
	KWOKNodeAnnotation = "kwok.x-k8s.io/node"
	KWOKNodeValue      = "fake"
)

// The pod annotations the cluster's KWOK stages read (stages.yaml): the
// value is a Go duration ("30s") or an RFC 3339 time. PodCompleteDelay
// makes a running pod succeed that long after it started; PodFailDelay
// makes it fail (exit code 1); PodReadyDelay holds a bound pod Pending
// that long before it runs. A pod with none of them runs until deleted.
const (
	PodReadyDelay    = "pod-ready.stage.kwok.x-k8s.io/delay"
	PodCompleteDelay = "pod-complete.stage.kwok.x-k8s.io/delay"
	PodFailDelay     = "pod-fail.stage.kwok.x-k8s.io/delay"
)

// errExited is a program of the cluster ending on its own.
var errExited = errors.New("exited")

//go:embed stages.yaml
var stagesYAML []byte

// Cluster is a running test cluster: etcd, kube-apiserver and KWOK on
// loopback, with no controller manager and no kubelet.
type Cluster struct {
	// Kubeconfig is the path of a kubeconfig file for the admin user.
	Kubeconfig string
	// Config is the admin's client configuration (a client certificate
	// in group system:masters).
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// Host is the apiserver's URL, https://127.0.0.1:PORT.
	Host string

	bins Binaries
	dir  string

	mu     sync.Mutex
	procs  []*proc  // in start order; Stop ends them in reverse
	remove []string // dirs outside dir for Stop to remove
}

// proc is one program of the cluster and its log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// Start builds the binaries when the cache lacks them (once per process;
// see Build), then starts etcd, kube-apiserver and KWOK on free loopback
// ports in a temp dir, and waits for the apiserver's /readyz. They stop
// at t.Cleanup. A test that cannot have a cluster fails: etcd missing
// (apt-get install etcd-server; .ci/run does) or a build error.
func Start(t testing.TB) *Cluster {
	t.Helper()
	bins, err := cachedBuild(t)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	start := time.Now()
	base := t.TempDir()
	c := &Cluster{bins: bins}
	t.Cleanup(c.Stop)
	// The free ports are picked before the programs bind them, so another
	// process (a test package beside this one) may take one first: a
	// program that exits at start is tried again on new ports.
	const attempts = 3
	for i := 1; ; i++ {
		c.dir = filepath.Join(base, strconv.Itoa(i))
		if err = os.Mkdir(c.dir, 0o700); err == nil {
			err = c.start()
		}
		if err == nil {
			break
		}
		if i == attempts || !errors.Is(err, errExited) {
			c.dumpLogs(t)
			t.Fatalf("kubetest: start: %v", err)
		}
		t.Logf("kubetest: start, try %d: %v; trying again", i, err)
		c.Stop()
	}
	t.Logf("kubetest: cluster %s up in %s (dir %s)", c.Host, time.Since(start).Round(10*time.Millisecond), c.dir)
	return c
}

func (c *Cluster) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	certs, err := newPKI(c.dir)
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}

	// etcd. Ports are picked free and may be taken before the program
	// binds them; a program that then exits fails Start, and is rare.
	etcdClient, etcdPeer := freePort(), freePort()
	clientURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	if err := c.run("etcd", c.bins.Etcd,
		"--name=kubetest",
		"--data-dir="+c.etcdDataDir(),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubetest="+peerURL,
		"--logger=zap",
		"--log-level=warn",
	); err != nil {
		return err
	}

	port := freePort()
	c.Host = "https://127.0.0.1:" + strconv.Itoa(port)
	if err := c.run("kube-apiserver", c.bins.APIServer,
		"--bind-address=127.0.0.1",
		// The endpoint reconciler refuses a loopback address, and there is
		// no other: nothing reaches the apiserver through its Service.
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--secure-port="+strconv.Itoa(port),
		"--etcd-servers="+clientURL,
		"--cert-dir="+filepath.Join(c.dir, "apiserver-certs"),
		"--tls-cert-file="+certs.ServingCert,
		"--tls-private-key-file="+certs.ServingKey,
		"--client-ca-file="+certs.CACert,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+certs.SAPub,
		"--service-account-signing-key-file="+certs.SAKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		// No controller manager runs: nobody would make the default
		// service accounts the ServiceAccount plugin demands, nor lift the
		// not-ready taint TaintNodesByCondition puts on every new node.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		"--enable-priority-and-fairness=false",
		// etcd 3.4 has no RequestWatchProgress, which the WatchList
		// feature (informers' streaming lists, on by default since 1.34)
		// waits on: with it on, a client-go informer's watch sees a
		// change only on its next relist, 5 to 25 s late.
		"--feature-gates=WatchList=false",
		"--profiling=false",
		"--v=0",
	); err != nil {
		return err
	}

	c.Config = &rest.Config{
		Host: c.Host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   certs.CAPEM,
			CertData: certs.AdminCertPEM,
			KeyData:  certs.AdminKeyPEM,
		},
		QPS:   200,
		Burst: 400,
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.dir, "kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, c.Host, certs); err != nil {
		return err
	}
	if err := c.waitReady(ctx); err != nil {
		return err
	}

	stages := filepath.Join(c.dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, stagesYAML, 0o600); err != nil {
		return err
	}
	return c.run("kwok", c.bins.KWOK,
		"--kubeconfig="+c.Kubeconfig,
		"--config="+stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+KWOKNodeAnnotation+"="+KWOKNodeValue,
		"--node-ip=10.0.0.1",
		"--cidr=10.0.0.1/16",
	)
}

// etcdDataDir is on tmpfs (/dev/shm) where there is one: etcd 3.4 has no
// --unsafe-no-fsync, and a test cluster's data need not survive a crash.
// Stop removes it once etcd has ended.
func (c *Cluster) etcdDataDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "kubetest-etcd-"); err == nil {
			c.mu.Lock()
			c.remove = append(c.remove, d)
			c.mu.Unlock()
			return d
		}
	}
	return filepath.Join(c.dir, "etcd")
}

// waitReady polls /readyz until it answers ok, a program exits, or ctx
// ends.
func (c *Cluster) waitReady(ctx context.Context) error {
	rc := c.Client.Discovery().RESTClient()
	var last error
	for {
		body, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("/readyz: %s", body)
		}
		if p := c.exited(); p != nil {
			return fmt.Errorf("%s: %w: %v", p.name, errExited, p.err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("apiserver not ready: %w", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// run starts one program with its output in a log file in the cluster's
// dir; it dies with the test process (Pdeathsig) if Stop never runs.
func (c *Cluster) run(name, path string, args ...string) error {
	logPath := filepath.Join(c.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return nil
}

// exited returns a program of the cluster that has ended, if any.
func (c *Cluster) exited() *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		select {
		case <-p.done:
			return p
		default:
		}
	}
	return nil
}

// Stop ends KWOK, the apiserver and etcd, in that order: SIGTERM, then
// SIGKILL after five seconds. Start registers it with t.Cleanup; calling
// it again does nothing.
func (c *Cluster) Stop() {
	c.mu.Lock()
	procs, remove := c.procs, c.remove
	c.procs, c.remove = nil, nil
	c.mu.Unlock()
	defer func() {
		for _, d := range remove {
			_ = os.RemoveAll(d)
		}
	}()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// CPUTime is the user and system CPU time the named program of the
// cluster ("etcd", "kube-apiserver", "kwok", "kube-scheduler") has used
// so far (Linux only: it reads /proc).
func (c *Cluster) CPUTime(name string) (time.Duration, error) {
	p := c.proc(name)
	if p == nil {
		return 0, fmt.Errorf("kubetest: no %s running", name)
	}
	return cpuTime(p.cmd.Process.Pid)
}

// StopProgram ends one program of the cluster (SIGTERM, then SIGKILL
// after five seconds), kube-scheduler say, leaving the others running.
func (c *Cluster) StopProgram(name string) {
	c.mu.Lock()
	var p *proc
	for i, q := range c.procs {
		if q.name == name {
			p = q
			c.procs = append(c.procs[:i:i], c.procs[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (c *Cluster) proc(name string) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// Logs returns the named program's output so far ("etcd",
// "kube-apiserver", "kwok", "kube-scheduler").
func (c *Cluster) Logs(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, name+".log"))
	return string(b)
}

// dumpLogs puts the tail of every program's log in the test's output.
func (c *Cluster) dumpLogs(t testing.TB) {
	for _, name := range []string{"etcd", "kube-apiserver", "kwok", "kube-scheduler"} {
		b, err := os.ReadFile(filepath.Join(c.dir, name+".log"))
		if err != nil {
			continue
		}
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("kubetest: %s log tail:\n%s", name, bytes.TrimSpace(b))
	}
}

// AddNodes creates n nodes named prefix-0 … prefix-(n-1), each with the
// labels given, the allocatable given (also its capacity; cpu, memory
// and pods get large defaults when missing) and KWOK's annotation, so
// that KWOK makes them Ready and runs the pods bound to them. It waits
// until every node is Ready (a minute, and 50 ms more per node).
func (c *Cluster) AddNodes(t testing.TB, prefix string, n int, labels map[string]string, allocatable corev1.ResourceList) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute+time.Duration(n)*50*time.Millisecond)
	defer cancel()
	res := corev1.ResourceList{}
	for k, v := range allocatable {
		res[k] = v.DeepCopy()
	}
	for k, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: "1k", corev1.ResourceMemory: "1Ti", corev1.ResourcePods: "1k"} {
		if _, ok := res[k]; !ok {
			res[k] = resource.MustParse(v)
		}
	}
	names := make([]string, n)
	nodes := make([]*corev1.Node, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		l := map[string]string{
			"kubernetes.io/hostname": names[i],
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     "amd64",
			"type":                   "kwok",
		}
		for k, v := range labels {
			l[k] = v
		}
		nodes[i] = &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        names[i],
				Labels:      l,
				Annotations: map[string]string{KWOKNodeAnnotation: KWOKNodeValue},
			},
			Status: corev1.NodeStatus{Allocatable: res, Capacity: res},
		}
	}
	// Created by a few at once: thousands of nodes one by one take long.
	errs := make([]error, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(n, 8) {
		wg.Go(func() {
			for i := range next {
				_, errs[i] = c.Client.CoreV1().Nodes().Create(ctx, nodes[i], metav1.CreateOptions{})
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("kubetest: create node %s: %v", names[i], err)
		}
	}
	for _, name := range names {
		if err := c.waitNodeReady(ctx, name); err != nil {
			c.dumpLogs(t)
			t.Fatalf("kubetest: node %s: %v", name, err)
		}
	}
}

func (c *Cluster) waitNodeReady(ctx context.Context, name string) error {
	for {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		if p := c.exited(); p != nil {
			return fmt.Errorf("not Ready: %s: %w: %v", p.name, errExited, p.err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not Ready: %w (last error %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func writeKubeconfig(path, host string, certs *pki) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: certs.CAPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: certs.AdminCertPEM, ClientKeyData: certs.AdminKeyPEM}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin"}
	cfg.CurrentContext = "kubetest"
	return clientcmd.WriteToFile(*cfg, path)
}

// freePort asks the kernel for a free loopback port.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("kubetest: no free port: %v", err))
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartKubeScheduler runs the stock kube-scheduler (built from the same
// release, on first use: BuildScheduler) against the cluster, as the
// default scheduler, until the test ends or Stop("kube-scheduler"): for
// comparisons with gpufleet's scheduler. It serves nothing
// (--secure-port=0) and does not elect a leader; args are more flags
// (--kube-api-qps=500).
func (c *Cluster) StartKubeScheduler(t testing.TB, args ...string) {
	t.Helper()
	path, err := BuildScheduler(context.Background(), t.Logf)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	if err := c.run("kube-scheduler", path, append([]string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
		"--v=0",
	}, args...)...); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	// It has no readiness to poll without a port: give it a moment to
	// fail on its flags, so that a broken start shows here.
	time.Sleep(500 * time.Millisecond)
	c.mu.Lock()
	p := c.procs[len(c.procs)-1]
	c.mu.Unlock()
	select {
	case <-p.done:
		c.dumpLogs(t)
		t.Fatalf("kubetest: kube-scheduler exited: %v", p.err)
	default:
	}
}
