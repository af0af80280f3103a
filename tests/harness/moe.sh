#!/usr/bin/env bash
# The gpt2-moe family end to end: a 2-rank full_shard training of gpt2-moe-tiny with routing
# traces (moe.trace_every), its routing series and /routing table (one row per token per MoE
# layer per traced step and rank), then `shardbench moe-place --ep 2`: a placement file with
# every MoE layer's experts balanced over the 2 ranks, the solver's cross-rank tokens no more
# than greedy's and round robin's; the exported folder serves (infer).
# Usage: moe.sh build/shardbench
set -euo pipefail
sb=$(realpath "$1")
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$d"
cat > moe.toml <<TOML
[suite]
name = "moe"
[base]
task = "train"
model = "gpt2-moe-tiny"
strategy = "full_shard"
world = 2
threads = 1
batch = 8
seq = 32
steps = 4
"moe.trace_every" = 2
export_folder = "$d/exported"
TOML
"$sb" sweep moe.toml > sweep.log 2>&1 || { cat sweep.log; fail "sweep"; }
/usr/bin/python3 - results/moe <<'PY'
import glob, sys, h5py, numpy as np
f = glob.glob(f"{sys.argv[1]}/points/*.h5")[0]
with h5py.File(f) as h:
    assert h.attrs["status"] == "done", h.attrs["failure_reason"]
    r = {k: h["routing"][k][:] for k in ("step", "rank", "layer", "token", "expert", "second", "kept")}
    # Steps 1 and 3 traced (every 2nd, and the last), 2 ranks x 4 rows x 32 tokens, blocks 1 and 3.
    assert sorted(set(r["step"])) == [1, 3], set(r["step"])
    assert sorted(set(r["layer"])) == [1, 3] and sorted(set(r["rank"])) == [0, 1]
    assert len(r["token"]) == 2 * 2 * 2 * 4 * 32, len(r["token"])
    assert r["expert"].min() >= 0 and r["expert"].max() < 4 and (r["second"] == -1).all()
    assert len(h["series"]["moe_dropped_fraction"][:]) == 4
PY
"$sb" moe-place results/moe --ep 2 > place.log 2>&1 || { cat place.log; fail "moe-place"; }
/usr/bin/python3 - results/moe/placement-ep2.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["experts"] == 4 and p["ep"] == 2 and p["optimal"], p
assert sorted(p["placement"]) == ["1", "3"], p["placement"]
for ranks in p["placement"].values():
    assert sorted(ranks) == [0, 0, 1, 1], ranks
cr = p["cross_rank"]
assert cr["ilp"] <= cr["greedy"] and cr["ilp"] <= cr["round_robin"], cr
assert p["transitions"] == 2 * 2 * 4 * 32, p["transitions"]
PY
grep -q "cross-rank tokens" place.log || { cat place.log; fail "moe-place printed no table"; }
printf '[base]\ntask = "infer"\nmodel = "%s"\nworld = 1\nbatch = 2\nseq = 16\nsteps = 3\n' "$d/exported" > infer.toml
"$sb" sweep infer.toml --results infer > infer.log 2>&1 || { cat infer.log; fail "infer of the exported folder"; }
cat place.log
echo "moe: ok"
