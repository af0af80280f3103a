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
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis import stats  # noqa: E402
from analysis.compare import Groups  # noqa: E402
from analysis.load import load_results  # noqa: E402
from analysis.metrics import summarize, timed_comm, timed_steps  # noqa: E402
from analysis.paper import policy_order_key  # noqa: E402
from analysis import modelcomp, serving  # noqa: E402

MAX_SCATTER = 3000  # measured events drawn per collective in the alpha-beta plot
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


def _label(cfg, keys):
    return " ".join(str(cfg.get(k)) for k in keys if k in cfg)


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
            lines.append((_label(json.loads(fam), ["model", "strategy", "compression"]), pts))
    if not lines:
        return None, "no training points that differ only in world size"
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


def plot_memory_stacked(results, summary, groups):
    """Model-state bytes per rank (mean over ranks), stacked by part, one bar per point."""
    bars = []
    for k in _task_groups(groups, "train"):
        r = results.ranks[results.ranks["point_id"] == groups.members[k][0]]
        if len(r):
            # Files from before compression_bytes was recorded count it in optim_bytes.
            parts = [float(r[c].astype(float).mean()) if c in r else 0.0 for c, _ in MEMORY_PARTS]
            bars.append((groups.name[k], parts))
    if not bars:
        return None, "no per-rank memory records of training points"
    div, unit = byte_unit(max(sum(v) for _, v in bars))
    fig, ax = plt.subplots(figsize=(max(7, 0.6 * len(bars) + 3), 5))
    x = np.arange(len(bars))
    bottom = np.zeros(len(bars))
    for i, (_, part) in enumerate(MEMORY_PARTS):
        v = np.array([b[1][i] for b in bars]) / div
        ax.bar(x, v, bottom=bottom, label=part)
        bottom += v
    ax.set_xticks(x, [b[0] for b in bars], rotation=35, ha="right", fontsize=8)
    # Explicit headroom: a zero-height segment on the tallest bar is a sticky edge that
    # would stop autoscaling margins.
    ax.set_ylim(0, bottom.max() * 1.08)
    ax.set(ylabel=f"model-state memory per rank ({unit})",
           title="Model-state memory per rank by strategy (mean over ranks)")
    ax.legend(fontsize=8)
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
    fig, axes = _panels(len(fams))
    for ax, (fam, by_policy) in zip(axes, fams.items()):
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
               title=_label(json.loads(fam), ["model", "strategy", "world"]) + " ranks")
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
            rows.append((groups.name[k], by_kind, c["logical_bytes"].astype(float).sum() / n))
    if not rows:
        return None, "no collective events in timed steps"
    kinds = sorted({kind for _, b, _ in rows for kind in b.index})
    div, unit = byte_unit(max(max(b.sum(), lg) for _, b, lg in rows))
    fig, ax = plt.subplots(figsize=(max(7, 0.8 * len(rows) + 3), 5))
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for kind in kinds:
        v = np.array([b.get(kind, 0.0) for _, b, _ in rows]) / div
        ax.bar(x, v, bottom=bottom, label=kind)
        bottom += v
    ax.plot(x, [lg / div for _, _, lg in rows], "kx", ms=9, label="logical bytes (uncompressed)")
    ax.set_xticks(x, [r[0] for r in rows], rotation=35, ha="right", fontsize=8)
    ax.set(ylabel=f"bytes on the wire per step, all ranks ({unit})",
           title="Wire bytes per step by collective kind")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig, ""


PERCENTILES = [(50, "o"), (90, "s"), (99, "^")]  # (percentile, its marker on the CDFs)


def _series_labels(results, pids):
    """point_id -> legend label (model, quantization), the point name where two points
    would share a label (repetitions): one label, and one colour, per series."""
    labels = {pid: _label(results.config[pid], ["model", "quantization"]) for pid in pids}
    counts = pd.Series(list(labels.values())).value_counts()
    names = results.points.set_index("point_id")["point_name"]
    return {pid: (lab if counts[lab] == 1 else str(names.get(pid, pid)))
            for pid, lab in labels.items()}


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
        ax.legend(title="model, quantization", fontsize=8)
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
        label = groups.name[k] + (" [flagged: " + flags[0].split(";")[0] + "]"
                                  if flags and flags[0] else "")
        rows.append((label, [compute, med["comm_exposed_s"], med["optimizer_s"], other]))
    if not rows:
        return None, "no timed training steps"
    parts = ["forward + backward (wall time)", "exposed communication", "optimizer",
             "rest of the step (not attributed)"]
    fig, ax = plt.subplots(figsize=(9, max(3.5, 0.45 * len(rows) + 2)))
    y = np.arange(len(rows))
    left = np.zeros(len(rows))
    for i, part in enumerate(parts):
        v = np.array([r[1][i] for r in rows]) * 1e3
        ax.barh(y, v, left=left, label=part)
        left += v
    ax.set_yticks(y, [r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel="median time per step (ms)", title="Step-time breakdown (slowest rank)")
    # Below the axes: inside it would hide the ends of the bars.
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4)
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
    "ratio, a negative fitted alpha counted as 0; broadcast is not predicted (no ring model).")


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
    # Least squares can put the intercept below zero when small messages are few and noisy;
    # no message takes negative time.
    latency = max(alpha, 0.0) * (p - 1) / (world - 1)
    wire = nbytes * ring_factor(op, p) * wire_per_logical
    return latency, beta * wire


def alpha_beta_fits(results):
    """Fits t = alpha + beta * wire_bytes, one fit per micro-benchmark point and operation
    (a micro suite varies the implementation by point), with the 192-worker prediction.
    Only `task = micro` points count: a training collective overlaps compute and waits on
    other ranks, so its duration is not the message time the model describes (R^2 of 0.01
    to 0.14 on training runs). Returns (events with a series column, fits table)."""
    done = results.done()
    micro = done[done.get("task", pd.Series(dtype=object)) == "micro"]["point_id"]
    parts = [timed_comm(results, pid) for pid in micro]
    c = pd.concat(parts, ignore_index=True) if parts else results.comm.iloc[0:0].copy()
    pts = done.set_index("point_id")
    c["world_size"] = c["point_id"].map(pts["world_size"])
    name, op = c["point_id"].map(pts["point_name"]).astype(str), c["op"].astype(str)
    # A micro suite names its points by operation already ("all_gather/mpi").
    c["series"] = [n if o in n else f"{n}: {o}" for n, o in zip(name, op)]
    rows = []
    for series, g in c.groupby("series", sort=True):
        wire, logical = g["wire_bytes"].astype(float), g["logical_bytes"].astype(float)
        a, b, r2 = stats.fit_alpha_beta(wire, g["duration_s"].astype(float))
        world, op = int(g["world_size"].iloc[0]), g["op"].iloc[0]
        ratio = float(np.median(wire[logical > 0] / logical[logical > 0])) \
            if (logical > 0).any() else np.nan
        lat, bw = predict_time(op, a, b, world, ratio)
        rows.append({"series": series, "op": op, "world_size": world, "events": len(g),
                     "alpha_us": a * 1e6, "beta_s_per_byte": b,
                     "bandwidth_GB_per_s": 1 / b / 1e9 if b > 0 else np.nan, "r2": r2,
                     PREDICT_COLUMN: (lat + bw) * 1e3, "pred_latency_ms": lat * 1e3,
                     "pred_bandwidth_ms": bw * 1e3})
    return c, pd.DataFrame(rows, columns=[
        "series", "op", "world_size", "events", "alpha_us", "beta_s_per_byte",
        "bandwidth_GB_per_s", "r2", PREDICT_COLUMN, "pred_latency_ms", "pred_bandwidth_ms"])


def _colour(i, n):
    # Past ten series the default cycle repeats; tab20 keeps twenty apart.
    return plt.get_cmap("tab20")(i % 20) if n > 10 else f"C{i}"


def _draw_fits(ax, c, fits):
    """Measured durations (dots) and the fitted line per series, R^2 in the legend."""
    for i, f in enumerate(fits.itertuples()):
        g = c[c["series"] == f.series]
        if len(g) > MAX_SCATTER:
            # The fit used every event; drawing a million markers shows nothing more.
            g = g.sample(MAX_SCATTER, random_state=0)
        x = g["wire_bytes"].astype(float).to_numpy()
        colour = _colour(i, len(fits))
        ax.plot(x, g["duration_s"].astype(float) * 1e6, "o", color=colour, ms=4, alpha=0.6)
        xs = np.geomspace(max(x.min(), 1.0), x.max(), 100)
        ax.plot(xs, (f.alpha_us * 1e-6 + f.beta_s_per_byte * xs) * 1e6, "-", color=colour,
                label=f"{f.series}: alpha {f.alpha_us:.3g} us, 1/beta "
                      f"{f.bandwidth_GB_per_s:.3g} GB/s, R\u00b2 {f.r2:.3f}")
    ax.set(xscale="log", yscale="log", xlabel="message size on the wire (bytes)",
           ylabel="collective time (us)",
           title="Measured (dots) and fitted t = alpha + beta * bytes (lines)")
    # Below the axes: a micro suite has twenty series, whose legend would cover the dots.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.1), ncol=2)
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
    ax.set_yticks(y, f["series"], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, (f[PREDICT_COLUMN].max() if len(f) else 1) * 1.25)
    ax.set(xlabel=f"predicted time at {PREDICT_WORKERS} workers (ms)",
           title=f"{PREDICT_WORKERS}-worker prediction, m = {PREDICT_BYTES / 1e6:.1f} MB")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(axis="x", alpha=0.3)


def plot_alpha_beta(results, summary, groups):
    """Collective micro-benchmarks: measured durations against message size with the fitted
    alpha-beta line and its R^2; beside them the 192-worker prediction, its assumptions
    written under the figure."""
    c, fits = alpha_beta_fits(results)
    if not len(fits):
        return None, ("no collective micro-benchmark points (task = micro): the alpha-beta "
                      "model is fitted only on those")
    fits = fits[np.isfinite(fits["alpha_us"].astype(float))]
    if not len(fits):
        return None, "no micro-benchmark collective with at least two message sizes"
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(15, max(6.5, 0.45 * len(fits) + 4)),
                                  gridspec_kw={"width_ratios": [3, 2]})
    _draw_fits(ax, c, fits)
    _draw_prediction(ax2, fits)
    fig.text(0.01, 0.005, "\n".join(textwrap.wrap(PREDICT_ASSUMPTIONS, 190)), fontsize=7,
             va="bottom", ha="left")
    # Laid out when drawn, leaving the bottom strip to the assumptions (make_plots keeps it).
    fig.set_layout_engine("tight", rect=(0, 0.08, 1, 1))
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
    ("alpha_beta", "Collective micro-benchmarks: time against message size with the fitted "
     "alpha-beta model and its R\u00b2, and the 192-worker prediction. " + PREDICT_ASSUMPTIONS,
     plot_alpha_beta),
] + serving.PLOTS + modelcomp.PLOTS


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
                if fig.get_layout_engine() is None:  # a plot may lay itself out
                    fig.tight_layout()
                path = os.path.join(out_dir, stem + ".png")
                fig.savefig(path, dpi=110)
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
