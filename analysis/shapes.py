"""The report's "Model shapes (advisor)" section: per `shapes` point (the model-shape advisor,
docs/MODELS.md "Shapes"; workloads/train/shapes_workload.cpp), the model and its neighbouring
shapes ranked by predicted step time (the step's kernels timed on the point's machine and
summed: GEMMs, and the other kernels as the operators run), with the predicted gain over the
model. The series are docs/METRICS.md "Model shapes"."""
import pandas as pd

COLUMNS = ["d_model", "heads", "head_size", "d_ff", "vocab", "params", "gemm_s", "other_s", "step_s", "gain_pct"]


def section(res):
    """(blocks, table): nothing when no point has shapes series."""
    se = res.series
    if not len(se) or not (se["name"] == "shape_step_s").any():
        return [], pd.DataFrame()
    names = res.points.set_index("point_id")["point_name"] if len(res.points) else pd.Series(dtype=str)
    tx = res.texts.set_index(["point_id", "name"])["value"] if len(res.texts) else pd.Series(dtype=str)
    rows = []
    for pid in dict.fromkeys(se.loc[se["name"] == "shape_step_s", "point_id"]):
        sp = se[se["point_id"] == pid]
        col = {n: g.sort_values("i")["value"].to_numpy() for n, g in sp.groupby("name")}
        cfg = res.config.get(pid, {})
        for i in range(len(col["shape_step_s"])):
            rows.append({"point_name": names.get(pid, pid), "model": cfg.get("model"), "dtype": cfg.get("dtype"),
                         "threads": cfg.get("threads"), "rank": i,
                         **{c: col["shape_" + c][i] for c in COLUMNS},
                         "machine": tx.get((pid, "shapes_machine"), "")})
    table = pd.DataFrame(rows)
    shown = table[table["rank"] <= 5].drop(columns=["machine"])
    return [("h2", "Model shapes (advisor)"),
            ("p", "Per shapes point: rank 0 is the model, then its neighbours within the point's "
                  "shapes.tolerance of its parameters, by predicted step time (one training step's "
                  "kernels timed on the point's machine, dtype and threads, summed: gemm_s the GEMMs, "
                  "other_s the rest; docs/MODELS.md \"Shapes\"). gain_pct = model step / shape step - 1. "
                  "A prediction, not a measured step: train both to measure it (suite/shapes-d1000.toml). "
                  "The five best per point; every shape in tables/model_shapes.csv."),
            ("table", shown)], table
