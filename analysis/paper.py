# The papers' results tables with their figures beside ours, in the same shape. Which points
# form a table is decided from config values and the suite's `reference` attribute (the rule is
# written in docs/REPORTS.md, "Which points form the paper tables").
import json

import numpy as np
import pandas as pd

from analysis import stats

LOSS_TOLERANCE = 0.005  # "reached baseline loss": final loss within 0.5% above the none policy's
POLICY_KEY = "compression"
POLICY_ORDER = ["none", "naive", "hybrid"]


def policy_order_key(policy):
    """The paper's order none, naive, hybrid; suites name variants by prefix ("naive-int8"),
    so a policy sorts with the first paper policy it starts with, others last."""
    p = str(policy)
    rank = next((i for i, name in enumerate(POLICY_ORDER) if p.startswith(name)), len(POLICY_ORDER))
    return rank, p

# Seed paper tables: (title, reference key, task or None, ours from summary, unit, change kind)
SEED_TABLES = [
    ("Inference latency per batch", "latency_ms", "infer",
     lambda g, k, s: g.median(k, s, "step_time_s") * 1e3, "ms", "reduction"),
    ("Memory footprint", "memory_gb", None,
     lambda g, k, s: g.median(k, s, "memory_bytes") / 1e9, "GB", "reduction"),
    ("Training throughput", "samples_per_s", "train",
     lambda g, k, s: g.median(k, s, "samples_per_s"), "samples/s", "factor"),
]


def _change(kind, new, base):
    if kind == "reduction":
        return stats.percent_reduction(new, base)
    return new / base if base else np.nan


def _pairs(groups, ref_key, task):
    """(group, baseline group) pairs whose group carries ref_key in its reference."""
    for key in groups.members:
        if ref_key not in groups.reference(key):
            continue
        if task and groups.config(key).get("task") != task:
            continue
        base, _ = groups.baseline_of(key)
        if base is not None:
            yield key, base


def seed_tables(groups, summary):
    """The seed paper's four tables: {title: DataFrame}. Empty tables are left out."""
    out = {}
    for title, ref_key, task, ours, unit, kind in SEED_TABLES:
        change = "reduction (%)" if kind == "reduction" else "factor (x)"
        rows = []
        for key, base in _pairs(groups, ref_key, task):
            pb = groups.reference(base).get(ref_key, np.nan)
            po = groups.reference(key)[ref_key]
            ob, oo = ours(groups, base, summary), ours(groups, key, summary)
            rows.append({
                "comparison": f"{groups.config(key).get('model', '?')}: "
                              f"{groups.difference(key, base)}",
                f"paper baseline ({unit})": pb, f"paper optimized ({unit})": po,
                f"paper {change}": _change(kind, po, pb),
                f"ours baseline ({unit})": ob, f"ours optimized ({unit})": oo,
                f"ours {change}": _change(kind, oo, ob),
                "repetitions": len(groups.members[key])})
        if rows:
            out[title] = pd.DataFrame(rows)
            out[title].attrs.update(unit=unit, kind=kind, change=change)
    rows = []
    for key, base in _pairs(groups, "accuracy_delta_pct", None):
        ab, ao = groups.median(base, summary, "accuracy"), groups.median(key, summary, "accuracy")
        metric = summary.loc[groups.members[key][0], "accuracy_metric"]
        rows.append({
            "comparison": f"{groups.config(key).get('model', '?')}: "
                          f"{groups.difference(key, base)}",
            "metric": metric or "(none recorded)",
            "paper: within (%) of baseline": groups.reference(key)["accuracy_delta_pct"],
            "ours baseline": ab, "ours optimized": ao,
            "ours: within (%) of baseline": abs(ao - ab) / ab * 100 if ab else np.nan})
    if rows:
        out["Model accuracy"] = pd.DataFrame(rows)
    return out


def _family_key(config):
    # Everything but the policy (and its spelled-out settings) and the repetition.
    return json.dumps({k: v for k, v in config.items()
                       if k != "repetition" and not k.startswith(POLICY_KEY)}, sort_keys=True)


def compression_tables(groups, summary):
    """The hybrid-compression table (TFLOPS per worker and samples/s for none vs naive vs
    hybrid, and whether baseline loss was reached), one per family of training points that
    differ only in the compression policy and include `none`. {title: DataFrame}."""
    families = {}
    for key in groups.members:
        cfg = groups.config(key)
        if cfg.get("task") == "train" and POLICY_KEY in cfg:
            families.setdefault(_family_key(cfg), {})[cfg[POLICY_KEY]] = key
    out = {}
    for fam, by_policy in families.items():
        if "none" not in by_policy or len(by_policy) < 2:
            continue
        policies = sorted(by_policy, key=policy_order_key)
        none = by_policy["none"]
        t0 = groups.median(none, summary, "tflops_per_worker")
        s0 = groups.median(none, summary, "samples_per_s")
        l0 = groups.median(none, summary, "final_loss")
        rows = []
        for p in policies:
            key = by_policy[p]
            ref = groups.reference(key)
            t = groups.median(key, summary, "tflops_per_worker")
            s = groups.median(key, summary, "samples_per_s")
            loss = groups.median(key, summary, "final_loss")
            reached = "" if not np.isfinite(loss) or not np.isfinite(l0) else \
                ("yes" if loss <= l0 * (1 + LOSS_TOLERANCE) else "no")
            paper_reached = ref.get("reached_baseline_loss")
            rows.append({
                "policy": p, "TFLOPS per worker": t, "samples/s": s,
                "TFLOPS vs none (%)": stats.percent_change(t, t0),
                "samples/s vs none (%)": stats.percent_change(s, s0),
                "paper TFLOPS vs none (%)": ref.get("tflops_gain_pct", np.nan),
                "paper samples/s vs none (%)": ref.get("samples_gain_pct", np.nan),
                "final loss": loss, "reached baseline loss": reached,
                "paper reached baseline loss": "" if paper_reached is None else
                ("yes" if paper_reached else "no"),
                "repetitions": len(groups.members[key])})
        c = json.loads(fam)
        title = (f"Compression policies: {c.get('model', '?')} {c.get('strategy', '?')} "
                 f"on {c.get('world', '?')} ranks")
        out[title] = pd.DataFrame(rows)
    return out


def _g(v):
    return "?" if v is None or not np.isfinite(v) else f"{v:.3g}"


def seed_summary(seed):
    """The seed paper's "Performance Results" list as one table, paper beside ours, a row per
    table row: e.g. "185 -> 42 ms (77.3% reduction)". Built from seed_tables()."""
    rows = []
    for title, df in seed.items():
        for _, r in df.iterrows():
            if title == "Model accuracy":
                paper = f"within {_g(r['paper: within (%) of baseline'])}% of baseline"
                ours = (f"within {_g(r['ours: within (%) of baseline'])}% of baseline "
                        f"({r['metric']})")
            else:
                unit, kind, col = df.attrs["unit"], df.attrs["kind"], df.attrs["change"]

                def one(who):
                    b, o, ch = r[f"{who} baseline ({unit})"], r[f"{who} optimized ({unit})"], \
                        r[f"{who} {col}"]
                    tail = f"{_g(ch)}% reduction" if kind == "reduction" else f"{_g(ch)}x"
                    return f"{_g(b)} -> {_g(o)} {unit} ({tail})"
                paper, ours = one("paper"), one("ours")
            rows.append({"result": title, "comparison": r["comparison"], "paper": paper,
                         "ours": ours})
    return pd.DataFrame(rows, columns=["result", "comparison", "paper", "ours"])
