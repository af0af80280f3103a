#!/usr/bin/env bash
# The shipped fine-tuning suites end to end on their demo data (suite/data/
# make_finetune_demo.py, written to a temporary folder): suite/finetune.toml fine-tunes
# bert-tiny on labelled JSONL one-process and under full_shard on 2 ranks and exports a
# folder; suite/finetune-infer.toml serves that folder under each quantization. Asserted:
# every point is done; every strategy's fp32 validation accuracy on 2 ranks equals the
# one-process fine-tune's within 0.5 points (the engine is equal to the reference); fp32
# inference of the exported folder scores exactly what training scored; the report's
# accuracy table has a row per quantization; the exported folder is complete (config.json
# names the data's labels, the tokenizer's vocab.txt is copied beside the weights).
# Usage: finetune.sh build/shardbench
source "$(dirname "$0")/preamble.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
/usr/bin/python3 "$src/suite/data/make_finetune_demo.py" "$d/demo" > /dev/null
for s in finetune finetune-infer; do
  sed "s|results/finetune-demo|$d/demo|g" "$src/suite/$s.toml" > "$d/$s.toml"
  "$sb" sweep "$d/$s.toml" --results "$d/$s" --allow-oversubscribe > "$d/$s.log" 2>&1 ||
    { cat "$d/$s.log"; fail "sweep $s"; }
  "$sb" report "$d/$s" > "$d/$s.report.log" 2>&1 || { cat "$d/$s.report.log"; fail "report $s"; }
done
/usr/bin/python3 - "$d" <<'PY'
import glob, json, sys, h5py
d = sys.argv[1]
def points(name):
    out = []
    for f in sorted(glob.glob(f"{d}/{name}/points/*.h5")):
        with h5py.File(f) as h:
            assert h.attrs["status"] == "done", (f, h.attrs["status"])
            cfg = json.loads(h.attrs["config"])
            out.append((cfg, {k: float(v) for k, v in h["scalars"].attrs.items()}))
    return out
train = points("finetune")
assert len(train) == 8, len(train)
base = next(s for c, s in train if c["world"] == 1)
fs = next(s for c, s in train if c["strategy"] == "full_shard" and c["dtype"] == "fp32")
for c, s in train:
    assert s["validation_examples"] == 300 and 0.5 < s["classification_accuracy"] <= 1, s
    assert 0 < s["macro_f1"] <= 1, s
    # Every fp32 strategy on 2 ranks equals the one-process fine-tune (the engine is equal
    # to the reference up to reduction order): within 0.5 points of accuracy.
    if c["dtype"] == "fp32":
        assert abs(s["classification_accuracy"] - base["classification_accuracy"]) <= 0.005, (c, s, base)
infer = points("finetune-infer")
assert len(infer) == 6, len(infer)
none = next(s for c, s in infer if c["quantization"] == "none")
assert none["classification_accuracy"] == base["classification_accuracy"], (none, base)
assert none["top1_agreement"] == 1.0, none
# Static int8, calibrated on the training split: within the seed's 0.5 points of fp32 and
# agreeing with fp32 on at least 99% of the validation examples.
st = next(s for c, s in infer if c["quantization"] == "int8-static")
assert abs(st["classification_accuracy"] - none["classification_accuracy"]) <= 0.005, (st, none)
assert st["top1_agreement"] >= 0.99 and st["calibration_batches"] == 4, st
print("fine-tune accuracy", base["classification_accuracy"], "full_shard", fs["classification_accuracy"])
for c, s in infer:
    print(f'  infer {c["quantization"]}: accuracy {s["classification_accuracy"]:.4f}, '
          f'agreement with fp32 {s["top1_agreement"]:.4f}')
PY
rows=$(grep -c '^| .*bert-tiny-ft: quantization: none -> ' "$d/finetune-infer/report/report.md" || true)
[ "$rows" -ge 5 ] || fail "the accuracy table has $rows quantization rows, expected 5"
# The export keeps the label names (sorted: negative = 0) and the tokenizer's files.
/usr/bin/python3 - "$d/demo/bert-tiny-ft/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["id2label"] == {"0": "negative", "1": "positive"}, c["id2label"]
assert c["label2id"] == {"negative": 0, "positive": 1}, c["label2id"]
PY
cmp "$d/demo/vocab.txt" "$d/demo/bert-tiny-ft/vocab.txt" || fail "the export lacks the tokenizer's vocab.txt"
echo "finetune suites: OK"
