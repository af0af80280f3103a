# The report end to end: problems listed without a crash, every plot embedded in the HTML,
# the tables written as CSV; the plot-only entry point; plots skipped with a note.
import html.parser
import os
import subprocess
import sys

import h5py
import pandas as pd
import pytest

import make_fixture
from analysis import report
from analysis.plots import PLOTS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Html(html.parser.HTMLParser):
    """Collects the img tags and checks that every opened element is closed."""
    VOID = {"img", "meta", "br"}

    def __init__(self):
        super().__init__()
        self.imgs, self.stack, self.errors = [], [], []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.imgs.append(dict(attrs))
        elif tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


def _run(args):
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def built(results, tmp_path_factory):
    folder, source = results
    out = str(tmp_path_factory.mktemp("report"))
    proc = _run(["analysis.report", folder, "--out", out])
    assert proc.returncode == 0, proc.stderr
    return folder, source, out, proc.stdout


def test_problems_reported_without_a_crash(built):
    _, source, out, stdout = built
    md = open(os.path.join(out, "report.md")).read()
    page = open(os.path.join(out, "report.html")).read()
    reason = ("rank 3 on localhost: out of memory (workloads/fsdp/full_shard.cpp:88)"
              if source != "shardbench" else "rank 1 on localhost: injected by the analysis tests")
    for text in (md, page, stdout):
        assert reason in text
        assert "c0ffee00.h5" in text                      # the corrupt file
        assert "7e3a0000.h5.tmp" in text                  # the unfinished write
    assert "| failed |" in md and "| unreadable |" in md and "| missing |" in md
    probs = pd.read_csv(os.path.join(out, "tables", "problems.csv"))
    assert sorted(probs["kind"]) == ["failed", "missing", "unfinished", "unreadable"]


def test_html_is_self_contained_and_embeds_every_plot(built):
    _, _, out, _ = built
    pngs = sorted(f for f in os.listdir(os.path.join(out, "plots")) if f.endswith(".png"))
    page = open(os.path.join(out, "report.html")).read()
    p = _Html()
    p.feed(page)
    assert p.errors == [] and p.stack == []
    assert sorted(i["data-file"] for i in p.imgs) == pngs
    assert all(i["src"].startswith("data:image/png;base64,iVBOR") for i in p.imgs)  # PNG magic
    md = open(os.path.join(out, "report.md")).read()
    for f in pngs:
        assert f"(plots/{f})" in md


def test_fixture_report_has_every_plot_and_table(fixture_dir, tmp_path):
    r = report.build(fixture_dir, str(tmp_path))
    assert [p["stem"] for p in r["plots"] if p["path"]] == [stem for stem, _, _ in PLOTS]
    tables = set(os.listdir(tmp_path / "tables"))
    for name in ("points", "metrics", "comparisons", "problems", "steps", "ranks", "comm",
                 "queries", "query_summary", "alpha_beta", "paper_results",
                 "paper_inference_latency_per_batch",
                 "paper_memory_footprint", "paper_training_throughput", "paper_model_accuracy",
                 "compression_policies_gpt2_tiny_full_shard_on_2_ranks"):
        assert name + ".csv" in tables
    t = pd.read_csv(tmp_path / "tables" / "paper_inference_latency_per_batch.csv")
    assert t.loc[0, "ours optimized (ms)"] == pytest.approx(42.0)
    fits = pd.read_csv(tmp_path / "tables" / "alpha_beta.csv").set_index("op")
    # Only the micro-benchmark's collectives are fitted; they lie exactly on the fixture's lines.
    for op, (alpha, beta) in make_fixture.ALPHA_BETA.items():
        assert fits.loc[op, "alpha_us"] == pytest.approx(alpha * 1e6, rel=1e-6)
        assert fits.loc[op, "beta_s_per_byte"] == pytest.approx(beta, rel=1e-6)
        assert fits.loc[op, "events"] == 2 * len(make_fixture.MICRO_SIZES)


def test_absent_data_skips_plots_with_a_note(tmp_path):
    # Only a corrupt file and one inference point without queries.
    res = tmp_path / "res"
    make_fixture.write_point(str(res / "points" / "0-aaaa.h5"), index=0, point_id="aaaa",
                             name="infer", config=make_fixture._cfg(task="infer", world=1),
                             steps=[dict(step=0, wall_s=0.1)])
    (res / "points" / "1-bbbb.h5").write_bytes(b"not hdf5")
    proc = _run(["analysis.report", str(res), "--out", str(tmp_path / "out")])
    assert proc.returncode == 0, proc.stderr
    assert "plot skipped: latency_cdf: no inference queries" in proc.stdout
    assert "plot skipped: throughput_scaling: no training points that differ only in world size" \
        in proc.stdout
    md = (tmp_path / "out" / "report.md").read_text()
    assert ("Skipped: Inference latency CDFs by quantization and scenario: "
            "no inference queries.") in md
    assert "1-bbbb.h5" in md
    assert os.listdir(tmp_path / "out" / "plots") == []


def test_plots_entry_point(fixture_dir, tmp_path):
    proc = _run(["analysis.plots", fixture_dir, "--out", str(tmp_path)])
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(tmp_path)) == sorted(stem + ".png" for stem, _, _ in PLOTS)


def test_missing_results_folder_is_an_error(tmp_path):
    proc = _run(["analysis.report", str(tmp_path / "nope")])
    assert proc.returncode == 2
    assert proc.stderr == f"analysis.report: {tmp_path / 'nope'}: no such results folder\n"


def test_mixed_builds_are_flagged(tmp_path):
    for i, commit in enumerate(["abc123", "def456"]):
        path = str(tmp_path / "points" / f"{i}-p{i}.h5")
        make_fixture.write_point(path, index=i, point_id=f"p{i}", name=f"p{i}",
                                 config=make_fixture._cfg(world=i + 1))
        with h5py.File(path, "r+") as f:
            f.attrs["git_commit"] = commit
    report.build(str(tmp_path), str(tmp_path / "out"))
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| fixture | 000000000000 | abc123 | 0.1.0 |" in md
    assert "| fixture | 000000000000 | def456 | 0.1.0 |" in md
    assert "Warning: these results come from more than one build or suite file version" in md


def test_failure_reason_with_a_byte_that_is_not_utf8(tmp_path):
    # A reason quoting a corrupted checkpoint's strategy string: older writers stored the raw
    # byte. The report replaces it instead of failing with UnicodeEncodeError.
    path = str(tmp_path / "points" / "0-p0.h5")
    make_fixture.write_point(path, index=0, point_id="p0", name="p0",
                             config=make_fixture._cfg(world=1))
    with h5py.File(path, "r+") as f:
        f.attrs["status"] = "failed"
        del f.attrs["failure_reason"]
        f.attrs.create("failure_reason", data=b"checkpoint strategy \xff\xfe is unknown",
                       dtype=h5py.string_dtype("utf-8"))
    report.build(str(tmp_path), str(tmp_path / "out"))
    md = (tmp_path / "out" / "report.md").read_text()
    assert "checkpoint strategy \ufffd\ufffd is unknown" in md
