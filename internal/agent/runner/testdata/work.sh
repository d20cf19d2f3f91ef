#!/usr/bin/env bash
# A job that does numbered steps, checkpoints its step on the checkpoint
# signal and exits, and resumes from the checkpoint when started again.
#   STEPS: run until this step (default: forever); MORE: after resuming,
#   run this many more steps and exit 0.
set -u
ckpt="$GPUFLEET_CHECKPOINT_DIR/step"
i=0
if [ -f "$ckpt" ]; then
  i=$(cat "$ckpt")
  echo "resumed at $i"
  if [ -n "${MORE:-}" ]; then STEPS=$((i + MORE)); fi
fi
checkpoint() {
  echo "$i" > "$ckpt.tmp" && mv "$ckpt.tmp" "$ckpt"
  echo "checkpointed at $i"
  exit 0
}
trap checkpoint "$GPUFLEET_CHECKPOINT_SIGNAL"
while [ "$i" -lt "${STEPS:-1000000000}" ]; do
  i=$((i + 1))
  echo "step $i"
  # Work in small slices so the trap runs soon after the signal.
  sleep 0.02
done
echo "done at $i"
