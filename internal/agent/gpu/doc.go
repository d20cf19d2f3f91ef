// Package gpu reads what each GPU of a machine is doing: utilization,
// memory, power, temperature and the processes on it, MIG devices as
// entries of their own. Every source sits behind one interface, Source:
// NVML (cgo, through github.com/NVIDIA/go-nvml), nvidia-smi's CSV queries,
// a DCGM exporter's Prometheus text, and a scripted fake for tests and
// demos. Open picks one by name, and "auto" tries them in order.
//
// A value a source cannot tell is Unknown (-1), never a guessed zero: an
// idle detector that read "0%" for "not reported" would raise false
// alarms on every MIG device.
//
// Package gpu is the agent's I/O edge toward the driver: it may exec and
// dial, but it must not import the agent's runner, spool or link, nor any
// decision package (sched, fleet, billing, plan, engine).
package gpu
