# The papers' results tables with their figures beside ours, in the same shape. Which points
# form a table is decided from config values and the suite's `reference` attribute (the rule is
# written in docs/REPORTS.md, "Which points form the paper tables").
import json

import numpy as np
import pandas as pd

from analysis import conditions as cond_mod
from analysis import stats
from analysis.references import is_paper_figure

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
# The seed's latency is per batch of 8 sequences of 128 tokens, timed batch by batch: only
# the offline scenario (batches of `batch` samples back to back) measures that.
PAPER_LATENCY_SCENARIO = "offline"
MEMORY_NOTE = ("the seed does not say what its 3.2 -> 0.8 GB measured; its 4.0x matches the "
               "weight bytes (fp32 -> int8 is 4 -> 1 byte per weight), while 3.2 GB exceeds "
               "BERT-Large's 1.34 GB of fp32 weights, so it likely includes runtime memory: "
               "compare its ratio with our model bytes and its size with our peak resident memory")
ACCURACY_NOTE = ("needs a trained checkpoint: a randomly initialised model has no accuracy to "
                 "keep. Run suite/quant-accuracy-train.toml, then suite/quant-accuracy.toml "
                 "(docs/QUANTIZATION.md)")
# A training speed-up from sharding or compression removes communication (and shards the
# optimizer step): it cannot exceed the baseline's step time over its forward + backward time
# in the same run. Beyond this margin above that ceiling a factor is flagged.
CEILING_MARGIN = 1.10


def _change(kind, new, base):
    if kind == "reduction":
        return stats.percent_reduction(new, base)
    return new / base if base else np.nan


def _pairs(groups, ref_key, task):
    """(group, baseline group) pairs whose group carries ref_key in its reference."""
    for key in groups.members:
        if not is_paper_figure(groups.reference(key), ref_key):  # [v, lo, hi] is a check
            continue
        if task and groups.config(key).get("task") != task:
            continue
        base, _ = groups.baseline_of(key)
        if base is not None:
            yield key, base


def conditions_text(groups, key, conds):
    """The conditions column: task shape, precision, ranks x threads and the machine."""
    c = groups.config(key)
    parts = []
    if c.get("task") == "infer":
        parts.append(f"scenario {c.get('scenario', 'single-stream')}")
    parts.append(f"batch {c.get('batch', '?')} x seq {c.get('seq', '?')}")
    prec = [str(c[k]) for k in ("dtype", "param_dtype", "quantization") if c.get(k) not in
            (None, "", "none")]
    parts.append("/".join(prec) if prec else "fp32")
    pid = groups.members[key][0]
    if conds is not None and pid in conds.index:
        parts.append(cond_mod.describe(conds.loc[pid]))
        if conds.loc[pid, "flags"]:
            parts.append("FLAGGED: " + conds.loc[pid, "flags"])
    else:
        parts.append(f"{c.get('world', '?')} ranks, conditions not recorded")
    return "; ".join(parts)


def _comparable(title, groups, key, base):
    """"" when our figures measure what the paper's row did, else why not."""
    if title != "Inference latency per batch":
        return ""
    for k in (base, key):
        scen = groups.config(k).get("scenario", "single-stream")
        if scen != PAPER_LATENCY_SCENARIO:
            return (f"not comparable: {groups.name[k]} ran the {scen} scenario; the paper's "
                    f"figure is per batch of 8 x 128 (set scenario = \"offline\", batch = 8, "
                    f"seq = 128)")
    return ""


def _ceiling(groups, base, summary, steps):
    """Baseline step time / baseline compute time (median over its timed steps), or NaN."""
    if steps is None or not len(steps):
        return np.nan
    s = steps[steps["point_id"].isin(groups.members[base]) & (steps["warmup"].astype(int) == 0)]
    if not len(s):
        return np.nan
    # Forward + backward only: sharding may also shrink the optimizer step (1/world of it).
    compute = (s["forward_s"] + s["backward_s"]).astype(float).median()
    ceiling = float(s["wall_s"].astype(float).median() / compute) if compute > 0 else np.nan
    # Each phase is the slowest rank's, so their sum can exceed the step's wall time: then the
    # bound is not determined, and nothing is flagged against it.
    return ceiling if ceiling >= 1 else np.nan


def _compute_dtypes(groups, keys, conds):
    """The recorded compute dtype of each group's first point ("" where unknown, e.g. older
    files); unknown ones are left out, so only two known, different dtypes differ."""
    out = []
    for k in keys:
        pid = groups.members[k][0]
        if conds is not None and pid in conds.index and conds.loc[pid, "compute_dtype"]:
            out.append(conds.loc[pid, "compute_dtype"])
    return out


def _row(title, groups, key, base, summary, conds, steps):
    _, ref_key, _, ours, unit, kind = next(t for t in SEED_TABLES if t[0] == title)
    change = "reduction (%)" if kind == "reduction" else "factor (x)"
    pb = groups.reference(base).get(ref_key, np.nan)
    po = groups.reference(key)[ref_key]
    note = _comparable(title, groups, key, base)
    ob, oo = (np.nan, np.nan) if note else (ours(groups, base, summary), ours(groups, key, summary))
    row = {"comparison": f"{groups.config(key).get('model', '?')}: "
                         f"{groups.difference(key, base)}",
           f"paper baseline ({unit})": pb, f"paper optimized ({unit})": po,
           f"paper {change}": _change(kind, po, pb),
           f"ours baseline ({unit})": ob, f"ours optimized ({unit})": oo,
           f"ours {change}": _change(kind, oo, ob),
           "repetitions": len(groups.members[key])}
    if title == "Memory footprint":
        row["ours peak resident baseline (GB)"] = groups.median(base, summary, "peak_rss_bytes") / 1e9
        row["ours peak resident optimized (GB)"] = groups.median(key, summary, "peak_rss_bytes") / 1e9
        note = MEMORY_NOTE
    if title == "Training throughput":
        dtypes = _compute_dtypes(groups, (base, key), conds)
        # The ceiling bounds what removing communication buys; a faster compute dtype
        # shortens the compute itself, so the baseline's compute time bounds nothing.
        ceiling = _ceiling(groups, base, summary, steps) if len(set(dtypes)) < 2 else np.nan
        row["ceiling (x)"] = ceiling
        if len(set(dtypes)) > 1:
            note = (f"no ceiling: the baseline computes in {dtypes[0]}, the optimized row in "
                    f"{dtypes[1]}, so the baseline's compute time does not bound the factor")
        if np.isfinite(ceiling) and np.isfinite(row["ours factor (x)"]) and \
                row["ours factor (x)"] > ceiling * CEILING_MARGIN:
            note = (f"implausible: {row['ours factor (x)']:.3g}x exceeds the {ceiling:.3g}x the "
                    f"baseline's own compute time allows (check the conditions)")
    row["conditions"] = conditions_text(groups, key, conds)
    row["note"] = note
    return row


def seed_tables(groups, summary, conds=None, steps=None):
    """The seed paper's four tables: {title: DataFrame}. Empty tables are left out. conds:
    conditions.conditions() indexed by point_id; steps: the step records (for the ceiling)."""
    out = {}
    for title, ref_key, task, _, unit, kind in SEED_TABLES:
        rows = [_row(title, groups, key, base, summary, conds, steps)
                for key, base in _pairs(groups, ref_key, task)]
        if rows:
            out[title] = pd.DataFrame(rows)
            out[title].attrs.update(unit=unit, kind=kind,
                                    change="reduction (%)" if kind == "reduction" else "factor (x)")
    acc = accuracy_table(groups, summary, conds)
    if acc is not None:
        out["Model accuracy"] = acc
    return out


def _trained(groups, key):
    """Weights that were trained: a training point's own, a checkpoint, or a model folder."""
    c = groups.config(key)
    return c.get("task") == "train" or bool(c.get("checkpoint")) or "/" in str(c.get("model", ""))


def accuracy_table(groups, summary, conds=None):
    """Accuracy kept by the optimized model: only meaningful on a trained checkpoint, and
    never a comparison of undefined numbers (then the row says what it needs)."""
    rows = []
    for key, base in _pairs(groups, "accuracy_delta_pct", None):
        ab, ao = groups.median(base, summary, "accuracy"), groups.median(key, summary, "accuracy")
        metric = summary.loc[groups.members[key][0], "accuracy_metric"]
        note, within = "", np.nan
        if not (_trained(groups, key) and _trained(groups, base)):
            note, ab, ao = ACCURACY_NOTE, np.nan, np.nan
        elif not (np.isfinite(ab) and np.isfinite(ao)) or ab == 0:
            note, ab, ao = "no accuracy recorded on both sides: nothing to compare", np.nan, np.nan
        else:
            within = abs(ao - ab) / ab * 100
        rows.append({
            "comparison": f"{groups.config(key).get('model', '?')}: "
                          f"{groups.difference(key, base)}",
            "metric": metric or "(none recorded)",
            "paper: within (%) of baseline": groups.reference(key)["accuracy_delta_pct"],
            "ours baseline": ab, "ours optimized": ao, "ours: within (%) of baseline": within,
            "repetitions": len(groups.members[key]),
            "conditions": conditions_text(groups, key, conds), "note": note})
    return pd.DataFrame(rows) if rows else None


def _family_key(config):
    # Everything but the policy (and its spelled-out settings), the repetition and the seed:
    # a family's seeds are pooled (the seed changes the initialisation and the data order).
    return json.dumps({k: v for k, v in config.items()
                       if k not in ("repetition", "seed") and not k.startswith(POLICY_KEY)},
                      sort_keys=True)


def _pooled(groups, keys, summary, metric):
    """The median of a metric over every member of several groups (a policy's seeds)."""
    pids = [pid for k in keys for pid in groups.members[k]]
    v = summary.loc[pids, metric].astype(float)
    v = v[np.isfinite(v)]
    return float(v.median()) if len(v) else np.nan


def _seed_losses(groups, keys, summary):
    """Each seed's final loss (its group's median), finite ones only."""
    v = [groups.median(k, summary, "final_loss") for k in keys]
    return [x for x in v if np.isfinite(x)]


def _reached(losses, base):
    """"Reached baseline loss": with 2+ seeds on both sides, the policy's mean within (or
    below) the baseline seeds' spread, max over them; otherwise within LOSS_TOLERANCE of the
    baseline's one loss. "" when a side has none."""
    if not losses or not base:
        return ""
    if len(losses) >= 2 and len(base) >= 2:
        return "yes" if np.mean(losses) <= max(base) else "no"
    return "yes" if np.mean(losses) <= np.mean(base) * (1 + LOSS_TOLERANCE) else "no"


def compression_tables(groups, summary):
    """The hybrid-compression table (TFLOPS per worker and samples/s for none vs naive vs
    hybrid, and whether baseline loss was reached), one per family of training points that
    differ only in the compression policy (and seed: seeds pooled) and include `none`.
    {title: DataFrame}."""
    families = {}
    for key in groups.members:
        cfg = groups.config(key)
        if cfg.get("task") == "train" and POLICY_KEY in cfg:
            families.setdefault(_family_key(cfg), {}).setdefault(cfg[POLICY_KEY], []).append(key)
    out = {}
    for fam, by_policy in families.items():
        if "none" not in by_policy or len(by_policy) < 2:
            continue
        policies = sorted(by_policy, key=policy_order_key)
        none = by_policy["none"]
        t0 = _pooled(groups, none, summary, "tflops_per_worker")
        s0 = _pooled(groups, none, summary, "samples_per_s")
        l0 = _seed_losses(groups, none, summary)
        rows = []
        for p in policies:
            keys = by_policy[p]
            ref = groups.reference(keys[0])
            t = _pooled(groups, keys, summary, "tflops_per_worker")
            s = _pooled(groups, keys, summary, "samples_per_s")
            losses = _seed_losses(groups, keys, summary)
            paper_reached = ref.get("reached_baseline_loss")
            rows.append({
                "policy": p, "TFLOPS per worker": t, "samples/s": s,
                "TFLOPS vs none (%)": stats.percent_change(t, t0),
                "samples/s vs none (%)": stats.percent_change(s, s0),
                "paper TFLOPS vs none (%)": ref.get("tflops_gain_pct", np.nan),
                "paper samples/s vs none (%)": ref.get("samples_gain_pct", np.nan),
                "final loss": float(np.mean(losses)) if losses else np.nan,
                "reached baseline loss": _reached(losses, l0),
                "paper reached baseline loss": "" if paper_reached is None else
                ("yes" if paper_reached else "no"),
                "repetitions": sum(len(groups.members[k]) for k in keys),
                "seeds": len(keys),
                "final loss min": min(losses) if losses else np.nan,
                "final loss max": max(losses) if losses else np.nan})
        c = json.loads(fam)
        title = (f"Compression policies: {c.get('model', '?')} {c.get('strategy', '?')} "
                 f"on {c.get('world', '?')} ranks")
        mesh = ", ".join(f"{k.split('.')[1]} {c[k]}" for k in ("mesh.dp_shard", "mesh.tp", "mesh.pp")
                         if k in c and int(c[k] or 1) > 1)
        if mesh:
            title += f" ({mesh})"
        while title in out:  # families that differ in keys the title does not show
            title += " +"
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
                ours = r["note"] or (f"within {_g(r['ours: within (%) of baseline'])}% of "
                                     f"baseline ({r['metric']})")
            else:
                unit, kind, col = df.attrs["unit"], df.attrs["kind"], df.attrs["change"]

                def one(who):
                    b, o, ch = r[f"{who} baseline ({unit})"], r[f"{who} optimized ({unit})"], \
                        r[f"{who} {col}"]
                    tail = f"{_g(ch)}% reduction" if kind == "reduction" else f"{_g(ch)}x"
                    return f"{_g(b)} -> {_g(o)} {unit} ({tail})"
                paper = one("paper")
                ours = r["note"] if r["note"].startswith("not comparable") else one("ours")
            rows.append({"result": title, "comparison": r["comparison"], "paper": paper,
                         "ours": ours, "repetitions": r["repetitions"],
                         "conditions": r["conditions"]})
    return pd.DataFrame(rows, columns=["result", "comparison", "paper", "ours", "repetitions",
                                       "conditions"])
