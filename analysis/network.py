# The network model apart from compression cost (the Parallel3d issue): the 192-worker
# prediction no longer carries this machine's shared-memory bandwidth to 192 workers. A
# compressed collective's time is split into
#   the codec's compute per logical byte, measured where it ran (the micro-benchmarks: the
#   compressed series' time per logical byte minus the plain series' network time of the
#   compressed wire bytes, on the same machine and operation), and
#   the network's: alpha per ring step and bandwidth, per level (within a node, between
#   nodes), from a cluster preset (NETWORKS) or a [network] table a user gives.
# A ring collective over p ranks on nodes of g ranks crosses nodes when p > g: every step pays
# the inter-node alpha and the ring's bytes move at the slower level's bandwidth (a ring's
# one flow per node link). Compression pays when it saves more network time than its codec
# costs: with r = wire / logical bytes and c = codec seconds per logical byte,
#   plain  t = steps x alpha + W / bw,   compressed  t = steps x alpha + r W / bw + c W,
# so it pays below the bandwidth bw* = (1 - r) / c (W, the ring's logical bytes per rank,
# cancels). Formulas in docs/METRICS.md ("Network model").
import math

import numpy as np
import pandas as pd

from analysis.plots import ring_factor  # the ring's bytes per rank per buffer byte

# Per cluster: ranks per node, and (alpha in us, bandwidth in GB/s) within and between nodes.
# lassen: LLNL's Lassen (the hybrid-compression paper's 192 V100s): 4 V100 per node joined by
# NVLink 2.0 (150 GB/s per GPU pair each way; NCCL's ring reaches about 50 GB/s of bus
# bandwidth within a node), nodes by dual-rail EDR InfiniBand (2 x 100 Gb/s = 25 GB/s per
# node); the alphas are NCCL-typical small-message latencies (about 5 us in a node, 10 us
# between nodes), assumptions rather than measurements.
NETWORKS = {
    "lassen": dict(ranks_per_node=4, alpha_intra_us=5.0, bw_intra_GBps=50.0,
                   alpha_inter_us=10.0, bw_inter_GBps=25.0,
                   source="LLNL Lassen: 4 V100/node, NVLink 2.0, dual-rail EDR InfiniBand "
                          "(2 x 100 Gb/s); NCCL-typical alphas (assumed)"),
}
KEYS = ("ranks_per_node", "alpha_intra_us", "bw_intra_GBps", "alpha_inter_us", "bw_inter_GBps")
COLUMNS = ["op", "series", "wire_per_logical", "codec_GB_per_s", "pays_below_GB_per_s",
           "network", "network_bw_GB_per_s", "pays_on_network", "plain_ms", "compressed_ms"]


def load(arg):
    """--network: a preset name, or a TOML file whose [network] table has KEYS."""
    if arg.endswith(".toml"):
        import tomllib
        with open(arg, "rb") as fh:
            doc = tomllib.load(fh)
        if "network" not in doc:
            raise KeyError(f"{arg}: no [network] table (it needs {', '.join(KEYS)})")
        return network(dict(doc["network"], name=doc["network"].get("name", arg)))
    return network(arg)


def network(name_or_table):
    """A preset by name, or a [network] table (a dict with KEYS); errors name what is
    missing and the presets."""
    if isinstance(name_or_table, str):
        if name_or_table not in NETWORKS:
            raise KeyError(f"unknown network \"{name_or_table}\"; presets: "
                           f"{', '.join(sorted(NETWORKS))}, or give a [network] table with "
                           f"{', '.join(KEYS)}")
        return dict(NETWORKS[name_or_table], name=name_or_table)
    missing = [k for k in KEYS if k not in name_or_table]
    if missing:
        raise KeyError(f"[network] lacks {', '.join(missing)} (it needs {', '.join(KEYS)})")
    return dict(name_or_table, name=name_or_table.get("name", "given"))


def ring_steps(op, p):
    return (2 if op == "all_reduce" else 1) * (p - 1)


def level(net, p):
    """(alpha seconds, bandwidth bytes/s) of a ring over p ranks."""
    if p > net["ranks_per_node"]:
        return net["alpha_inter_us"] * 1e-6, min(net["bw_intra_GBps"], net["bw_inter_GBps"]) * 1e9
    return net["alpha_intra_us"] * 1e-6, net["bw_intra_GBps"] * 1e9


def predict(op, nbytes, p, net, wire_per_logical=1.0, codec_s_per_byte=0.0):
    """Seconds of one ring `op` of an nbytes buffer over p ranks on `net`: steps x alpha +
    r W / bw + c W, W = nbytes x the ring factor (the logical bytes each rank sends)."""
    alpha, bw = level(net, p)
    w = nbytes * ring_factor(op, p)
    return ring_steps(op, p) * alpha + wire_per_logical * w / bw + codec_s_per_byte * w


def pays_below(wire_per_logical, codec_s_per_byte):
    """bw* in bytes/s: compression pays on networks slower than this (inf: a free codec)."""
    if codec_s_per_byte <= 0:
        return math.inf
    return max(0.0, (1.0 - wire_per_logical) / codec_s_per_byte)


def codec_costs(fits):
    """Per compressed series of the fits (alpha_beta_fits: wire_per_logical < 1), its codec
    seconds per logical byte: its time per logical byte (beta x r) minus the network time of
    its wire bytes at the plain series' beta on the same operation (r x beta_plain), so
    c = r (beta_c - beta_plain). The plain series: the same op's fastest uncompressed fit
    (r = 1). Rows without a plain series of their op are left out."""
    rows = []
    for op, g in fits.groupby("op", sort=False):
        plain = g[np.isclose(g["wire_per_logical"], 1.0)]
        if not len(plain):
            continue
        beta_p = plain["beta_s_per_byte"].min()
        for _, f in g[g["wire_per_logical"] < 0.999].iterrows():
            r = float(f["wire_per_logical"])
            rows.append(dict(op=op, series=f["series"], wire_per_logical=r,
                             codec_s_per_byte=max(0.0, r * (f["beta_s_per_byte"] - beta_p))))
    return pd.DataFrame(rows, columns=["op", "series", "wire_per_logical", "codec_s_per_byte"])


def compression_table(fits, net, nbytes, p):
    """Per compressed series: its ratio, its codec throughput as measured, the bandwidth below
    which it pays, and on `net` at p ranks the plain and compressed times of nbytes."""
    net = network(net)
    rows = []
    for _, c in codec_costs(fits).iterrows():
        r, cs = c["wire_per_logical"], c["codec_s_per_byte"]
        star = pays_below(r, cs)
        _, bw = level(net, p)
        rows.append(dict(op=c["op"], series=c["series"], wire_per_logical=r,
                         codec_GB_per_s=(1 / cs / 1e9) if cs > 0 else math.inf,
                         pays_below_GB_per_s=star / 1e9, network=net["name"],
                         network_bw_GB_per_s=bw / 1e9, pays_on_network=bool(bw < star),
                         plain_ms=predict(c["op"], nbytes, p, net) * 1e3,
                         compressed_ms=predict(c["op"], nbytes, p, net, r, cs) * 1e3))
    return pd.DataFrame(rows, columns=COLUMNS)
