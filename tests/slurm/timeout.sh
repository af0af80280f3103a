#!/usr/bin/env bash
# A point that needs longer than its job's --time and does not resume (no checkpoint_dir +
# resume): Slurm's real pre-timeout signal stops it, and instead of a requeue that would start
# again at step 0 (forever), it ends failed after this one time-out, its partial trace kept,
# and `status` says how to fix it. --time-min 1 makes the time-out come within a minute.
# Usage: timeout.sh SHARDBENCH REPO WORKDIR   (SLURM_CONF set by the ctest fixture)
exe=$1 repo=$2 work=$3
source "$(dirname "$0")/lib.sh"
rm -rf "$work"; mkdir -p "$work"
results="$work/results"
suite="$work/timeout.toml"
cat > "$suite" <<TOML
[suite]
name = "slurm-timeout"
[base]
task = "train"
model = "gpt2-tiny"
strategy = "full_shard"
world = 2
threads = 1
batch = 8
seq = 32
steps = 1000000
warmup = 2
time_limit = 900
TOML
out=$("$exe" submit "$suite" --results "$results" --local-cluster --time-min 1) || fail "submit failed: $out"
echo "$out"
job=$(echo "$out" | sed -nE 's/^submitted job array ([0-9]+):.*/\1/p' | head -n 1)
[ -n "$job" ] || fail "submit printed no job array id: $out"
trap 'scancel "$job" 2>/dev/null || true' EXIT
log="$results/logs/${job}_0.out"
# One minute of job time and the wind-down; a requeue would keep it in the queue far longer.
wait_jobs 180 "$job"

grep -q "requeueing" "$log" && fail "the point was requeued although it cannot resume"
grep -q "restart 1" "$log" && fail "the task ran again after its time-out"
info=$(scontrol show job "${job}_0" 2>&1)
echo "$info" | grep -q "Restarts=0" || fail "the task was restarted: $info"
f=$(ls "$results"/points/*.h5) || fail "no result file"
st=$(h5_status "$f")
[ "$st" = failed ] || fail "after the time-out the point is $st, not failed"
status=$("$exe" status "$results" || true)
echo "$status"
line=$(echo "$status" | grep " failed ") || fail "status does not report the point failed"
for want in "pre-timeout signal" "--time=0:01:00" "does not resume" "give the job more time" \
            "checkpoint_dir and resume = true"; do
  echo "$line" | grep -qF -- "$want" || fail "status does not say '$want': $line"
done
steps=$(/usr/bin/python3 -c '
import h5py, sys
f = h5py.File(sys.argv[1], "r")
print(len(f["steps/step"]) if "steps/step" in f else 0)' "$f")
echo "partial trace: $steps steps"
echo "PASS"
