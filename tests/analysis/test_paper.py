# The paper's tables: shape (columns in the paper's order, our figures beside the paper's)
# and numbers computed by hand from make_fixture.py.
import pytest

from analysis import paper
from analysis.compare import Groups
from analysis.load import load_results
from analysis.metrics import summarize

approx = pytest.approx


@pytest.fixture(scope="module")
def tables(fixture_dir):
    r = load_results(fixture_dir)
    s, g = summarize(r), Groups(r)
    return paper.seed_tables(g, s), paper.compression_tables(g, s)


def test_seed_tables_shape(tables):
    seed, _ = tables
    assert list(seed) == ["Inference latency per batch", "Memory footprint",
                          "Training throughput", "Model accuracy"]
    # Every table says under which conditions ours ran and why a row is not a plain number.
    assert list(seed["Inference latency per batch"].columns) == [
        "comparison", "paper baseline (ms)", "paper optimized (ms)", "paper reduction (%)",
        "ours baseline (ms)", "ours optimized (ms)", "ours reduction (%)", "repetitions",
        "conditions", "note"]
    assert list(seed["Memory footprint"].columns) == [
        "comparison", "paper baseline (GB)", "paper optimized (GB)", "paper reduction (%)",
        "ours baseline (GB)", "ours optimized (GB)", "ours reduction (%)", "repetitions",
        "ours peak resident baseline (GB)", "ours peak resident optimized (GB)", "conditions",
        "note"]
    assert list(seed["Training throughput"].columns) == [
        "comparison", "paper baseline (samples/s)", "paper optimized (samples/s)",
        "paper factor (x)", "ours baseline (samples/s)", "ours optimized (samples/s)",
        "ours factor (x)", "repetitions", "ceiling (x)", "conditions", "note"]
    assert list(seed["Model accuracy"].columns) == [
        "comparison", "metric", "paper: within (%) of baseline", "ours baseline",
        "ours optimized", "ours: within (%) of baseline", "repetitions", "conditions", "note"]


def test_latency_table(tables):
    row = tables[0]["Inference latency per batch"].iloc[0]
    assert row["comparison"] == "bert-large: quantization: none -> int8-dynamic"
    assert (row["paper baseline (ms)"], row["paper optimized (ms)"]) == (185, 42)
    assert row["paper reduction (%)"] == approx((185 - 42) / 185 * 100)  # the seed's 77%
    # Medians of the timed batches: 0.185 s and 0.042 s.
    assert row["ours baseline (ms)"] == approx(185.0)
    assert row["ours optimized (ms)"] == approx(42.0)
    assert row["ours reduction (%)"] == approx((185 - 42) / 185 * 100)


def test_memory_table(tables):
    row = tables[0]["Memory footprint"].iloc[0]
    assert (row["paper baseline (GB)"], row["paper optimized (GB)"]) == (3.2, 0.8)
    assert row["paper reduction (%)"] == approx(75.0)
    # model_bytes 1.34e9 and 0.402e9 in GB (1e9 bytes).
    assert (row["ours baseline (GB)"], row["ours optimized (GB)"]) == (approx(1.34), approx(0.402))
    assert row["ours reduction (%)"] == approx(70.0)


def test_throughput_table_uses_repetition_medians(tables):
    row = tables[0]["Training throughput"].iloc[0]
    assert row["comparison"] == "bert-large: strategy: no_shard -> full_shard"
    assert row["paper factor (x)"] == approx(124 / 32)  # the seed's 3.9x
    assert row["ours baseline (samples/s)"] == approx(31.5)   # median of 30, 31, 32, 33
    assert row["ours optimized (samples/s)"] == approx(123.0)  # median of 120 .. 126
    assert row["ours factor (x)"] == approx(123 / 31.5)
    assert row["repetitions"] == 4


def test_accuracy_table(tables):
    row = tables[0]["Model accuracy"].iloc[0]
    assert row["metric"] == "mlm_accuracy"
    assert row["paper: within (%) of baseline"] == 0.5
    assert row["ours: within (%) of baseline"] == approx(abs(0.597 - 0.600) / 0.600 * 100)


def test_hybrid_compression_table(tables):
    _, comp = tables
    assert list(comp) == ["Compression policies: gpt2-tiny full_shard on 2 ranks"]
    t = comp["Compression policies: gpt2-tiny full_shard on 2 ranks"]
    assert list(t.columns) == [
        "policy", "TFLOPS per worker", "samples/s", "TFLOPS vs none (%)",
        "samples/s vs none (%)", "paper TFLOPS vs none (%)", "paper samples/s vs none (%)",
        "final loss", "reached baseline loss", "paper reached baseline loss", "repetitions",
        "seeds", "final loss min", "final loss max"]
    assert list(t["policy"]) == ["none", "naive", "hybrid"]
    tf = 128 * 6e6 / 2 / 1e12  # TFLOPS per worker per sample/s
    assert list(t["TFLOPS per worker"]) == \
        [approx(100 * tf), approx(123.6 * tf), approx(112.7 * tf)]
    assert list(t["samples/s vs none (%)"]) == [approx(0), approx(23.6), approx(12.7)]
    assert list(t["paper TFLOPS vs none (%)"])[1:] == [22.5, 17.3]
    # Final losses 2.0 (none), 2.1 (naive: 5% above), 2.005 (hybrid: 0.25%, within 0.5%).
    assert list(t["reached baseline loss"]) == ["yes", "no", "yes"]
    assert list(t["paper reached baseline loss"]) == ["", "no", "yes"]


def test_seeds_pool_and_baseline_loss_means_the_seeds_spread():
    # One seed a side: within 0.5% of the baseline's loss.
    assert paper._reached([2.009], [2.0]) == "yes" and paper._reached([2.011], [2.0]) == "no"
    # Seeds: the policy's mean at most the baseline seeds' largest loss.
    assert paper._reached([3.0, 3.4, 3.2], [3.1, 3.3, 3.25]) == "yes"  # mean 3.2 <= 3.3
    assert paper._reached([3.3, 3.5, 3.4], [3.1, 3.3, 3.25]) == "no"   # mean 3.4 > 3.3
    assert paper._reached([], [2.0]) == ""
    # The seed is not part of a family: a suite's seeds land in one table.
    a = paper._family_key({"model": "gpt2", "compression": "none", "seed": 1})
    b = paper._family_key({"model": "gpt2", "compression": "hybrid3d", "seed": 2})
    assert a == b


def test_seed_summary_reads_like_the_paper(tables):
    t = paper.seed_summary(tables[0])
    assert list(t.columns) == ["result", "comparison", "paper", "ours", "repetitions",
                               "conditions"]
    assert list(t["paper"]) == ["185 -> 42 ms (77.3% reduction)", "3.2 -> 0.8 GB (75% reduction)",
                                "32 -> 124 samples/s (3.88x)", "within 0.5% of baseline"]
    assert list(t["ours"]) == ["185 -> 42 ms (77.3% reduction)", "1.34 -> 0.402 GB (70% reduction)",
                               "31.5 -> 123 samples/s (3.9x)",
                               "within 0.5% of baseline (mlm_accuracy)"]


def test_policy_order_follows_the_paper_by_prefix():
    assert sorted(["hybrid", "topk", "naive-int8", "none", "fp16"], key=paper.policy_order_key) == \
        ["none", "naive-int8", "hybrid", "fp16", "topk"]
