#!/usr/bin/env bash
# scancel ends array tasks for good in one call: the job script requeues only on Slurm's
# pre-timeout signal (USR1), never on the TERM of a cancel. Cancelling one running task ends
# it (not requeued, no restart); one scancel of the array then ends the other.
# Usage: cancel.sh SHARDBENCH REPO WORKDIR   (SLURM_CONF set by the ctest fixture)
exe=$1 repo=$2 work=$3
source "$(dirname "$0")/lib.sh"
rm -rf "$work"; mkdir -p "$work"
results="$work/results"
suite="$work/cancel.toml"
# Two one-rank points that would train far longer than the test: both run at once on the
# cluster's 2 CPUs.
cat > "$suite" <<TOML
[suite]
name = "slurm-cancel"
[base]
task = "train"
model = "gpt2-tiny"
world = 1
threads = 1
batch = 8
seq = 32
steps = 1000000
warmup = 2
time_limit = 900
[axes]
seed = [1, 2]
TOML
out=$("$exe" submit "$suite" --results "$results" --local-cluster) || fail "submit failed: $out"
echo "$out"
job=$(echo "$out" | sed -nE 's/^submitted job array ([0-9]+):.*/\1/p' | head -n 1)
[ -n "$job" ] || fail "submit printed no job array id: $out"
trap 'scancel "$job" 2>/dev/null || true' EXIT  # never leave the cluster busy for later tests

# training TASK: the task's log shows step progress.
training() { grep -qE "[0-9]+/1000000 elapsed" "$results/logs/${job}_$1.out" 2>/dev/null; }
for _ in $(seq 300); do
  training 0 && training 1 && break
  [ -n "$(squeue -h -j "$job" -o %i 2>/dev/null)" ] || break  # they ended without training
  sleep 1
done
training 0 && training 1 || fail "the tasks never both reported training steps"

# ended_for_good TASK: gone from the queue, cancelled, never restarted.
ended_for_good() {
  local info
  info=$(scontrol show job "${job}_$1" 2>&1) || fail "scontrol knows no ${job}_$1: $info"
  echo "$info" | grep -q "JobState=CANCELLED" || fail "${job}_$1 is not CANCELLED: $info"
  echo "$info" | grep -q "Restarts=0" || fail "${job}_$1 was restarted: $info"
  grep -q "restart 1" "$results/logs/${job}_$1.out" && fail "${job}_$1 ran again after scancel"
  grep -q "requeueing" "$results/logs/${job}_$1.out" && fail "${job}_$1 was requeued by its script"
  return 0
}

scancel "${job}_0" || fail "scancel ${job}_0 failed"
echo "cancelled ${job}_0"
wait_jobs 90 "${job}_0"
sleep 3  # a requeue by the script would show now
[ -z "$(squeue -h -j "${job}_0" -o %i 2>/dev/null)" ] || fail "${job}_0 is back in the queue"
ended_for_good 0
[ -n "$(squeue -h -j "${job}_1" -t RUNNING -o %i 2>/dev/null)" ] || fail "${job}_1 stopped too"

scancel "$job" || fail "scancel $job failed"
echo "cancelled the array $job"
wait_jobs 90 "$job"
sleep 3
[ -z "$(squeue -h -j "$job" -o %i 2>/dev/null)" ] || fail "array $job is back in the queue"
ended_for_good 1
"$exe" status "$results" || true
echo "PASS"
