package kubenodes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/kubetest"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// applyRBAC creates the ClusterRoles and bindings of the shipped
// manifests files (under deploy/kubernetes) and returns a client acting
// as gpufleet's service account.
func applyRBAC(t *testing.T, c *kubetest.Cluster, files ...string) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	var rules []rbacv1.PolicyRule
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "kubernetes", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			switch o := obj.(type) {
			case *rbacv1.ClusterRole:
				rules = append(rules, o.Rules...)
				_, err = c.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRoleBinding:
				_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:gpufleet-system:gpufleet", Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, client, rules)
	return client
}

// waitAllowed waits until client may do what each rule grants: the
// apiserver's RBAC authorizer reads roles and bindings through an
// informer, so a binding just created takes effect a moment later (on a
// loaded machine, after the first request that needs it).
func waitAllowed(t *testing.T, client kubernetes.Interface, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for _, r := range rules {
		if len(r.APIGroups) == 0 || len(r.Resources) == 0 || len(r.Verbs) == 0 {
			continue
		}
		resource, sub, _ := strings.Cut(r.Resources[0], "/")
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: r.APIGroups[0], Resource: resource, Subresource: sub, Verb: r.Verbs[0]}}}
		for {
			got, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err == nil && got.Status.Allowed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the shipped roles do not take effect within 30 s: %s %s: %v", r.Verbs[0], r.Resources[0], err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestPoolUnderShippedRBAC: with gpufleet.yaml and node-pool.yaml applied
// and nothing more, the pool acting as gpufleet's service account rents a
// node and releases it (cordon, eviction of its pod, delete); with
// gpufleet.yaml alone it may not create one.
func TestPoolUnderShippedRBAC(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	scheduler := applyRBAC(t, c, "gpufleet.yaml")
	if _, err := scheduler.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-allowed"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("node create with gpufleet.yaml alone: %v; want forbidden", err)
	}
	pooled := applyRBAC(t, c, "node-pool.yaml")
	p, err := New(Config{Client: pooled, Pool: "rbac", Offers: []core.Offer{offer}, Retry: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Acquire(ctx, provider.AcquireRequest{ClientToken: "L1", OfferID: offer.ID, Mode: core.OnDemand})
	if err != nil {
		t.Fatalf("acquire as the service account: %v", err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "work"},
		Spec: corev1.PodSpec{NodeName: m.ProviderID, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the pod runs on the pool's node", func() bool {
		got, err := c.Client.CoreV1().Pods("default").Get(ctx, "work", metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.PodRunning
	})
	if err := p.Release(ctx, m.ProviderID); err != nil {
		t.Fatalf("release as the service account: %v", err)
	}
	if _, err := c.Client.CoreV1().Nodes().Get(ctx, m.ProviderID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s after the release: %v; want deleted", m.ProviderID, err)
	}
	waitFor(t, 30*time.Second, "the pod evicted", func() bool {
		_, err := c.Client.CoreV1().Pods("default").Get(ctx, "work", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}
