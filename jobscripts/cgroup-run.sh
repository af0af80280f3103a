#!/usr/bin/env bash
# Runs a command inside a fresh cgroup-v1 memory group limited to LIMIT (e.g. 16G), so what
# the command holds, page cache included, is counted and capped, and prints the group's peak
# (memory.max_usage_in_bytes) and whether the limit was hit (memory.failcnt) when it ends.
#   jobscripts/cgroup-run.sh 16G build/shardbench sweep suite/offload-xl.toml
# Needs a writable /sys/fs/cgroup/memory (root in this VM). Exit status: the command's.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 LIMIT COMMAND [ARGS...]  (LIMIT as memory.limit_in_bytes takes it: 16G, 8192M)" >&2
  exit 2
fi
limit=$1; shift
root=/sys/fs/cgroup/memory
if [ ! -w "$root" ]; then
  echo "$0: $root is not writable: run as root on a machine with the cgroup-v1 memory controller" >&2
  exit 2
fi
group=$root/shardbench-$$
mkdir "$group"
cleanup() {
  # Move ourselves out before removing the group (a group with tasks cannot be removed).
  echo $$ > "$root/cgroup.procs" 2>/dev/null || true
  rmdir "$group" 2>/dev/null || true
}
trap cleanup EXIT
echo "$limit" > "$group/memory.limit_in_bytes"
echo 1 > "$group/memory.use_hierarchy" 2>/dev/null || true
echo $$ > "$group/cgroup.procs"
set +e
"$@"
status=$?
set -e
peak=$(cat "$group/memory.max_usage_in_bytes")
fails=$(cat "$group/memory.failcnt")
echo "cgroup $group: limit $(cat "$group/memory.limit_in_bytes") bytes, peak usage $peak bytes" \
     "($((peak / 1048576)) MiB), limit hit $fails times, exit status $status"
exit $status
