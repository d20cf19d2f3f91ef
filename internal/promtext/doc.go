// Package promtext parses the Prometheus text exposition format (what a
// DCGM exporter serves) into its sample lines, with the line of each and
// errors that name the line, the metric or label and the offending text.
//
// It sits apart from the agent's GPU sources so that both the agent
// (internal/agent/gpu, a DCGM exporter on its machine) and Kubernetes
// mode (internal/kube, the dcgm-exporter pods of a cluster) read
// exporters with one parser. It imports core only and does no I/O.
package promtext
