#!/usr/bin/env bash
# Slurm's pre-timeout signal on a point that resumes (checkpoint_dir + resume = true): the batch
# shell of the running array task receives USR1 (sent here by hand, as `--signal=B:USR1@...`
# would before the limit), the ranks stop after the current step and save a checkpoint, the
# task is requeued, and the rerun continues from that checkpoint (its steps go on from where
# the first run stopped, not from 0) and completes the point.
# Usage: requeue.sh SHARDBENCH REPO WORKDIR   (SLURM_CONF set by the ctest fixture)
exe=$1 repo=$2 work=$3
source "$(dirname "$0")/lib.sh"
rm -rf "$work"; mkdir -p "$work"
results="$work/results"
ckpt="$work/ckpt"
steps=3000
base() {  # base() NAME STEPS: the suite's [suite] and [base] tables
  cat <<TOML
[suite]
name = "$1"
[base]
task = "train"
model = "gpt2-tiny"
strategy = "full_shard"
world = 2
threads = 1
batch = 8
seq = 32
steps = $2
warmup = 1
time_limit = 900
checkpoint_dir = "$ckpt"
TOML
}
# resume = true loads the checkpoint on every start, the first included: make one (4 steps).
base slurm-requeue-prep 4 > "$work/prep.toml"
"$exe" sweep "$work/prep.toml" --results "$work/prep" > "$work/prep.log" 2>&1 ||
  { cat "$work/prep.log"; fail "the run that writes the first checkpoint failed"; }
{ base slurm-requeue $steps; echo "resume = true"; } > "$work/requeue.toml"

out=$("$exe" submit "$work/requeue.toml" --results "$results" --local-cluster) || fail "submit failed: $out"
echo "$out"
job=$(echo "$out" | sed -nE 's/^submitted job array ([0-9]+):.*/\1/p' | head -n 1)
[ -n "$job" ] || fail "submit printed no job array id: $out"
trap 'scancel "$job" 2>/dev/null || true' EXIT
log="$results/logs/${job}_0.out"
# Wait until the point is really training (step progress in its log), then signal.
for _ in $(seq 300); do
  grep -qE "[0-9]+/$steps elapsed" "$log" 2>/dev/null && break
  [ -n "$(squeue -h -j "$job" -o %i 2>/dev/null)" ] || break  # it ended without training
  sleep 1
done
grep -qE "[0-9]+/$steps elapsed" "$log" 2>/dev/null || fail "the task never reported training steps"
scancel --batch --signal=USR1 "${job}_0" || fail "scancel --signal failed"
echo "sent USR1 to ${job}_0"
# Slurm holds a requeued job for about two minutes (its begin time); start it now instead.
for _ in $(seq 120); do grep -q "requeueing" "$log" && break; sleep 1; done
grep -q "requeueing" "$log" || fail "the task was not requeued after the signal"
for _ in $(seq 30); do
  squeue -h -j "${job}_0" -t PENDING -o %i | grep -q . && break
  sleep 1
done
# Not in the second of the requeue: slurmd refuses credentials as old as the revoked one.
sleep 3
scontrol update JobId="${job}_0" StartTime=now || fail "cannot start the requeued task now"
wait_jobs 600 "$job"
grep -q "requeue: " "$log" || fail "after-timeout did not decide to requeue"
grep -q "restart 1" "$log" || fail "the requeued task did not run again"
f=$(ls "$results"/points/*.h5)
[ "$(h5_status "$f")" = done ] || fail "after the requeue the point is $(h5_status "$f"), not done"
# The rerun's trace: from the step the first run stopped at (> 4, the prep's checkpoint) to
# the last, one row per step.
read -r first last n < <(/usr/bin/python3 -c '
import h5py, sys
s = h5py.File(sys.argv[1], "r")["steps/step"][:]
print(s[0], s[-1], len(s))' "$f")
echo "the rerun did steps $first..$last ($n rows)"
[ "$first" -gt 4 ] ||
  fail "the rerun started at step $first: not from the checkpoint saved at the signal"
[ "$last" = $((steps - 1)) ] && [ "$n" = $((steps - first)) ] ||
  fail "the rerun did steps $first..$last in $n rows, expected $first..$((steps - 1))"
"$exe" status "$results" | grep -q done || fail "status does not say done"
echo "PASS"
