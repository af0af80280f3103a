# `shardbench compare` (analysis/compare_runs.py) and the results index (analysis/index.py) on
# copies of the hand-computable fixture: a copy whose throughput is exactly 10% lower must trip
# a 5% gate and pass a 15% one; the index follows files that appear, change and disappear.
import io
import json
import os
import shutil

import h5py
import numpy as np
import pytest

from analysis import compare_runs, index
from analysis.compare import group_key
from analysis.load import load_results
from analysis.metrics import summarize


def _scaled_copy(src, dst, factor):
    """dst = src with every step's tokens/s and samples/s multiplied by factor."""
    shutil.copytree(src, dst)
    pdir = os.path.join(dst, "points")
    for n in os.listdir(pdir):
        if not n.endswith(".h5"):
            continue
        try:
            with h5py.File(os.path.join(pdir, n), "r+") as f:
                for col in ("tokens_per_s", "samples_per_s"):
                    if "steps" in f and col in f["steps"]:
                        f["steps"][col][...] = f["steps"][col][()] * factor
        except OSError:
            pass  # the fixture's deliberately corrupt files
    return dst


@pytest.fixture(scope="module")
def slower(fixture_dir, tmp_path_factory):
    return _scaled_copy(fixture_dir, str(tmp_path_factory.mktemp("cmp") / "slower"), 0.9)


def _run(argv):
    out = io.StringIO()
    return compare_runs.main(argv, out=out), out.getvalue()


def test_matched_points_carry_the_exact_change(fixture_dir, slower):
    df, only_a, only_b = compare_runs.compare_runs(fixture_dir, slower, ["tokens_per_s"])
    r = load_results(fixture_dir)
    s = summarize(r)
    with_tokens = s.index[s["tokens_per_s"] > 0]
    groups = {group_key(r.config[pid]) for pid in with_tokens}  # repetitions are one point
    assert len(df) == len(groups) > 0
    assert np.allclose(df["ratio"], 0.9) and np.allclose(df["pct"], -10.0)
    assert only_a == [] and only_b == []


def test_a_gate_sets_the_exit_code(fixture_dir, slower):
    code, text = _run([fixture_dir, slower, "--fail-if", "tokens_per_s < -5%"])
    assert code == 1, text
    assert "REGRESSION tokens_per_s < -5%: " in text and "(-10.0%, p " in text
    code, text = _run([fixture_dir, slower, "--fail-if", "tokens_per_s < -15%"])
    assert code == 0, text
    assert "gates passed: tokens_per_s < -15%" in text
    # Faster is not a regression under a "<" gate, and a ">" gate catches a rise.
    code, _ = _run([slower, fixture_dir, "--fail-if", "tokens_per_s < -5%"])
    assert code == 0
    code, _ = _run([slower, fixture_dir, "--fail-if", "tokens_per_s > +5%"])
    assert code == 1


def test_bad_gates_and_empty_comparisons_are_usage_errors(fixture_dir, slower, capsys):
    assert _run([fixture_dir, slower, "--fail-if", "tokens_per_s down 5"])[0] == 2
    assert "expected METRIC < PERCENT% or METRIC > PERCENT%" in capsys.readouterr().err
    assert _run([fixture_dir, slower, "--fail-if", "speed < -5%"])[0] == 2
    assert "unknown metric 'speed'" in capsys.readouterr().err
    assert _run([fixture_dir + ":model=nothing-like-this", slower])[0] == 2
    assert "no point of" in capsys.readouterr().err


def test_json_output(fixture_dir, slower):
    code, text = _run([fixture_dir, slower, "--metric", "tokens_per_s", "--json",
                       "--fail-if", "tokens_per_s < -5%"])
    j = json.loads(text)
    assert code == 1 and len(j["gates_fired"]) == len(j["rows"]) > 0
    assert all(r["metric"] == "tokens_per_s" for r in j["rows"])


def test_index_follows_the_files(fixture_dir, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(fixture_dir, root / "sweep_a")
    _, read, _ = index.update(str(root))
    done = len(load_results(str(root / "sweep_a")).done())
    n = index.query(str(root), "SELECT COUNT(*) AS n FROM points")["n"][0]
    assert n == done and read > 0
    _, read_again, _ = index.update(str(root))
    assert read_again == 0  # nothing changed: nothing read
    _scaled_copy(fixture_dir, str(root / "sweep_b"), 0.5)
    q = index.query(str(root), "SELECT folder, SUM(tokens_per_s) AS t FROM points "
                               "WHERE tokens_per_s IS NOT NULL GROUP BY folder ORDER BY folder")
    assert len(q) == 2 and q["t"][1] == pytest.approx(0.5 * q["t"][0])
    shutil.rmtree(root / "sweep_b")
    _, _, dropped = index.update(str(root))
    assert dropped > 0
    assert index.query(str(root), "SELECT COUNT(*) AS n FROM points")["n"][0] == done
    # config is JSON: json_extract filters on any key.
    m = index.query(str(root), "SELECT DISTINCT json_extract(config, '$.task') AS task FROM points")
    assert set(m["task"]) <= {"train", "infer", "serve", "micro"}
