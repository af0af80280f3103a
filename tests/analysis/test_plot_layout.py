# Plot layout, as make_plots saves each figure: no title, axis (tick labels and label), legend
# or note reaches past the figure's edge or into another one's text, no two tick labels of
# an axis overlap, and bars are labelled by what differs among them, not by full point names
# (issue 28: paper-small's 110-character names clipped the axes and the four memory bars all
# read "...v_batches=2"). Run on the fixture, on the fixture under paper-small's long names,
# on the 21-point collectives suite and on a real sweep when one is built.
import os

import matplotlib.pyplot as plt
import pytest

import make_fixture
from analysis import plots
from analysis.compare import Groups
from analysis.load import load_results
from analysis.metrics import summarize

TOLERANCE_PX = 1.0


def _long_name(name, cfg):
    """A point name as paper-small's expansion writes it: every axis value, 100+ characters."""
    return "/".join([cfg["task"], cfg["model"], f"world={cfg['world']}", "threads=1",
                     cfg["quantization"], cfg["strategy"], cfg["compression"], cfg["dtype"],
                     "single-stream", "queries=32", "eval_every=6", "eval_batches=2",
                     "accuracy_batches=2", name.replace("/", "-")])


def _load(folder):
    r = load_results(folder)
    return r, summarize(r), Groups(r)


@pytest.fixture(scope="module")
def long_names(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("long_names"))
    pts = [(i, pid, _long_name(name, kw["config"]), kw)
           for i, pid, name, kw in make_fixture.fixture_points()]
    assert min(len(p[2]) for p in pts) > 100
    make_fixture.write_points(folder, pts, os.environ.get("SB_FIXTURE_WRITER"))
    return _load(folder)


@pytest.fixture(scope="module")
def collectives(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("collectives"))
    make_fixture.write_points(folder, make_fixture.collective_points(),
                              os.environ.get("SB_FIXTURE_WRITER"))
    return _load(folder)


@pytest.fixture(scope="module")
def fixture(fixture_dir):
    return _load(fixture_dir)


@pytest.fixture(scope="module")
def real(results):
    return _load(results[0])


def _drawn_tick_labels(axis):
    """Tick labels the axis draws: those of ticks inside its view interval, with text."""
    lo, hi = sorted(axis.get_view_interval())
    eps = 1e-9 * max(abs(lo), abs(hi), 1.0)
    return [t for loc, t in zip(axis.get_majorticklocs(), axis.get_majorticklabels())
            if lo - eps <= loc <= hi + eps and t.get_visible() and t.get_text()]


def layout_problems(fig):
    """What is clipped or overlaps in a laid-out figure: a list of sentences (empty: none)."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = []  # (owner, what, bbox): owner = the axes' title or "figure"
    problems = []
    for i, ax in enumerate(a for a in fig.axes if a.get_visible()):
        owner = f"panel {i} {ax.get_title()!r}"
        if ax.get_title():
            boxes.append((owner, "title", ax.title.get_window_extent(r)))
        for name, axis in (("x axis", ax.xaxis), ("y axis", ax.yaxis)):
            bb = axis.get_tightbbox(r)
            if bb is not None and bb.width > 0:
                boxes.append((owner, name, bb))
            # Extents are upright boxes: those of slanted labels overlap where the text does not.
            labels = [t for t in _drawn_tick_labels(axis) if t.get_rotation() % 90 == 0]
            ext = [t.get_window_extent(r) for t in labels]
            for j in range(len(ext) - 1):
                for k in range(j + 1, len(ext)):
                    if ext[j].overlaps(ext[k]):
                        problems.append(f"{owner}: {name} tick labels {labels[j].get_text()!r} "
                                        f"and {labels[k].get_text()!r} overlap")
        if ax.get_legend() is not None:
            boxes.append((owner, "legend", ax.get_legend().get_window_extent(r)))
        boxes += [(owner, f"text {t.get_text()!r}", t.get_window_extent(r)) for t in ax.texts]
    for t in fig.texts:  # notes, and the suptitle
        boxes.append(("figure", f"text {t.get_text()[:40]!r}", t.get_window_extent(r)))
    boxes += [("figure", "legend", lg.get_window_extent(r)) for lg in fig.legends]

    edge = fig.bbox
    for owner, what, bb in boxes:
        if (bb.x0 < edge.x0 - TOLERANCE_PX or bb.y0 < edge.y0 - TOLERANCE_PX or
                bb.x1 > edge.x1 + TOLERANCE_PX or bb.y1 > edge.y1 + TOLERANCE_PX):
            problems.append(f"{owner}: {what} is clipped: {bb.bounds} outside the figure "
                            f"{edge.bounds}")
    for j in range(len(boxes)):
        for k in range(j + 1, len(boxes)):
            (o1, w1, b1), (o2, w2, b2) = boxes[j], boxes[k]
            # One panel's two axes meet at its corner, where the first tick labels may touch.
            if o1 == o2 and {w1, w2} == {"x axis", "y axis"}:
                continue
            if b1.overlaps(b2):
                problems.append(f"{o1} {w1} overlaps {o2} {w2}")
    return problems


def _check_every_plot(loaded, made_by):
    drawn = 0
    for stem, _, fn in plots.PLOTS:
        fig, note = fn(*loaded)
        if fig is None:
            continue
        plots.lay_out(fig)
        problems = layout_problems(fig)
        plt.close(fig)
        assert problems == [], f"{made_by}: {stem}.png:\n" + "\n".join(problems)
        drawn += 1
    return drawn


def test_layout_of_every_plot_of_the_fixture(fixture):
    assert _check_every_plot(fixture, "fixture") == len(plots.PLOTS)


def test_layout_with_paper_small_point_names(long_names):
    assert _check_every_plot(long_names, "fixture with long names") == len(plots.PLOTS)


def test_layout_of_the_collectives_suite(collectives):
    assert _check_every_plot(collectives, "collectives suite") >= 1


def test_layout_of_a_real_sweep(real):
    assert _check_every_plot(real, "real sweep") >= 1


def _tick_texts(fig, axis="x"):
    ax = fig.axes[0]
    return [t.get_text() for t in _drawn_tick_labels(ax.xaxis if axis == "x" else ax.yaxis)]


def test_bars_are_labelled_by_the_keys_that_vary(long_names):
    # The training groups of the fixture: bert-large (4 steps) no_shard and full_shard, then
    # gpt2-tiny (6 steps) full_shard none, naive, hybrid at 2 ranks, full_shard at 1 and 4,
    # no_shard at 1 and 2 (repetitions and their count are one bar).
    want = [f"model={m}\nstrategy={s}\ncompression={c}\nworld={w} steps={n}"
            for m, s, c, w, n in [
                ("bert-large", "no_shard", "none", 2, 4),
                ("bert-large", "full_shard", "none", 2, 4),
                ("gpt2-tiny", "full_shard", "none", 2, 6),
                ("gpt2-tiny", "full_shard", "naive", 2, 6),
                ("gpt2-tiny", "full_shard", "hybrid", 2, 6),
                ("gpt2-tiny", "full_shard", "none", 1, 6),
                ("gpt2-tiny", "full_shard", "none", 4, 6),
                ("gpt2-tiny", "no_shard", "none", 1, 6),
                ("gpt2-tiny", "no_shard", "none", 2, 6)]]
    fig, _ = plots.plot_memory_stacked(*long_names)
    assert _tick_texts(fig) == want
    plt.close(fig)
    fig, _ = plots.plot_step_breakdown(*long_names)
    assert _tick_texts(fig, "y") == want
    plt.close(fig)


def test_alpha_beta_one_panel_per_operation_with_the_spread(collectives):
    fig, _ = plots.plot_alpha_beta(*collectives)
    panels = [ax for ax in fig.axes if ax.get_xscale() == "log"]
    assert [ax.get_title() for ax in panels] == make_fixture.COLLECTIVE_OPS
    sizes = make_fixture.MICRO_SIZES
    for ax in panels:
        op = ax.get_title()
        impls = [i for i in make_fixture.COLLECTIVE_IMPLS
                 if op not in ("broadcast", "all_to_all") or i not in ("int8", "topk")]
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        # Labelled by the key that varies among the operation's points, in suite order.
        assert [t.split("\n")[0] for t in legend] == [f"micro.impl={i}" for i in impls]
        assert all(t.endswith("R\u00b2 1.000") for t in legend), legend
        assert len(ax.containers) == len(impls)
        for impl, bars in zip(impls, ax.containers):
            alpha, beta = make_fixture.COLLECTIVE_IMPLS[impl]
            line = [(alpha + beta * n) * 1e6 for n in sizes]
            # Dots: the medians, on the line; bars: from the 0.8x call to the 5x one.
            assert list(bars.lines[0].get_xdata()) == sizes
            assert list(bars.lines[0].get_ydata()) == pytest.approx(line, rel=1e-9)
            (segments,) = bars.lines[2]
            ends = [y for (_, lo), (_, hi) in segments.get_segments() for y in (lo, hi)]
            assert ends == pytest.approx([y for t in line for y in (0.8 * t, 5.0 * t)],
                                         rel=1e-9)
    plt.close(fig)
