package kube

import corev1 "k8s.io/api/core/v1"

// The names gpufleet reads on nodes and pods. The nvidia.com labels are
// those NVIDIA's GPU feature discovery puts on nodes; the gpufleet.io
// keys are gpufleet's own, read from a pod's annotations first and then
// its labels (a label can be selected on, an annotation holds anything).
const (
	// SchedulerName is the spec.schedulerName of the pods gpufleet
	// schedules (Config.SchedulerName overrides it).
	SchedulerName = "gpufleet"
	// ResourceGPU is the device plugin's extended resource: a node's
	// allocatable count of it is its GPUs, a pod's request its GPUs.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

	// LabelGPUProduct is a node's GPU model (GFD); pods constrain the
	// model by node affinity or a nodeSelector on it.
	LabelGPUProduct = "nvidia.com/gpu.product"
	// LabelGPUMemory is the memory of each GPU of a node in MiB (GFD).
	LabelGPUMemory = "nvidia.com/gpu.memory"
	// LabelOffer names the catalog offer a node is (its price plans);
	// without it the instance-type label is matched against the
	// catalog's instance types.
	LabelOffer = "gpufleet.io/offer"
	// LabelInstanceType is the well-known instance-type label.
	LabelInstanceType = corev1.LabelInstanceTypeStable

	// KeyTier is a pod's tier: core, regular or offline. Without it the
	// PriorityClass name decides (core, regular, offline, optionally
	// prefixed gpufleet-), else regular.
	KeyTier = "gpufleet.io/tier"
	// KeyDuration is the estimated run time, a Go duration (90m, 3h).
	KeyDuration = "gpufleet.io/duration"
	// KeyDeadline is when the work must be done, RFC 3339.
	KeyDeadline = "gpufleet.io/deadline"
	// KeyDeferrable lets the work wait for a cheaper time-of-use window.
	KeyDeferrable = "gpufleet.io/deferrable"
	// KeyInterruptible lets the engine preempt the pod (default false).
	KeyInterruptible = "gpufleet.io/interruptible"
	// KeyGang names the gang a pod belongs to; the pods of one namespace
	// with one gang name are bound all together or not at all.
	KeyGang = "gpufleet.io/gang"
	// KeyGangSize is how many pods the gang has; nothing of it is bound
	// before that many exist.
	KeyGangSize = "gpufleet.io/gang-size"
	// KeyPreemptions counts how often gpufleet recreated a bare pod it
	// preempted (set on the recreated pod).
	KeyPreemptions = "gpufleet.io/preemptions"

	// KeyGPUFraction is the share of one GPU a pod asks for, above 0 and
	// below 1 ("0.5"); such a pod requests no nvidia.com/gpu: a
	// reservation pod holds the whole GPU (share.go).
	KeyGPUFraction = "gpufleet.io/gpu-fraction"
	// KeyGPUMemory is the GPU memory a pod asks for on its shared GPU, a
	// quantity ("20Gi"); alone, its share is that memory over the
	// largest GPU memory of the cluster's nodes.
	KeyGPUMemory = "gpufleet.io/gpu-memory"
	// KeyGPUGroup, set by gpufleet on a pod that shares a GPU, names the
	// reservation pod (in the reservation namespace) that holds the GPU.
	KeyGPUGroup = "gpufleet.io/gpu-group"
	// KeyGPUID is the device ID of a shared GPU as the device plugin
	// named it (a UUID, or an index with deviceIDStrategy=index): the
	// reservation pod's container writes it on its pod, and gpufleet
	// copies it to each pod sharing the GPU before binding it, for the
	// container's NVIDIA_VISIBLE_DEVICES (the downward API).
	KeyGPUID = "gpufleet.io/gpu-id"
	// KeyGPUMemoryLimit, set by gpufleet on a pod that shares a GPU, is
	// the GPU memory in MiB the pod may use there: the memory it asked
	// for, else its fraction of the GPU's memory.
	KeyGPUMemoryLimit = "gpufleet.io/gpu-memory-limit"
	// LabelReservation marks the reservation pods gpufleet makes: one
	// per shared GPU, requesting nvidia.com/gpu: 1 on its node, so that
	// the kubelet and other schedulers count the GPU as taken.
	LabelReservation = "gpufleet.io/reservation"
	// ReservationNamespace is where reservation pods are made (Options
	// overrides it).
	ReservationNamespace = "gpufleet-system"
)

// get returns key from the pod's annotations, else its labels.
func get(annotations, labels map[string]string, key string) (string, bool) {
	if v, ok := annotations[key]; ok {
		return v, true
	}
	v, ok := labels[key]
	return v, ok
}
