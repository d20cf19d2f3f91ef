// Command kubebuild builds the test cluster's binaries (kube-apiserver and
// KWOK; kube-scheduler too with -scheduler) into the cache that
// internal/kubetest reads, so that CI pays the build before go test's
// per-package timeout starts. It prints where they are.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/gpufleet/gpufleet/internal/kubetest"
)

func main() {
	scheduler := flag.Bool("scheduler", false, "also build kube-scheduler (for StartKubeScheduler)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	b, err := kubetest.Build(ctx, log.Printf)
	if err != nil {
		log.Fatal(err)
	}
	if *scheduler {
		if _, err := kubetest.BuildScheduler(ctx, log.Printf); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("etcd %s\nkube-apiserver %s\nkwok %s\n", b.Etcd, b.APIServer, b.KWOK)
	if *scheduler {
		fmt.Printf("kube-scheduler %s\n", b.Scheduler)
	}
	fmt.Printf("ready in %s\n", time.Since(start).Round(time.Second))
}
