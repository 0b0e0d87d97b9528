#!/usr/bin/env bash
# usage: status.sh JOBID -> prints running, success or failed (the stand-in scheduler of submit.sh)
set -uo pipefail
dir=logs/cluster id=$1
if [ -f "$dir/$id.rc" ]; then
  [ "$(cat "$dir/$id.rc")" = 0 ] && echo success || echo failed
elif kill -0 "$(cat "$dir/$id.pid" 2>/dev/null)" 2>/dev/null; then
  echo running
else
  sleep 1  # the job may have written its exit code just now
  if [ -f "$dir/$id.rc" ] && [ "$(cat "$dir/$id.rc")" = 0 ]; then echo success; else echo failed; fi
fi
# A real scheduler instead, for example:
#   sacct -j "$id" -X -n -o State | head -1 | awk '{print ($1=="COMPLETED") ? "success" : ($1 ~ /RUNNING|PENDING|CONFIGURING|COMPLETING/) ? "running" : "failed"}'
