#!/usr/bin/env bash
# A job that ignores the checkpoint signal and SIGTERM, with a child that
# inherits the same dispositions: only SIGKILL to the group ends both.
trap '' USR1 TERM
sleep 1000 &
echo "child $!"
echo "pgrp $(cut -d' ' -f5 /proc/$$/stat)"
while true; do sleep 0.05; done
