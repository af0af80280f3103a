# Tolerance checks ([[reference]] NAME = [value, lower, upper]; analysis/references.py): a real
# probe sweep whose suite expects one impossible and one generous step time gets one point
# outside and one within; the C++ list of checkable metrics is the analysis's summary columns.
import os
import re
import subprocess

import pytest

from analysis.load import load_results
from analysis.metrics import SUMMARY_COLUMNS, summarize
from analysis.references import checks_of, is_paper_figure, reference_checks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_checkable_metrics_are_the_summary_columns():
    src = open(os.path.join(ROOT, "harness", "spec", "reference.cpp")).read()
    body = src[src.index("reference_checks() {"):src.index("return checks;")]
    names = re.findall(r'\{"([a-z0-9_]+)", "', body)
    assert sorted(names) == sorted(c for c in SUMMARY_COLUMNS
                                   if c not in ("point_id", "timed_steps", "accuracy_metric"))


def test_checks_and_paper_figures_are_told_apart():
    ref = {"samples_per_s": 124.0, "tokens_per_s": 100.0, "tokens_per_s.lower": -0.1,
           "tokens_per_s.upper": 0.2}
    assert checks_of(ref) == {"tokens_per_s": (100.0, -0.1, 0.2)}
    assert is_paper_figure(ref, "samples_per_s") and not is_paper_figure(ref, "tokens_per_s")


SUITE = """
[base]
task = "probe"
world = 1
threads = 1
steps = 3
warmup = 1
[axes]
"probe.elements" = [8, 16]
[[reference]]
match = { "probe.elements" = 8 }
step_time_s = [1e-9, -0.1, 0.1]
[[reference]]
match = { "probe.elements" = 16 }
step_time_s = [1.0, -1.0, 1000.0]
"""


def test_a_point_outside_its_tolerance_is_listed(tmp_path):
    binary = os.environ.get("SB_SHARDBENCH_BIN")
    if not binary or "probe" not in os.path.basename(binary):
        pytest.skip("needs the probe binary (SB_SHARDBENCH_BIN=.../shardbench_probe)")
    suite = tmp_path / "checks.toml"
    suite.write_text(SUITE)
    out = tmp_path / "results"
    subprocess.run([binary, "sweep", str(suite), "--results", str(out)], check=True,
                   capture_output=True, timeout=300)
    r = load_results(str(out))
    c = reference_checks(r, summarize(r)).set_index("expected")
    assert c.loc[1e-9, "verdict"] == "OUTSIDE"
    assert c.loc[1.0, "verdict"] == "within"
    assert c.loc[1.0, "low"] == pytest.approx(0.0) and c.loc[1.0, "high"] == pytest.approx(1001.0)
