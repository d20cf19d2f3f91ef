// Package kubetest runs a real Kubernetes control plane for tests, with no
// fake clientset: etcd (Debian's etcd-server), kube-apiserver built from
// k8s.io/kubernetes, and KWOK, which plays the kubelet of fake nodes, each
// on loopback ports in the test's temp dir.
//
// Start builds the binaries once into the user's cache (Build; a file
// lock keeps parallel test packages from building twice), generates a CA,
// serving and admin client certificates and a service-account key, starts
// etcd, the apiserver (RBAC; the admin is in system:masters) and KWOK, and
// stops them at t.Cleanup. AddNodes makes nodes KWOK manages; a pod bound
// to one runs, and with the PodCompleteDelay annotation succeeds after a
// while (KWOK stages in stages.yaml). No controller manager runs: no
// Deployment, Job or garbage collection; namespaces are not finalized.
// StartKubeScheduler adds the stock kube-scheduler, for comparisons.
//
// It is a test helper: only _test.go files and cmd/kubebuild import it.
// It must not import the gpufleet packages under test.
package kubetest
