# Plots: every numeric axis names its unit, every panel has a legend, and the figures carry
# the fixture's data (e.g. the scaling efficiency points, the wire-byte stacks).
import re

import matplotlib.pyplot as plt
import numpy as np
import pytest

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
    assert eff["gpt2-tiny full_shard none"] == pytest.approx(
        [1.0, 100 / 55 / 2, 140 / 55 / 3, 180 / 55 / 4])
    assert eff["gpt2-tiny no_shard none"] == pytest.approx([1.0, 90 / 60 / 2])
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
