#!/usr/bin/env bash
# usage: cancel.sh JOBID... (the stand-in scheduler of submit.sh): stop each job's process group.
# A real scheduler instead: scancel "$@"
for id in "$@"; do
  pid=$(cat "logs/cluster/$id.pid" 2>/dev/null) && kill -TERM -- "-$pid" 2>/dev/null
done
exit 0
