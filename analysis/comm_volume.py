# The report's "Communication by mesh dimension" section (the Parallel3d issue's
# characterization, after "Demystifying the Communication Characteristics for Distributed
# Transformer Models"): for every done point that trains or serves (not the micro-benchmarks),
# what its ranks sent per timed step along each mesh dimension (the comm rows' `dim`) and
# operation, how many messages of which sizes, and the point-to-point share. Formulas in
# docs/METRICS.md ("Communication by mesh dimension").
import numpy as np
import pandas as pd

from analysis.metrics import timed_comm

# Message-size histogram buckets: (upper bound in bytes, column).
BUCKETS = [(1 << 10, "msgs_le_1KiB"), (64 << 10, "msgs_le_64KiB"), (1 << 20, "msgs_le_1MiB"),
           (16 << 20, "msgs_le_16MiB"), (np.inf, "msgs_gt_16MiB")]
COLUMNS = (["point_name", "model", "seq", "world", "dim", "op", "messages_per_step",
            "bytes_per_step", "share_of_bytes"] + [c for _, c in BUCKETS] + ["p2p_share"])
# Files written before the `dim` column: their groups' dimensions.
GROUP_DIM = {"world": "world", "shard": "dp_shard", "replica": "dp_replicate"}


def _dims(c):
    # `dim` is optional (files from before the column): read with get, its absence handled.
    dim = c.get("dim")
    dim = dim.astype(str) if dim is not None else pd.Series("", index=c.index)
    return dim.where(dim != "", c["group"].astype(str).map(GROUP_DIM).fillna("world"))


def volume_table(res):
    """One row per (point, dim, op) over timed steps: messages and bytes per step (a message
    counted once: every collective row is one rank's part, a point-to-point message is its
    send row; recv rows are left out), each row's share of the point's bytes, the message
    sizes' histogram per step, and the point's point-to-point share of bytes."""
    rows = []
    done = res.done()
    for _, p in done[done.get("task", pd.Series(dtype=object)) != "micro"].iterrows():
        pid = p["point_id"]
        c = timed_comm(res, pid)
        c = c[c["op"].astype(str) != "recv"]
        if not len(c):
            continue
        c = c.assign(dim=_dims(c), wire=c["wire_bytes"].astype(float))
        steps = max(c["step"].nunique(), 1)
        total = c["wire"].sum()
        p2p = c.loc[c["op"] == "send", "wire"].sum()
        cfg = res.config.get(pid, {})
        for (dim, op), g in c.groupby(["dim", "op"], sort=True):
            row = {"point_name": p["point_name"], "model": cfg.get("model", ""),
                   "seq": cfg.get("seq", np.nan), "world": cfg.get("world", np.nan),
                   "dim": dim, "op": op, "messages_per_step": len(g) / steps,
                   "bytes_per_step": g["wire"].sum() / steps,
                   "share_of_bytes": g["wire"].sum() / total if total > 0 else np.nan,
                   "p2p_share": p2p / total if total > 0 else np.nan}
            lo = -np.inf
            for hi, col in BUCKETS:
                row[col] = ((g["wire"] > lo) & (g["wire"] <= hi)).sum() / steps
                lo = hi
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def section(res):
    """(blocks, table) of the section; no blocks when no point communicated."""
    t = volume_table(res)
    if not len(t):
        return [], t
    return [("h2", "Communication by mesh dimension"),
            ("p", "Per timed step, summed over ranks: each collective row is one rank's part "
                  "(its wire bytes), each point-to-point message counted once by its send "
                  "row; share_of_bytes is the row's part of the point's bytes, msgs_* the "
                  "messages per step by size, p2p_share the point's bytes sent point to point "
                  "(docs/METRICS.md). Volume against sequence length and model size: compare "
                  "rows of one dimension and op across points."),
            ("table", t)], t
