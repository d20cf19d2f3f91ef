package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// The releases the test cluster is built from. Every k8s.io module is at
// one release: KubeVersion's staging modules are pinned to StagingVersion,
// the version of k8s.io/client-go the main module uses.
const (
	KubeVersion    = "v1.37.2"
	StagingVersion = "v0.37.2"
	KWOKVersion    = "v0.8.0"
)

// stagingModules are the k8s.io modules that k8s.io/kubernetes replaces
// with its staging directories (its go.mod's replace block); outside that
// repository each must be pinned to the release, or the build fails on
// their v0.0.0 requirements.
var stagingModules = []string{
	"api", "apiextensions-apiserver", "apimachinery", "apiserver", "cli-runtime",
	"client-go", "cloud-provider", "cluster-bootstrap", "code-generator",
	"component-base", "component-helpers", "controller-manager", "cri-api",
	"cri-client", "cri-streaming", "csi-translation-lib",
	"dynamic-resource-allocation", "endpointslice", "externaljwt", "kms",
	"kube-aggregator", "kube-controller-manager", "kube-proxy", "kube-scheduler",
	"kubectl", "kubelet", "metrics", "mount-utils", "pod-security-admission",
	"sample-apiserver", "sample-cli-plugin", "sample-controller", "streaming",
}

// Binaries are the programs a test cluster runs.
type Binaries struct {
	Etcd, APIServer, Scheduler, KWOK string
}

// EtcdPath is Debian's etcd-server (3.4); .ci/run installs it.
const EtcdPath = "/usr/bin/etcd"

// CacheDir is where the binaries, their build module and build cache
// live: ${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet/kube/KubeVersion.
func CacheDir() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("kubetest: cache dir: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "gpufleet", "kube", KubeVersion), nil
}

// Build makes sure the binaries Start needs (kube-apiserver, KWOK) are in
// the cache, building what is missing, and returns the paths of all of
// them; kube-scheduler is built only by BuildScheduler. A file lock in the
// cache dir makes concurrent callers (test packages run in parallel)
// build once; a binary is renamed into place only when whole. logf, when
// not nil, gets a line per build step.
func Build(ctx context.Context, logf func(format string, args ...any)) (Binaries, error) {
	b, dir, err := paths()
	if err != nil {
		return Binaries{}, err
	}
	if _, err := os.Stat(b.Etcd); err != nil {
		return Binaries{}, fmt.Errorf("kubetest: etcd %s is missing (apt-get install etcd-server; .ci/run does): %w", b.Etcd, err)
	}
	if exists(b.APIServer) && exists(b.KWOK) {
		return b, nil
	}
	return b, withLock(ctx, dir, func() error {
		if err := buildKube(ctx, logf, dir, b.APIServer, "kube-apiserver"); err != nil {
			return err
		}
		return buildKWOK(ctx, logf, dir, b.KWOK)
	})
}

// BuildScheduler makes sure kube-scheduler is in the cache, as Build does
// for the others, and returns its path. It shares most packages with
// kube-apiserver, so after Build it takes a fraction of its time.
func BuildScheduler(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	b, dir, err := paths()
	if err != nil {
		return "", err
	}
	if exists(b.Scheduler) {
		return b.Scheduler, nil
	}
	return b.Scheduler, withLock(ctx, dir, func() error {
		return buildKube(ctx, logf, dir, b.Scheduler, "kube-scheduler")
	})
}

func paths() (Binaries, string, error) {
	dir, err := CacheDir()
	if err != nil {
		return Binaries{}, "", err
	}
	bin := filepath.Join(dir, "bin")
	return Binaries{
		Etcd:      EtcdPath,
		APIServer: filepath.Join(bin, "kube-apiserver"),
		Scheduler: filepath.Join(bin, "kube-scheduler"),
		KWOK:      filepath.Join(bin, "kwok-"+KWOKVersion),
	}, dir, nil
}

func withLock(ctx context.Context, dir string, f func() error) error {
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, "build.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	return f()
}

// buildKube builds k8s.io/kubernetes/cmd/<cmd> to out, unless another
// process did while this one waited for the lock.
func buildKube(ctx context.Context, logf func(string, ...any), dir, out, cmd string) error {
	if exists(out) {
		return nil
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	goBin, err := goCommand()
	if err != nil {
		return err
	}
	mod := filepath.Join(dir, "build")
	if err := writeBuildModule(mod); err != nil {
		return err
	}
	env := buildEnv(dir)
	pkg := "k8s.io/kubernetes/cmd/" + cmd
	// go get records the sums of every module the command needs.
	if err := run(ctx, logf, goBin, mod, env, "get", pkg+"@"+KubeVersion); err != nil {
		return err
	}
	ldflags := "-s -w -X k8s.io/component-base/version.gitVersion=" + KubeVersion +
		" -X k8s.io/component-base/version.gitMajor=" + major(KubeVersion) +
		" -X k8s.io/component-base/version.gitMinor=" + minor(KubeVersion)
	if err := run(ctx, logf, goBin, mod, env, "build", "-trimpath", "-ldflags", ldflags, "-o", out+".tmp", pkg); err != nil {
		return err
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	return nil
}

// buildKWOK installs KWOK to out; its go.mod has no replace directives,
// so go install pkg@version works.
func buildKWOK(ctx context.Context, logf func(string, ...any), dir, out string) error {
	if exists(out) {
		return nil
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	goBin, err := goCommand()
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "kwok-gobin")
	env := append(buildEnv(dir), "GOBIN="+tmp)
	if err := run(ctx, logf, goBin, dir, env, "install", "-trimpath", "-ldflags", "-s -w", "sigs.k8s.io/kwok/cmd/kwok@"+KWOKVersion); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(tmp, "kwok"), out); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	return nil
}

var (
	buildOnce sync.Once
	buildBins Binaries
	buildErr  error
)

// cachedBuild runs Build once per process: every Start after the first
// finds the binaries at once.
func cachedBuild(t interface {
	Logf(string, ...any)
}) (Binaries, error) {
	buildOnce.Do(func() {
		start := time.Now()
		buildBins, buildErr = Build(context.Background(), t.Logf)
		if d := time.Since(start); d > time.Second {
			t.Logf("kubetest: binaries ready in %s", d.Round(time.Second))
		}
	})
	return buildBins, buildErr
}

func writeBuildModule(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	mods := append([]string(nil), stagingModules...)
	sort.Strings(mods)
	var s strings.Builder
	s.WriteString("// Generated by gpufleet's internal/kubetest: builds Kubernetes " + KubeVersion + " binaries.\n")
	s.WriteString("module gpufleet.local/kubebuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes " + KubeVersion + "\n\nreplace (\n")
	for _, m := range mods {
		fmt.Fprintf(&s, "\tk8s.io/%s => k8s.io/%s %s\n", m, m, StagingVersion)
	}
	s.WriteString(")\n")
	path := filepath.Join(dir, "go.mod")
	if old, err := os.ReadFile(path); err == nil && string(old) == s.String() {
		return nil
	}
	if err := os.WriteFile(path, []byte(s.String()), 0o644); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	return nil
}

// buildEnv is the environment of the builds: this Go, modules resolved
// for the build module alone (no workspace, no vendor), no cgo (the
// release binaries are static too), and a build cache of their own.
func buildEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOFLAGS", "GOWORK", "CGO_ENABLED", "GOCACHE", "GOBIN", "GOOS", "GOARCH", "GOTOOLCHAIN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0", "GOTOOLCHAIN=local",
		"GOCACHE="+filepath.Join(dir, "gocache"))
}

func goCommand() (string, error) {
	// go test puts its GOROOT/bin first on PATH.
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if exists(p) {
		return p, nil
	}
	return "", errors.New("kubetest: no go command on PATH to build the cluster's binaries")
}

func run(ctx context.Context, logf func(string, ...any), goBin, dir string, env []string, args ...string) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	logf("kubetest: go %s (%s)", strings.Join(args, " "), time.Since(start).Round(time.Second))
	if err != nil {
		return fmt.Errorf("kubetest: go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func exists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func major(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	return parts[0]
}

func minor(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[1]
}
