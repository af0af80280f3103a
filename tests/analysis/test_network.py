# The network model apart from compression cost (analysis/network.py): the codec's cost per
# logical byte from a compressed fit and the same operation's plain fit, the bandwidth below
# which compression pays, ring times per network level computed by hand, the Lassen preset,
# and [network] tables given in a TOML file (missing keys and unknown presets named).
import math

import pandas as pd
import pytest

from analysis import network


def _fits():
    return pd.DataFrame([
        dict(series="all_reduce/ours", op="all_reduce", beta_s_per_byte=1e-10, wire_per_logical=1.0),
        dict(series="all_reduce/mpi", op="all_reduce", beta_s_per_byte=2e-10, wire_per_logical=1.0),
        dict(series="all_reduce/int8", op="all_reduce", beta_s_per_byte=3e-10, wire_per_logical=0.25),
        dict(series="broadcast/ours", op="broadcast", beta_s_per_byte=1e-10, wire_per_logical=1.0),
        dict(series="all_gather/topk", op="all_gather", beta_s_per_byte=1e-10, wire_per_logical=0.1),
    ])


def test_codec_cost_is_the_time_beyond_the_plain_network_time():
    c = network.codec_costs(_fits())
    # all_gather/topk has no plain series of its op: left out.
    assert list(c["series"]) == ["all_reduce/int8"]
    # r (beta_c - fastest plain beta) = 0.25 x (3e-10 - 1e-10)
    assert c["codec_s_per_byte"].iloc[0] == pytest.approx(5e-11)
    assert network.pays_below(0.25, 5e-11) == pytest.approx(0.75 / 5e-11)  # 15 GB/s
    assert network.pays_below(0.25, 0.0) == math.inf


def test_ring_times_per_level_by_hand():
    net = network.network("lassen")
    m = 1e9
    # Within a node (4 ranks): 2 x 3 steps x 5 us + 2 x 3/4 x m / 50 GB/s.
    assert network.predict("all_reduce", m, 4, net) == pytest.approx(6 * 5e-6 + 1.5e9 / 50e9)
    # 192 ranks cross nodes: 382 steps x 10 us + 2 x 191/192 x m / 25 GB/s, and the codec.
    w = m * 2 * 191 / 192
    assert network.predict("all_reduce", m, 192, net) == pytest.approx(382 * 10e-6 + w / 25e9)
    assert network.predict("all_reduce", m, 192, net, 0.25, 5e-11) == pytest.approx(
        382 * 10e-6 + 0.25 * w / 25e9 + 5e-11 * w)


def test_table_says_where_compression_pays():
    t = network.compression_table(_fits(), "lassen", 1e9, 192).set_index("series")
    row = t.loc["all_reduce/int8"]
    assert row["codec_GB_per_s"] == pytest.approx(20.0)
    assert row["pays_below_GB_per_s"] == pytest.approx(15.0)
    assert row["network_bw_GB_per_s"] == pytest.approx(25.0)
    assert not row["pays_on_network"]  # 25 GB/s between Lassen's nodes > 15
    assert row["compressed_ms"] > row["plain_ms"]
    slow = dict(network.NETWORKS["lassen"], bw_inter_GBps=5.0, name="slow")
    row = network.compression_table(_fits(), slow, 1e9, 192).set_index("series").loc["all_reduce/int8"]
    assert row["pays_on_network"] and row["compressed_ms"] < row["plain_ms"]


def test_given_tables_and_errors(tmp_path):
    good = tmp_path / "net.toml"
    good.write_text("[network]\nname = \"lab\"\nranks_per_node = 8\nalpha_intra_us = 2.0\n"
                    "bw_intra_GBps = 100.0\nalpha_inter_us = 4.0\nbw_inter_GBps = 12.5\n")
    n = network.load(str(good))
    assert n["name"] == "lab" and network.level(n, 16) == (4e-6, 12.5e9)
    bad = tmp_path / "bad.toml"
    bad.write_text("[network]\nranks_per_node = 8\n")
    with pytest.raises(KeyError, match="lacks alpha_intra_us, bw_intra_GBps"):
        network.load(str(bad))
    with pytest.raises(KeyError, match="presets: lassen"):
        network.load("summit")
