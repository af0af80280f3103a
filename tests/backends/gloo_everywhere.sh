#!/usr/bin/env bash
# End to end: train points with hybrid compression on 4 ranks (shard groups of 2) on mpi and
# on gloo. Every comm event of a gloo point, compressed or not (the parameter gathers,
# gradient reduce-scatters and replica all-reduces, the loss and norm scalars), ran on gloo:
# no exception is stated on the host (only nccl runs host tensors on mpi). The gloo points'
# losses and gradient norms are the mpi points' (Gloo's ring sums the scalars in another
# order at 4 ranks: within 1e-6).
# Usage: gloo_everywhere.sh SHARDBENCH WORKDIR
set -euo pipefail
exe=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
cat >"$work/gloo.toml" <<TOML
[suite]
name = "gloo-everywhere"
[base]
task = "train"
model = "gpt2-tiny"
world = 4
shard_group = 2
threads = 1
batch = 8
seq = 32
steps = 3
warmup = 1
compression = "hybrid"
[axes]
strategy = ["no_shard", "hybrid_shard"]
comm_backend = ["mpi", "gloo"]
TOML

"$exe" sweep "$work/gloo.toml" --results "$work/out" --allow-oversubscribe
/usr/bin/python3 - "$work/out/points" <<'PY'
import glob, json, sys, h5py
points = {}
for path in glob.glob(sys.argv[1] + "/*.h5"):
    f = h5py.File(path, "r")
    assert f.attrs["status"] == "done", (path, f.attrs["status"])
    cfg = json.loads(f.attrs["config"])
    assert f["texts"].attrs["comm_backend"] == cfg["comm_backend"], path
    backends = [b.decode() for b in f["comm/backend"][:]]
    kinds = [k.decode() for k in f["comm/kind"][:]]
    points[(cfg["strategy"], cfg["comm_backend"])] = (backends, kinds, f["steps/loss"][:],
                                                      f["steps/grad_norm"][:])
assert len(points) == 4, sorted(points)
want_kinds = {"no_shard": {"grad_all_reduce"},
              "hybrid_shard": {"param_all_gather", "grad_reduce_scatter", "grad_all_reduce"}}
for (strategy, backend), (backends, kinds, loss, norm) in sorted(points.items()):
    off = [(b, k) for b, k in zip(backends, kinds) if b != backend]
    assert not off, f"{strategy} on {backend}: {len(off)} of {len(backends)} events elsewhere: {sorted(set(off))}"
    assert want_kinds[strategy] <= set(kinds), (strategy, backend, sorted(set(kinds)))
    print(f"{strategy} on {backend}: all {len(backends)} events on {backend}; kinds {sorted(set(kinds))}")
for strategy in want_kinds:
    _, _, loss_m, norm_m = points[(strategy, "mpi")]
    _, _, loss_g, norm_g = points[(strategy, "gloo")]
    for name, m, g in (("loss", loss_m, loss_g), ("grad_norm", norm_m, norm_g)):
        assert len(m) == len(g) == 3, (strategy, name, m, g)
        for s, (a, b) in enumerate(zip(m, g)):
            assert abs(a - b) <= 1e-6 * abs(a), f"{strategy} step {s} {name}: mpi {a!r} gloo {b!r}"
    print(f"{strategy}: gloo's losses {list(loss_g)} equal mpi's within 1e-6")
PY
