# The report's model-compression section (analysis/modelcomp.py): the Pareto front holds
# exactly the infer points no other point of the same setting beats on latency and accuracy
# (fronts are per setting: a batch-1 point never hides a batch-32 one); the distillation
# table puts each student's accuracy beside its teacher's with their ratio; the report has
# both sections and the accuracy-against-latency plot.
import os

import make_fixture
from analysis import modelcomp, report
from analysis.load import load_results


def _infer(root, i, model, quant, pruning, latency, accuracy, batch=32):
    cfg = make_fixture._cfg(task="infer", model=f"results/x/{model}", quantization=quant,
                            pruning=pruning, batch=batch, seq=32, scenario="offline", world=1,
                            strategy="no_shard", device="cpu")
    make_fixture.write_point(os.path.join(root, "points", f"{i}-p{i:03d}.h5"), index=i,
                             point_id=f"p{i:03d}", name=f"{model}/{quant}/{pruning}/{batch}",
                             config=cfg, scalars=dict(latency_p50_s=latency,
                                                      classification_accuracy=accuracy,
                                                      model_bytes=1e6))


POINTS = [  # model, quantization, pruning, latency, accuracy, batch
    ("teacher", "none", "none", 0.100, 0.90, 32),
    ("teacher", "bf16", "none", 0.040, 0.90, 32),      # front: faster, as accurate
    ("student", "none", "none", 0.050, 0.88, 32),      # beaten by teacher/bf16
    ("student", "bf16", "none", 0.020, 0.87, 32),      # front
    ("student", "bf16", "ffn", 0.015, 0.80, 32),       # front: fastest
    ("student", "int8-dynamic", "ffn", 0.018, 0.79, 32),  # beaten
    ("teacher", "none", "none", 0.010, 0.90, 1),       # another setting: its own front
]


def _write(root):
    for i, p in enumerate(POINTS):
        _infer(root, i, *p)
    cfg = make_fixture._cfg(task="train", model="bert-base-6l", teacher="results/x/teacher",
                            **{"distill.student_init": "every_other", "distill.temperature": 2.0,
                               "distill.soft_weight": 0.5, "distill.hard_weight": 0.5})
    make_fixture.write_point(os.path.join(root, "points", "7-d007.h5"), index=7, point_id="d007",
                             name="student", config=cfg,
                             scalars=dict(classification_accuracy=0.873,
                                          teacher_classification_accuracy=0.9, params=66e6,
                                          teacher_params=110e6))


def test_the_pareto_front_is_the_undominated_points_per_setting(tmp_path):
    _write(str(tmp_path))
    pts = modelcomp.accuracy_latency_points(load_results(str(tmp_path))).set_index("point_name")
    front = set(pts.index[pts["pareto"]])
    assert front == {"teacher/bf16/none/32", "student/bf16/none/32", "student/bf16/ffn/32",
                     "teacher/none/none/1"}
    assert set(pts["model"]) == {"teacher", "student"}  # folder names, not paths


def test_the_distillation_table_divides_by_the_teacher(tmp_path):
    _write(str(tmp_path))
    d = modelcomp.distillation_table(load_results(str(tmp_path)))
    assert len(d) == 1
    assert abs(d["accuracy_vs_teacher"].iloc[0] - 0.97) < 1e-12
    assert d["distill.student_init"].iloc[0] == "every_other"


def test_the_report_has_the_sections_and_the_plot(tmp_path):
    _write(str(tmp_path / "r"))
    built = report.build(str(tmp_path / "r"), str(tmp_path / "out"))
    md = open(tmp_path / "out" / "report.md").read()
    assert "## Distillation (task = train with a teacher)" in md
    assert "## Accuracy against latency" in md
    made = {p["stem"]: p for p in built["plots"]}
    assert made["accuracy_vs_latency"]["path"], made["accuracy_vs_latency"]["note"]
    assert built["tables"]["accuracy_latency"]["pareto"].sum() == 4
