# `shardbench compare A B`: two results folders (or two groups of points, `FOLDER:key=value`)
# matched point by point on their config, side by side with the ratio B / A, a Mann-Whitney U
# test where repetitions allow, and regression gates that set the exit code:
#   python3 -m analysis.compare_runs results/main results/branch --fail-if 'tokens_per_s < -5%'
# Exit 0: no gate fired; 1: a gate fired; 2: bad arguments or nothing to compare.
import argparse
import json
import re
import sys

import numpy as np
import pandas as pd

from analysis import stats
from analysis.compare import REPETITION_KEY
from analysis.load import load_results
from analysis.metrics import summarize

# Metrics compare can gate on: summary columns (docs/METRICS.md, "Analysis").
METRICS = ["step_time_s", "samples_per_s", "tokens_per_s", "mfu", "tflops_per_worker",
           "final_loss", "accuracy", "model_state_bytes", "peak_model_state_bytes",
           "peak_rss_bytes", "memory_bytes", "wire_bytes_per_step", "compression_ratio"]
GATE_RE = re.compile(r"^\s*([a-z_0-9]+)\s*([<>])\s*([+-]?\d+(?:\.\d+)?)\s*%\s*$")
COLUMNS = ["point", "metric", "a_n", "a_median", "b_n", "b_median", "ratio", "pct", "U", "p",
           "note"]


class Gate:
    """`METRIC < -5%`: fires when B's median is more than 5% below A's; `METRIC > +10%`: more
    than 10% above. When repetitions allow the Mann-Whitney test, the change must also be
    significant (p < stats.ALPHA) to fire; with too few repetitions the median change alone
    decides (a CI job with one repetition still gates)."""

    def __init__(self, text):
        m = GATE_RE.match(text)
        if not m:
            raise ValueError(f"--fail-if {text!r}: expected METRIC < PERCENT% or METRIC > "
                             f"PERCENT%, e.g. 'tokens_per_s < -5%'")
        self.text, self.metric, self.op, self.pct = text.strip(), m.group(1), m.group(2), float(m.group(3))
        if self.metric not in METRICS:
            raise ValueError(f"--fail-if {text!r}: unknown metric {self.metric!r}; known: "
                             f"{', '.join(METRICS)}")

    def fires(self, row):
        pct, p = row["pct"], row["p"]
        if not np.isfinite(pct):
            return False
        crossed = pct < self.pct if self.op == "<" else pct > self.pct
        testable = not row["note"].startswith("too few repetitions")
        return crossed and (not testable or (np.isfinite(p) and p < stats.ALPHA))


def parse_side(text):
    """`FOLDER` or `FOLDER:key=value[,key=value]` -> (folder, {key: value as text})."""
    folder, _, sel = text.partition(":")
    where = {}
    for part in filter(None, sel.split(",")):
        k, eq, v = part.partition("=")
        if not eq or not k:
            raise ValueError(f"{text!r}: a selector is key=value[,key=value], got {part!r}")
        where[k.strip()] = v.strip()
    return folder, where


def _selected(results, where):
    """Done point ids whose config matches every key=value (compared as text)."""
    out = []
    for pid in results.done()["point_id"]:
        cfg = results.config.get(pid, {})
        if all(k in cfg and _text(cfg[k]) == v for k, v in where.items()):
            out.append(pid)
    return out


def _text(v):
    return json.dumps(v) if isinstance(v, (dict, list)) else str(v).lower() if isinstance(v, bool) else str(v)


def _match_key(cfg, ignore):
    return json.dumps({k: v for k, v in cfg.items() if k not in ignore}, sort_keys=True)


def _groups(results, pids, ignore):
    """match key -> [point ids]: repetitions and the selector keys do not tell points apart."""
    g = {}
    for pid in pids:
        g.setdefault(_match_key(results.config[pid], ignore), []).append(pid)
    return g


def _name(results, pid):
    n = results.points.set_index("point_id").loc[pid, "point_name"]
    return re.sub(r"/r\d+$", "", str(n))


def _pair_name(ra, pa, rb, pb):
    a, b = _name(ra, pa), _name(rb, pb)
    return a if a == b else f"{a} | {b}"


def compare_runs(a_spec, b_spec, metrics=None):
    """Long table (COLUMNS) and the lists of points found on one side only."""
    (fa, wa), (fb, wb) = parse_side(a_spec), parse_side(b_spec)
    ra, rb = load_results(fa), load_results(fb)
    sa, sb = summarize(ra), summarize(rb)
    ignore = {REPETITION_KEY} | set(wa) | set(wb)
    ga = _groups(ra, _selected(ra, wa), ignore)
    gb = _groups(rb, _selected(rb, wb), ignore)
    rows = []
    for key in sorted(set(ga) & set(gb), key=lambda k: _name(ra, ga[k][0])):
        for metric in metrics or METRICS:
            a = sa.loc[ga[key], metric].astype(float).to_numpy()
            b = sb.loc[gb[key], metric].astype(float).to_numpy()
            a, b = a[np.isfinite(a)], b[np.isfinite(b)]
            if not len(a) or not len(b):
                continue
            u, p, warning = stats.repetition_test(a, b)
            ma, mb = float(np.median(a)), float(np.median(b))
            rows.append({"point": _pair_name(ra, ga[key][0], rb, gb[key][0]), "metric": metric, "a_n": len(a),
                         "a_median": ma, "b_n": len(b), "b_median": mb,
                         "ratio": mb / ma if ma else np.nan, "pct": stats.percent_change(mb, ma),
                         "U": u, "p": p, "note": warning})
    only_a = [_name(ra, v[0]) for k, v in ga.items() if k not in gb]
    only_b = [_name(rb, v[0]) for k, v in gb.items() if k not in ga]
    return pd.DataFrame(rows, columns=COLUMNS), only_a, only_b


def _fmt(v):
    if isinstance(v, float):
        return "-" if not np.isfinite(v) else f"{v:.4g}"
    return str(v)


def print_table(df, out):
    """Aligned text; a note every row shares (one repetition per side) is said once."""
    shown = df.drop(columns=["U"])
    if len(shown) and shown["note"].str.startswith("too few repetitions").all():
        print("every row: too few repetitions for the Mann-Whitney test to tell (run more "
              "repetitions, the suite's `repetition` axis); the gates use the median change "
              "alone", file=out)
        shown = shown.drop(columns=["note", "p"])
    cells = [list(shown.columns)] + [[_fmt(v) for v in r] for r in shown.itertuples(index=False)]
    w = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    for r in cells:
        print("  ".join(c.ljust(w[i]) if i in (0, 1, len(w) - 1) else c.rjust(w[i])
                        for i, c in enumerate(r)).rstrip(), file=out)


def main(argv=None, out=sys.stdout):
    ap = argparse.ArgumentParser(prog="shardbench compare", description=__doc__)
    ap.add_argument("a", help="baseline: FOLDER or FOLDER:key=value[,key=value]")
    ap.add_argument("b", help="candidate: FOLDER or FOLDER:key=value[,key=value]")
    ap.add_argument("--fail-if", action="append", default=[], metavar="GATE",
                    help="e.g. 'tokens_per_s < -5%%' (repeatable); exit 1 when one fires")
    ap.add_argument("--metric", action="append", help="compare only these metrics")
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    a = ap.parse_args(argv)
    try:
        gates = [Gate(t) for t in a.fail_if]
        df, only_a, only_b = compare_runs(a.a, a.b, a.metric)
    except ValueError as e:
        print(f"shardbench compare: {e}", file=sys.stderr)
        return 2
    if not len(df):
        print(f"shardbench compare: no point of {a.a} matches one of {a.b} (same config apart "
              f"from repetition and the selector keys) with a done result", file=sys.stderr)
        return 2
    fired = []
    for g in gates:
        for _, r in df[df["metric"] == g.metric].iterrows():
            if g.fires(r):
                fired.append(f"{g.text}: {r['point']}: {r['metric']} {r['a_median']:.4g} -> "
                             f"{r['b_median']:.4g} ({r['pct']:+.1f}%, p {_fmt(r['p'])})")
    if a.json:
        json.dump({"rows": json.loads(df.to_json(orient="records")), "only_a": only_a,
                   "only_b": only_b, "gates_fired": fired}, out, indent=1)
        print(file=out)
    else:
        print(f"A = {a.a}, B = {a.b}; ratio = B / A of the medians over repetitions; p: "
              f"two-sided Mann-Whitney U", file=out)
        print_table(df, out)
        for side, names in (("A", only_a), ("B", only_b)):
            if names:
                print(f"only in {side} (not compared): {', '.join(names)}", file=out)
        for f in fired:
            print(f"REGRESSION {f}", file=out)
        if gates and not fired:
            print(f"gates passed: {'; '.join(g.text for g in gates)}", file=out)
    return 1 if fired else 0


if __name__ == "__main__":
    sys.exit(main())
