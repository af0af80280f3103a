#!/usr/bin/env bash
# End to end: a micro point with micro.impl = "tune" writes the tuning table (every collective,
# each size once, mpi and gloo timed), and a train point with comm_backend = "auto" on it
# runs, records the table as its source and which backend ran each collective; a table of
# another world size is refused by `plan`.
# Usage: tune_then_auto.sh SHARDBENCH WORKDIR
set -euo pipefail
exe=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
table="$work/table/backend-table.toml"
cat >"$work/tune.toml" <<TOML
[suite]
name = "tune"
[base]
task = "micro"
"micro.impl" = "tune"
world = 2
threads = 1
"micro.min_bytes" = 4
"micro.max_bytes" = 65536
comm_tuning = "$table"
TOML
cat >"$work/auto.toml" <<TOML
[suite]
name = "auto"
[base]
task = "train"
model = "gpt2-tiny"
strategy = "full_shard"
world = 2
batch = 8
seq = 32
steps = 3
warmup = 1
comm_backend = "auto"
comm_tuning = "$table"
TOML
fails=0
check() { if [ "$1" != 0 ]; then echo "FAIL: $2"; fails=$((fails + 1)); fi; }

"$exe" sweep "$work/tune.toml" --results "$work/tune" --allow-oversubscribe
[ -f "$table" ]; check $? "no table at $table"
for op in all_gather reduce_scatter all_reduce broadcast all_to_all; do
  n=$(grep -c "op = \"$op\"" "$table" || true)
  [ "$n" -ge 5 ]; check $? "$op: $n entries in the table, expected one per size (>= 5)"
done
dups=$(awk '/^op =/{op=$3} /^bytes =/{print op, $3}' "$table" | sort | uniq -d | wc -l)
[ "$dups" = 0 ]; check $? "the table has $dups duplicate (op, size) entries"
grep -q '^world = 2$' "$table"; check $? "the table does not say world = 2"

"$exe" sweep "$work/auto.toml" --results "$work/auto" --allow-oversubscribe
/usr/bin/python3 - "$work/auto/points" "$table" <<'PY'
import glob, sys, h5py
f = h5py.File(glob.glob(sys.argv[1] + "/*.h5")[0], "r")
assert f.attrs["status"] == "done", f.attrs["status"]
texts = f["texts"].attrs
assert texts["comm_backend"] == "auto", texts["comm_backend"]
assert sys.argv[2] in texts["comm_tuning_source"], texts["comm_tuning_source"]
backends = set(b.decode() for b in f["comm/backend"][:])
assert backends <= {"mpi", "gloo"} and backends, backends
print("auto point ok: backends", sorted(backends), "| source", texts["comm_tuning_source"])
PY
check $? "the auto point's result"

sed -i 's/^world = 2$/world = 4/' "$table"
# From here every check reports (set -e would end the script silently at a failed test).
set +e
out=$("$exe" plan "$work/auto.toml" 2>&1)
rc=$?
[ $rc != 0 ]; check $? "plan accepted a table measured with 4 ranks for a 2-rank point: $out"
echo "$out" | grep -q "is stale: it was measured with 4 ranks, this point runs 2"
check $? "plan's message for a stale table: $out"
echo "tune then auto: $fails failed checks"
[ "$fails" = 0 ]
