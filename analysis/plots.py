# The report's plots (PNG, matplotlib Agg). Each plot function returns (figure, note); a
# figure of None means its data is absent and the note says which. Also the `plot` entry
# point: /usr/bin/python3 -m analysis.plots RESULTS --out DIR.
import argparse
import json
import os
import sys

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

MAX_SCATTER = 3000  # measured events drawn per collective in the alpha-beta plot
MEMORY_PARTS = [("param_bytes", "parameters"), ("grad_bytes", "gradients"),
                ("optim_bytes", "optimizer state"), ("gathered_bytes", "gathered buffers")]


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
    ax.set(xlabel="world size (ranks)", ylabel="global throughput (tokens/s)",
           title="Throughput against world size")
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
            parts = [float(r[c].astype(float).mean()) for c, _ in MEMORY_PARTS]
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
            # Markers and dashes keep coinciding curves (a policy that tracks none) visible.
            ax.plot(s["step"], s["loss"], marker="os^vD"[i % 5], ls=["-", "--", ":"][i % 3],
                    label=str(policy))
        ax.set(xlabel="step (optimizer steps)", ylabel="training loss (nats/token)",
               title=_label(json.loads(fam), ["model", "strategy", "world"]) + " ranks")
        ax.legend(title="compression", fontsize=8)
        ax.grid(alpha=0.3)
    return fig, ""


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


def plot_latency_cdf(results, summary, groups):
    """Empirical CDF of query latency, one panel per scenario, one line per point
    (labelled by model and quantization)."""
    done = set(results.done()["point_id"])
    q = results.queries[results.queries["point_id"].isin(done)]
    if not len(q):
        return None, "no inference queries"
    scenarios = sorted(q["scenario"].unique())
    fig, axes = _panels(len(scenarios), width=5.5)
    for ax, scen in zip(axes, scenarios):
        for pid, g in q[q["scenario"] == scen].groupby("point_id", sort=False):
            lat = np.sort(g["latency_s"].astype(float).to_numpy()) * 1e3
            cfg = results.config[pid]
            ax.step(lat, np.arange(1, len(lat) + 1) / len(lat), where="post",
                    label=_label(cfg, ["model", "quantization"]))
        ax.set(xlabel="query latency (ms)", ylabel="fraction of queries (CDF)", title=scen,
               ylim=(0, 1.02))
        ax.legend(title="model, quantization", fontsize=8)
        ax.grid(alpha=0.3)
    return fig, ""


def plot_step_breakdown(results, summary, groups):
    """Median time per timed step split into compute (forward + backward), exposed
    communication, optimizer and the rest of the wall time."""
    rows = []
    for k in _task_groups(groups, "train"):
        s = _steps_of(results, groups.members[k])
        if not len(s):
            continue
        med = {c: float(np.median(s[c].astype(float))) for c in
               ("wall_s", "forward_s", "backward_s", "optimizer_s", "comm_exposed_s")}
        compute = med["forward_s"] + med["backward_s"]
        other = max(0.0, med["wall_s"] - compute - med["optimizer_s"] - med["comm_exposed_s"])
        rows.append((groups.name[k], [compute, med["comm_exposed_s"], med["optimizer_s"], other]))
    if not rows:
        return None, "no timed training steps"
    parts = ["compute (forward + backward)", "exposed communication", "optimizer", "other"]
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


def alpha_beta_fits(results):
    """Fits t = alpha + beta * wire_bytes over the collectives of timed steps, one fit per
    series. Micro-benchmark points are used when there are any (training collectives overlap
    compute, so their durations are not clean latencies), one series per point and
    operation: a micro suite varies the implementation (raw MPI, ours, compressed) by point.
    Otherwise one series per operation and world size. Returns (events with a series
    column, fits table)."""
    done = results.done()
    micro = done[done.get("task", pd.Series(dtype=object)) == "micro"]["point_id"]
    use = micro if len(micro) else done["point_id"]
    # Warm-up collectives (first touch, connection set-up) are not the steady state the
    # model describes.
    parts = [timed_comm(results, pid) for pid in use]
    c = pd.concat(parts, ignore_index=True) if parts else results.comm.iloc[0:0].copy()
    pts = done.set_index("point_id")
    c["world_size"] = c["point_id"].map(pts["world_size"])
    if len(micro):
        c["series"] = c["point_id"].map(pts["point_name"]) + ": " + c["op"]
    else:
        c["series"] = c["op"] + ", " + c["world_size"].astype(str) + " ranks"
    rows = []
    for series, g in c.groupby("series", sort=True):
        a, b, r2 = stats.fit_alpha_beta(g["wire_bytes"].astype(float),
                                        g["duration_s"].astype(float))
        rows.append({"series": series, "op": g["op"].iloc[0],
                     "world_size": int(g["world_size"].iloc[0]), "events": len(g),
                     "alpha_us": a * 1e6, "beta_s_per_byte": b,
                     "bandwidth_GB_per_s": 1 / b / 1e9 if b > 0 else np.nan, "r2": r2})
    return c, pd.DataFrame(rows, columns=["series", "op", "world_size", "events", "alpha_us",
                                          "beta_s_per_byte", "bandwidth_GB_per_s", "r2"])


def plot_alpha_beta(results, summary, groups):
    """Measured collective durations against message size, with the fitted alpha-beta line."""
    c, fits = alpha_beta_fits(results)
    fits = fits[np.isfinite(fits["alpha_us"])]
    if not len(fits):
        return None, "no collectives with at least two message sizes"
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for i, f in enumerate(fits.itertuples()):
        g = c[c["series"] == f.series]
        if len(g) > MAX_SCATTER:
            # The fit used every event; drawing a million markers shows nothing more.
            g = g.sample(MAX_SCATTER, random_state=0)
        x = g["wire_bytes"].astype(float).to_numpy()
        color = f"C{i % 10}"
        ax.plot(x, g["duration_s"].astype(float) * 1e6, "o", color=color, ms=4, alpha=0.6,
                label=f"{f.series}: measured")
        xs = np.geomspace(max(x.min(), 1.0), x.max(), 100)
        ax.plot(xs, (f.alpha_us * 1e-6 + f.beta_s_per_byte * xs) * 1e6, "-", color=color,
                label=f"model: alpha {f.alpha_us:.3g} us, 1/beta {f.bandwidth_GB_per_s:.3g} GB/s")
    ax.set(xscale="log", yscale="log", xlabel="message size on the wire (bytes)",
           ylabel="collective time (us)",
           title="Collective time against message size, alpha-beta model t = alpha + beta * bytes")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
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
    ("alpha_beta", "Collective time against message size with the fitted alpha-beta model",
     plot_alpha_beta),
]


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
