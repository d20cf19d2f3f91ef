#!/usr/bin/env bash
# A job of numbered steps that keeps its progress in a checkpoint:
#   steps.sh N   runs until step N and exits 0.
# It saves its step every 10 steps and on the checkpoint signal (then
# goes on), saves and exits 143 on SIGTERM, and on start resumes from
# the saved step.
set -u
ck="$GPUFLEET_CHECKPOINT_DIR/step"
i=0
if [ -f "$ck" ]; then
  i=$(cat "$ck")
  echo "resumed at $i"
fi
save() { echo "$i" > "$ck.tmp" && mv "$ck.tmp" "$ck"; echo "checkpointed at $i"; }
trap save "$GPUFLEET_CHECKPOINT_SIGNAL"
trap 'save; exit 143' TERM
while [ "$i" -lt "$1" ]; do
  i=$((i + 1))
  echo "step $i"
  if [ $((i % 10)) -eq 0 ]; then save; fi
  sleep 0.05
done
echo "done at $i"
