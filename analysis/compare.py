# Each point against its baseline (baseline_id from the suite). Points that differ only in
# the `repetition` config key form one group; a group's figure is the median of its members.
import json
import re

import numpy as np
import pandas as pd

from analysis import stats

REPETITION_KEY = "repetition"

# (metric column of the summary, label with unit, whether higher is better)
COMPARED = [
    ("samples_per_s", "throughput (samples/s)", True),
    ("tokens_per_s", "throughput (tokens/s)", True),
    ("step_time_s", "step / batch latency (s)", False),
    ("memory_bytes", "memory (bytes)", False),
    ("peak_rss_bytes", "peak resident memory (bytes)", False),
    ("wire_bytes_per_step", "wire bytes per step", False),
    ("final_loss", "final loss", False),
    ("accuracy", "accuracy", True),
]

COLUMNS = ["group", "baseline", "metric", "n", "median", "min", "max", "baseline_n",
           "baseline_median", "baseline_min", "baseline_max", "ratio", "pct", "U", "p", "warning"]


def group_key(config):
    """Canonical config without the repetition key: equal keys = repetitions of one point."""
    return json.dumps({k: v for k, v in config.items() if k != REPETITION_KEY}, sort_keys=True)


class Groups:
    """Repetition groups of the done points, in expansion order of their first member."""

    def __init__(self, results):
        self.results = results
        done = results.done()
        self.of_point = {}   # point_id -> group key
        self.members = {}    # group key -> [point_id] in expansion order
        for pid in done["point_id"]:
            k = group_key(results.config[pid])
            self.of_point[pid] = k
            self.members.setdefault(k, []).append(pid)
        names = done.set_index("point_id")["point_name"]
        # Expansion names repetitions "<name>/r<k>"; a group is shown by the common name.
        self.name = {k: re.sub(r"/r\d+$", "", names[m[0]]) for k, m in self.members.items()}

    def config(self, key):
        return json.loads(key)

    def baseline_of(self, key):
        """The baseline group of a group: the group of its members' baseline_id (first one
        that resolves). Returns (group key or None, baseline ids named but not measured)."""
        pts = self.results.points.set_index("point_id")
        unresolved = []
        for pid in self.members[key]:
            b = pts.loc[pid, "baseline_id"]
            if not b:
                continue
            if b in self.of_point:
                return self.of_point[b], []
            unresolved.append(b)
        return None, unresolved

    def values(self, key, summary, metric):
        v = summary.loc[self.members[key], metric].astype(float)
        return v[np.isfinite(v)].to_numpy()

    def median(self, key, summary, metric):
        v = self.values(key, summary, metric)
        return float(np.median(v)) if len(v) else np.nan

    def reference(self, key):
        """The suite's reference figures of a group (its first member's; repetitions share)."""
        return self.results.reference.get(self.members[key][0], {})

    def difference(self, key, base):
        """What changes from the baseline, e.g. "quantization: none -> int8-dynamic"."""
        a, b = self.config(key), self.config(base)
        diff = [f"{k}: {b.get(k)} -> {a.get(k)}" for k in sorted(set(a) | set(b))
                if a.get(k) != b.get(k)]
        return "; ".join(diff) if diff else "(same config)"


def compare(results, summary, groups=None):
    """Long table: one row per (group with a baseline, metric present on both sides)."""
    g = groups or Groups(results)
    rows = []
    for key in g.members:
        base, unresolved = g.baseline_of(key)
        if base is None:
            if unresolved:
                rows.append({"group": g.name[key], "baseline": unresolved[0], "metric": "",
                             "warning": "baseline has no done result"})
            continue
        for metric, label, _ in COMPARED:
            a, b = g.values(key, summary, metric), g.values(base, summary, metric)
            if len(a) == 0 or len(b) == 0:
                continue
            u, p, warning = stats.repetition_test(a, b)
            med_a, med_b = float(np.median(a)), float(np.median(b))
            rows.append({
                "group": g.name[key], "baseline": g.name[base], "metric": label,
                "n": len(a), "median": med_a, "min": a.min(), "max": a.max(),
                "baseline_n": len(b), "baseline_median": med_b, "baseline_min": b.min(),
                "baseline_max": b.max(), "ratio": med_a / med_b if med_b else np.nan,
                "pct": stats.percent_change(med_a, med_b), "U": u, "p": p, "warning": warning})
    return pd.DataFrame(rows, columns=COLUMNS)
