# Helpers for the Slurm tests (sourced). Every failure names what was expected and dumps the
# job logs, so a red test says why. Every `submit` here passes --local-cluster: the cluster is
# jobscripts/local-cluster.sh's (root, one node, more ranks than cores, no binding).
set -euo pipefail
fail() {
  echo "FAIL: $*" >&2
  for f in "$results"/logs/*.out; do [ -f "$f" ] && { echo "---- $f"; tail -n 30 "$f"; }; done >&2
  exit 1
}
# wait_jobs ID...: until none of the jobs is pending or running (timeout: $1 seconds).
wait_jobs() {
  local limit=$1; shift
  local t=0
  while [ -n "$(squeue -h -j "$(IFS=,; echo "$*")" -o %i 2>/dev/null)" ]; do
    sleep 2; t=$((t + 2))
    [ $t -lt "$limit" ] || fail "jobs $* still in the queue after ${limit}s: $(squeue -h -o '%i %T %r')"
  done
}
# h5_status FILE: the status attribute of a result file.
h5_status() {
  /usr/bin/python3 -c 'import h5py,sys; print(h5py.File(sys.argv[1],"r").attrs["status"])' "$1"
}
