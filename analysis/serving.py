# The report's Serving section (task = "serve"): per-point latency percentiles, goodput per
# policy over a request_rate sweep, and the serving plots. Formulas: docs/METRICS.md
# ("Serving"); the percentiles themselves are the workload's scalars (one source of truth),
# read here, not recomputed.
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.labels import point_labels  # noqa: E402

GOODPUT_ATTAINMENT = 0.9  # DistServe's: at least 90% of requests meet both SLOs
# Config keys that identify a sweep's line: everything but the swept rate and the repetition.
_NOT_SERIES = {"request_rate", "repetition"}
# The workload's scalars shown per point (the serve task records them; docs/METRICS.md).
SCALARS = [
    "requests_served", "requests_refused", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
    "itl_p99_s", "e2e_p99_s", "output_tokens_per_s", "decode_batch_mean", "prefill_batch_mean",
    "prefill_efficiency", "slo_attainment", "schedule_overhead",
]
POINT_COLUMNS = (["point_id", "point_name", "serve_policy", "request_rate", "batch", "model",
                  "quantization"] + SCALARS + ["slo_ttft_ms", "slo_tpot_ms"])


def serving_points(res):
    """One row per done serve point: its policy, rate and the workload's figures."""
    done = set(res.done()["point_id"]) if len(res.points) else set()
    names = res.points.set_index("point_id")["point_name"] if len(res.points) else {}
    rows = []
    for pid in res.points["point_id"] if len(res.points) else []:
        cfg = res.config.get(pid, {})
        if pid not in done or cfg.get("task") != "serve":
            continue
        row = {"point_id": pid, "point_name": names[pid]}
        for k in ("serve_policy", "request_rate", "batch", "model", "quantization", "slo_ttft_ms",
                  "slo_tpot_ms"):
            row[k] = cfg.get(k)
        for k in SCALARS:
            row[k] = res.scalar(pid, k)
        row["series"] = json.dumps({k: v for k, v in cfg.items() if k not in _NOT_SERIES},
                                   sort_keys=True)
        rows.append(row)
    df = pd.DataFrame(rows, columns=POINT_COLUMNS + ["series"])
    return df.sort_values(["series", "request_rate"]).reset_index(drop=True) if len(df) else df


def goodput(points):
    """Per sweep line (every config key but request_rate equal): the highest request_rate at
    which SLO attainment >= 0.9 there and at every lower rate of the line. A line whose lowest
    rate fails has none ("below the lowest rate swept"); one whose every rate passes has a
    goodput of at least its highest rate (said in the note)."""
    rows = []
    for series, g in points.groupby("series", sort=False):
        g = g.sort_values("request_rate")
        ok = g["slo_attainment"].astype(float) >= GOODPUT_ATTAINMENT
        passed = ok.cumprod().astype(bool)  # monotone: stop at the first failing rate
        first = g.iloc[0]
        row = {"serve_policy": first["serve_policy"], "model": first["model"],
               "quantization": first["quantization"], "batch": first["batch"],
               "slo_ttft_ms": first["slo_ttft_ms"], "slo_tpot_ms": first["slo_tpot_ms"],
               "rates_swept": len(g), "goodput_req_per_s": np.nan, "note": "", "series": series}
        if not passed.iloc[0]:
            row["note"] = f"below the lowest rate swept ({g['request_rate'].iloc[0]:g} req/s)"
        else:
            row["goodput_req_per_s"] = float(g["request_rate"][passed].max())
            if passed.all():
                row["note"] = "every rate swept met the SLOs: goodput is at least this"
        rows.append(row)
    out = pd.DataFrame(rows)
    if not len(out):
        return out
    order = {"sequential": 0, "static": 1, "continuous": 2}
    out = out.sort_values(["model", "quantization", "batch", "serve_policy"],
                          key=lambda c: c.map(order) if c.name == "serve_policy" else c)
    out = out.reset_index(drop=True)
    # Against static batching of the same line (every key but the policy equal).
    def line(s):
        d = json.loads(s)
        d.pop("serve_policy", None)
        return json.dumps(d, sort_keys=True)
    out["line"] = out["series"].map(line)
    static = out[out["serve_policy"] == "static"].set_index("line")["goodput_req_per_s"]
    out["x_static"] = [g / static[ln] if ln in static.index and static[ln] > 0 else np.nan
                       for g, ln in zip(out["goodput_req_per_s"], out["line"])]
    return out.drop(columns=["series", "line"])


def _panels(n, width=5.5, height=4.2):
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False)
    return fig, list(axes.flat)


def plot_latency_vs_rate(results, summary, groups):
    """p50 (dashed) and p99 (solid) TTFT and TPOT against request rate, a line per policy."""
    pts = serving_points(results)
    if not len(pts):
        return None, "no serve points"
    fig, axes = _panels(2)
    for ax, metric, title in ((axes[0], "ttft", "time to first token"),
                              (axes[1], "tpot", "time per output token")):
        lines = list(pts.groupby("series", sort=False))
        # A line per sweep over the rate: labelled by the keys that differ between lines.
        labels = point_labels([json.loads(series) for series, _ in lines],
                              fallback=("serve_policy", "batch"))
        for i, ((_, g), lab) in enumerate(zip(lines, labels)):
            g = g.sort_values("request_rate")
            lab = lab.replace("\n", " ")
            ax.plot(g["request_rate"], 1e3 * g[f"{metric}_p99_s"], "o-", color=f"C{i % 10}",
                    label=lab + " p99")
            ax.plot(g["request_rate"], 1e3 * g[f"{metric}_p50_s"], "s--", color=f"C{i % 10}",
                    alpha=0.6, label=lab + " p50")
        ax.set(xlabel="request rate (req/s)", ylabel=f"{metric.upper()} (ms, log scale)",
               yscale="log", title=title)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    return fig, ""


def plot_latency_cdfs(results, summary, groups):
    """Empirical CDFs of TTFT and TPOT over the served requests of each serve point."""
    pts = serving_points(results)
    req = results.requests
    if not len(pts) or not len(req):
        return None, "no serve requests"
    fig, axes = _panels(2)
    labels = point_labels([results.config[pid] for pid in pts["point_id"]],
                          list(pts["point_name"]), fallback=("serve_policy", "request_rate"))
    for i, (p, lab) in enumerate(zip(pts.itertuples(), labels)):
        r = req[(req["point_id"] == p.point_id) & (req["refused"].astype(int) == 0)]
        lab = lab.replace("\n", " ")
        for ax, col in ((axes[0], "ttft_s"), (axes[1], "tpot_s")):
            # A one-token request has no TPOT (docs/METRICS.md).
            rr = r if col == "ttft_s" else r[r["output_tokens"].astype(int) > 1]
            v = np.sort(rr[col].astype(float).to_numpy()) * 1e3
            v = v[v > 0]  # a log axis has no place for 0
            if len(v):
                ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", color=f"C{i % 10}",
                        label=lab)
    for ax, name in ((axes[0], "TTFT"), (axes[1], "TPOT")):
        ax.set(xscale="log", xlabel=f"{name} (ms, log scale)", ylabel="fraction of requests (CDF)",
               ylim=(0, 1.02), title=f"{name} CDF")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    return fig, ""


def plot_batch_over_time(results, summary, groups):
    """Rows decoded per step against the server's clock, one panel per policy, at each
    policy's highest request rate (where batching matters most). Points that never decode
    (BERT requests end at their prefill) show the requests prefilled per step instead."""
    pts = serving_points(results)
    st = results.serve_steps
    if not len(pts) or not len(st):
        return None, "no serve steps"
    top = pts.sort_values("request_rate").groupby("serve_policy", sort=False).tail(1)
    fig, axes = _panels(len(top))
    for ax, p in zip(axes, top.itertuples()):
        s = st[st["point_id"] == p.point_id]
        col, what = "decode_rows", "decode batch (rows)"
        if not (s[col].astype(int) > 0).any():
            col, what = "prefill_requests", "requests prefilled per step"
        ax.step(s["start_s"].astype(float), s[col].astype(int), where="post", lw=0.8,
                label=f"batch limit {p.batch}")
        ax.set(xlabel="server clock (s)", ylabel=what,
               title=f"{p.serve_policy} at {p.request_rate:g} req/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig, ""


PLOTS = [
    ("serving_latency_vs_rate", "Serving: TTFT and TPOT (p50, p99) against request rate per "
     "policy", plot_latency_vs_rate),
    ("serving_cdfs", "Serving: TTFT and TPOT CDFs per point", plot_latency_cdfs),
    ("serving_batch", "Serving: batch size over time (decode rows; BERT: requests prefilled) at "
     "each policy's highest rate",
     plot_batch_over_time),
]
