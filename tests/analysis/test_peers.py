# The report's "PyTorch peers (same machine)" section (analysis/peers.py) and the peer file
# (analysis/peer_file.py): a fixture folder of inference points written by the C++ writer
# (or the h5py mirror) plus a peer file written by peer_file.write, and the section's rows,
# ratios and reasons checked against figures computed by hand.
import json
import os
import re

import numpy as np
import pytest

import make_fixture
from analysis import peer_file, peers
from analysis import report as report_mod

CPU = "Test CPU @ 2.00GHz"
MACHINE = {"ranks_per_node": 1, "nodes": [{
    "host": "localhost", "cpu_model": CPU, "isa": ["avx2", "amx_bf16"], "cores": 2,
    "rank_cpus": 2, "ranks": [0], "loadavg_1m_start": 0.1, "loadavg_1m_end": 0.1,
    "other_cpus": 0.0, "steal_cpus": 0.0}]}
LOGITS = {"timed_output": "logits (batch, seq, vocab)"}


def _infer(pid, name, quantization, walls, scenario="offline", model="bert-large", texts=None):
    """An infer point: a warm-up forward of 9 s (left out of every figure), then `walls`."""
    cfg = dict(model=model, task="infer", strategy="no_shard", world=1, threads=2, batch=8,
               seq=128, scenario=scenario, queries=len(walls), samples_per_query=8,
               quantization=quantization)
    steps = [dict(step=0, warmup=True, wall_s=9.0, forward_s=9.0)] + [
        dict(step=i + 1, wall_s=w, forward_s=w, samples_per_s=8 / w, tokens_per_s=8 * 128 / w)
        for i, w in enumerate(walls)]
    return (0, pid, name, dict(config=cfg, steps=steps, ranks=make_fixture._ranks(1, 1, 0, 0, 0),
                               machine=MACHINE, texts={**LOGITS, **(texts or {})}))


# ours_ms = 1e3 x the median timed wall_s: 2250, 1000, 625, 500, 1500, 2250.
POINTS = [
    _infer("e0000001", "bert-large/infer/none", "none", [2.0, 2.25, 2.5]),
    _infer("e0000002", "bert-large/infer/bf16", "bf16", [1.0, 1.0, 1.0],
           texts={"compute_dtype": "bf16"}),
    _infer("e0000003", "bert-large/infer/int8-dynamic", "int8-dynamic", [0.5, 0.625, 0.75]),
    _infer("e0000004", "bert-large/infer/int8-static", "int8-static", [0.5, 0.5, 0.5]),
    _infer("e0000005", "bert-large/infer/int8-weight-channel", "int8-weight-channel", [1.5]),
    _infer("e0000006", "bert-large/infer/none/single-stream", "none", [2.25],
           scenario="single-stream"),
    _infer("e0000007", "gpt2/infer/none", "none", [0.125], model="gpt2"),  # another model
]


def _peer(**kw):
    """A peer record. Per mode, median of each round, then of the two rounds: fp32 (4500,
    3500) -> 4000; bf16 (1250, 1250) -> 1250; compile (1000, 1000) -> 1000; int8-dynamic
    (1100, 1100) -> 1100. The best low-precision mode: torch.compile bf16, 1000 ms."""
    rec = {"kind": peer_file.KIND, "version": peer_file.VERSION,
           "script": "suite/micro/torch_peers_bert.py", "model": "bert-large",
           "timed_output": "MLM logits (batch, seq, vocab): BertForMaskedLM",
           "batch": 8, "seq": 128, "threads": 2, "iters": 3,
           "rounds": [{"fp32": [4000, 4500, 5000], "bf16": [1000, 1250, 1500],
                       "bf16 torch.compile": [900, 1000, 1100], "int8-dynamic": [1000, 1100, 1200]},
                      {"fp32": [3000, 3500, 4000], "bf16": [1250] * 3,
                       "bf16 torch.compile": [1000] * 3, "int8-dynamic": [1100] * 3}],
           "versions": {"torch": "2.15.0", "transformers": "5.25.0", "python": "3.11.2"},
           "cpu_model": CPU, "isa": ["avx2", "amx_bf16"], "hostname": "localhost",
           "timestamp": "2026-12-05T18:00:00Z", "command_line": "torch_peers_bert.py --results R"}
    rec.update(kw)
    return rec


def _folder(tmp_path, *peer_records):
    d = str(tmp_path)
    make_fixture.write_points(d, POINTS, writer=os.environ.get("SB_FIXTURE_WRITER"))
    for rec in peer_records:
        peer_file.write(d, rec)
    return d


def _report(d):
    built = report_mod.build(d, os.path.join(d, "report"))
    with open(os.path.join(d, "report", "report.md")) as fh:
        md = fh.read()
    return built["tables"]["peers"], md[md.index("## PyTorch peers"):]


def _rows(table):
    return [(r.point_name, r.peer_mode, r.ours_ms, r.peer_ms, r.ours_over_peer, r.note)
            for r in table.itertuples()]


def _same(got, want):
    """Rows equal, NaN equal to NaN (a ratio withheld)."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g[:2] == w[:2] and g[5] == w[5], (g, w)
        for a, b in zip(g[2:5], w[2:5]):
            assert (np.isnan(a) and np.isnan(b)) or a == pytest.approx(b, rel=1e-12), (g, w)


SINGLE = ("ratio withheld: our point ran the single-stream scenario: only offline's forwards "
          "are batches of batch x seq (set scenario = \"offline\")")


def test_peers_beside_our_points_with_exact_ratios(tmp_path):
    d = _folder(tmp_path, _peer())
    table, md = _report(d)
    nan = np.nan
    _same(_rows(table), [
        ("bert-large/infer/bf16", "bf16", 1000.0, 1250.0, 0.8, ""),
        ("bert-large/infer/bf16", "bf16 torch.compile", 1000.0, 1000.0, 1.0, ""),
        ("bert-large/infer/int8-dynamic", "int8-dynamic", 625.0, 1100.0, 625 / 1100, ""),
        ("bert-large/infer/int8-static", "best low-precision: bf16 torch.compile", 500.0, 1000.0,
         0.5, ""),
        ("bert-large/infer/int8-weight-channel", "", 1500.0, nan, nan,
         "PyTorch has no peer of int8-weight-channel here"),
        ("bert-large/infer/none", "fp32", 2250.0, 4000.0, 2250 / 4000, ""),
        ("bert-large/infer/none/single-stream", "fp32", 2250.0, 4000.0, nan, SINGLE),
    ])
    assert list(table["peer_rounds_ms"]) == ["1250 / 1250", "1000 / 1000", "1100 / 1100",
                                             "1000 / 1000", "", "4500 / 3500", "4500 / 3500"]
    assert list(table["compute_dtype"])[:2] == ["bf16", "bf16"]
    name = peer_file.file_name(_peer())
    assert name == "torch_peers_bert-bert-large-b8-s128-t2-20261205T180000Z.json"
    assert set(table["peer_file"]) == {name}
    assert f"### bert-large, 8 x 128, 2 threads (peers/{name})" in md
    assert ("Our fastest low-precision point, bert-large/infer/int8-static (int8-static), 500 ms, "
            "is 2x as fast as PyTorch's best low-precision mode (bf16 torch.compile, 1000 ms) "
            "and takes 0.125x PyTorch's eager fp32 time (4000 ms).") in md
    assert "1 of 6 ratios withheld" in md
    assert ("Our points of bert-large ran from 2026-12-02T10:00:00Z to 2026-12-02T10:01:00Z."
            in md)
    assert "gpt2/infer" not in md[:md.index("## ", 5)]
    # tables/peers.csv carries the same rows.
    assert os.path.exists(os.path.join(d, "report", "tables", "peers.csv"))


def test_other_cpu_or_host_withholds_every_ratio_and_says_why(tmp_path):
    d = _folder(tmp_path, _peer(cpu_model="Other CPU", hostname="elsewhere"))
    table, md = _report(d)
    ours = table[table["point_name"] != ""]
    assert ours["ours_over_peer"].isna().all()
    cpu = (f"CPU differs: ours {CPU}, the peer's Other CPU; host differs: ours localhost, the "
           f"peer's elsewhere")
    matched = ours[ours["peer_mode"] != ""]
    assert list(matched["note"][matched["point_name"] == "bert-large/infer/none"]) == [
        "ratio withheld: " + cpu]
    assert list(matched["note"][matched["point_name"] == "bert-large/infer/none/single-stream"]) \
        == [SINGLE + "; " + cpu]
    assert "6 of 6 ratios withheld" in md
    assert "Our fastest low-precision point" not in md


def test_other_shapes_withhold_the_ratio(tmp_path):
    d = _folder(tmp_path, _peer(threads=4, batch=4))
    table, _ = _report(d)
    row = table[(table["point_name"] == "bert-large/infer/none")].iloc[0]
    assert np.isnan(row["ours_over_peer"])
    assert row["note"] == ("ratio withheld: shapes differ: ours 8 x 128 on 2 threads, the peer's "
                           "4 x 128 on 4 threads")


def test_without_a_peer_file_the_section_says_what_to_run(tmp_path):
    d = _folder(tmp_path)
    table, md = _report(d)
    assert len(table) == 0
    assert (f"No peer file in {os.path.abspath(d)}/peers/. To measure PyTorch beside these "
            f"points, run on the machine that ran them") in md
    # One command per shape of the offline points of a model the script builds (not gpt2).
    assert (f"`.venv/bin/python suite/micro/torch_peers_bert.py --model bert-large --batch 8 "
            f"--seq 128 --threads 2 --results {os.path.abspath(d)}`.") in md
    assert "--model gpt2" not in md


def test_broken_and_unfinished_peer_files_are_listed_not_read(tmp_path):
    d = _folder(tmp_path, _peer())
    folder = os.path.join(d, "peers")
    with open(os.path.join(folder, "old.json"), "w") as fh:
        json.dump({**_peer(), "version": 0}, fh)
    with open(os.path.join(folder, "cut.json"), "w") as fh:
        fh.write('{"kind": ')
    with open(os.path.join(folder, "half.json.tmp.77"), "w") as fh:
        fh.write("{")
    recs, problems = peer_file.read_folder(d)
    assert [r["file"] for r in recs] == [peer_file.file_name(_peer())]
    assert [p[0] for p in problems] == ["cut.json", "half.json.tmp.77", "old.json"]
    assert problems[1][1] == "temporary file only: the write never completed"
    assert problems[2][1] == ("version 0, this analysis reads 1: rerun "
                              "suite/micro/torch_peers_bert.py with this checkout")
    _, md = _report(d)
    assert "Peer file peers/old.json not read: version 0" in md


def test_write_is_atomic_and_refuses_an_invalid_record(tmp_path):
    d = str(tmp_path)
    path = peer_file.write(d, _peer())
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]  # no temporary left
    with open(path) as fh:
        assert json.load(fh) == _peer()
    bad = _peer()
    del bad["hostname"]
    bad["rounds"] = [{"fp32": []}]
    with pytest.raises(ValueError, match="key 'hostname' missing"):
        peer_file.write(d, bad)
    del bad["rounds"]
    bad["hostname"] = "h"
    with pytest.raises(ValueError, match=r"key 'rounds' missing"):
        peer_file.write(d, bad)
    with pytest.raises(ValueError, match=r"rounds\[0\]\['fp32'\] is not a non-empty list"):
        peer_file.write(d, _peer(rounds=[{"fp32": []}]))
    assert os.listdir(os.path.join(d, "peers")) == [os.path.basename(path)]


def test_cpu_info_reads_cpuinfo_as_the_harness(tmp_path):
    p = tmp_path / "cpuinfo"
    p.write_text("processor\t: 0\nmodel name\t: " + CPU + "\nflags\t\t: fpu avx2 amx_bf16 "
                 "avx512f sse4_2\n\nprocessor\t: 1\nmodel name\t: ignored\n")
    assert peer_file.cpu_info(str(p)) == {"cpu_model": CPU,
                                          "isa": ["sse4_2", "avx2", "avx512f", "amx_bf16"]}


def test_isa_flags_are_the_harness_list():
    # The peer file lists the flags the harness records, so the two read alike in a report.
    src = open(os.path.join(make_fixture.REPO, "harness", "core", "machine.cpp")).read()
    body = src[src.index("kIsaFlags = {"):]
    body = body[:body.index("};")]
    assert tuple(re.findall(r'"([a-z0-9_]+)"', body)) == peer_file.ISA_FLAGS
