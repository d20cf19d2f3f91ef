#!/usr/bin/env bash
# A job whose leader exits while a background child would run on.
sleep 1000 &
echo "child $!"
exit 3
