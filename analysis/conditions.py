# Under which conditions each point was measured, and whether those conditions make its
# timings suspect (docs/METRICS.md, "Measurement conditions"). Read from the `machine` root
# attribute (per node: CPU model, ISA flags, cores, ranks, load averages, other work and
# stolen time during the point) and the step records.
import json

import numpy as np
import pandas as pd

# A point's step times vary this much (coefficient of variation over timed steps) before it
# is flagged: the machines drift 10-25% over minutes, a point's steps within seconds less.
CV_LIMIT = 0.10
# CPUs' worth of work that was not the point's own, averaged over the point, before it is
# flagged (a quarter core: a build or another benchmark, not the kernel's housekeeping).
OTHER_CPUS_LIMIT = 0.25
STEAL_CPUS_LIMIT = 0.25
MIN_STEPS_FOR_CV = 3

COLUMNS = ["point_id", "cpu_model", "isa", "cores", "ranks_per_node", "threads_per_rank",
           "oversubscription", "loadavg_1m_start", "loadavg_1m_end", "other_cpus", "steal_cpus",
           "step_time_cv", "compute_dtype", "flags"]


def _machine(text):
    try:
        m = json.loads(text or "{}")
    except ValueError:
        return {}
    return m if isinstance(m, dict) else {}


def _max(nodes, key):
    v = [float(n[key]) for n in nodes if key in n and float(n[key]) >= 0]
    return max(v) if v else np.nan


def step_time_cv(wall_s):
    """std / mean of the timed steps' wall times (sample std); NaN under MIN_STEPS_FOR_CV."""
    w = np.asarray(wall_s, float)
    w = w[np.isfinite(w)]
    if len(w) < MIN_STEPS_FOR_CV or w.mean() <= 0:
        return np.nan
    return float(w.std(ddof=1) / w.mean())


def flags(row):
    """Why this point's timings are suspect, as short phrases ("" when none)."""
    out = []
    if np.isfinite(row["oversubscription"]) and row["oversubscription"] > 1.0:
        out.append(f"oversubscribed {row['oversubscription']:.1f}x ({row['ranks_per_node']} ranks x "
                   f"{row['threads_per_rank']} threads on {row['cores']} cores)")
    if np.isfinite(row["step_time_cv"]) and row["step_time_cv"] > CV_LIMIT:
        out.append(f"noisy: step-time CV {100 * row['step_time_cv']:.0f}% > {100 * CV_LIMIT:.0f}%")
    if np.isfinite(row["other_cpus"]) and row["other_cpus"] > OTHER_CPUS_LIMIT:
        out.append(f"other work: {row['other_cpus']:.2f} CPUs busy with other processes")
    if np.isfinite(row["steal_cpus"]) and row["steal_cpus"] > STEAL_CPUS_LIMIT:
        out.append(f"stolen: the hypervisor took {row['steal_cpus']:.2f} CPUs")
    return "; ".join(out)


def conditions(results):
    """One row per readable point (COLUMNS). Unknown figures (older files) are NaN."""
    rows = []
    steps = results.steps
    texts = results.texts
    # The dtype an inference forward computed in (quant_compute): bf16 weights may have run
    # in fp32 on a CPU without bf16 units, and the table must say so.
    compute = ({} if texts.empty else
               dict(texts[texts["name"] == "compute_dtype"][["point_id", "value"]].values))
    for _, p in results.points.iterrows():
        m = _machine(p.get("machine", "{}"))
        nodes = m.get("nodes", [])
        cores = min((int(n.get("cores", 0)) for n in nodes), default=0) or np.nan
        rpn = int(m.get("ranks_per_node", 0)) or np.nan
        threads = int(p.get("threads_per_rank", 0) or 0) or np.nan
        s = steps[(steps["point_id"] == p["point_id"]) & (steps["warmup"].astype(int) == 0)]
        row = {
            "point_id": p["point_id"],
            "cpu_model": "; ".join(sorted({str(n.get("cpu_model", "")) for n in nodes})),
            "isa": " ".join(nodes[0].get("isa", [])) if nodes else "",
            "cores": cores, "ranks_per_node": rpn, "threads_per_rank": threads,
            "oversubscription": rpn * threads / cores,
            "loadavg_1m_start": _max(nodes, "loadavg_1m_start"),
            "loadavg_1m_end": _max(nodes, "loadavg_1m_end"),
            "other_cpus": _max(nodes, "other_cpus"), "steal_cpus": _max(nodes, "steal_cpus"),
            "step_time_cv": step_time_cv(s["wall_s"]) if len(s) else np.nan,
            "compute_dtype": compute.get(p["point_id"], ""),
        }
        row["flags"] = flags(row)
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def describe(row):
    """The conditions column of a table: "4 ranks x 2 threads on 2 cores, AMD EPYC"."""
    if not np.isfinite(row.get("cores", np.nan)):
        return "conditions not recorded"
    out = (f"{int(row['ranks_per_node'])} ranks x {int(row['threads_per_rank'])} threads on "
           f"{int(row['cores'])} cores, {row['cpu_model'] or 'unknown CPU'}")
    if row.get("compute_dtype"):
        out += f", computed in {row['compute_dtype']}"
    return out
