// Package arch holds no code, only the test that enforces gpufleet's
// import rules, so that the layers point one way:
//   - core imports nothing of ours;
//   - the decision packages (sched, fleet, billing, plan, engine) do no
//     I/O — no net, no database, no os, no file system, none of our
//     packages that do — so that the live server and the simulator can
//     share them and every decision can be replayed;
//   - store persists core types only: it depends on core and itself;
//   - the agent depends on no decision package and none of the server's:
//     it reaches the server only through its wire protocol;
//   - kube (the Kubernetes scheduler) imports only the engine, core,
//     clock, sched, policy, pricing, capacity (what fits on a shared
//     GPU), the Kubernetes node pool and client-go (k8s.io/...), and depends on no store, server or API:
//     the cluster is its state.
package arch
