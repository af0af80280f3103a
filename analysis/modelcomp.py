# The report's model-compression section (docs/DISTILLATION.md, docs/PRUNING.md):
# - distillation: each train point with a teacher, its accuracy beside the teacher's on the
#   same held-out data (both recorded by the student's point) and their ratio;
# - accuracy against latency over the infer points (quantization x pruning x distillation):
#   every point with an accuracy figure, and its Pareto front: the points no other point of the
#   same setting beats on both (at most as slow and at least as accurate, one of them strictly).
# Latencies compare only within one setting (batch, seq, scenario, threads, device): the front
# is drawn per setting. Figures are the workloads' scalars, read here, not recomputed.
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

# The accuracy shown, the first the point has (classification before MLM before agreement).
ACCURACY = ["classification_accuracy", "mlm_accuracy", "top1_agreement"]
LATENCY = "latency_p50_s"
SETTING = ["batch", "seq", "scenario", "threads", "device", "world"]
DISTILL_COLUMNS = ["point_name", "model", "teacher", "distill.student_init", "distill.temperature",
                   "distill.soft_weight", "distill.hard_weight", "params", "teacher_params",
                   "classification_accuracy", "teacher_classification_accuracy", "accuracy_vs_teacher",
                   "final_eval_loss", "teacher_eval_loss"]


def _done(res):
    if not len(res.points):
        return []
    done = set(res.done()["point_id"])
    names = res.points.set_index("point_id")["point_name"]
    return [(pid, names[pid], res.config.get(pid, {})) for pid in res.points["point_id"] if pid in done]


def distillation_table(res):
    """One row per done train point with a teacher."""
    rows = []
    for pid, name, cfg in _done(res):
        if cfg.get("task") != "train" or not cfg.get("teacher"):
            continue
        row = {"point_name": name}
        for k in ("model", "teacher", "distill.student_init", "distill.temperature",
                  "distill.soft_weight", "distill.hard_weight"):
            row[k] = cfg.get(k)
        for k in ("params", "teacher_params", "classification_accuracy",
                  "teacher_classification_accuracy", "final_eval_loss", "teacher_eval_loss"):
            row[k] = res.scalar(pid, k)
        row["accuracy_vs_teacher"] = (row["classification_accuracy"] / row["teacher_classification_accuracy"]
                                      if row["teacher_classification_accuracy"] > 0 else np.nan)
        rows.append(row)
    return pd.DataFrame(rows, columns=DISTILL_COLUMNS)


def accuracy_latency_points(res):
    """Done infer points with a latency and an accuracy: model (its folder's name), the
    compression keys, latency, accuracy, bytes, and whether the point is on its setting's front."""
    rows = []
    for pid, name, cfg in _done(res):
        if cfg.get("task") != "infer":
            continue
        acc_name = next((a for a in ACCURACY if np.isfinite(res.scalar(pid, a))), None)
        lat = res.scalar(pid, LATENCY)
        if acc_name is None or not np.isfinite(lat):
            continue
        rows.append({"point_id": pid, "point_name": name,
                     "model": os.path.basename(str(cfg.get("model", "")).rstrip("/")),
                     "quantization": cfg.get("quantization"), "pruning": cfg.get("pruning", "none"),
                     LATENCY: lat, "accuracy": res.scalar(pid, acc_name), "accuracy_name": acc_name,
                     "model_bytes": res.scalar(pid, "model_bytes"),
                     "setting": json.dumps({k: cfg.get(k) for k in SETTING}, sort_keys=True)})
    df = pd.DataFrame(rows, columns=["point_id", "point_name", "model", "quantization", "pruning", LATENCY,
                                     "accuracy", "accuracy_name", "model_bytes", "setting"])
    df["pareto"] = False
    for _, g in df.groupby(["setting", "accuracy_name"], sort=False):
        df.loc[pareto_front(g).index, "pareto"] = True
    return df


def pareto_front(g):
    """The rows no other row beats: sorted by latency (ties: higher accuracy first), a row is
    on the front when its accuracy is above every faster row's."""
    s = g.sort_values([LATENCY, "accuracy"], ascending=[True, False])
    best, keep = -np.inf, []
    for idx, acc in zip(s.index, s["accuracy"]):
        if acc > best:
            keep.append(idx)
            best = acc
    return s.loc[keep]


def plot_accuracy_vs_latency(results, summary, groups):
    """Accuracy against latency p50, one panel per setting; the Pareto front joined."""
    pts = accuracy_latency_points(results)
    if not len(pts):
        return None, "no infer points with both a latency and an accuracy figure"
    panels = list(pts.groupby(["setting", "accuracy_name"], sort=False))
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 5.5), squeeze=False)
    for ax, ((setting, acc_name), g) in zip(axes.flat, panels):
        for i, (model, m) in enumerate(g.groupby("model", sort=False)):
            ax.scatter(1e3 * m[LATENCY], m["accuracy"], color=f"C{i % 10}", label=model, s=30)
            for r in m.itertuples():
                ax.annotate(f"{r.quantization}/{r.pruning}", (1e3 * getattr(r, LATENCY), r.accuracy),
                            xytext=(3, 3), textcoords="offset points", fontsize=6)
        f = pareto_front(g)
        ax.plot(1e3 * f[LATENCY], f["accuracy"], "k--", lw=1, label="Pareto front")
        s = json.loads(setting)
        ax.set(xlabel="latency p50 per query (ms)", ylabel=acc_name.replace("_", " ") + " (fraction)",
               title=", ".join(f"{k} {v}" for k, v in s.items() if v is not None))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig, ""


PLOTS = [
    ("accuracy_vs_latency", "Accuracy against inference latency per model, quantization and pruning, "
     "with the Pareto front (per setting)", plot_accuracy_vs_latency),
]


def blocks(distilled, points):
    B = []
    if len(distilled):
        B += [("h2", "Distillation (task = train with a teacher)"),
              ("p", "Each student's validation accuracy beside its teacher's on the same data "
                    "(both recorded by the student's point; accuracy_vs_teacher = student / "
                    "teacher). Latency: the accuracy-against-latency table below, from infer "
                    "points of the exported models."), ("table", distilled)]
    if len(points):
        B += [("h2", "Accuracy against latency"),
              ("p", "Infer points with an accuracy figure; pareto = no point of the same setting "
                    "(batch, seq, scenario, threads, device, world) is at once at most as slow and "
                    "at least as accurate, one of them strictly."),
              ("table", points.drop(columns=["point_id", "setting"]))]
    return B
