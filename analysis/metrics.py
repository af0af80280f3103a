# Per-point summary metrics (the "points x metrics" table) from the raw records, with the
# formulas of docs/METRICS.md ("Analysis" section). Only timed (non-warm-up) steps count.
import numpy as np
import pandas as pd

# Scalars that measure accuracy (higher is better), in order of preference; each is recorded
# by a workload (tests/analysis/test_schema.py checks it).
ACCURACY_SCALARS = ["classification_accuracy", "mlm_accuracy", "top1_agreement"]

SUMMARY_COLUMNS = [
    "point_id", "timed_steps", "step_time_s", "samples_per_s", "tokens_per_s", "mfu",
    "tflops_per_worker", "final_loss", "accuracy", "accuracy_metric", "model_state_bytes",
    "peak_model_state_bytes", "peak_rss_bytes", "memory_bytes", "wire_bytes_per_step",
    "logical_bytes_per_step", "compression_ratio",
]


def timed_steps(steps):
    return steps[steps["warmup"].astype(int) == 0]


def timed_comm(results, pid):
    """Collectives of timed steps. A point without step records (micro-benchmarks) has no
    warm-up to leave out, so all its collectives count."""
    c = results.comm[results.comm["point_id"] == pid]
    s = results.steps[results.steps["point_id"] == pid]
    if len(s) == 0:
        return c
    return c[c["step"].isin(timed_steps(s)["step"])]


def _median(x):
    x = pd.to_numeric(x, errors="coerce").dropna()
    return float(np.median(x)) if len(x) else np.nan


def summarize_point(results, pid):
    s = timed_steps(results.steps[results.steps["point_id"] == pid])
    r = results.ranks[results.ranks["point_id"] == pid]
    row = {"point_id": pid, "timed_steps": len(s)}
    # HPC convention: the median over timed steps is robust to a stray slow step; each step's
    # time is already the slowest rank's.
    for col, name in (("wall_s", "step_time_s"), ("samples_per_s", "samples_per_s"),
                      ("tokens_per_s", "tokens_per_s"), ("mfu", "mfu")):
        row[name] = _median(s[col]) if len(s) else np.nan
    # Achieved model FLOP/s per rank: from the FLOPs per token when recorded, else from MFU
    # and the measured peak it divides by (the train workload records peak_gflops_per_rank;
    # MFU x peak = flops_per_token x tokens/s / world, the same quantity).
    fpt = results.scalar(pid, "model_flops_per_token")
    peak = results.scalar(pid, "peak_gflops_per_rank")
    world = float(results.points.set_index("point_id").loc[pid, "world_size"])
    if len(s) and np.isfinite(fpt):
        row["tflops_per_worker"] = _median(s["tokens_per_s"].astype(float) * fpt / world / 1e12)
    elif len(s) and np.isfinite(peak):
        row["tflops_per_worker"] = _median(s["mfu"].astype(float) * peak / 1e3)
    else:
        row["tflops_per_worker"] = np.nan
    final_eval = results.scalar(pid, "final_eval_loss")
    # Only training steps carry a loss (inference records leave it 0).
    trains = results.config.get(pid, {}).get("task") == "train"
    row["final_loss"] = final_eval if np.isfinite(final_eval) else (
        float(s["loss"].iloc[-1]) if len(s) and trains else np.nan)
    row["accuracy"], row["accuracy_metric"] = np.nan, ""
    for name in ACCURACY_SCALARS:
        v = results.scalar(pid, name)
        if np.isfinite(v):
            row["accuracy"], row["accuracy_metric"] = v, name
            break
    for col in ("model_state_bytes", "peak_model_state_bytes", "peak_rss_bytes"):
        row[col] = float(r[col].astype(float).max()) if len(r) else np.nan  # the fullest rank
    model_bytes = results.scalar(pid, "model_bytes")
    row["memory_bytes"] = model_bytes if np.isfinite(model_bytes) else row["peak_model_state_bytes"]
    c = timed_comm(results, pid)
    n = c["step"].nunique()
    if "op" in c.columns:  # a point-to-point message is counted once, by its send row
        c = c[c["op"] != "recv"]
    row["wire_bytes_per_step"] = float(c["wire_bytes"].astype(float).sum()) / n if n else np.nan
    row["logical_bytes_per_step"] = (float(c["logical_bytes"].astype(float).sum()) / n
                                     if n else np.nan)
    row["compression_ratio"] = (row["logical_bytes_per_step"] / row["wire_bytes_per_step"]
                                if n and row["wire_bytes_per_step"] > 0 else np.nan)
    return row


def summarize(results):
    """points x metrics for the points with status `done`, indexed by point_id."""
    rows = [summarize_point(results, pid) for pid in results.done()["point_id"]]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS).set_index("point_id")


# LoadGen's server rule (docs/METRICS.md, "Inference"): a server run is valid only when the
# system kept up with the arrivals and the p99 latency stayed within the bound.
SERVER_RATE_FRACTION = 0.90  # achieved completions/s at least this fraction of target_qps
QUERY_COLUMNS = ["point_id", "model", "scenario", "queries", "p50_ms", "p90_ms", "p99_ms",
                 "samples_per_s", "target_qps", "achieved_qps", "latency_bound_ms", "validity"]


def server_validity(achieved_qps, target_qps, p99_ms, bound_ms):
    """"VALID" or "INVALID: <every rule broken>" for a server-scenario point."""
    broken = []
    if not np.isfinite(achieved_qps) or achieved_qps < SERVER_RATE_FRACTION * target_qps:
        broken.append(f"achieved {achieved_qps:.3g} queries/s < {SERVER_RATE_FRACTION:.0%} of "
                      f"the target {target_qps:g}")
    if np.isfinite(bound_ms) and p99_ms > bound_ms:
        broken.append(f"p99 latency {p99_ms:.4g} ms > bound {bound_ms:g} ms")
    return "INVALID: " + "; ".join(broken) if broken else "VALID"


def _query_row(pid, scen, g, cfg):
    lat = g["latency_s"].astype(float).to_numpy()
    span = float((g["issue_s"] + g["latency_s"]).max() - g["issue_s"].min())
    row = {"point_id": pid, "model": cfg.get("model", ""), "scenario": scen, "queries": len(g),
           "samples_per_s": float(g["samples"].sum()) / span if span > 0 else np.nan,
           "target_qps": np.nan, "achieved_qps": np.nan, "latency_bound_ms": np.nan,
           "validity": ""}
    # Offline issues everything at once: one "query", so percentiles of it say nothing.
    if scen != "offline":
        for q in (50, 90, 99):
            row[f"p{q}_ms"] = 1e3 * np.percentile(lat, q)
    else:
        row.update(p50_ms=np.nan, p90_ms=np.nan, p99_ms=np.nan)
    if scen == "server":
        row["target_qps"] = float(cfg.get("target_qps", np.nan))
        row["latency_bound_ms"] = float(cfg.get("server_latency_ms", np.nan))
        row["achieved_qps"] = len(g) / span if span > 0 else np.nan
        row["validity"] = server_validity(row["achieved_qps"], row["target_qps"], row["p99_ms"],
                                          row["latency_bound_ms"])
    return row


def query_summary(results):
    """Per point and scenario, sorted by model and scenario: count, p50/p90/p99 latency
    (linear-interpolated percentiles; not for offline), throughput = samples / (last
    completion - first issue), and for server points LoadGen's validity."""
    q = results.queries[results.queries["point_id"].isin(results.done()["point_id"])]
    rows = [_query_row(pid, scen, g, results.config.get(pid, {}))
            for (pid, scen), g in q.groupby(["point_id", "scenario"], sort=True)]
    df = pd.DataFrame(rows, columns=QUERY_COLUMNS)
    if len(df):
        names = results.points.set_index("point_id")["point_name"]
        df = (df.assign(_n=df["point_id"].map(names))
                .sort_values(["model", "scenario", "_n"]).drop(columns="_n")
                .reset_index(drop=True))
    return df
