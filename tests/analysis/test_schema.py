# The analysis reads only what the workloads record: every scalar name it asks a result for
# is recorded by some workload in workloads/ (a name read but never written would make a
# column silently empty, as "accuracy", "cls_accuracy" and "model_flops_per_token" once were).
import glob
import os
import re

from analysis import metrics

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def recorded_scalars():
    names = set()
    for path in glob.glob(os.path.join(REPO, "workloads", "**", "*.cpp"), recursive=True):
        text = open(path, encoding="utf-8").read()
        names |= set(re.findall(r'\.scalar\(\s*"([a-z0-9_]+)"', text))
        # Serve records its summary as a map (serve/metrics.cpp summarize: m["name"] = ...).
        names |= set(re.findall(r'\bm\["([a-z0-9_]+)"\]\s*=', text))
        # Infer records each family's eval metric under its name and with "_fp32".
        for m in re.findall(r'eval_metric = "([a-z0-9_]+)"', text):
            names |= {m, m + "_fp32"}
    return names


def read_scalars():
    names = set(metrics.ACCURACY_SCALARS)
    for path in glob.glob(os.path.join(REPO, "analysis", "*.py")):
        text = open(path, encoding="utf-8").read()
        names |= set(re.findall(r'\.scalar\(\s*pid,\s*"([a-z0-9_]+)"', text))
    return names


def test_the_scan_finds_known_names():
    assert {"final_eval_loss", "model_bytes", "top1_agreement", "mlm_accuracy",
            "perplexity_fp32", "output_tokens_per_s"} <= recorded_scalars()
    assert {"final_eval_loss", "model_bytes", "peak_gflops_per_rank"} <= read_scalars()


def test_every_scalar_the_analysis_reads_is_recorded_by_a_workload():
    missing = sorted(read_scalars() - recorded_scalars())
    assert missing == [], f"analysis reads scalars no workload records: {missing}"
