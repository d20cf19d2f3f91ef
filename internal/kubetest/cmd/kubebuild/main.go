// Command kubebuild builds the test cluster's binaries (kube-apiserver,
// kube-scheduler, KWOK) into the cache that internal/kubetest reads, so
// that CI pays the build before go test's per-package timeout starts.
// It prints where they are.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/gpufleet/gpufleet/internal/kubetest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	b, err := kubetest.Build(ctx, log.Printf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("etcd %s\nkube-apiserver %s\nkube-scheduler %s\nkwok %s\n(%s)\n",
		b.Etcd, b.APIServer, b.Scheduler, b.KWOK, time.Since(start).Round(time.Second))
}
