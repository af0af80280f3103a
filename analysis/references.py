# Tolerance checks of a suite's [[reference]] entries (harness/spec/reference.h): a figure
# written [value, lower, upper] says what this system should measure; a point is outside when
# its metric (docs/METRICS.md "Analysis") is not within value x (1 + lower) .. value x (1 +
# upper). Stored in the point's reference as NAME, NAME.lower and NAME.upper.
import numpy as np
import pandas as pd

COLUMNS = ["point_id", "point_name", "metric", "expected", "low", "high", "measured",
           "deviation_pct", "verdict"]


def checks_of(reference):
    """{metric: (value, lower, upper)} of a point's reference: the figures with bounds."""
    return {k: (v, reference[k + ".lower"], reference[k + ".upper"])
            for k, v in reference.items()
            if not k.endswith((".lower", ".upper")) and k + ".lower" in reference}


def is_paper_figure(reference, key):
    """A plain number: a paper's figure, printed beside ours (not a check)."""
    return key in reference and key + ".lower" not in reference


def reference_checks(results, summary):
    """One row per (done point, checked metric); verdict "within", "OUTSIDE" or
    "not measured" (the point recorded no such metric)."""
    names = results.points.set_index("point_id")["point_name"] if len(results.points) else {}
    rows = []
    for pid in results.done()["point_id"]:
        for metric, (v, lo, hi) in sorted(checks_of(results.reference.get(pid, {})).items()):
            low, high = sorted((v * (1 + lo), v * (1 + hi)))
            m = float(summary.loc[pid, metric]) if metric in summary.columns else np.nan
            if not np.isfinite(m):
                verdict, dev = "not measured", np.nan
            else:
                verdict = "within" if low <= m <= high else "OUTSIDE"
                dev = (m - v) / v * 100 if v else np.nan
            rows.append({"point_id": pid, "point_name": names[pid], "metric": metric,
                         "expected": v, "low": low, "high": high, "measured": m,
                         "deviation_pct": dev, "verdict": verdict})
    return pd.DataFrame(rows, columns=COLUMNS)
