# Plots: every numeric axis names its unit, every panel has a legend, and the figures carry
# the fixture's data (e.g. the scaling efficiency points, the wire-byte stacks).
import os
import re

import matplotlib.pyplot as plt
import numpy as np
import pytest

import make_fixture
from analysis import plots
from analysis.compare import Groups
from analysis.load import load_results
from analysis.metrics import summarize

NUMBER = re.compile(r"^[\u2212\-]?[\d.,]+(e[\u2212\-+]?\d+)?$|^\$.*\$$|^$")


@pytest.fixture(scope="module")
def loaded(fixture_dir):
    r = load_results(fixture_dir)
    return r, summarize(r), Groups(r)


def _numeric(axis):
    return all(NUMBER.match(t.get_text()) for t in axis.get_ticklabels())


@pytest.mark.parametrize("stem,fn", [(s, f) for s, _, f in plots.PLOTS])
def test_axes_labelled_with_units_and_legends(loaded, stem, fn):
    fig, note = fn(*loaded)
    assert fig is not None, note
    fig.canvas.draw()
    for ax in [a for a in fig.axes if a.get_visible()]:
        assert ax.get_legend() is not None and ax.get_legend().get_texts(), stem
        for axis, label in ((ax.xaxis, ax.get_xlabel()), (ax.yaxis, ax.get_ylabel())):
            if _numeric(axis):
                assert re.search(r"\(.+\)", label), f"{stem}: numeric axis label {label!r}"
    plt.close(fig)


def test_scaling_efficiency_points(loaded):
    fig, _ = plots.plot_throughput_scaling(*loaded)
    eff = {l.get_label(): list(l.get_ydata()) for l in fig.axes[1].get_lines()}
    # full_shard tokens/s at 1, 2, 3, 4 ranks: 55, 100, 140, 180 samples/s x 128.
    # Labelled by what differs between the two lines (analysis/labels.py).
    assert eff["strategy=full_shard"] == pytest.approx(
        [1.0, 100 / 55 / 2, 140 / 55 / 3, 180 / 55 / 4])
    assert eff["strategy=no_shard"] == pytest.approx([1.0, 90 / 60 / 2])
    plt.close(fig)


def test_wire_byte_stacks(loaded):
    fig, _ = plots.plot_wire_bytes(*loaded)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "bytes on the wire per step, all ranks (KiB)"
    heights = {}
    for c in ax.containers:
        heights[c.get_label()] = [b.get_height() for b in c]
    # none, naive, hybrid: reduce-scatter 2 x 4000, 2 x 1000, 2 x 400 bytes per step; no
    # "other" kind, since the warm-up step's broadcast is left out.
    assert heights["grad_reduce_scatter"] == pytest.approx(np.array([8000, 2000, 800]) / 1024)
    assert heights["param_all_gather"] == pytest.approx(np.array([8000, 2000, 4000]) / 1024)
    assert set(heights) == {"grad_reduce_scatter", "param_all_gather"}
    plt.close(fig)


def test_byte_unit():
    assert plots.byte_unit(1023) == (1, "B")
    assert plots.byte_unit(1024) == (1024, "KiB")
    assert plots.byte_unit(3 * 2**30) == (2**30, "GiB")


# ---- Issue #15, "Reports a person reads": the plots ---------------------------------------

def _write_subset(folder, keep):
    """The fixture suite's points whose config passes keep, renumbered, through the same
    writer as fixture_dir (the C++ one under ctest)."""
    chosen = [p for p in make_fixture.fixture_points() if keep(p[3]["config"])]
    make_fixture.write_points(folder, chosen, os.environ.get("SB_FIXTURE_WRITER"))
    r = load_results(folder)
    return r, summarize(r), Groups(r)


@pytest.fixture(scope="module")
def inference_only(tmp_path_factory):
    return _write_subset(str(tmp_path_factory.mktemp("inference_only")),
                         lambda cfg: cfg["task"] == "infer")


@pytest.fixture(scope="module")
def training_only(tmp_path_factory):
    return _write_subset(str(tmp_path_factory.mktemp("training_only")),
                         lambda cfg: cfg["task"] == "train")


def test_inference_only_results_plot_without_error(inference_only, tmp_path):
    # Was: alpha_beta failed with TypeError (an empty fits table of object dtype).
    made = {p["stem"]: p for p in plots.make_plots(*inference_only, str(tmp_path))}
    assert not [p["note"] for p in made.values() if p["note"].startswith("plot failed")]
    assert made["latency_cdf"]["path"] is not None
    assert made["alpha_beta"]["path"] is None
    assert "micro" in made["alpha_beta"]["note"]


def test_alpha_beta_not_fitted_on_training_collectives(training_only):
    # Training collectives overlap compute: their durations are not message times.
    _, fits = plots.alpha_beta_fits(training_only[0])
    assert len(fits) == 0
    fig, note = plots.plot_alpha_beta(*training_only)
    assert fig is None and "task = micro" in note


def test_alpha_beta_prints_r2_and_the_192_worker_prediction(loaded):
    fig, _ = plots.plot_alpha_beta(*loaded)
    fig.canvas.draw()
    # One panel per operation (log-log), then the prediction panel.
    panels = [ax for ax in fig.axes if ax.get_xscale() == "log"]
    assert [ax.get_title() for ax in panels] == list(make_fixture.ALPHA_BETA)
    legend = [t.get_text() for ax in panels for t in ax.get_legend().get_texts()]
    assert len(legend) == len(make_fixture.ALPHA_BETA)
    assert all(t.endswith("R\u00b2 1.000") for t in legend), legend  # exact lines
    # The prediction panel and its assumptions under the figure.
    assert fig.axes[-1].get_xlabel() == "predicted time at 192 workers (ms)"
    notes = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    for words in ("p = 192 workers", "497.8 MB", "2(p-1) steps", "no contention"):
        assert words in notes
    plt.close(fig)
    _, fits = plots.alpha_beta_fits(loaded[0])
    fits = fits.set_index("op")
    m, p, w = 4 * 124_439_808, 192, 2  # GPT-2's fp32 gradient; fitted at 2 ranks
    for op, (alpha, beta) in make_fixture.ALPHA_BETA.items():
        steps = 2 if op == "all_reduce" else 1  # ring: 2(p-1) or (p-1) latency steps
        # The fixture records wire = logical bytes (uncompressed); at 192 workers each rank
        # sends the ring's steps x (p-1)/p of the buffer.
        want = steps * (p - 1) * alpha / (steps * (w - 1)) + beta * m * steps * (p - 1) / p
        assert fits.loc[op, plots.PREDICT_COLUMN] == pytest.approx(want * 1e3, rel=1e-9)
        assert fits.loc[op, "r2"] == pytest.approx(1.0)


def test_latency_cdf_log_axis_percentiles_and_one_colour_per_series(loaded):
    fig, _ = plots.plot_latency_cdf(*loaded)
    q = loaded[0].queries
    colour = {}
    for ax in [a for a in fig.axes if a.get_visible()]:
        assert ax.get_xscale() == "log"
        marks = [ln for ln in ax.get_lines() if ln.get_linestyle() == "None" and
                 len(ln.get_xdata())]
        for curve in [ln for ln in ax.get_lines() if ln.get_linestyle() != "None"]:
            label = curve.get_label()
            assert colour.setdefault(label, curve.get_color()) == curve.get_color(), label
            # Labelled by the key that differs between the two points (analysis/labels.py).
            pid = {"quantization=none": "a0000001",
                   "quantization=int8-dynamic": "a0000002"}[label]
            lat = q[(q["point_id"] == pid) & (q["scenario"] == ax.get_title())]["latency_s"]
            own = [ln for ln in marks if ln.get_color() == curve.get_color()]
            for pct, marker in plots.PERCENTILES:
                ln = [m for m in own if m.get_marker() == marker]
                assert len(ln) == 1, (label, pct)
                assert ln[0].get_xdata()[0] == pytest.approx(
                    np.percentile(lat.astype(float) * 1e3, pct))
                assert ln[0].get_ydata()[0] == pytest.approx(pct / 100)
        assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"p50", "p90", "p99"}
    assert len(colour) == 2 and len(set(colour.values())) == 2
    plt.close(fig)


def test_overlapping_loss_curves_stay_distinguishable(loaded):
    fig, _ = plots.plot_loss_curves(*loaded)
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    # none and hybrid coincide on 5 of 6 steps in the fixture.
    styles = {(ln.get_linestyle(), ln.get_marker()) for ln in lines.values()}
    assert len(styles) == len(lines) == 3

    def marked(ln):
        x = list(ln.get_xdata())
        every = ln.get_markevery()
        return set(x if every is None else x[every[0]::every[1]])

    assert marked(lines["none"]) and marked(lines["hybrid"])
    assert not marked(lines["none"]) & marked(lines["hybrid"])
    # The later line is drawn inside the earlier, thicker one.
    assert lines["none"].get_linewidth() > lines["hybrid"].get_linewidth()
    plt.close(fig)


def test_throughput_axis_starts_at_zero(loaded):
    fig, _ = plots.plot_throughput_scaling(*loaded)
    assert fig.axes[0].get_ylim()[0] == 0
    assert fig.axes[0].get_ylim()[1] > 180 * 128  # the largest throughput stays in view
    plt.close(fig)
