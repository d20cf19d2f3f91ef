#!/usr/bin/env bash
# Burns some CPU and memory, then exits 0.
x=$(head -c 8000000 /dev/zero | tr '\0' 'x')
n=0
while [ $n -lt 300000 ]; do n=$((n + 1)); done
echo "${#x} $n"
