#!/usr/bin/env bash
# Slurm's pre-timeout signal: the batch shell of a running array task receives USR1 (sent
# here by hand, as `--signal=B:USR1@...` would before the limit), the ranks stop cleanly and
# write an incomplete result, the task is requeued, and the rerun completes the point.
# Usage: requeue.sh SHARDBENCH REPO WORKDIR   (SLURM_CONF set by the ctest fixture)
exe=$1 repo=$2 work=$3
source "$(dirname "$0")/lib.sh"
rm -rf "$work"; mkdir -p "$work"
results="$work/results"
suite="$work/requeue.toml"
cat > "$suite" <<TOML
[suite]
name = "slurm-requeue"
[base]
task = "train"
model = "gpt2-tiny"
strategy = "full_shard"
world = 2
threads = 1
batch = 8
seq = 32
steps = 3000
warmup = 2
time_limit = 900
TOML
out=$("$exe" submit "$suite" --results "$results") || fail "submit failed: $out"
echo "$out"
job=$(echo "$out" | sed -nE 's/^submitted job array ([0-9]+):.*/\1/p' | head -n 1)
[ -n "$job" ] || fail "submit printed no job array id: $out"
# Wait until the point is really training (step progress in its log), then signal.
log_glob="$results/logs/${job}_0.out"
for _ in $(seq 300); do
  grep -qE "[0-9]+/3000 elapsed" $log_glob 2>/dev/null && break
  sleep 1
done
grep -qE "[0-9]+/3000 elapsed" $log_glob 2>/dev/null || fail "the task never reported training steps"
scancel --batch --signal=USR1 "${job}_0" || fail "scancel --signal failed"
echo "sent USR1 to ${job}_0"
wait_jobs 900 "$job"
grep -q "requeueing" $log_glob || fail "the task was not requeued after the signal"
grep -q "restart 1" $log_glob || fail "the requeued task did not run again"
f=$(ls "$results"/points/*.h5)
[ "$(h5_status "$f")" = done ] || fail "after the requeue the point is $(h5_status "$f"), not done"
steps=$(/usr/bin/python3 -c 'import h5py,sys; print(len(h5py.File(sys.argv[1],"r")["steps/step"]))' "$f")
[ "$steps" = 3000 ] || fail "the completed point has $steps steps, expected 3000"
"$exe" status "$results" | grep -q done || fail "status does not say done"
echo "PASS"
