#!/usr/bin/env bash
# The gpt2-moe family end to end: a 2-rank full_shard training of gpt2-moe-tiny with routing
# traces (moe.trace_every), its routing series and /routing table (one row per token per MoE
# layer per traced step and rank), then `shardbench moe-place --ep 2`: a placement file with
# every MoE layer's experts balanced over the 2 ranks, the solver's cross-rank tokens no more
# than greedy's and round robin's; the exported folder serves (infer). The same training with
# expert parallelism (mesh.ep = 2: each rank holds 2 of the 4 experts, tokens travel by
# all-to-all) gives the same losses, routing and exported weights as mesh.ep = 1. Inference
# at mesh.ep = 2 in both of ExFlow's forms, and with the placement, scores what mesh.ep = 1
# does; serving at mesh.ep = 2 in both forms serves every request.
# Usage: moe.sh build/shardbench
source "$(dirname "$0")/preamble.sh"
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
# The report's affinity section: the table, a heatmap per layer pair, the placement comparison.
"$sb" report results/moe > report.log 2>&1 || { cat report.log; fail "report"; }
grep -q "^## Expert affinity (ExFlow)" results/moe/report/report.md || fail "no affinity section"
grep -q "placement-ep2.json" results/moe/report/report.md || fail "no placement table"
ls results/moe/report/plots/affinity_*_1_3.png > /dev/null || fail "no heatmap"
grep -q "^1,3,512," <(cut -d, -f2- results/moe/report/tables/expert_affinity.csv) || { cat results/moe/report/tables/expert_affinity.csv; fail "affinity table"; }
printf '[base]\ntask = "infer"\nmodel = "%s"\nworld = 1\nbatch = 2\nseq = 16\nsteps = 3\n' "$d/exported" > infer.toml
"$sb" sweep infer.toml --results infer > infer.log 2>&1 || { cat infer.log; fail "infer of the exported folder"; }
# Expert-parallel inference of the trained model (docs/FSDP.md "Expert-parallel inference"):
# at mesh.ep = 2 in both forms, coherent with the placement moe-place wrote, and top-2 in the
# dispatch_combine form (against top-2 at mesh.ep = 1), the same
# perplexity and top-1 agreement as mesh.ep = 1 (the forms' logits are bitwise equal:
# tests/mpi/moe_ep_inference.cpp), each form's collectives in the comm table, the per-layer
# series; a placement made for another model is refused at plan naming the key.
cat > epi.toml <<TOML
[suite]
name = "moe-epi"
[base]
task = "infer"
model = "gpt2-moe-tiny"
checkpoint = "$d/exported"
strategy = "full_shard"
world = 2
threads = 1
batch = 4
seq = 32
queries = 4
accuracy_batches = 2
[[zip]]
"mesh.ep" = [1, 2, 2, 2, 1, 2]
"moe.ep_form" = ["dispatch_combine", "dispatch_combine", "coherent", "coherent", "dispatch_combine", "dispatch_combine"]
"moe.expert_placement" = ["", "", "", "$d/results/moe/placement-ep2.json", "", ""]
"moe.top_k" = [1, 1, 1, 1, 2, 2]
TOML
"$sb" sweep epi.toml > epi.log 2>&1 || { cat epi.log; fail "expert-parallel inference"; }
/usr/bin/python3 - results/moe-epi <<'PY'
import glob, json, sys, h5py, numpy as np
pts = {}
for f in glob.glob(f"{sys.argv[1]}/points/*.h5"):
    with h5py.File(f) as h:
        assert h.attrs["status"] == "done", h.attrs["failure_reason"]
        c = json.loads(h.attrs["config"])
        key = (c["mesh.ep"], c["moe.ep_form"], bool(c["moe.expert_placement"]), c["moe.top_k"])
        kinds = sorted(set(k.decode() for k in h["comm"]["kind"][:])) if "comm" in h else []
        series = {k: h["series"][k][:] for k in h["series"]} if "series" in h else {}
        pts[key] = (dict(h["scalars"].attrs), kinds, series, dict(h["texts"].attrs))
one, two, coh, placed = pts[(1, "dispatch_combine", False, 1)], pts[(2, "dispatch_combine", False, 1)], \
    pts[(2, "coherent", False, 1)], pts[(2, "coherent", True, 1)]
one2, two2 = pts[(1, "dispatch_combine", False, 2)], pts[(2, "dispatch_combine", False, 2)]
assert abs(two2[0]["perplexity"] - one2[0]["perplexity"]) < 1e-5 * one2[0]["perplexity"], (two2[0], one2[0])
assert two2[0]["perplexity"] != two[0]["perplexity"], "top-2 scored as top-1: moe.top_k did not reach inference"
for p in (two, coh, placed):
    assert p[0]["perplexity"] == two[0]["perplexity"] and p[0]["top1_agreement"] == two[0]["top1_agreement"], (p[0], two[0])
assert abs(two[0]["perplexity"] - one[0]["perplexity"]) < 1e-5 * one[0]["perplexity"], (two[0], one[0])
assert {"ep_dispatch", "ep_combine"} <= set(two[1]) and "ep_route" not in two[1], two[1]
assert {"ep_route", "ep_context", "ep_home"} <= set(coh[1]) and "ep_dispatch" not in coh[1], coh[1]
for p in (two, coh, placed, two2):
    s = p[2]
    assert list(s["ep_layer"]) == [1, 3], s["ep_layer"]
    assert ((s["ep_layer_cross_rank_fraction"] >= 0) & (s["ep_layer_cross_rank_fraction"] <= 1)).all()
    assert (s["ep_layer_a2a_bytes"] > 0).all() and (s["ep_layer_a2a_s"] > 0).all(), s
assert placed[3]["expert_placement"].endswith("placement-ep2.json") and coh[3]["ep_form"] == "coherent", placed[3]
print("moe-epi: top-2 perplexity {:.4f} (ep 1 {:.4f})".format(two2[0]["perplexity"], one2[0]["perplexity"]))
print("moe-epi: perplexity {:.4f} (ep 1 {:.4f}); second MoE layer cross-rank fraction: dispatch_combine {:.3f}, "
      "coherent {:.3f}, placed {:.3f}".format(two[0]["perplexity"], one[0]["perplexity"],
      two[2]["ep_layer_cross_rank_fraction"][1], coh[2]["ep_layer_cross_rank_fraction"][1],
      placed[2]["ep_layer_cross_rank_fraction"][1]))
PY
"$sb" report results/moe-epi > epir.log 2>&1 || { cat epir.log; fail "report of the ep inference points"; }
grep -q "^## Expert parallelism per MoE layer (ExFlow)" results/moe-epi/report/report.md || fail "no ep inference section"
[ "$(wc -l < results/moe-epi/report/tables/ep_inference_layers.csv)" = 9 ] \
  || { cat results/moe-epi/report/tables/ep_inference_layers.csv; fail "ep inference table: 4 points x 2 layers"; }
sed 's/"model": "gpt2-moe-tiny"/"model": "gpt2-moe-small"/' results/moe/placement-ep2.json > other.json
grep -q '"gpt2-moe-small"' other.json || fail "could not write a placement for another model"
sed "s|$d/results/moe/placement-ep2.json|$d/other.json|" epi.toml > other.toml
if "$sb" plan other.toml > other.log 2>&1; then cat other.log; fail "a placement for another model planned"; fi
grep -q "moe.expert_placement: .*the placement is for model 'gpt2-moe-small'; this point's model is 'gpt2-moe-tiny'" other.log \
  || { cat other.log; fail "the placement's model mismatch is not named"; }
cat > ep.toml <<TOML
[suite]
name = "moe-ep"
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
[[zip]]
"mesh.ep" = [1, 2]
export_folder = ["$d/ep1", "$d/ep2"]
TOML
"$sb" sweep ep.toml > ep.log 2>&1 || { cat ep.log; fail "sweep with mesh.ep = 2"; }
/usr/bin/python3 - results/moe-ep "$d" <<'PY'
import glob, json, sys, h5py, numpy as np
def load_file(path):  # safetensors: an 8-byte header length, a JSON header, the raw tensors
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    head = json.loads(raw[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__": continue
        assert v["dtype"] == "F32", v
        b, e = v["data_offsets"]
        out[k] = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=np.float32).reshape(v["shape"])
    return out
runs = {}
for f in glob.glob(f"{sys.argv[1]}/points/*.h5"):
    with h5py.File(f) as h:
        assert h.attrs["status"] == "done", h.attrs["failure_reason"]
        ep = json.loads(h.attrs["config"])["mesh.ep"]
        kinds = [k.decode() for k in h["comm"]["kind"][:]]
        runs[ep] = (h["steps"]["loss"][:], {k: h["routing"][k][:] for k in ("step", "rank", "layer", "token", "expert", "kept")}, kinds)
        away = h["series"]["moe_cross_rank_fraction"][:] if "moe_cross_rank_fraction" in h["series"] else None
        assert (away is None) == (ep == 1), (ep, away)
        assert away is None or (len(away) == 4 and ((away > 0) & (away < 1)).all()), away
        if ep == 2:  # per MoE layer: the forward's dispatch and combine
            s = h["series"]
            assert list(s["moe_layer"][:]) == [1, 3], s["moe_layer"][:]
            assert (s["moe_layer_a2a_bytes"][:] > 0).all() and (s["moe_layer_a2a_s"][:] > 0).all()
            assert len(s["moe_layer_a2a_backward_s"][:]) == 2 and (s["moe_layer_a2a_backward_s"][:] > 0).all()
            assert ((s["moe_layer_cross_rank_fraction"][:] > 0) & (s["moe_layer_cross_rank_fraction"][:] < 1)).all()
assert sorted(runs) == [1, 2], runs.keys()
l1, l2 = runs[1][0], runs[2][0]
assert np.allclose(l1, l2, rtol=1e-5, atol=0), (l1, l2)
for k in runs[1][1]:
    assert (runs[1][1][k] == runs[2][1][k]).all(), k
# 2 ranks x 2 MoE layers x 4 steps: a dispatch and a combine each forward (evaluation's too),
# the gradients of both in backward; none at ep 1.
k = runs[2][2]
assert k.count("ep_grad") == 2 * 2 * 2 * 4 and k.count("ep_dispatch") == k.count("ep_combine") >= 2 * 2 * 4, k
assert "ep_dispatch" not in runs[1][2]
a, b = load_file(f"{sys.argv[2]}/ep1/model.safetensors"), load_file(f"{sys.argv[2]}/ep2/model.safetensors")
assert sorted(a) == sorted(b)
# AdamW turns 1e-8 rounding differences on ~0 gradients into up to a few 1e-5 (tests/mpi/moe_ep.cpp).
worst = max(float(np.abs(a[k] - b[k]).max()) for k in a)
assert worst < 2e-4, worst
print(f"moe-ep: losses {l2[0]:.6f} -> {l2[-1]:.6f} equal at ep 1 and 2; exported weights within {worst:.1e}")
PY
# Serving at mesh.ep = 2 (docs/FSDP.md "Expert-parallel serving"): KV-cached prefill and decode
# under continuous batching in both forms and with the placement, against mesh.ep = 1 (logits
# equal within 1e-5, the forms bit for bit: tests/mpi/moe_ep_serve.cpp): every request served,
# each form's collectives in the comm table (an ep_context per block and an ep_logits per step
# in both), the per-layer series over the timed steps.
cat > eps.toml <<TOML
[suite]
name = "moe-eps"
[base]
task = "serve"
model = "gpt2-moe-tiny"
checkpoint = "$d/exported"
strategy = "full_shard"
world = 2
threads = 1
batch = 4
arrival = "poisson"
request_rate = 400.0
requests = 12
prompt_len_min = 4
prompt_len_max = 16
output_len_min = 4
output_len_max = 12
serve_policy = "continuous"
[[zip]]
"mesh.ep" = [1, 2, 2, 2]
"moe.ep_form" = ["dispatch_combine", "dispatch_combine", "coherent", "coherent"]
"moe.expert_placement" = ["", "", "", "$d/results/moe/placement-ep2.json"]
TOML
"$sb" sweep eps.toml > eps.log 2>&1 || { cat eps.log; fail "expert-parallel serving"; }
/usr/bin/python3 - results/moe-eps <<'PY'
import glob, json, sys, h5py
pts = {}
for f in glob.glob(f"{sys.argv[1]}/points/*.h5"):
    with h5py.File(f) as h:
        assert h.attrs["status"] == "done", h.attrs["failure_reason"]
        c = json.loads(h.attrs["config"])
        kinds = [k.decode() for k in h["comm"]["kind"][:]] if "comm" in h else []
        series = {k: h["series"][k][:] for k in h["series"] if k.startswith("ep_")} if "series" in h else {}
        pts[(c["mesh.ep"], c["moe.ep_form"], bool(c["moe.expert_placement"]))] = (dict(h["scalars"].attrs), kinds, series)
assert len(pts) == 4, pts.keys()
one = pts[(1, "dispatch_combine", False)]
assert not one[2] and "ep_context" not in one[1], one
for key, (sc, kinds, s) in pts.items():
    assert sc["requests_served"] == 12, (key, sc["requests_served"])
    if key[0] == 1: continue
    steps = sc["ep_steps"]
    assert steps > 0 and list(s["ep_layer"]) == [1, 3], (key, steps, s)
    # per rank and timed step: an ep_context per block (4), one ep_logits; per MoE layer (2) two
    # all-to-alls, or one
    assert kinds.count("ep_context") == 2 * 4 * steps and kinds.count("ep_logits") == 2 * steps, key
    a2a = ("ep_route",) if key[1] == "coherent" else ("ep_dispatch", "ep_combine")
    for k in ("ep_route", "ep_dispatch", "ep_combine"):
        assert kinds.count(k) == (2 * 2 * steps if k in a2a else 0), (key, k, kinds.count(k))
    assert (s["ep_layer_a2a_bytes"] > 0).all() and ((s["ep_layer_cross_rank_fraction"] >= 0) & (s["ep_layer_cross_rank_fraction"] <= 1)).all(), s
print("moe-eps: 12 requests served at ep 1 and in both forms at ep 2; second MoE layer cross-rank fraction: "
      "dispatch_combine {:.3f}, coherent {:.3f}, placed {:.3f}".format(
      *(pts[k][2]["ep_layer_cross_rank_fraction"][1] for k in ((2, "dispatch_combine", False), (2, "coherent", False), (2, "coherent", True)))))
PY
cat place.log
echo "moe: ok"
