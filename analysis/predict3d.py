# The hybrid-compression paper's scale predicted with the network model (the Parallel3d
# issue): GPT-NeoX-20B on 192 V100s of Lassen under 3D parallelism, per step and per GPU, the
# time each mesh dimension's traffic takes on the network (analysis/network.py: alpha and
# bandwidth per level) with no compression, with uniform3d (int8 on every dimension) and with
# hybrid3d (int8 on data-parallel gradients, bf16 on tp / pp traffic), beside the compute
# time, and what that predicts for TFLOPS per GPU against the paper's +22.5% / +17.3%.
# Every number that is not a formula is an assumption, listed in ASSUMPTIONS and printed with
# the table. Formulas in docs/METRICS.md ("3D prediction").
#   python3 -m analysis.predict3d [--network lassen|FILE.toml] [--tp 4 --pp 4 --dp 12]
import argparse
import sys

import pandas as pd

from analysis import network as network_mod

# GPT-NeoX-20B (Black et al. 2022): 44 layers, hidden 6144, vocabulary 50,432, sequence
# 2048, 20.6e9 parameters, global batch about 1536 sequences, fp16 with activation
# checkpointing. The mesh of the paper's runs is not published in its abstract: tp 4 (one
# Lassen node of 4 V100s), pp 4 (11 layers a stage), dp 12 is assumed (192 = 4 x 4 x 12).
PAPER = dict(model="GPT-NeoX-20B", layers=44, hidden=6144, seq=2048, params=20.6e9,
             tp=4, pp=4, dp=12, micro_batch=4, microbatches=32, elem_bytes=2,
             peak_tflops=125.0, compute_efficiency=0.375, recompute=True,
             codec_GB_per_s=210.0)
ASSUMPTIONS = {
    "mesh": "tp 4 (one node), pp 4, dp 12: not given by the paper; tp inside a node as Megatron places it",
    "batch": "micro-batch 4 x 32 micro-batches x dp 12 = 1536 sequences of 2048 (GPT-NeoX-20B's ~1538)",
    "elem_bytes": "fp16 activations and gradients on the wire (2 bytes): the logical bytes",
    "compute": "8 x params x tokens FLOPs per step (forward, backward, recomputed forward: activation "
               "checkpointing) at 0.375 of the V100's 125 TFLOPS fp16 peak (GPT-NeoX-20B's ~37.5% of "
               "A100 peak), plus the pipeline bubble (p - 1) / (m + p - 1); no overlap of "
               "communication with compute (an upper bound on communication's share)",
    "tp": "4 ring all-reduces of b x T x d per layer per micro-batch (Megatron: 2 forward, 2 backward) "
          "within a node; the recomputed forward's 2 more are not counted",
    "pp": "each stage sends b x T x d forward and its gradient backward per micro-batch, point to "
          "point between nodes; the node's 4 tp ranks each send the whole tensor (no scatter-gather "
          "optimization), sharing the node's inter-node bandwidth",
    "dp": "one ring all-reduce (ZeRO-1: reduce-scatter + all-gather, the same bytes) of the stage's "
          "fp16 gradients, params / (tp x pp), between nodes; the node's 4 ranks run theirs at once "
          "and share its inter-node bandwidth",
    "codec": "210 GB/s per logical byte for quantize + dequantize on a V100 (memory-bound: "
             "~630 GB/s of its 900 GB/s HBM, 3 bytes moved per 2 logical bytes each way); this "
             "machine's CPU codec speed says nothing about a V100's",
    "int8": "wire / logical = (1 + 4 / 256) / 2 = 0.508 against fp16 (int8 codes and an fp32 scale "
            "per 256-element block)",
    "bf16": "wire / logical = 1 against fp16: bf16 on fp16 traffic saves no bytes (on fp32 traffic, "
            "as in the CPU runs here, it halves them)",
}
INT8 = (1 + 4 / 256) / 2
# Per scheme, wire / logical of (tp, pp, dp) traffic, and its codec cost applies where < 1.
SCHEMES = {"none": (1.0, 1.0, 1.0), "uniform3d": (INT8, INT8, INT8), "hybrid3d": (1.0, 1.0, INT8)}
PAPER_GAINS = {"none": "", "uniform3d": "+22.5% TFLOPS, +23.6% samples/s",
               "hybrid3d": "+17.3% TFLOPS, +12.7% samples/s"}
COLUMNS = ["scheme", "tp_s", "pp_s", "dp_s", "comm_s", "compute_s", "step_s", "tflops_per_gpu",
           "gain", "paper"]


def _share(net, bw_key):
    """A rank's share of a level's bandwidth when every rank of its node uses the level."""
    ranks = net["ranks_per_node"] if bw_key == "bw_inter_GBps" else 1
    return net[bw_key] * 1e9 / ranks


def volumes(s):
    """Logical bytes per GPU per step of each dimension, and how many transfers carry them."""
    act = s["micro_batch"] * s["seq"] * s["hidden"] * s["elem_bytes"]  # one b x T x d tensor
    layers = s["layers"] / s["pp"]
    return dict(tp_msgs=4 * layers * s["microbatches"], tp_bytes=act,
                pp_msgs=2 * s["microbatches"], pp_bytes=act,
                dp_bytes=s["params"] / (s["tp"] * s["pp"]) * s["elem_bytes"])


def predict(shape=None, net="lassen"):
    """One row per scheme: seconds per step per GPU of tp, pp and dp traffic on `net`, the
    compute, the step, TFLOPS per GPU and the gain over no compression."""
    s = dict(PAPER, **(shape or {}))
    net = network_mod.network(net) if not isinstance(net, dict) else net
    v = volumes(s)
    c = 1.0 / (s["codec_GB_per_s"] * 1e9)
    tokens = s["dp"] * s["micro_batch"] * s["microbatches"] * s["seq"]
    gpus = s["tp"] * s["pp"] * s["dp"]
    flops = (8 if s["recompute"] else 6) * s["params"] * tokens / gpus
    bubble = (s["pp"] - 1) / (s["microbatches"] + s["pp"] - 1)
    compute = flops / (s["peak_tflops"] * 1e12 * s["compute_efficiency"]) / (1 - bubble)
    rows = []
    for scheme, (r_tp, r_pp, r_dp) in SCHEMES.items():
        cost = lambda r: c if r < 1 else 0.0  # noqa: E731 (a codec only where it compresses)
        tp = v["tp_msgs"] * network_mod.predict("all_reduce", v["tp_bytes"], s["tp"], net, r_tp,
                                                cost(r_tp)) if s["tp"] > 1 else 0.0
        pp = v["pp_msgs"] * (net["alpha_inter_us"] * 1e-6 +
                             v["pp_bytes"] * (r_pp / _share(net, "bw_inter_GBps") + cost(r_pp)))
        pp = pp if s["pp"] > 1 else 0.0
        # The dp ring crosses nodes (one rank a node: tp fills it) and shares the node's link
        # with the node's other dp rings.
        dp_net = dict(net, ranks_per_node=1, bw_inter_GBps=_share(net, "bw_inter_GBps") / 1e9)
        dp = network_mod.predict("all_reduce", v["dp_bytes"], s["dp"], dp_net, r_dp,
                                 cost(r_dp)) if s["dp"] > 1 else 0.0
        comm = tp + pp + dp
        step = compute + comm
        rows.append(dict(scheme=scheme, tp_s=tp, pp_s=pp, dp_s=dp, comm_s=comm,
                         compute_s=compute, step_s=step, tflops_per_gpu=flops / step / 1e12,
                         paper=PAPER_GAINS[scheme]))
    t = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "gain"])
    base = t.loc[t["scheme"] == "none", "tflops_per_gpu"].iloc[0]
    t.insert(8, "gain", [f"{x / base - 1:+.1%}" for x in t["tflops_per_gpu"]])
    return t, s


def text(shape=None, net="lassen"):
    """The table with its conditions and assumptions, as printed."""
    t, s = predict(shape, net)
    n = network_mod.network(net) if not isinstance(net, dict) else net
    lines = [f"{s['model']} on {s['tp'] * s['pp'] * s['dp']} GPUs (tp {s['tp']} x pp {s['pp']} x "
             f"dp {s['dp']}) of {n['name']} ({n.get('source', 'given')}): seconds per step per GPU",
             t.to_string(index=False, float_format=lambda x: f"{x:.3f}"), "assumptions:"]
    lines += [f"  {k}: {v}" for k, v in ASSUMPTIONS.items()]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--network", default="lassen", help="a preset or a TOML file with [network]")
    for k in ("tp", "pp", "dp", "micro_batch", "microbatches"):
        ap.add_argument("--" + k.replace("_", "-"), type=int, dest=k)
    a = ap.parse_args(argv)
    shape = {k: getattr(a, k) for k in ("tp", "pp", "dp", "micro_batch", "microbatches")
             if getattr(a, k) is not None}
    print(text(shape, network_mod.load(a.network)))


if __name__ == "__main__":
    sys.exit(main())


def section(res, net):
    """The report's block: shown when the results hold a 3D-compression point (a uniform3d or
    hybrid3d run), for the network the report was asked for. (blocks, table)."""
    cfgs = getattr(res, "config", {}) or {}
    if not any(str(c.get("compression", "")) in ("uniform3d", "hybrid3d") for c in cfgs.values()):
        return [], pd.DataFrame(columns=COLUMNS)
    t, s = predict(None, net)
    n = network_mod.network(net) if not isinstance(net, dict) else net
    return [("h2", f"The paper's scale predicted: {s['model']} on 192 GPUs of {n['name']}"),
            ("p", f"Seconds per step per GPU of each dimension's traffic on {n['name']} "
                  f"({n.get('source', 'given')}) under tp {s['tp']} x pp {s['pp']} x dp {s['dp']}, "
                  "beside the compute, for the three schemes of this suite; the paper's measured "
                  "gains beside the predicted ones. Assumptions: " +
                  "; ".join(f"{k}: {v}" for k, v in ASSUMPTIONS.items()) +
                  ". docs/METRICS.md \"3D prediction\"; `python3 -m analysis.predict3d --help` "
                  "for other meshes."),
            ("table", t)], t
