#!/usr/bin/env bash
# Distillation end to end on the demo data: a bert-tiny teacher fine-tunes and is exported; a
# 1-layer student distils from it on 2 ranks (full_shard, the teacher sharded alike, layers
# copied from the teacher) and a plain student trains alone; the three folders are served
# under two quantizations; the report has the Distillation table (the student's accuracy
# beside the teacher's, as measured in the student's point) and the accuracy-against-latency
# table and plot with a Pareto front. A fourth model prunes gradually while it trains (magnitude
# to 80% by the cubic schedule, on 2 ranks) and keeps exactly that sparsity. Then the teacher pruned (ffn) and written back out as a
# folder, which loads as a model with the pruned model's accuracy.
# Usage: distill.sh build/shardbench
source "$(dirname "$0")/preamble.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
/usr/bin/python3 "$src/suite/data/make_finetune_demo.py" "$d/demo" > /dev/null
cat > "$d/train.toml" <<EOF
[base]
task = "train"
data = "$d/demo/train.jsonl"
validation = "$d/demo/validation.jsonl"
tokenizer_dir = "$d/demo"
batch = 32
seq = 32
steps = 60
lr = 2e-3
min_lr = 2e-4
lr_warmup = 5
eval_batches = 2
[[zip]]
model = ["bert-tiny", "bert-tiny-1l", "bert-tiny-1l", "bert-tiny"]
world = [1, 2, 1, 2]
threads = [2, 1, 2, 1]
strategy = ["no_shard", "full_shard", "no_shard", "full_shard"]
teacher = ["", "$d/teacher", "", ""]
"distill.student_init" = ["none", "every_other", "none", "none"]
export_folder = ["$d/teacher", "$d/student", "$d/alone", "$d/sparse"]
pruning = ["none", "none", "none", "magnitude"]
"pruning.sparsity" = [0.5, 0.5, 0.5, 0.8]
EOF
"$sb" sweep "$d/train.toml" --results "$d/t" > "$d/train.log" 2>&1 || { cat "$d/train.log"; fail "train sweep"; }
/usr/bin/python3 - "$d/t" <<'PY'
import glob, json, sys, h5py
seen = {}
for f in sorted(glob.glob(f"{sys.argv[1]}/points/*.h5")):
    with h5py.File(f) as h:
        assert h.attrs["status"] == "done", (f, h.attrs["failure_reason"])
        c = json.loads(h.attrs["config"])
        s = {k: float(v) for k, v in h["scalars"].attrs.items()}
        if c["pruning"] != "none":  # gradual magnitude pruning to 80%, kept through fine-tuning
            assert abs(s["pruning_sparsity_final"] - round(0.8 * s["pruning_eligible"]) / s["pruning_eligible"]) < 1e-12, s
            steps = h["series"]["pruning_step_sparsity"][()]
            assert len(steps) == 4 and steps[-1] == 0.8 and (steps[1:] > steps[:-1]).all(), steps
            print("gradually pruned: sparsity", s["pruning_sparsity_final"], "accuracy", s["classification_accuracy"])
            continue
        seen[(c["model"], bool(c["teacher"]))] = s
        if c["teacher"]:
            assert "teacher_forward_s" in h["series"], list(h["series"])
            assert s["teacher_params"] > s["params"], s
            assert 0.5 < s["teacher_classification_accuracy"] <= 1, s
        else:
            assert "teacher_classification_accuracy" not in s
teacher, student = seen[("bert-tiny", False)], seen[("bert-tiny-1l", True)]
# The student's point scores the exported teacher on the same validation data: the same accuracy.
assert abs(student["teacher_classification_accuracy"] - teacher["classification_accuracy"]) < 1e-9, (student, teacher)
print("teacher", teacher["classification_accuracy"], "distilled", student["classification_accuracy"],
      "alone", seen[("bert-tiny-1l", False)]["classification_accuracy"])
PY
# The [base] of the infer suites below: the demo's validation data, every example scored.
infer_base() {
  printf '[base]\ntask = "infer"\ndata = "%s"\nvalidation = "%s"\ntokenizer_dir = "%s"\n' \
    "$d/demo/train.jsonl" "$d/demo/validation.jsonl" "$d/demo"
  printf 'batch = 32\nseq = 32\nscenario = "offline"\nqueries = %s\nsamples_per_query = 32\naccuracy_batches = 1\n' "$1"
}
{ infer_base 2; cat <<EOF
[axes]
model = ["$d/teacher", "$d/student", "$d/alone"]
quantization = ["none", "bf16"]
EOF
} > "$d/infer.toml"
"$sb" sweep "$d/infer.toml" --results "$d/i" > "$d/infer.log" 2>&1 || { cat "$d/infer.log"; fail "infer sweep"; }
"$sb" report "$d/t" > /dev/null 2>&1 || fail "report of the training points"
grep -q "^## Distillation (task = train with a teacher)" "$d/t/report/report.md" || fail "no Distillation section"
"$sb" report "$d/i" > "$d/report.log" 2>&1 || { cat "$d/report.log"; fail "report"; }
grep -q "^## Accuracy against latency" "$d/i/report/report.md" || fail "no accuracy-against-latency section"
[ -s "$d/i/report/plots/accuracy_vs_latency.png" ] || fail "no accuracy_vs_latency plot"
/usr/bin/python3 - "$d/i/report/tables/accuracy_latency.csv" <<'PY'
import sys
import pandas as pd
t = pd.read_csv(sys.argv[1])
assert len(t) == 6 and t["pareto"].sum() >= 1, t
print(t[["model", "quantization", "latency_p50_s", "accuracy", "pareto"]].to_string(index=False))
PY
# Pruning a checkpoint folder and writing it back out: the teacher pruned (ffn, 50%) and
# exported, then loaded as a model on its own: the same accuracy and parameters, d_ff halved.
{ infer_base 1; cat <<EOF
[[zip]]
model = ["$d/teacher", "$d/teacher-ffn"]
pruning = ["ffn", "none"]
"pruning.export_folder" = ["$d/teacher-ffn", ""]
EOF
} > "$d/prune.toml"
"$sb" sweep "$d/prune.toml" --results "$d/p" > "$d/prune.log" 2>&1 || { cat "$d/prune.log"; fail "prune sweep"; }
/usr/bin/python3 - "$d/p" "$d/teacher-ffn/config.json" <<'PY'
import glob, json, sys, h5py
s = []
for f in sorted(glob.glob(f"{sys.argv[1]}/points/*.h5")):
    with h5py.File(f) as h:
        assert h.attrs["status"] == "done", (f, h.attrs["failure_reason"])
        s.append({k: float(v) for k, v in h["scalars"].attrs.items()})
assert s[0]["classification_accuracy"] == s[1]["classification_accuracy"], s
assert s[0]["params"] == s[1]["params"], s
assert json.load(open(sys.argv[2]))["intermediate_size"] == 128
print("pruned and reloaded: accuracy", s[1]["classification_accuracy"], "params", s[1]["params"])
PY
echo "distill: OK"
