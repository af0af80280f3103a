# The paper's scale predicted with the network model (analysis/predict3d.py): volumes per
# dimension and the no-compression times computed by hand from the formulas of docs/METRICS.md
# ("3D prediction"), the schemes' wire ratios, and the report's section only for 3D-compression
# results.
import types

import pytest

from analysis import network, predict3d


def test_volumes_by_hand():
    v = predict3d.volumes(predict3d.PAPER)
    act = 4 * 2048 * 6144 * 2                       # b x T x d x fp16
    assert v["tp_bytes"] == act and v["pp_bytes"] == act
    assert v["tp_msgs"] == 4 * 11 * 32              # 4 a layer, 11 layers a stage, 32 micro-batches
    assert v["pp_msgs"] == 2 * 32                   # forward and backward, each micro-batch
    assert v["dp_bytes"] == pytest.approx(20.6e9 / 16 * 2)


def test_uncompressed_times_by_hand():
    t, s = predict3d.predict()
    none = t.set_index("scheme").loc["none"]
    act = 4 * 2048 * 6144 * 2
    # tp: 1408 ring all-reduces over 4 ranks in a node: 6 steps x 5 us + 2 x 3/4 x act / 50 GB/s.
    assert none["tp_s"] == pytest.approx(1408 * (6 * 5e-6 + 1.5 * act / 50e9))
    # pp: 64 sends between nodes at a quarter of 25 GB/s, each 10 us.
    assert none["pp_s"] == pytest.approx(64 * (10e-6 + act / 6.25e9))
    # dp: a ring over 12 nodes at a quarter of 25 GB/s: 22 steps x 10 us + 2 x 11/12 x bytes.
    g = 20.6e9 / 16 * 2
    assert none["dp_s"] == pytest.approx(22 * 10e-6 + 2 * 11 / 12 * g / 6.25e9)
    tokens = 12 * 4 * 32 * 2048
    flops = 8 * 20.6e9 * tokens / 192
    assert none["compute_s"] == pytest.approx(flops / (125e12 * 0.375) / (1 - 3 / 35))
    assert none["tflops_per_gpu"] == pytest.approx(flops / none["step_s"] / 1e12)


def test_schemes_compress_where_they_say():
    t = predict3d.predict()[0].set_index("scheme")
    # hybrid3d: bf16 on fp16 tp / pp traffic saves nothing; int8 on dp gradients does.
    assert t.loc["hybrid3d", "tp_s"] == t.loc["none", "tp_s"]
    assert t.loc["hybrid3d", "pp_s"] == t.loc["none", "pp_s"]
    assert t.loc["hybrid3d", "dp_s"] == t.loc["uniform3d", "dp_s"] < t.loc["none", "dp_s"]
    assert t.loc["uniform3d", "tp_s"] < t.loc["none", "tp_s"]
    assert t.loc["none", "gain"] == "+0.0%"
    # A slower network makes compression pay more.
    slow = dict(network.network("lassen"), bw_inter_GBps=2.5, name="slow")
    s = predict3d.predict(None, slow)[0].set_index("scheme")
    g = lambda tab: tab.loc["uniform3d", "tflops_per_gpu"] / tab.loc["none", "tflops_per_gpu"]  # noqa: E731
    assert g(s) > g(t)


def test_report_section_only_for_3d_compression():
    net = network.network("lassen")
    plain = types.SimpleNamespace(config={"a": {"compression": "hybrid"}})
    assert predict3d.section(plain, net)[0] == []
    three = types.SimpleNamespace(config={"a": {"compression": "uniform3d"}})
    blocks, table = predict3d.section(three, net)
    assert blocks[0][1].startswith("The paper's scale predicted: GPT-NeoX-20B")
    assert "mesh: tp 4 (one node)" in blocks[1][1]
    assert list(table["scheme"]) == ["none", "uniform3d", "hybrid3d"]


def test_cli_prints_the_assumptions(capsys):
    predict3d.main(["--tp", "8", "--pp", "2"])
    out = capsys.readouterr().out
    assert "tp 8 x pp 2 x dp 12" in out and "assumptions:" in out and "codec:" in out
