#!/usr/bin/env bash
# `shardbench submit` of a suite as a real Slurm job array: every point completes with a
# complete HDF5 result and `status` says done, except one point made to fail (its data file
# does not exist), which is reported failed with its reason while the others complete.
# Usage: job_array.sh SHARDBENCH REPO WORKDIR   (SLURM_CONF set by the ctest fixture)
exe=$1 repo=$2 work=$3
source "$(dirname "$0")/lib.sh"
rm -rf "$work"; mkdir -p "$work"
results="$work/results"
suite="$work/slurm_array.toml"
# The quickstart suite's GPT-2 points plus one that cannot run.
cat > "$suite" <<TOML
[suite]
name = "slurm-array"
[base]
task = "train"
model = "gpt2-tiny"
world = 2
threads = 1
batch = 8
seq = 32
steps = 6
warmup = 2
time_limit = 300
[axes]
strategy = ["no_shard", "full_shard"]
data = ["markov", "$work/no-such-corpus.bin"]
[[exclude]]
strategy = "no_shard"
data = "$work/no-such-corpus.bin"
TOML
"$exe" plan "$suite" || fail "plan failed"
out=$("$exe" submit "$suite" --results "$results" --local-cluster) || fail "submit failed: $out"
echo "$out"
ids=$(echo "$out" | sed -nE 's/^submitted job array ([0-9]+):.*/\1/p' | tr '\n' ' ')
[ -n "$ids" ] || fail "submit printed no job array id: $out"
echo "job arrays: $ids"
wait_jobs 600 $ids

status=$("$exe" status "$results" || true)
echo "$status"
n_files=$(ls "$results"/points/*.h5 2>/dev/null | wc -l)
[ "$n_files" = 3 ] || fail "expected 3 result files, found $n_files"
ls "$results"/points/*.tmp 2>/dev/null && fail "a temporary result file was left behind"
done_n=0 failed_n=0
for f in "$results"/points/*.h5; do
  case "$(h5_status "$f")" in
    done) done_n=$((done_n + 1)) ;;
    failed) failed_n=$((failed_n + 1)); failed_file=$f ;;
    *) fail "$f has status $(h5_status "$f")" ;;
  esac
done
[ $done_n = 2 ] && [ $failed_n = 1 ] || fail "expected 2 done and 1 failed, got $done_n done, $failed_n failed"
reason=$(/usr/bin/python3 -c 'import h5py,sys; print(h5py.File(sys.argv[1],"r").attrs["failure_reason"])' "$failed_file")
echo "failure reason: $reason"
echo "$reason" | grep -q "no-such-corpus.bin" || fail "failure reason does not name the missing file: $reason"
echo "$status" | grep -q "failed" || fail "status does not report the failed point"
[ "$(echo "$status" | grep -c ' done')" -ge 2 ] || fail "status does not report two points done"
# Provenance: the Slurm ids are recorded.
for f in "$results"/points/*.h5; do
  /usr/bin/python3 - "$f" <<'PY' || fail "$f lacks Slurm provenance"
import h5py, sys
a = h5py.File(sys.argv[1], "r").attrs
assert a["slurm_array_job_id"] != "" and a["slurm_array_task_id"] != "", dict(a)
PY
done
echo "PASS"
