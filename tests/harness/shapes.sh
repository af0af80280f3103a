#!/usr/bin/env bash
# `shardbench shapes` (the model-shape advisor; docs/MODELS.md "Shapes") on gpt2-tiny at B2 x T32,
# fp32, one thread, its measurements an ordinary result: the point is done with one series
# entry per shape (the model first, its neighbours best first, each within the tolerance of its
# parameters, step = GEMMs + the rest), `status` counts it and `report` tables it; the same call
# again finds the point done; a point with a wider tolerance times nothing it already timed
# (every kernel of the first reused); an inference pass times forward-only kernels and reuses
# the forward GEMMs; --folder writes the best shape, which loads and trains;
# plan refuses world 2 and fp16 naming the keys.
# Usage: shapes.sh build/shardbench
source "$(dirname "$0")/preamble.sh"
cd "$d"
args=(gpt2-tiny --batch 2 --seq 32 --dtype fp32 --threads 1)
"$sb" shapes "${args[@]}" --folder best > one.log 2>&1 || { cat one.log; fail "shapes"; }
grep -q "^shapes of gpt2-tiny: .* [1-9][0-9]* kernels timed, 0 reused" one.log || { cat one.log; fail "first call: kernels timed"; }
grep -q "^best: .*predicted step [0-9.]*% \(faster\|slower\)" one.log || { cat one.log; fail "no best shape"; }
res=results/shapes/gpt2-tiny-b2-s32-fp32-t1
/usr/bin/python3 - "$res" <<'PY'
import glob, json, sys, h5py, numpy as np
(f,) = glob.glob(f"{sys.argv[1]}/points/*.h5")
with h5py.File(f) as h:
    assert h.attrs["status"] == "done", h.attrs["failure_reason"]
    assert json.loads(h.attrs["config"])["task"] == "shapes"
    s = {k: h["series"][k][:] for k in h["series"]}
    sc, tx = dict(h["scalars"].attrs), dict(h["texts"].attrs)
n = len(s["shape_step_s"])
assert n >= 2 and all(len(v) == n for k, v in s.items() if k.startswith("shape_")), s
p = s["shape_params"]
assert (abs(p - p[0]) <= 0.02 * p[0]).all(), p
assert (s["shape_d_model"] % s["shape_heads"] == 0).all()
assert np.allclose(s["shape_step_s"], s["shape_gemm_s"] + s["shape_other_s"])
assert (np.diff(s["shape_step_s"][1:]) >= 0).all(), "neighbours not best first"
assert s["shape_gain_pct"][0] == 0 and sc["predicted_step_s"] == s["shape_step_s"][0]
assert sc["best_gain_pct"] == s["shape_gain_pct"][1] and "best_config" in tx, sc
timings = json.loads(tx["kernel_timings"])
assert sc["kernels_timed"] == len(timings) and sc["kernels_reused"] == 0, (sc, len(timings))
assert any(k.startswith("gemm|") for k in timings) and any(k.startswith("adamw|") for k in timings)
print(f"shapes: {n} shapes, {len(timings)} kernels, model step {sc['predicted_step_s']:.5f} s predicted")
PY
"$sb" status "$res" > status.log 2>&1 || { cat status.log; fail "status"; }
grep -q "1 done" status.log || { cat status.log; fail "status does not count the point done"; }
"$sb" report "$res" > report.log 2>&1 || { cat report.log; fail "report"; }
grep -q "^## Model shapes (advisor)" "$res/report/report.md" || fail "no shapes section in the report"
[ "$(wc -l < "$res/report/tables/model_shapes.csv")" -ge 3 ] || fail "model_shapes.csv"
"$sb" shapes "${args[@]}" > again.log 2>&1 || { cat again.log; fail "shapes again"; }
grep -q "0 ran, 1 skipped" again.log || { cat again.log; fail "the same call ran the point again"; }
"$sb" shapes "${args[@]}" --tolerance 0.05 --results wider > wider.log 2>&1 || { cat wider.log; fail "wider"; }
grep -q "^shapes of gpt2-tiny: .* [0-9]* kernels timed, [1-9][0-9]* reused" wider.log || { cat wider.log; fail "wider: nothing reused"; }
/usr/bin/python3 - "$res" wider <<'PY'
import glob, json, sys, h5py
def timings(d):
    (f,) = glob.glob(f"{d}/points/*.h5")
    with h5py.File(f) as h:
        return json.loads(h["texts"].attrs["kernel_timings"]), dict(h["scalars"].attrs)
first, _ = timings(sys.argv[1])
second, sc = timings(sys.argv[2])
shared = set(first) & set(second)
assert shared and all(first[k] == second[k] for k in shared), "a kernel timed again"
assert sc["kernels_reused"] == len(shared), (sc, len(shared))
PY
# The inference pass: forward-only kernels (no loss, optimizer or gradient GEMMs), the forward
# GEMMs reused from the training point.
"$sb" shapes "${args[@]}" --pass infer > infer.log 2>&1 || { cat infer.log; fail "shapes --pass infer"; }
grep -q "^shapes of gpt2-tiny: one inference pass's kernels .* [1-9][0-9]* reused" infer.log || { cat infer.log; fail "infer: nothing reused"; }
/usr/bin/python3 - "$res-infer" <<'PY'
import glob, json, sys, h5py
(f,) = glob.glob(f"{sys.argv[1]}/points/*.h5")
with h5py.File(f) as h:
    t = json.loads(h["texts"].attrs["kernel_timings"])
    assert json.loads(h.attrs["config"])["shapes.pass"] == "infer"
ops = {k.split("|")[0] for k in t}
assert ops == {"gemm", "layernorm", "gelu", "softmax_causal", "add"}, ops
assert all(k.endswith("|fwd") for k in t if k.split("|")[0] in ("layernorm", "gelu", "softmax_causal")), t
PY
printf '[base]\ntask = "train"\nmodel = "%s"\nworld = 1\nthreads = 1\nbatch = 2\nseq = 16\nsteps = 2\nwarmup = 0\n' "$d/best" > best.toml
"$sb" sweep best.toml --results trained > best.log 2>&1 || { cat best.log; fail "the best shape's folder does not train"; }
cat > bad.toml <<'TOML'
[base]
task = "shapes"
model = "gpt2-tiny"
[[zip]]
world = [2, 1]
dtype = ["fp32", "fp16"]
TOML
if "$sb" plan bad.toml > bad.log 2>&1; then cat bad.log; fail "plan accepted world 2 and fp16"; fi
grep -q "world: the shapes task times kernels in one process" bad.log || { cat bad.log; fail "world not named"; }
grep -q "dtype: the shapes task times fp32 or bf16 kernels" bad.log || { cat bad.log; fail "dtype not named"; }
echo "shapes: ok"
