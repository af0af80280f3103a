#!/usr/bin/env bash
# End to end: the micro task's point-to-point benchmarks (micro.op = p2p_*) on the mpi and
# gloo backends write one comm row per timed iteration per rank with the benchmark as op,
# the pair's other rank as peer and the message's exact bytes, OSU's figures per size, no
# wrong byte; the report fits them apart from the collectives; an odd world is refused by
# `plan` naming the key and the fix.
# Usage: p2p_micro.sh SHARDBENCH WORKDIR
set -euo pipefail
exe=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
cat >"$work/p2p.toml" <<TOML
[suite]
name = "p2p-test"
[base]
task = "micro"
world = 2
threads = 1
"micro.min_bytes" = 1
"micro.max_bytes" = 4096
"micro.factor" = 8
"micro.iters" = 20
"micro.window" = 4
[axes]
"micro.op" = ["p2p_latency", "p2p_bw", "p2p_bibw"]
"micro.impl" = ["ours-async"]
comm_backend = ["mpi", "gloo"]
TOML
"$exe" sweep "$work/p2p.toml" --results "$work/res" --allow-oversubscribe
/usr/bin/python3 - "$work/res/points" <<'PY'
import glob, sys, h5py
import numpy as np
files = sorted(glob.glob(sys.argv[1] + "/*.h5"))
assert len(files) == 6, files
seen = set()
for path in files:
    f = h5py.File(path, "r")
    assert f.attrs["status"] == "done", (path, f.attrs["status"])
    c = f["comm"]
    op = {x.decode() if isinstance(x, bytes) else x for x in c["op"][:]}
    assert len(op) == 1, op
    op = op.pop()
    backend = {x.decode() if isinstance(x, bytes) else x for x in c["backend"][:]}
    seen.add((op, tuple(sorted(backend))))
    rank, peer = c["rank"][:], c["peer"][:]
    assert (peer == (rank ^ 1)).all(), (path, rank[:4], peer[:4])
    sizes = np.array([1, 8, 64, 512, 4096])
    step = c["step"][:]
    assert (c["wire_bytes"][:] == sizes[step]).all(), path
    assert len(step) == 2 * 20 * len(sizes), len(step)  # ranks x iters x sizes
    s = f["series"]
    assert (s["bandwidth_MBps"][:] > 0).all() and (s["wrong"][:] == 0).all(), path
    assert (s["size_bytes"][:] == sizes).all(), s["size_bytes"][:]
want = {(o, (b,)) for o in ("p2p_latency", "p2p_bw", "p2p_bibw") for b in ("mpi", "gloo")}
assert seen == want, seen
print("p2p rows ok:", sorted(seen))
PY
"$exe" report "$work/res" --out "$work/report" >/dev/null
/usr/bin/python3 - "$work/report/tables/alpha_beta.csv" <<'PY'
import sys, pandas as pd
t = pd.read_csv(sys.argv[1])
ops = set(t["op"])
assert {"p2p_latency", "p2p_bw", "p2p_bibw"} <= ops, ops
assert (t["alpha_us"] >= 0).all() and (t["beta_s_per_byte"] >= 0).all()
print("alpha-beta fits:", sorted(ops))
PY
sed 's/^world = 2$/world = 3/' "$work/p2p.toml" >"$work/odd.toml"
if out=$("$exe" plan "$work/odd.toml" 2>&1); then
  echo "FAIL: plan accepted an odd world for the p2p benchmarks"; exit 1
fi
echo "$out" | grep -q "world" && echo "$out" | grep -q "even number of ranks" || {
  echo "FAIL: plan's refusal does not name the key and the fix:"; echo "$out"; exit 1; }
echo "p2p micro: ok"
