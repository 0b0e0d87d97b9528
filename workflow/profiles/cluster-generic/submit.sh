#!/usr/bin/env bash
# usage: submit.sh RULE HOST EXCLUSIVE JOBSCRIPT -> prints a job id
# Stand-in scheduler for one machine: the jobscript runs as its own process in a new session,
# detached from snakemake, with only PATH and LANG from the caller, a fresh HOME and TMPDIR, and its
# output in logs/cluster/ID.log. The job's exit code lands in logs/cluster/ID.rc (read by status.sh).
set -euo pipefail
rule=$1 host=$2 exclusive=$3 jobscript=$4
dir=logs/cluster
mkdir -p "$dir"
id="local-$(date +%s%N)-$RANDOM"
printf 'rule=%s host=%s exclusive=%s jobscript=%s\n' "$rule" "$host" "$exclusive" "$jobscript" > "$dir/$id.submit"
scratch=$(mktemp -d)
setsid env -i PATH="$PATH" LANG="${LANG:-C.UTF-8}" HOME="$scratch" TMPDIR="$scratch" \
  bash -c 'bash "$1"; echo $? > "$2.rc.tmp" && mv "$2.rc.tmp" "$2.rc"; rm -rf "$3"' job "$jobscript" "$dir/$id" "$scratch" \
  > "$dir/$id.log" 2>&1 < /dev/null &
echo $! > "$dir/$id.pid"
echo "$id"
# A real scheduler instead, for example:
#   sbatch --parsable ${host:+--nodelist="$host"} $([ "$exclusive" = 1 ] && echo --exclusive) "$jobscript"
#   qsub -terse ${host:+-l hostname="$host"} "$jobscript"
