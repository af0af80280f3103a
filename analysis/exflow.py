# ExFlow's offline half (Yao et al., "Exploiting Inter-Layer Expert Affinity for Accelerating
# Mixture-of-Experts Model Inference"; the MoE issue; docs/METRICS.md "Expert affinity and
# placement"): from a gpt2-moe run's routing traces (the /routing table, moe.trace_every),
# the inter-layer affinity P(expert j at the next MoE layer | expert i at this one), and a
# placement of each MoE layer's experts on the ep ranks that keeps as many tokens as possible
# on their rank between consecutive MoE layers:
#   maximize   sum_{pairs (a, b)} sum_{i, j} C_ab[i, j] [rank_a(i) = rank_b(j)]
#   subject to every expert on one rank, E / ep experts per rank and layer,
# an integer program (linearized with y_abijr <= x_air, y_abijr <= x_bjr) solved by HiGHS
# through scipy.optimize.milp (SciPy 1.10, Debian's python3-scipy: a maintained MILP solver
# already installed for the analysis, no new dependency), beside two baselines: round robin
# (expert e on rank e mod ep) and a greedy that places each next layer's experts where most
# of their incoming tokens already are.
#
# `shardbench moe-place RESULTS --ep N [--out FILE]` (python3 -m analysis.exflow place ...)
# writes the placement file and prints each placement's cross-rank tokens.
import argparse
import itertools
import json
import os
import sys

import numpy as np
import pandas as pd


def transitions(routing, experts):
    """[(layer_a, layer_b, C)] for consecutive MoE layers: C[i, j] counts the tokens (one per
    step, rank and token index) whose first choice was i at layer_a and j at layer_b."""
    if not len(routing):
        return []
    pv = routing.pivot_table(index=["step", "rank", "token"], columns="layer", values="expert",
                             aggfunc="first")
    layers = sorted(pv.columns)
    out = []
    for a, b in zip(layers, layers[1:]):
        both = pv[[a, b]].dropna().astype(int)
        c = np.zeros((experts, experts))
        np.add.at(c, (both[a].to_numpy(), both[b].to_numpy()), 1)
        out.append((int(a), int(b), c))
    return out


def affinity_table(trans, experts):
    """Per layer pair: the tokens, the top-1 conditional probability (sum_i max_j C[i, j] /
    sum C: the share of tokens that go to their expert's most likely successor) against
    1 / experts (no affinity), and the conditional distributions' mean entropy in bits
    (weighted by each row's tokens; log2(experts) = no affinity)."""
    rows = []
    for a, b, c in trans:
        total = c.sum()
        if total == 0:
            continue
        rs = c.sum(1)
        p = np.divide(c, rs[:, None], out=np.zeros_like(c), where=rs[:, None] > 0)
        ent = -np.where(p > 0, p * np.log2(np.where(p > 0, p, 1)), 0).sum(1)
        rows.append({"layer": a, "next_layer": b, "tokens": int(total),
                     "top1_conditional": float(c.max(1).sum() / total),
                     "uniform": 1.0 / experts,
                     "entropy_bits": float((ent * rs).sum() / total),
                     "max_entropy_bits": float(np.log2(experts))})
    return pd.DataFrame(rows, columns=["layer", "next_layer", "tokens", "top1_conditional",
                                       "uniform", "entropy_bits", "max_entropy_bits"])


def cross_rank(trans, placement):
    """Tokens that change rank between consecutive MoE layers under `placement` ({layer:
    array of each expert's rank})."""
    n = 0.0
    for a, b, c in trans:
        ra, rb = np.asarray(placement[a]), np.asarray(placement[b])
        n += c[ra[:, None] != rb[None, :]].sum()
    return int(n)


def _layers(trans):
    return sorted({a for a, _, _ in trans} | {b for _, b, _ in trans})


def _check(experts, ep):
    if ep < 1 or experts % ep:
        raise ValueError(f"{experts} experts do not split over ep {ep}: use an ep that divides them")


def round_robin(trans, experts, ep):
    _check(experts, ep)
    return {l: np.arange(experts) % ep for l in _layers(trans)}


def greedy(trans, experts, ep):
    """The first layer round robin; each next layer's experts, heaviest incoming flow first,
    on the rank with room that already holds most of their tokens."""
    _check(experts, ep)
    layers = _layers(trans)
    out = {layers[0]: np.arange(experts) % ep}
    by_pair = {(a, b): c for a, b, c in trans}
    for a, b in zip(layers, layers[1:]):
        c = by_pair[(a, b)]
        inflow = np.zeros((experts, ep))  # tokens into expert j from rank r
        for r in range(ep):
            inflow[:, r] = c[out[a] == r].sum(0)
        room = np.full(ep, experts // ep)
        ranks = np.full(experts, -1)
        for j in np.argsort(-inflow.max(1), kind="stable"):
            order = np.argsort(-inflow[j], kind="stable")
            r = next(r for r in order if room[r] > 0)
            ranks[j], room[r] = r, room[r] - 1
        out[b] = ranks
    return out


def ilp(trans, experts, ep, time_limit=60.0):
    """The integer program above, by HiGHS (scipy.optimize.milp). Rank labels are symmetric:
    expert 0 of the first layer is fixed on rank 0."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import lil_matrix
    _check(experts, ep)
    layers = _layers(trans)
    li = {l: k for k, l in enumerate(layers)}
    nx = len(layers) * experts * ep

    def x(l, e, r):
        return (li[l] * experts + e) * ep + r

    ys = []  # (pair index, i, j, r, count)
    for a, b, c in trans:
        for i, j in zip(*np.nonzero(c)):
            for r in range(ep):
                ys.append((a, b, int(i), int(j), r, c[i, j]))
    n = nx + len(ys)
    cost = np.zeros(n)
    A = lil_matrix((2 * len(ys) + len(layers) * experts + len(layers) * ep, n))
    lo, hi = [], []
    row = 0
    for t, (a, b, i, j, r, cnt) in enumerate(ys):
        cost[nx + t] = -cnt
        A[row, nx + t], A[row, x(a, i, r)] = 1, -1  # y <= x_air
        A[row + 1, nx + t], A[row + 1, x(b, j, r)] = 1, -1  # y <= x_bjr
        lo += [-np.inf, -np.inf]
        hi += [0, 0]
        row += 2
    for l in layers:
        for e in range(experts):  # each expert on one rank
            for r in range(ep):
                A[row, x(l, e, r)] = 1
            lo.append(1), hi.append(1)
            row += 1
        for r in range(ep):  # E / ep experts a rank
            for e in range(experts):
                A[row, x(l, e, r)] = 1
            lo.append(experts // ep), hi.append(experts // ep)
            row += 1
    integrality = np.r_[np.ones(nx), np.zeros(len(ys))]
    low, up = np.zeros(n), np.ones(n)
    low[x(layers[0], 0, 0)] = 1  # symmetry
    res = milp(cost, constraints=LinearConstraint(A.tocsr(), lo, hi), integrality=integrality,
               bounds=Bounds(low, up), options={"time_limit": time_limit})
    if res.x is None:
        raise RuntimeError(f"HiGHS found no placement: {res.message}")
    xs = np.round(res.x[:nx]).reshape(len(layers), experts, ep)
    return {l: xs[li[l]].argmax(1) for l in layers}, bool(res.status == 0)


def brute_force(trans, experts, ep):
    """Every balanced placement of every layer (small instances only): the optimum's
    cross-rank tokens, for tests."""
    layers = _layers(trans)
    balanced = [np.array(p) for p in itertools.product(range(ep), repeat=experts)
                if all(p.count(r) == experts // ep for r in range(ep))]
    best = None
    for combo in itertools.product(balanced, repeat=len(layers)):
        n = cross_rank(trans, dict(zip(layers, combo)))
        best = n if best is None else min(best, n)
    return best


def place(results, ep, point=None):
    """The placements of the routing traces of one point (the last done point with routing,
    or `point`): a dict ready for JSON, with each placement's cross-rank tokens."""
    r = results.routing
    if not len(r):
        raise SystemExit(f"{results.root}: no point has routing traces; train a gpt2-moe model "
                         f"with moe.trace_every > 0")
    pid = point or r["point_id"].iloc[-1]
    r = r[r["point_id"] == pid]
    if not len(r):
        raise SystemExit(f"{results.root}: point {pid} has no routing traces")
    cfg = results.config.get(pid, {})
    # The model's experts (a scalar the train task records), not the most chosen one + 1.
    experts = results.scalar(pid, "moe_experts")
    experts = int(experts) if np.isfinite(experts) else int(r["expert"].max()) + 1
    trans = transitions(r, experts)
    if not trans:
        raise SystemExit(f"point {pid}: fewer than two MoE layers traced; nothing to place")
    rr, gr = round_robin(trans, experts, ep), greedy(trans, experts, ep)
    ip, optimal = ilp(trans, experts, ep)
    tokens = int(sum(c.sum() for _, _, c in trans))
    # How affinity evolves over training: the table of each traced step alone.
    by_step = []
    for step, rs in r.groupby("step", sort=True):
        for row in affinity_table(transitions(rs, experts), experts).to_dict("records"):
            by_step.append({"step": int(step), **row})
    return {"point_id": pid, "model": cfg.get("model", ""), "experts": experts, "ep": ep,
            "solver": "HiGHS (scipy.optimize.milp)", "optimal": optimal,
            "placement": {str(l): [int(v) for v in ip[l]] for l in sorted(ip)},
            "transitions": tokens,
            "cross_rank": {"ilp": cross_rank(trans, ip), "greedy": cross_rank(trans, gr),
                           "round_robin": cross_rank(trans, rr)},
            "affinity": affinity_table(trans, experts).to_dict("records"),
            "affinity_by_step": by_step}


# ExFlow at scale, modelled (the MoE issue's "modelled gain at ep 8 to 64"): this machine has
# two cores, so the all-to-alls of 8 to 64 ranks are predicted with the network model of
# analysis/network.py (a preset such as lassen: alpha and bandwidth within and between nodes)
# from what the traces measured, the affinity. Per MoE layer, per rank and forward, with n
# tokens a rank, row bytes r = d x 2 (bf16) + 24 (id, expert, gate), E = P experts (one a rank,
# ExFlow's 8 to 64 experts on as many GPUs):
#   an all-to-all sending S bytes a rank   t(S) = (P - 1) alpha + S / bw   (pairwise exchange)
#   dispatch_combine, contiguous experts   2 t(n (1 - 1/P) r)   (routing spread evenly)
#   coherent, affinity placement           t(n (1 - s) r),  s = a + (1 - a) (E/P - 1) / (E - 1)
# s: the tokens that stay on their rank; a, the measured top-1 conditional share, is taken as
# the share whose likeliest successor the placement puts beside it (optimistic: a placement
# cannot always co-locate every expert's likeliest successor), the rest landing on the rank's
# other experts by chance. Checked against the solver's measured shares where a placement
# file of this folder exists (ep 2, 4 of the traced model's E experts). The coherent form's
# context all-gather, per block between MoE layers (`every` of them), ring over P:
#   (P - 1) alpha + (P - 1) n c / bw,  c = 2 d x 2 bytes (a token's key and value, bf16).
MODEL_EPS = (8, 16, 32, 64)
MODEL_TOKENS = {"prefill": 4096, "decode": 16}  # tokens a rank per forward (assumed)


def stay_share(a, experts, ep):
    """Modelled share of tokens that stay on their rank (above)."""
    if experts <= 1:
        return 1.0
    return a + (1.0 - a) * (experts / ep - 1.0) / (experts - 1.0)


def _network(net):
    """--network's value (a preset name or a TOML file) or a [network] table, as a table."""
    from analysis import network as netmod
    return netmod.load(net) if isinstance(net, str) else netmod.network(net)


def scale_model(a, d, net, every=2, eps=MODEL_EPS, tokens=MODEL_TOKENS):
    """Rows of the modelled all-to-all and context seconds per MoE layer (above)."""
    from analysis import network as netmod
    net = _network(net)
    r, c = 2.0 * d + 24.0, 4.0 * d
    rows = []
    for p in eps:
        alpha, bw = netmod.level(net, p)
        t = lambda nbytes: (p - 1) * alpha + nbytes / bw  # noqa: E731
        s = stay_share(a, p, p)
        for phase, n in tokens.items():
            dc = 2 * t(n * (1 - 1 / p) * r)
            coh = t(n * (1 - s) * r)
            ctx = every * ((p - 1) * alpha + (p - 1) * n * c / bw)
            rows.append({"ep": p, "experts": p, "phase": phase, "tokens_per_rank": n,
                         "cross_rank_dispatch_combine": 1 - 1 / p, "cross_rank_coherent": 1 - s,
                         "a2a_dispatch_combine_ms": 1e3 * dc, "a2a_coherent_ms": 1e3 * coh,
                         "a2a_ratio": coh / dc, "context_ms": 1e3 * ctx,
                         "with_context_ratio": (coh + ctx) / dc})
    return pd.DataFrame(rows)


def model_assumptions(a, d, net, every=2):
    net = _network(net)
    return (f"network {net['name']} ({net.get('source', 'given')}): {net['ranks_per_node']} ranks a node, "
            f"alpha {net['alpha_intra_us']} / {net['alpha_inter_us']} us and {net['bw_intra_GBps']} / "
            f"{net['bw_inter_GBps']} GB/s within / between nodes; measured top-1 conditional a = {a:.3f}; "
            f"d = {d}, bf16 rows; E = ep experts; tokens a rank a forward: "
            + ", ".join(f"{k} {v}" for k, v in MODEL_TOKENS.items()) + f"; every {every}")


def _heatmap(c, a, b, title, path):
    """P(expert j at layer b | expert i at layer a) as an image, rows i, columns j."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rs = c.sum(1)
    p = np.divide(c, rs[:, None], out=np.zeros_like(c), where=rs[:, None] > 0)
    fig, ax = plt.subplots(figsize=(3.2 + 0.25 * len(p), 2.8 + 0.25 * len(p)))
    im = ax.imshow(p, vmin=0, vmax=1, cmap="viridis")
    ax.set_xticks(range(len(p)))
    ax.set_yticks(range(len(p)))
    ax.set_xlabel(f"expert at layer {b}")
    ax.set_ylabel(f"expert at layer {a}")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="P(next | this)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section(res, plots_dir, results_dir, most_points=4):
    """The report's "Expert affinity (ExFlow)" section: for each point with routing traces (at
    most most_points, the last ones), each consecutive MoE layer pair's affinity (top-1
    conditional against 1 / experts, entropy) and its heatmap P(j | i); and every placement
    file moe-place wrote in the folder (cross-rank tokens of the solver, greedy and round
    robin). (blocks, table); no blocks without traces."""
    r = res.routing
    if not len(r):
        return [], pd.DataFrame()
    names = res.points.set_index("point_id")["point_name"] if len(res.points) else pd.Series(dtype=str)
    rows, imgs = [], []
    for pid in list(dict.fromkeys(r["point_id"]))[-most_points:]:
        rp = r[r["point_id"] == pid]
        e = res.scalar(pid, "moe_experts")
        experts = int(e) if np.isfinite(e) else int(rp["expert"].max()) + 1
        trans = transitions(rp, experts)
        for row in affinity_table(trans, experts).to_dict("records"):
            rows.append({"point_name": names.get(pid, pid), **row})
        for a, b, c in trans:
            path = os.path.join(plots_dir, f"affinity_{pid}_{a}_{b}.png")
            _heatmap(c, a, b, f"{names.get(pid, pid)}: layers {a} -> {b}", path)
            imgs.append(("img", path, f"Expert affinity P(j at layer {b} | i at layer {a}), point "
                                      f"{names.get(pid, pid)} ({int(c.sum())} tokens)"))
    table = pd.DataFrame(rows)
    blocks = [("h2", "Expert affinity (ExFlow)"),
              ("p", "From the routing traces (moe.trace_every): per consecutive MoE layer pair, the "
                    "share of tokens that go to their expert's most likely successor (top-1 "
                    "conditional) against 1 / experts (no affinity), and the conditional "
                    "distributions' mean entropy in bits against log2(experts) (docs/METRICS.md "
                    "\"Expert affinity and placement\")."),
              ("table", table)] + imgs
    places = []
    files = _placement_files(results_dir)
    for f, pl in files:
        cr, t = pl["cross_rank"], max(pl["transitions"], 1)
        places.append({"file": f, "ep": pl["ep"], "experts": pl["experts"], "transitions": pl["transitions"],
                       "ilp": cr["ilp"], "greedy": cr["greedy"], "round_robin": cr["round_robin"],
                       "ilp_share": cr["ilp"] / t, "ilp_vs_round_robin": cr["ilp"] / max(cr["round_robin"], 1)})
    if places:
        blocks += [("p", "Placements written by `shardbench moe-place` in this folder: tokens that change "
                         "rank between consecutive MoE layers under the solver's (HiGHS) placement, greedy "
                         "and round robin."), ("table", pd.DataFrame(places))]
    modelled = [pl for _, pl in files if "modelled" in pl]
    if modelled:
        m = modelled[-1]["modelled"]
        blocks += [("p", "ExFlow at scale, modelled (not measured: this machine has two cores): per MoE layer "
                         "and rank, the all-to-all time of dispatch_combine with contiguous experts against the "
                         "coherent form with an affinity placement, and the coherent form's context "
                         "all-gathers (docs/METRICS.md \"ExFlow at scale\"). Assumptions: " + m["assumptions"]
                         + f". At ep {m['stay_check']['ep']} the model's share of tokens staying on their rank is "
                         f"{m['stay_check']['modelled']:.3f}, the solver's measured {m['stay_check']['measured_ilp']:.3f}."),
                   ("table", pd.DataFrame(m["rows"]))]
    return blocks, table


def _placement_files(results_dir):
    """[(file name, its JSON)] of the placement files moe-place wrote in results_dir."""
    out = []
    for f in sorted(os.listdir(results_dir)) if os.path.isdir(results_dir) else []:
        if f.startswith("placement-ep") and f.endswith(".json"):
            with open(os.path.join(results_dir, f)) as fh:
                out.append((f, json.load(fh)))
    return out


def tokens_per_s(res, pid, prefix):
    """infer: its throughput; serve: the output tokens generated a second; train: the median step's."""
    if prefix == "moe_layer":
        return res.steps[res.steps["point_id"] == pid]["tokens_per_s"].median() if "tokens_per_s" in res.steps else np.nan
    serve = res.config.get(pid, {}).get("task") == "serve"
    return res.scalar(pid, "output_tokens_per_s" if serve else "throughput_tokens_per_s")


def inference_section(res):
    """The report's "Expert parallelism per MoE layer" table: per point at mesh.ep > 1 and per MoE
    layer (infer's and serve's ep_layer_* series, docs/METRICS.md "Expert-parallel inference"; train's
    moe_layer_* series, its forward's dispatch and combine, docs/MODELS.md), the form, the
    placement, the tokens sent to another rank's expert, the drops, and the all-to-all bytes
    and seconds per forward, beside the point's tokens/s. (blocks, table)."""
    se = res.series
    if not len(se) or not se["name"].isin(["ep_layer", "moe_layer"]).any():
        return [], pd.DataFrame()
    names = res.points.set_index("point_id")["point_name"] if len(res.points) else pd.Series(dtype=str)
    tx = res.texts.set_index(["point_id", "name"])["value"] if len(res.texts) else pd.Series(dtype=str)
    rows = []
    for pid in dict.fromkeys(se.loc[se["name"].isin(["ep_layer", "moe_layer"]), "point_id"]):
        sp = se[se["point_id"] == pid]
        col = {n: g.sort_values("i")["value"].to_numpy() for n, g in sp.groupby("name")}
        p = "ep_layer" if "ep_layer" in col else "moe_layer"  # infer's, or train's (forward only)
        for i, layer in enumerate(col[p]):
            rows.append({"point_name": names.get(pid, pid), "ep": res.config.get(pid, {}).get("mesh.ep"),
                         "form": tx.get((pid, "ep_form"), "") if p == "ep_layer" else "train (forward)",
                         "placement": os.path.basename(str(tx.get((pid, "expert_placement"), ""))),
                         "layer": int(layer),
                         "cross_rank_fraction": col[p + "_cross_rank_fraction"][i],
                         "dropped_fraction": col["ep_layer_dropped_fraction"][i] if p == "ep_layer" else np.nan,
                         "a2a_bytes_per_forward": col[p + "_a2a_bytes"][i],
                         "a2a_s_per_forward": col[p + "_a2a_s"][i],
                         "tokens_per_s": tokens_per_s(res, pid, p)})
    table = pd.DataFrame(rows)
    return [("h2", "Expert parallelism per MoE layer (ExFlow)"),
            ("p", "Points at mesh.ep > 1, per MoE layer (train: its forward's dispatch and combine; "
                  "infer and serve: their form; serve's \"per forward\" is per step, a prefill or a decode "
                  "step, and its tokens/s the output tokens generated). Inference's dispatch_combine sends every token to its "
                  "expert and back (two all-to-alls), coherent keeps it with its expert (one all-to-all; "
                  "the context all-gathers, ep_context, are in the comm table); a placement from moe-place "
                  "keeps more tokens on their rank (docs/FSDP.md \"Expert-parallel inference\" and "
                  "\"Expert-parallel serving\"). Compare points of one suite run only: infer's tokens/s is per rank."),
            ("table", table)], table


def main(argv=None):
    ap = argparse.ArgumentParser(prog="shardbench moe-place")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("place")
    p.add_argument("results")
    p.add_argument("--ep", type=int, required=True)
    p.add_argument("--out", default="")
    p.add_argument("--point", default=None)
    p.add_argument("--network", default="lassen", help="the modelled scale's network (analysis/network.py: "
                   "a preset, or a TOML file with a [network] table)")
    p.add_argument("--d-model", type=int, default=0,
                   help="the model's width, for the modelled scale's bytes (default: the point's moe_d_model)")
    a = ap.parse_args(argv)
    from analysis.load import load_results
    res = load_results(a.results)
    out = place(res, a.ep, a.point)
    pid = out["point_id"]
    d = a.d_model or res.scalar(pid, "moe_d_model")
    if d and np.isfinite(d):  # ExFlow at scale, modelled (above)
        mean_a = float(np.mean([row["top1_conditional"] for row in out["affinity"]]))
        every = res.scalar(pid, "moe_every")
        every = int(every) if np.isfinite(every) else 2
        net = _network(a.network)
        out["modelled"] = {"assumptions": model_assumptions(mean_a, int(d), net, every),
                           "rows": scale_model(mean_a, int(d), net, every).to_dict("records"),
                           "stay_check": {"ep": a.ep, "measured_ilp": 1 - out["cross_rank"]["ilp"] / max(out["transitions"], 1),
                                          "modelled": stay_share(mean_a, out["experts"], a.ep)}}
    path = a.out or os.path.join(a.results, f"placement-ep{a.ep}.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(out, fh, indent=2)
    os.replace(path + ".tmp", path)
    cr, t = out["cross_rank"], out["transitions"]
    print(f"point {out['point_id']} ({out['model']}): {out['experts']} experts on ep {a.ep}, "
          f"{t} token transitions between consecutive MoE layers")
    for name in ("ilp", "greedy", "round_robin"):
        print(f"  {name:<12} cross-rank tokens {cr[name]:>10}  ({cr[name] / t:.3f} of them)")
    for row in out["affinity"]:
        print(f"  layers {row['layer']}->{row['next_layer']}: top-1 conditional "
              f"{row['top1_conditional']:.3f} (no affinity: {row['uniform']:.3f}), entropy "
              f"{row['entropy_bits']:.2f} of {row['max_entropy_bits']:.2f} bits")
    if len({row["step"] for row in out["affinity_by_step"]}) > 1:
        print("  affinity over training (mean over layer pairs):")
        steps = pd.DataFrame(out["affinity_by_step"]).groupby("step")
        for step, g in steps:
            print(f"    step {step:>6}: top-1 conditional {g['top1_conditional'].mean():.3f}, "
                  f"entropy {g['entropy_bits'].mean():.2f} bits")
    if "modelled" in out:
        m = out["modelled"]
        print(f"  modelled at scale ({m['assumptions']}); the modelled share staying on its rank at ep {a.ep}: "
              f"{m['stay_check']['modelled']:.3f} against the solver's {m['stay_check']['measured_ilp']:.3f} here")
        print(pd.DataFrame(m["rows"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    else:
        print("  (no modelled scale: the point records no moe_d_model; pass --d-model)")
    print(f"placement written to {path}")


if __name__ == "__main__":
    sys.exit(main())
