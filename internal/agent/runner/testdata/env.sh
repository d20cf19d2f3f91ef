#!/usr/bin/env bash
for v in CUDA_VISIBLE_DEVICES CUDA_MPS_ACTIVE_THREAD_PERCENTAGE CUDA_MPS_PINNED_DEVICE_MEM_LIMIT GPUFLEET_CHECKPOINT_DIR GPUFLEET_CHECKPOINT_SIGNAL GPUFLEET_JOB_ID GPUFLEET_TOKEN FROM_SPEC; do
  echo "$v=${!v-<unset>}"
done
echo "pwd=$(pwd)"
echo "pgrp=$(cut -d' ' -f5 /proc/$$/stat) pid=$$"
test -d "$GPUFLEET_CHECKPOINT_DIR" && echo "checkpoint dir exists"
echo "to stderr" >&2
