# The report's "Memory: predicted against measured" section (the Longctx issue): for every done
# training point whose ranks carry the memory model's prediction (the ranks table's
# predicted_* columns), its fullest rank's measured memory beside the prediction, and, where
# `shardbench fit` chose the point's "auto" keys, fit's predicted peak and step time beside the
# measured ones. Formulas in docs/METRICS.md ("Memory model", "Fit").
import numpy as np
import pandas as pd

from analysis.metrics import timed_steps

MIB = 1024.0 * 1024.0
# The memory model's terms, each a ranks column predicted_<term>_bytes (harness/trace/records.h);
# their sum less predicted_grad_unformed_bytes (gradients not alive at the peak's moment) is
# the predicted peak, as `shardbench fit` takes it (MemoryPrediction::peak).
TERMS = ["param", "grad", "optim", "compression", "gathered", "activation_layers",
         "activation_attention", "activation_head", "offload", "first_unit_grad"]
LESS = "predicted_grad_unformed_bytes"
KEYS = ["strategy", "attention", "activation_checkpoint", "seq_chunks", "offload_optimizer", "kv_offload"]
COLUMNS = (["point_name", "rank"] + KEYS +
           ["state_mib", "state_predicted_mib", "step_tensors_mib", "activations_predicted_mib",
            "total_mib", "total_predicted_mib", "total_ratio", "peak_at", "predicted_at",
            "peak_rss_mib",
            "fit_peak_mib", "step_s", "fit_step_s"])


def _num(row, col):
    v = row.get(col, np.nan)
    return float(v) if pd.notna(v) else np.nan


def _text(row, col):
    v = row.get(col, "")
    if isinstance(v, bytes):
        v = v.decode()
    return v if isinstance(v, str) else ""


def memory_table(res):
    """One row per done point with a prediction: its fullest rank (largest measured model state
    + step tensors). total = model_state_bytes + peak_step_tensor_bytes (the tensors the step
    allocates above its start and end; NaN when not measured, 0 in the file); total_predicted =
    the sum of the predicted terms less the unformed gradients (LESS); total_ratio = total /
    total_predicted."""
    rows = []
    r_all = res.ranks
    if not len(r_all) or "predicted_model_state_bytes" not in r_all.columns:
        return pd.DataFrame(columns=COLUMNS)
    for _, p in res.done().iterrows():
        pid = p["point_id"]
        r = r_all[r_all["point_id"] == pid]
        # Optional columns (files from before them): read with get, their absence handled.
        if not len(r) or not (pd.to_numeric(r.get("predicted_model_state_bytes"), errors="coerce") > 0).any():
            continue
        step = pd.to_numeric(r.get("peak_step_tensor_bytes", pd.Series(0, index=r.index)), errors="coerce")
        step = step.where(step > 0)
        state = pd.to_numeric(r.get("model_state_bytes"), errors="coerce")
        row = r.loc[(state + step).fillna(state).idxmax()]
        predicted = sum(_num(row, f"predicted_{t}_bytes") for t in TERMS if f"predicted_{t}_bytes" in r.columns)
        if LESS in r.columns and pd.notna(row.get(LESS)):  # files from before it: nothing less
            predicted -= _num(row, LESS)
        acts = sum(_num(row, f"predicted_{t}_bytes") for t in TERMS[5:8] + ["first_unit_grad"]
                   if f"predicted_{t}_bytes" in r.columns)
        measured_step = _num(row, "peak_step_tensor_bytes")
        measured_step = measured_step if measured_step > 0 else np.nan
        measured_total = _num(row, "model_state_bytes") + measured_step
        cfg, ref = res.config.get(pid, {}), res.reference.get(pid, {})
        s = timed_steps(res.steps[res.steps["point_id"] == pid]) if len(res.steps) else pd.DataFrame()
        out = {"point_name": p["point_name"], "rank": int(row.get("rank"))}
        out.update({k: cfg.get(k, "") for k in KEYS})
        out.update({
            "state_mib": _num(row, "model_state_bytes") / MIB,
            "state_predicted_mib": _num(row, "predicted_model_state_bytes") / MIB,
            "step_tensors_mib": measured_step / MIB,
            "activations_predicted_mib": acts / MIB,
            "total_mib": measured_total / MIB,
            "total_predicted_mib": predicted / MIB,
            "total_ratio": measured_total / predicted if predicted > 0 else np.nan,
            # Where the measured step tensors peaked (the engine's phase) and the memory
            # model's moment: files from before the columns give "".
            "peak_at": _text(row, "peak_step_tensor_phase"),
            "predicted_at": _text(row, "predicted_peak_moment"),
            "peak_rss_mib": _num(row, "peak_rss_bytes") / MIB,
            "fit_peak_mib": float(ref["fit_peak_bytes"]) / MIB if "fit_peak_bytes" in ref else np.nan,
            "step_s": float(np.median(s["wall_s"])) if len(s) else np.nan,
            "fit_step_s": float(ref["fit_step_s"]) if "fit_step_s" in ref else np.nan,
        })
        rows.append(out)
    return pd.DataFrame(rows, columns=COLUMNS)


# The planner's accuracy (the Longctx issue's targets): a point's predicted peak is within
# MEMORY_TOLERANCE of the measured one when |total / total_predicted - 1| <= it; a pair of
# points counts for the step-time order when their measured median steps differ by more than
# ORDER_MARGIN (slower / faster - 1), and agrees when fit's predicted steps order them alike.
MEMORY_TOLERANCE = 0.10
ORDER_MARGIN = 0.15


def planner_accuracy(t):
    """{memory_within, memory_points, worst_ratio, pairs, pairs_agree, pairs_tied} over
    memory_table's rows (pairs: only rows with both a measured and a predicted step; a pair
    whose predicted steps are equal is tied: the prediction orders it neither way, and it does
    not count as agreeing)."""
    ratios = t["total_ratio"].dropna()
    out = {"memory_within": int((abs(ratios - 1.0) <= MEMORY_TOLERANCE).sum()),
           "memory_points": int(len(ratios)),
           "worst_ratio": float(ratios.iloc[int(abs(ratios - 1.0).values.argmax())]) if len(ratios) else np.nan,
           "pairs": 0, "pairs_agree": 0, "pairs_tied": 0}
    timed = t.dropna(subset=["step_s", "fit_step_s"])
    steps, fits = list(timed["step_s"]), list(timed["fit_step_s"])
    for i in range(len(steps)):
        for j in range(i + 1, len(steps)):
            lo, hi = sorted((steps[i], steps[j]))
            if lo <= 0 or hi / lo - 1.0 <= ORDER_MARGIN:
                continue
            out["pairs"] += 1
            out["pairs_agree"] += int((steps[i] - steps[j]) * (fits[i] - fits[j]) > 0)
            out["pairs_tied"] += int(fits[i] == fits[j])
    return out


def _accuracy_text(a):
    text = (f"Planner accuracy: {a['memory_within']} of {a['memory_points']} points' predicted "
            f"totals within {MEMORY_TOLERANCE:.0%} of the measured (worst total_ratio "
            f"{a['worst_ratio']:.3f}).")
    if a["pairs"]:
        text += (f" Step-time order: fit's predicted steps order {a['pairs_agree']} of the "
                 f"{a['pairs']} pairs whose measured median steps differ by more than "
                 f"{ORDER_MARGIN:.0%} as measured ({a['pairs_agree'] / a['pairs']:.0%}"
                 + (f"; {a['pairs_tied']} tied in the prediction" if a["pairs_tied"] else "")
                 + "; costs measured by `shardbench fit` on the machine its fit-costs.json names).")
    else:
        text += " Step-time order: no pair of points has both a measured and a predicted step."
    return text


def section(res):
    """(blocks, table); no blocks when no point carries a prediction."""
    t = memory_table(res)
    if not len(t):
        return [], t
    return [("h2", "Memory: predicted against measured"),
            ("p", "Each training point's fullest rank: model state measured (between steps) and "
                  "predicted; the step's tensors above its start and end measured (peak_step_tensor_bytes; "
                  "empty where not measured: a GPU or another allocator) beside the predicted "
                  "activations; total = model state + step tensors against the sum of every "
                  "predicted term less the gradients not yet formed at its moment (the peak "
                  "`shardbench fit` compares with memory_budget); peak "
                  "resident memory, which also holds the runtime. peak_at: where the step "
                  "was when its tensors peaked (the engine's last event: \"loss\" is forward's "
                  "end; \"backward of unit\" or, under full checkpointing, \"recomputation of "
                  "unit\" with the last block's number is the top block's backward; \"backward "
                  "of unit 0\" the first unit's); predicted_at: the moment the memory model takes its activation "
                  "terms at. fit_*: what `shardbench fit` "
                  "predicted for the point (its \"auto\" keys' choice, or its own settings when the "
                  "suite's costs were measured), beside the measured median "
                  "step (docs/METRICS.md \"Memory model\", \"Fit\")."),
            ("p", _accuracy_text(planner_accuracy(t))),
            ("table", t)], t
