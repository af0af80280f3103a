# The report's plots (PNG, matplotlib Agg). Each plot function returns (figure, note); a
# figure of None means its data is absent and the note says which. Also the `plot` entry
# point: /usr/bin/python3 -m analysis.plots RESULTS --out DIR.
import argparse
import json
import os
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import matplotlib.transforms as mtransforms  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis import stats  # noqa: E402
from analysis.compare import Groups  # noqa: E402
from analysis.load import load_results  # noqa: E402
from analysis.metrics import summarize, timed_comm, timed_steps  # noqa: E402
from analysis.paper import policy_order_key  # noqa: E402
from analysis import modelcomp, serving  # noqa: E402
from analysis.labels import point_labels  # noqa: E402

MEMORY_PARTS = [("param_bytes", "parameters"), ("grad_bytes", "gradients"),
                ("optim_bytes", "optimizer state"),
                ("compression_bytes", "compression state (error feedback, PowerSGD)"),
                ("gathered_bytes", "gathered parameters (most at once in a step)")]


def byte_unit(max_bytes):
    """(divisor, unit) so that the largest value reads between 1 and 1024."""
    for div, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if max_bytes >= div:
            return div, unit
    return 1, "B"


def _family(config, drop):
    return json.dumps({k: v for k, v in config.items() if k not in drop}, sort_keys=True)


def _task_groups(groups, task):
    return [k for k in groups.members if groups.config(k).get("task") == task]


def _panels(n, width=6.0, height=4.5):
    """Up to three panels a row: a long row of panels would shrink each to nothing."""
    ncols = min(3, n)
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _steps_of(results, pids):
    return timed_steps(results.steps[results.steps["point_id"].isin(pids)])


def plot_throughput_scaling(results, summary, groups):
    """Global tokens/s against world size, one line per family of training points that
    differ only in world size (and batch); and the scaling efficiency of each."""
    fams = {}
    for k in _task_groups(groups, "train"):
        cfg = groups.config(k)
        fams.setdefault(_family(cfg, {"world", "batch", "repetition"}), []).append(k)
    lines = []
    for fam, keys in fams.items():
        pts = sorted((groups.config(k)["world"], groups.median(k, summary, "tokens_per_s"))
                     for k in keys)
        pts = [(w, t) for w, t in pts if np.isfinite(t)]
        if len({w for w, _ in pts}) >= 2:
            lines.append((json.loads(fam), pts))
    if not lines:
        return None, "no training points that differ only in world size"
    labels = point_labels([cfg for cfg, _ in lines], fallback=("model", "strategy"))
    lines = [(lab, pts) for lab, (_, pts) in zip(labels, lines)]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for label, pts in lines:
        w, t = [p[0] for p in pts], [p[1] for p in pts]
        ax.plot(w, t, "o-", label=label)
        ax2.plot(w, stats.scaling_efficiency(w, t), "o-", label=label)
    # From zero: a throughput axis cut above zero makes small differences look large.
    ax.set(xlabel="world size (ranks)", ylabel="global throughput (tokens/s)",
           title="Throughput against world size", ylim=(0, None))
    ax2.axhline(1.0, color="grey", ls="--", lw=1, label="linear scaling")
    ax2.set(xlabel="world size (ranks)", ylabel="scaling efficiency (T(N)/T(N0)) / (N/N0)",
            title="Scaling efficiency", ylim=(0, None))
    for a in (ax, ax2):
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
        a.set_xticks(sorted({p[0] for _, pts in lines for p in pts}))
    return fig, ""


def _group_labels(groups, keys, **kw):
    """Labels of these repetition groups (analysis/labels.py): the keys that vary among them."""
    return point_labels([groups.config(k) for k in keys], [groups.name[k] for k in keys], **kw)


def _column_figure(labels):
    """A figure for one bar per label, labels under the bars unrotated: each bar gets the
    width of its longest label line, the figure the height of its tallest label."""
    chars = max(len(line) for lab in labels for line in lab.split("\n"))
    lines = max(lab.count("\n") + 1 for lab in labels)
    slot = max(0.7, 0.075 * chars + 0.15)  # inches per bar at 8 pt
    return plt.subplots(figsize=(max(6.0, slot * len(labels) + 2.0), 4.5 + 0.14 * lines))


def _legend_right(ax, **kw):
    """A legend beside the axes: inside, it hides the ends of bars."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, **kw)


def _legend_below(ax, **kw):
    """A legend under the axes, clear of its tick labels and x label (a fixed distance in
    inches: as a fraction of the axes it would land on the label of a short panel)."""
    below = mtransforms.ScaledTranslation(0, -0.6, ax.figure.dpi_scale_trans)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0),
              bbox_transform=ax.transAxes + below, **kw)


def plot_memory_stacked(results, summary, groups):
    """Model-state bytes per rank (mean over ranks), stacked by part, one bar per point."""
    bars = []
    for k in _task_groups(groups, "train"):
        r = results.ranks[results.ranks["point_id"] == groups.members[k][0]]
        if len(r):
            # Files from before compression_bytes was recorded count it in optim_bytes.
            parts = [float(r[c].astype(float).mean()) if c in r else 0.0 for c, _ in MEMORY_PARTS]
            bars.append((k, parts))
    if not bars:
        return None, "no per-rank memory records of training points"
    labels = _group_labels(groups, [k for k, _ in bars], fallback=("model", "strategy"))
    div, unit = byte_unit(max(sum(v) for _, v in bars))
    fig, ax = _column_figure(labels)
    x = np.arange(len(bars))
    bottom = np.zeros(len(bars))
    for i, (_, part) in enumerate(MEMORY_PARTS):
        v = np.array([b[1][i] for b in bars]) / div
        ax.bar(x, v, bottom=bottom, label=part)
        bottom += v
    ax.set_xticks(x, labels, fontsize=8)
    # Explicit headroom: a zero-height segment on the tallest bar is a sticky edge that
    # would stop autoscaling margins.
    ax.set_ylim(0, bottom.max() * 1.08)
    ax.set(ylabel=f"model-state memory per rank ({unit})",
           title="Model-state memory per rank (mean over ranks)")
    _legend_right(ax)
    ax.grid(axis="y", alpha=0.3)
    return fig, ""


def plot_loss_curves(results, summary, groups):
    """Training loss per step, one line per compression policy, one panel per family of
    points that differ only in the policy."""
    fams = {}
    for k in _task_groups(groups, "train"):
        cfg = groups.config(k)
        fams.setdefault(_family(cfg, {"compression", "repetition"}), {})[cfg.get("compression")] = k
    fams = {f: p for f, p in fams.items() if len(p) >= 2}
    if not fams:
        return None, "no training points that differ only in the compression policy"
    titles = point_labels([json.loads(f) for f in fams], drop={"compression"},
                          fallback=("model", "strategy", "world"))
    fig, axes = _panels(len(fams))
    for ax, title, by_policy in zip(axes, titles, fams.values()):
        order = sorted(by_policy, key=policy_order_key)
        for i, policy in enumerate(order):
            s = _steps_of(results, groups.members[by_policy[policy]][:1])
            # Coinciding curves (a policy that tracks none) stay visible: dashes, markers on
            # different steps per policy, and each later line thinner, drawn inside the
            # earlier one.
            ax.plot(s["step"], s["loss"], marker="os^vD"[i % 5], ls=["-", "--", ":"][i % 3],
                    markevery=_staggered(len(s), i, len(order)),
                    lw=1.6 + 1.2 * max(0, min(3, len(order) - 1 - i)), label=str(policy))
        ax.set(xlabel="step (optimizer steps)", ylabel="training loss (nats/token)",
               title=textwrap.fill(title.replace("\n", " "), 50))
        ax.legend(title="compression", fontsize=8)
        ax.grid(alpha=0.3)
    return fig, ""


def _staggered(n_points, i, n_lines, max_markers=12):
    """markevery for line i of n_lines: a marker every k points (at most max_markers per
    line), line i starting at offset i * k / n_lines, so no two lines mark the same point."""
    k = max(n_lines, -(-n_points // max_markers))
    return (i * k // n_lines, k)


def plot_wire_bytes(results, summary, groups):
    """Bytes on the wire per timed step, stacked by collective kind, with the logical
    (uncompressed) bytes as a marker."""
    rows = []
    for k in groups.members:
        pid = groups.members[k][0]
        if groups.config(k).get("task") == "micro" or \
                not len(results.steps[results.steps["point_id"] == pid]):
            continue  # a micro-benchmark's "step" is a message size: per step does not apply
        c = timed_comm(results, pid)
        n = c["step"].nunique()
        if n:
            by_kind = c.groupby("kind")["wire_bytes"].apply(lambda v: v.astype(float).sum()) / n
            rows.append((k, by_kind, c["logical_bytes"].astype(float).sum() / n))
    if not rows:
        return None, "no collective events in timed steps"
    labels = _group_labels(groups, [r[0] for r in rows], fallback=("model", "strategy"))
    kinds = sorted({kind for _, b, _ in rows for kind in b.index})
    div, unit = byte_unit(max(max(b.sum(), lg) for _, b, lg in rows))
    fig, ax = _column_figure(labels)
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for kind in kinds:
        v = np.array([b.get(kind, 0.0) for _, b, _ in rows]) / div
        ax.bar(x, v, bottom=bottom, label=kind)
        bottom += v
    logical = np.array([lg for _, _, lg in rows]) / div
    ax.plot(x, logical, "kx", ms=9, label="logical bytes (uncompressed)")
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylim(0, max(bottom.max(), logical.max()) * 1.08)
    ax.set(ylabel=f"bytes on the wire per step, all ranks ({unit})",
           title="Wire bytes per step by collective kind")
    _legend_right(ax)
    ax.grid(axis="y", alpha=0.3)
    return fig, ""


PERCENTILES = [(50, "o"), (90, "s"), (99, "^")]  # (percentile, its marker on the CDFs)


def _series_labels(results, pids):
    """point_id -> legend label: the keys that vary among these points (analysis/labels.py);
    one label, and one colour, per series."""
    names = results.points.set_index("point_id")["point_name"]
    labels = point_labels([results.config[pid] for pid in pids],
                          [names.get(pid, pid) for pid in pids],
                          fallback=("model", "quantization"))
    return dict(zip(pids, labels))


def plot_latency_cdf(results, summary, groups):
    """Empirical CDF of query latency on a log axis (latencies span decades across
    scenarios), one panel per scenario, one line per point (labelled by model and
    quantization) in the same colour in every panel, p50/p90/p99 marked on each line."""
    done = set(results.done()["point_id"])
    q = results.queries[results.queries["point_id"].isin(done)]
    if not len(q):
        return None, "no inference queries"
    pids = list(dict.fromkeys(q["point_id"]))
    labels = _series_labels(results, pids)
    colour = {pid: f"C{i % 10}" for i, pid in enumerate(pids)}
    scenarios = sorted(q["scenario"].unique())
    fig, axes = _panels(len(scenarios), width=5.5)
    for ax, scen in zip(axes, scenarios):
        for pid, g in q[q["scenario"] == scen].groupby("point_id", sort=False):
            lat = np.sort(g["latency_s"].astype(float).to_numpy()) * 1e3
            lat = lat[lat > 0]  # a log axis has no place for 0
            if not len(lat):
                continue
            ax.step(lat, np.arange(1, len(lat) + 1) / len(lat), where="post",
                    color=colour[pid], label=labels[pid])
            for pct, marker in PERCENTILES:
                # numpy's linear interpolation, as query_summary's p50/p90/p99.
                ax.plot(np.percentile(lat, pct), pct / 100, marker, color=colour[pid], ms=7,
                        mec="black", mew=0.6, ls="none")
        for pct, marker in PERCENTILES:  # one legend entry per percentile marker
            ax.plot([], [], marker, color="white", mec="black", ls="none", label=f"p{pct}")
        ax.set(xscale="log", xlabel="query latency (ms, log scale)",
               ylabel="fraction of queries (CDF)", title=scen, ylim=(0, 1.02))
        ax.legend(title="point", fontsize=8)
        ax.grid(alpha=0.3, which="both")
    return fig, ""


def plot_step_breakdown(results, summary, groups):
    """Median time per timed step split into the phases the workload timed: forward +
    backward wall time (computing or waiting: on an oversubscribed or busy machine much of it
    is waiting for a core, so it is not called "compute"), exposed communication, optimizer,
    and the unattributed rest. Points whose conditions are flagged say so in their label."""
    from analysis import conditions as cond_mod  # here: plots is imported by conditions' users
    conds = cond_mod.conditions(results).set_index("point_id")
    rows = []
    for k in _task_groups(groups, "train"):
        s = _steps_of(results, groups.members[k])
        if not len(s):
            continue
        med = {c: float(np.median(s[c].astype(float))) for c in
               ("wall_s", "forward_s", "backward_s", "optimizer_s", "comm_exposed_s")}
        compute = med["forward_s"] + med["backward_s"]
        other = max(0.0, med["wall_s"] - compute - med["optimizer_s"] - med["comm_exposed_s"])
        flags = [conds.loc[m, "flags"] for m in groups.members[k] if m in conds.index]
        # The flag's kind only ("noisy", "other work"): the report's conditions table has the rest.
        flag = "\n[flagged: " + flags[0].split(":")[0] + "]" if flags and flags[0] else ""
        rows.append((k, flag, [compute, med["comm_exposed_s"], med["optimizer_s"], other]))
    if not rows:
        return None, "no timed training steps"
    labels = [lab + flag for lab, (_, flag, _) in zip(
        _group_labels(groups, [r[0] for r in rows], fallback=("model", "strategy")), rows)]
    parts = ["forward + backward (wall time)", "exposed communication", "optimizer",
             "rest of the step (not attributed)"]
    lines = sum(lab.count("\n") + 1 for lab in labels)
    fig, ax = plt.subplots(figsize=(9, max(3.5, 0.2 * lines + 0.25 * len(rows) + 2)))
    y = np.arange(len(rows))
    left = np.zeros(len(rows))
    for i, part in enumerate(parts):
        v = np.array([r[2][i] for r in rows]) * 1e3
        ax.barh(y, v, left=left, label=part)
        left += v
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, left.max() * 1.05)
    ax.set(xlabel="median time per step (ms)", title="Step-time breakdown (slowest rank)")
    _legend_below(ax, fontsize=8, ncol=2)  # inside, it would hide the ends of the bars
    ax.grid(axis="x", alpha=0.3)
    return fig, ""


# The 192-worker prediction. 192 workers: the scale of the hybrid-compression paper's runs
# (192 V100s on Lassen). The comm-characterization paper ("Demystifying the Communication
# Characteristics for Distributed Transformer Models") models each collective's volume per rank
# (ring: all-reduce 2(p-1)/p m, about 2m; all-gather m); with the alpha-beta fit that volume
# becomes a time. The message m is one step's data-parallel gradient all-reduce of GPT-2
# (124,439,808 fp32 parameters).
PREDICT_WORKERS = 192
PREDICT_BYTES = 4 * 124_439_808
# Operations with a ring model: a (p-1) latency steps and a (p-1)/p m bytes sent per rank,
# a = 2 for all-reduce (reduce-scatter then all-gather), else 1. The prediction scales the
# fit's latency at the measured world size w by (p-1)/(w-1) (a cancels), and its bandwidth
# term by the wire bytes at p: m x the bus factor at p x the measured wire/logical ratio
# (logical bytes are already per rank on the ring, docs/METRICS.md "Compression").
RING_OPS = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
PREDICT_COLUMN = f"pred_{PREDICT_WORKERS}_workers_ms"
PREDICT_ASSUMPTIONS = (
    f"Prediction at p = {PREDICT_WORKERS} workers (the hybrid-compression paper's scale) for one "
    f"collective of m = {PREDICT_BYTES / 1e6:.1f} MB (the fp32 gradient of GPT-2 124M), with "
    "the comm-characterization paper's ring volumes: all-reduce 2(p-1) steps sending "
    "2(p-1)/p m per rank; all-gather, reduce-scatter, all-to-all p-1 steps sending (p-1)/p m. "
    "Assumes alpha per step and beta as fitted at the measured world size on this machine "
    "(one flat network, no node hierarchy, no contention at 192), time linear in bytes beyond "
    "the largest measured message, compressed series keeping their measured wire/logical "
    "ratio (alpha and beta are never negative: the fit keeps both >= 0); broadcast is not "
    "predicted (no ring model).")


def ring_factor(op, p):
    """The ring's bytes sent per rank per byte of the buffer (nccl-tests' bus factor)."""
    return (2.0 if op == "all_reduce" else 1.0) * (p - 1) / p


def predict_time(op, alpha, beta, world, wire_per_logical, nbytes=PREDICT_BYTES,
                 p=PREDICT_WORKERS):
    """One `op` of an nbytes fp32 buffer on p workers, from a fit at `world` ranks:
    t(p) = alpha (p-1)/(world-1) + beta wire(p), with wire(p) = nbytes * ring_factor(op, p) *
    wire_per_logical (logical bytes are the uncompressed ring's per rank, so the measured
    ratio is the compression alone). Returns (latency term, bandwidth term) in seconds; NaNs
    without a ring model or a fit."""
    if op not in RING_OPS or world < 2 or not np.isfinite(alpha) or not np.isfinite(beta):
        return np.nan, np.nan
    latency = alpha * (p - 1) / (world - 1)  # alpha >= 0: stats.fit_alpha_beta
    wire = nbytes * ring_factor(op, p) * wire_per_logical
    return latency, beta * wire


FIT_COLUMNS = ["series", "op", "label", "world_size", "events", "sizes", "alpha_us",
               "beta_s_per_byte", "bandwidth_GB_per_s", "r2", "wire_per_logical", PREDICT_COLUMN,
               "pred_latency_ms", "pred_bandwidth_ms"]
SIZE_COLUMNS = ["series", "op", "wire_bytes", "median_s", "min_s", "max_s", "q1_s", "q3_s",
                "events"]


def _micro_events(results):
    """Timed collective events of the done micro-benchmark points, with world_size and
    series (the point name, with the operation when the name lacks it)."""
    done = results.done()
    micro = done[done.get("task", pd.Series(dtype=object)) == "micro"]["point_id"]
    parts = [timed_comm(results, pid) for pid in micro]
    c = pd.concat(parts, ignore_index=True) if parts else results.comm.iloc[0:0].copy()
    pts = done.set_index("point_id")
    c["world_size"] = c["point_id"].map(pts["world_size"])
    name, op = c["point_id"].map(pts["point_name"]).astype(str), c["op"].astype(str)
    # A micro suite names its points by operation already ("all_gather/mpi").
    c["series"] = [n if o in n else f"{n}: {o}" for n, o in zip(name, op)]
    return c


def _series_of_op(results, c):
    """(point_id, op) -> label: per operation, the keys that vary among its points."""
    names = results.points.set_index("point_id")["point_name"]
    out = {}
    for op, g in c.groupby("op", sort=False):
        pids = list(dict.fromkeys(g["point_id"]))
        labs = point_labels([results.config.get(p, {}) for p in pids],
                            [names.get(p, p) for p in pids], drop={"micro.op"},
                            fallback=("micro.impl",))
        out.update({(p, op): lab for p, lab in zip(pids, labs)})
    return out


def alpha_beta_fits(results):
    """Fits t = alpha + beta * wire_bytes, one fit per micro-benchmark point and operation
    (a micro suite varies the implementation by point), to the per-size medians weighted by
    relative error with alpha, beta >= 0 (stats.fit_alpha_beta), with the 192-worker
    prediction. Only `task = micro` points count: a training collective overlaps compute and
    waits on other ranks, so its duration is not the message time the model describes (R^2
    of 0.01 to 0.14 on training runs). Returns (per-size spread, fits table)."""
    c = _micro_events(results)
    labels = _series_of_op(results, c)
    rows, spread = [], []
    for (series, pid, op), g in c.groupby(["series", "point_id", "op"], sort=False):
        wire, logical = g["wire_bytes"].astype(float), g["logical_bytes"].astype(float)
        dur = g["duration_s"].astype(float)
        sizes, med, lo, hi, q1, q3, n = stats.size_spread(wire, dur)
        spread += [dict(zip(SIZE_COLUMNS, (series, op) + v))
                   for v in zip(sizes, med, lo, hi, q1, q3, n.astype(int))]
        a, b, r2 = stats.fit_alpha_beta(wire, dur)
        world = int(g["world_size"].iloc[0])
        ratio = float(np.median(wire[logical > 0] / logical[logical > 0])) \
            if (logical > 0).any() else np.nan
        lat, bw = predict_time(op, a, b, world, ratio)
        rows.append({"series": series, "op": op, "label": labels[(pid, op)],
                     "world_size": world, "events": len(g), "sizes": len(sizes),
                     "alpha_us": a * 1e6, "beta_s_per_byte": b,
                     "bandwidth_GB_per_s": 1 / b / 1e9 if b > 0 else np.nan, "r2": r2,
                     "wire_per_logical": ratio,
                     PREDICT_COLUMN: (lat + bw) * 1e3, "pred_latency_ms": lat * 1e3,
                     "pred_bandwidth_ms": bw * 1e3})
    return pd.DataFrame(spread, columns=SIZE_COLUMNS), pd.DataFrame(rows, columns=FIT_COLUMNS)


def _colour(i, n):
    # Past ten series the default cycle repeats; tab20 keeps twenty apart.
    return plt.get_cmap("tab20")(i % 20) if n > 10 else f"C{i}"


def _draw_fits(ax, op, spread, fits):
    """One operation: per series the median time per size (dots), its min-max over the calls
    (bars) and the fitted line, alpha, 1/beta and R^2 in the legend."""
    for i, f in enumerate(fits.itertuples()):
        g = spread[(spread["series"] == f.series) & (spread["wire_bytes"] > 0)]
        x, med = g["wire_bytes"].to_numpy(), g["median_s"].to_numpy() * 1e6
        colour = _colour(i, len(fits))
        ax.errorbar(x, med, yerr=[med - g["min_s"].to_numpy() * 1e6,
                                  g["max_s"].to_numpy() * 1e6 - med],
                    fmt="o", ms=4, color=colour, ecolor=colour, elinewidth=1, capsize=2,
                    alpha=0.8)
        xs = np.geomspace(max(x.min(), 1.0), x.max(), 100)
        ax.plot(xs, (f.alpha_us * 1e-6 + f.beta_s_per_byte * xs) * 1e6, "-", color=colour,
                label=f"{f.label}\nalpha {f.alpha_us:.3g} us, 1/beta "
                      f"{f.bandwidth_GB_per_s:.3g} GB/s, R\u00b2 {f.r2:.3f}")
    ax.set(xscale="log", yscale="log", xlabel="message size on the wire (bytes)",
           ylabel="collective time (us)", title=op)
    _legend_below(ax, fontsize=7)  # inside, a legend of several series covers the dots
    ax.grid(alpha=0.3, which="both")


def _draw_prediction(ax, fits):
    """Predicted time at PREDICT_WORKERS per series, split into latency and bandwidth."""
    f = fits[np.isfinite(fits[PREDICT_COLUMN])]
    y = np.arange(len(f))
    ax.barh(y, f["pred_latency_ms"], label="latency term alpha (p-1)/(w-1)")
    ax.barh(y, f["pred_bandwidth_ms"], left=f["pred_latency_ms"],
            label="bandwidth term beta x wire bytes")
    for yi, t in zip(y, f[PREDICT_COLUMN]):
        ax.annotate(f"{t:.4g} ms", (t, yi), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=7)
    ax.set_yticks(y, [f"{op}: {lab}" for op, lab in zip(f["op"], f["label"])], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, (f[PREDICT_COLUMN].max() if len(f) else 1) * 1.25)
    ax.set(xlabel=f"predicted time at {PREDICT_WORKERS} workers (ms)",
           title=f"{PREDICT_WORKERS}-worker prediction, m = {PREDICT_BYTES / 1e6:.1f} MB")
    _legend_right(ax)
    ax.grid(axis="x", alpha=0.3)


def plot_alpha_beta(results, summary, groups):
    """Collective micro-benchmarks: one panel per operation with the measured median and
    spread per message size and the fitted alpha-beta line and its R^2; under them the
    192-worker prediction, its assumptions written under the figure."""
    spread, fits = alpha_beta_fits(results)
    if not len(fits):
        return None, ("no collective micro-benchmark points (task = micro): the alpha-beta "
                      "model is fitted only on those")
    fits = fits[np.isfinite(fits["alpha_us"].astype(float))]
    if not len(fits):
        return None, "no micro-benchmark collective with at least two message sizes"
    ops = list(dict.fromkeys(fits["op"]))
    ncols = min(3, len(ops))
    nrows = -(-len(ops) // ncols)
    entries = max((fits["op"] == op).sum() for op in ops)  # legend entries under a panel
    panel_h = 3.6 + 0.3 * entries
    label_lines = sum(lab.count("\n") + 1 for lab in fits["label"])
    pred_h = max(2.2, 0.22 * label_lines + 0.12 * len(fits) + 1.0)
    width = max(11.0, 5.2 * ncols)
    notes = textwrap.wrap(PREDICT_ASSUMPTIONS, int(width * 17))  # 7 pt: ~17 characters/inch
    notes_h = 0.12 * len(notes) + 0.15
    fig = plt.figure(figsize=(width, panel_h * nrows + pred_h + notes_h))
    grid = fig.add_gridspec(nrows + 1, ncols, height_ratios=[panel_h] * nrows + [pred_h])
    for i, op in enumerate(ops):
        _draw_fits(fig.add_subplot(grid[i // ncols, i % ncols]), op, spread,
                   fits[fits["op"] == op])
    _draw_prediction(fig.add_subplot(grid[nrows, :]), fits)
    fig.suptitle("Collective time against message size: median per size (dots), min-max over "
                 "calls (bars), fitted t = alpha + beta x bytes (lines)", fontsize=11)
    fig.text(0.01, 0.005, "\n".join(notes), fontsize=7, va="bottom", ha="left")
    # Laid out when drawn, leaving the bottom strip to the assumptions and the top one to the
    # title (tight_layout places neither: matplotlib 3.6).
    height = fig.get_figheight()
    fig.set_layout_engine("tight", rect=(0, notes_h / height, 1, 1 - 0.35 / height))
    return fig, ""


# (file stem, caption, function), in report order.
PLOTS = [
    ("throughput_scaling", "Throughput against world size per strategy, with scaling efficiency",
     plot_throughput_scaling),
    ("memory_per_rank", "Model-state memory per rank, stacked by part", plot_memory_stacked),
    ("loss_curves", "Training loss per compression policy", plot_loss_curves),
    ("wire_bytes", "Wire bytes per step by collective kind", plot_wire_bytes),
    ("latency_cdf", "Inference latency CDFs by quantization and scenario", plot_latency_cdf),
    ("step_breakdown", "Step-time breakdown", plot_step_breakdown),
    ("alpha_beta", "Collective micro-benchmarks, one panel per operation: median time per "
     "message size with its min-max over the calls, the alpha-beta model fitted to the medians "
     "(relative error, alpha and beta >= 0) and its R\u00b2, and the 192-worker prediction. "
     + PREDICT_ASSUMPTIONS,
     plot_alpha_beta),
] + serving.PLOTS + modelcomp.PLOTS


SAVE_DPI = 110


def lay_out(fig):
    """Lays a figure out as make_plots saves it: at SAVE_DPI (text takes its room in inches
    at the resolution it is drawn), tight unless the plot chose its own layout."""
    fig.set_dpi(SAVE_DPI)
    if fig.get_layout_engine() is None:
        fig.tight_layout()


def make_plots(results, summary, groups, out_dir):
    """Writes every plot whose data is present to out_dir/<stem>.png. Returns a list of
    dicts: stem, caption, path (None when skipped), note. One failing plot does not stop
    the others; its error becomes its note."""
    os.makedirs(out_dir, exist_ok=True)
    made = []
    for stem, caption, fn in PLOTS:
        path, note = None, ""
        try:
            fig, note = fn(results, summary, groups)
            if fig is not None:
                lay_out(fig)
                path = os.path.join(out_dir, stem + ".png")
                fig.savefig(path, dpi=SAVE_DPI)
                plt.close(fig)
        except Exception as e:  # noqa: BLE001 -- a broken plot is reported, not fatal
            plt.close("all")
            note = f"plot failed: {type(e).__name__}: {e}"
        made.append({"stem": stem, "caption": caption, "path": path, "note": note})
    return made


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m analysis.plots",
                                 description="Write the report's plots (PNG) only.")
    ap.add_argument("results", help="results folder (holds points/)")
    ap.add_argument("--out", help="output folder (default RESULTS/report/plots)")
    a = ap.parse_args(argv)
    res = load_results(a.results)
    out = a.out or os.path.join(a.results, "report", "plots")
    for p in make_plots(res, summarize(res), Groups(res), out):
        print(f"{p['stem']}: {p['path'] or 'skipped: ' + p['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
