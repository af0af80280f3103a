# Per-point metrics and comparisons against values computed by hand from make_fixture.py,
# and (for whichever writer produced `results`) against the raw datasets.
import os

import h5py
import numpy as np
import pytest

from analysis import stats
from analysis.compare import Groups, compare
from analysis.load import load_results
from analysis.metrics import query_summary, summarize

approx = pytest.approx


@pytest.fixture(scope="module")
def mir(fixture_dir):
    r = load_results(fixture_dir)
    s = summarize(r)
    return r, s, Groups(r)


def test_step_statistics_leave_out_warmup(mir):
    _, s, _ = mir
    # bert-large fp32 batches 0.190, 0.180, 0.185 s after a 2.0 s warm-up batch.
    assert s.loc["a0000001", "step_time_s"] == approx(0.185)
    assert s.loc["a0000001", "timed_steps"] == 3
    # samples/s 122.6, 124.6, ... alternate around 123.6; the warm-up's 1.0 is left out.
    assert s.loc["c0000001", "samples_per_s"] == approx(123.6)
    assert s.loc["c0000001", "tokens_per_s"] == approx(123.6 * 128)


def test_tflops_per_worker(mir):
    _, s, _ = mir
    # 100 samples/s x 128 tokens x 6e6 FLOP/token over 2 ranks.
    assert s.loc["c0000000", "tflops_per_worker"] == approx(100 * 128 * 6e6 / 2 / 1e12)
    assert np.isnan(s.loc["b0000000", "tflops_per_worker"])  # no model_flops_per_token


def test_losses_accuracy_and_memory(mir):
    _, s, _ = mir
    assert s.loc["c0000002", "final_loss"] == approx(2.005)   # last timed step
    assert np.isnan(s.loc["a0000001", "final_loss"])          # inference has no loss
    assert s.loc["a0000002", "accuracy"] == approx(0.597)
    assert s.loc["a0000002", "accuracy_metric"] == "mlm_accuracy"
    assert s.loc["a0000001", "memory_bytes"] == 1.34e9        # model_bytes scalar wins
    assert s.loc["b0000001", "memory_bytes"] == 50 + 50 + 100 + 25  # peak model state
    assert s.loc["b0000001", "model_state_bytes"] == 50 + 50 + 100


def test_wire_bytes_per_timed_step(mir):
    _, s, _ = mir
    # naive: per step 2 ranks x (all-gather 1000 + reduce-scatter 1000) on the wire, logical
    # 2 x (4000 + 4000); the warm-up's 1 MB broadcast is not a timed step.
    assert s.loc["c0000001", "wire_bytes_per_step"] == 4000
    assert s.loc["c0000001", "logical_bytes_per_step"] == 16000
    assert s.loc["c0000001", "compression_ratio"] == 4
    assert s.loc["c0000002", "wire_bytes_per_step"] == 2 * (2000 + 400)


def test_query_percentiles_and_throughput(mir):
    r, _, _ = mir
    q = query_summary(r).set_index(["point_id", "scenario"]).loc[("a0000001", "single-stream")]
    # latencies 20, 22, ..., 38 ms: linear-interpolated percentiles at rank p/100 x 9.
    assert q["queries"] == 10
    assert q["p50_ms"] == approx(29.0)
    assert q["p90_ms"] == approx(20 + 0.9 * 9 * 2)
    assert q["p99_ms"] == approx(20 + 0.99 * 9 * 2)
    # 10 samples from the first issue (0 s) to the last completion (9 s + 38 ms).
    assert q["samples_per_s"] == approx(10 / 9.038)


def test_repetitions_compared_with_mann_whitney(mir):
    r, s, g = mir
    c = compare(r, s, g)
    row = c[(c["group"] == "bert-large/full_shard") &
            (c["metric"] == "throughput (samples/s)")].iloc[0]
    assert row["baseline"] == "bert-large/no_shard"
    assert (row["n"], row["baseline_n"]) == (4, 4)
    assert (row["median"], row["min"], row["max"]) == (123.0, 120.0, 126.0)
    assert (row["baseline_median"], row["baseline_min"], row["baseline_max"]) == (31.5, 30.0, 33.0)
    assert row["ratio"] == approx(123 / 31.5)
    assert row["pct"] == approx((123 / 31.5 - 1) * 100)
    # Every optimized repetition beats every baseline one: U = 4 x 4, exact p = 2 / C(8, 4).
    assert row["U"] == 16
    assert row["p"] == approx(2 / 70)
    assert row["warning"] == ""


def test_single_runs_warn_that_the_test_cannot_tell(mir):
    r, s, g = mir
    c = compare(r, s, g)
    row = c[(c["group"] == "bert-large/infer/int8-dynamic") &
            (c["metric"] == "step / batch latency (s)")].iloc[0]
    assert row["pct"] == approx((0.042 / 0.185 - 1) * 100)
    assert row["warning"] == \
        "too few repetitions (1 vs 1): the smallest attainable p is 1 > 0.05"


def test_min_attainable_p():
    assert stats.min_attainable_p(3, 3) == approx(0.1)
    assert stats.min_attainable_p(4, 4) == approx(2 / 70)
    assert stats.min_attainable_p(3, 4) == approx(2 / 35)
    assert stats.repetition_test([1, 2, 3], [4, 5, 6])[2] == \
        "too few repetitions (3 vs 3): the smallest attainable p is 0.1 > 0.05"


def test_alpha_beta_fit_recovers_the_line():
    x = np.array([1e3, 1e4, 1e5, 1e6])
    a, b, r2 = stats.fit_alpha_beta(x, 5e-6 + 1e-10 * x)
    assert a == approx(5e-6, rel=1e-9) and b == approx(1e-10, rel=1e-9) and r2 == approx(1)
    # Hand-solved relative-error least squares for (1, 1), (2, 3), (3, 2): the rows [1, x] / t
    # against 1 give the normal equations [[49, 71], [71, 133]] (a, b) = (66, 114) (x 36):
    # alpha 19/41, beta 25/41 (ordinary least squares: 1 and 0.5).
    a, b, _ = stats.fit_alpha_beta([1, 2, 3], [1, 3, 2])
    assert (a, b) == (approx(19 / 41, rel=1e-9), approx(25 / 41, rel=1e-9))
    assert all(np.isnan(stats.fit_alpha_beta([8, 8], [1, 2])))
    assert all(np.isnan(stats.fit_alpha_beta([8, 16], [1e-6, 0.0])))  # one usable size


def test_alpha_beta_fit_on_noisy_calls_uses_the_medians_per_size():
    # 7 calls per size: the line times 0.9, 0.95, 1.0 (median), 1.0, 1.05, 1.1 and a 20x
    # outlier (a preempted rank), shuffled: the medians are the line, so the fit is exact,
    # and it does not move with the outliers that a fit over every call would chase.
    alpha, beta = 4e-6, 2.5e-10
    sizes = np.array([2.0 ** k for k in range(2, 25, 2)])
    factors = [0.9, 0.95, 1.0, 1.0, 1.05, 1.1, 20.0]
    x = np.repeat(sizes, len(factors))
    t = (alpha + beta * x) * np.tile(factors, len(sizes))
    order = np.random.default_rng(1).permutation(len(x))
    a, b, r2 = stats.fit_alpha_beta(x[order], t[order])
    assert a == approx(alpha, rel=1e-9) and b == approx(beta, rel=1e-9) and r2 == approx(1)
    spread = stats.size_spread(x, t)
    assert list(spread[0]) == list(sizes)
    assert spread[1] == approx(alpha + beta * sizes)                   # medians
    assert spread[2] == approx(0.9 * (alpha + beta * sizes))           # min
    assert spread[3] == approx(20.0 * (alpha + beta * sizes))          # max
    assert spread[4] == approx(0.975 * (alpha + beta * sizes))         # q1 (linear)
    assert list(spread[6]) == [len(factors)] * len(sizes)
    # Weighted by relative error: a 1 us message counts as much as a 10 ms one. Medians off
    # the line by +-10% alternately: the fit stays within 12% at every size, where ordinary
    # least squares (dominated by the largest sizes) misses the small ones by over 400%.
    m = (alpha + beta * sizes) * np.where(np.arange(len(sizes)) % 2, 0.9, 1.1)
    a, b, _ = stats.fit_alpha_beta(sizes, m)
    assert np.max(np.abs((a + b * sizes) / m - 1)) < 0.12
    ols_a, ols_b = np.polyfit(sizes, m, 1)[::-1]
    assert np.max(np.abs((ols_a + ols_b * sizes) / m - 1)) > 4  # 436% at 16 bytes


def test_alpha_beta_fit_keeps_alpha_at_or_above_zero():
    # Small messages faster than the large ones' line (a cache or eager-protocol effect):
    # an unconstrained fit puts the intercept below zero, which dives off a log axis and
    # predicts negative time. Ours keeps alpha = 0 and fits beta alone: the relative-error
    # least squares of t = beta x, beta = sum(x/t) / sum((x/t)^2).
    x = np.array([1e3, 1e4, 1e5, 1e6, 1e7])
    t = np.array([0.3e-7, 0.6e-6, 0.9e-5, 1e-4, 1e-3])
    A = np.column_stack([1 / t, x / t])
    free = np.linalg.lstsq(A, np.ones(len(x)), rcond=None)[0]
    assert free[0] < 0                              # the data do pull it negative
    assert np.polyfit(x, t, 1)[1] < 0               # and so does ordinary least squares
    a, b, _ = stats.fit_alpha_beta(x, t)
    assert a == 0.0
    assert b == approx(np.sum(x / t) / np.sum((x / t) ** 2), rel=1e-9)
    # The other bound: times that fall with size give beta = 0, alpha the weighted mean
    # sum(1/t) / sum(1/t^2).
    t = np.array([5e-6, 4e-6, 3e-6])
    a, b, _ = stats.fit_alpha_beta([1e3, 1e4, 1e5], t)
    assert b == 0.0 and a == approx(np.sum(1 / t) / np.sum(1 / t ** 2), rel=1e-9)


def test_scaling_efficiency():
    assert stats.scaling_efficiency([2, 1, 4], [100, 55, 180]) == \
        [approx(100 / 55 / 2), 1.0, approx(180 / 55 / 4)]


def test_summary_matches_raw_datasets(results):
    """Whatever wrote the files: medians over the raw non-warm-up steps, per point."""
    folder, _ = results
    r = load_results(folder)
    s = summarize(r)
    for pid, fname in r.done()[["point_id", "file"]].itertuples(index=False):
        with h5py.File(os.path.join(folder, "points", fname), "r") as f:
            timed = f["steps/warmup"][()] == 0
            if timed.any():
                assert s.loc[pid, "step_time_s"] == approx(np.median(f["steps/wall_s"][()][timed]))
                assert s.loc[pid, "samples_per_s"] == \
                    approx(np.median(f["steps/samples_per_s"][()][timed]))
            if len(f["ranks/rank"]):
                assert s.loc[pid, "model_state_bytes"] == \
                    float(f["ranks/model_state_bytes"][()].max())


def test_comparison_ratios_match_raw_datasets(results):
    """For every point and baseline without repetitions: the samples/s ratio is the ratio of
    the medians of the raw timed steps."""
    folder, _ = results
    r = load_results(folder)
    c = compare(r, summarize(r))
    done = r.done().set_index("point_id")

    def raw_median(pid):
        with h5py.File(os.path.join(folder, "points", done.loc[pid, "file"]), "r") as f:
            timed = f["steps/warmup"][()] == 0
            return float(np.median(f["steps/samples_per_s"][()][timed]))

    checked = 0
    for pid, row in done.iterrows():
        b = row["baseline_id"]
        if not b or b not in done.index or row.get("repetitions", 1) != 1:
            continue
        hit = c[(c["group"] == row["point_name"]) & (c["metric"] == "throughput (samples/s)")]
        assert len(hit) == 1, row["point_name"]
        assert hit.iloc[0]["ratio"] == approx(raw_median(pid) / raw_median(b))
        checked += 1
    assert checked >= 1


def test_tflops_from_mfu_and_measured_peak(tmp_path):
    # The train workload records MFU per step and the peak it divides by, not FLOPs/token:
    # MFU 0.4 of a 50 GFLOP/s peak is 0.02 TFLOPS per rank.
    import make_fixture
    make_fixture.write_point(str(tmp_path / "points" / "0-aaaa.h5"), index=0, point_id="aaaa",
                             name="p", config=make_fixture._cfg(),
                             steps=make_fixture._train_steps(10, 8, [1.0, 0.9, 0.8]),
                             scalars={"peak_gflops_per_rank": 50.0})
    s = summarize(load_results(str(tmp_path)))
    assert s.loc["aaaa", "tflops_per_worker"] == approx(0.4 * 50 / 1e3)
