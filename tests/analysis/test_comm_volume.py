# The report's "Communication by mesh dimension" section (analysis/comm_volume.py): a
# training point whose comm rows span dp_shard collectives and pp point-to-point messages,
# with a warm-up step left out, gives bytes and messages per step per (dim, op) computed by
# hand, recv rows never counted, the size histogram and the point-to-point share; a file
# written before the dim column falls back to its groups; micro points are left out.
import os

import numpy as np
import pytest

import make_fixture
from analysis import comm_volume
from analysis import report as report_mod
from analysis.load import load_results


def _row(step, rank, op, group, dim, wire, kind="other", peer=-1):
    return dict(step=step, rank=rank, op=op, group=group, kind=kind, logical_bytes=wire,
                wire_bytes=wire, start_s=0.0, duration_s=0.001, peer=peer, dim=dim)


def _steps(n):
    return [dict(step=0, warmup=True, wall_s=1.0)] + [dict(step=s, wall_s=1.0) for s in range(1, n + 1)]


def _train_point():
    ev = []
    for s in range(0, 3):  # step 0: the warm-up, left out
        for r in range(2):
            ev.append(_row(s, r, "all_gather", "shard", "dp_shard", 4000, "param_all_gather"))
            ev.append(_row(s, r, "reduce_scatter", "shard", "dp_shard", 2_000_000,
                           "grad_reduce_scatter"))
        ev.append(_row(s, 0, "send", "pp", "pp", 300_000, "pp_act", peer=1))
        ev.append(_row(s, 1, "recv", "pp", "pp", 300_000, "pp_act", peer=0))
        ev.append(_row(s, 1, "send", "pp", "pp", 300_000, "pp_grad", peer=0))
        ev.append(_row(s, 0, "recv", "pp", "pp", 300_000, "pp_grad", peer=1))
    cfg = make_fixture._cfg(world=2, seq=64)
    return (0, "a0000001", "gpt2-tiny/pp", dict(config=cfg, steps=_steps(2), comm=ev))


def _old_point():
    ev = [_row(s, r, "all_reduce", "world", "", 800) for s in range(0, 2) for r in range(2)]
    cfg = make_fixture._cfg(world=2, seq=128)
    return (1, "a0000002", "gpt2-tiny/old", dict(config=cfg, steps=_steps(1), comm=ev))


def _micro_point():
    ev = [_row(0, r, "all_reduce", "world", "world", 64) for r in range(2)]
    cfg = make_fixture._cfg(task="micro", model="none")
    return (2, "a0000003", "micro", dict(config=cfg, comm=ev))


@pytest.fixture()
def results(tmp_path):
    d = str(tmp_path / "res")
    make_fixture.write_points(d, [_train_point(), _old_point(), _micro_point()],
                              writer=os.environ.get("SB_FIXTURE_WRITER"))
    return load_results(d)


def test_bytes_messages_and_shares_per_dimension(results):
    t = comm_volume.volume_table(results)
    pp = t[t["point_name"] == "gpt2-tiny/pp"].set_index(["dim", "op"])
    assert sorted(pp.index) == [("dp_shard", "all_gather"), ("dp_shard", "reduce_scatter"),
                                ("pp", "send")]
    total = 2 * 4000 + 2 * 2_000_000 + 2 * 300_000  # per timed step
    assert pp.loc[("dp_shard", "all_gather"), "bytes_per_step"] == 8000
    assert pp.loc[("dp_shard", "reduce_scatter"), "bytes_per_step"] == 4_000_000
    assert pp.loc[("pp", "send"), "bytes_per_step"] == 600_000  # recv rows not counted
    assert pp.loc[("pp", "send"), "messages_per_step"] == 2
    assert pp.loc[("pp", "send"), "share_of_bytes"] == pytest.approx(600_000 / total)
    assert np.allclose(pp["p2p_share"], 600_000 / total)
    assert pp.loc[("dp_shard", "all_gather"), "msgs_le_64KiB"] == 2
    assert pp.loc[("dp_shard", "reduce_scatter"), "msgs_le_16MiB"] == 2
    assert pp.loc[("pp", "send"), "msgs_le_1MiB"] == 2
    assert pp.loc[("pp", "send"), "seq"] == 64


def test_old_files_fall_back_to_groups_and_micro_is_left_out(results):
    t = comm_volume.volume_table(results)
    old = t[t["point_name"] == "gpt2-tiny/old"]
    assert list(old["dim"]) == ["world"] and list(old["bytes_per_step"]) == [1600]
    assert (old["p2p_share"] == 0).all()
    assert "micro" not in set(t["point_name"])


def test_report_has_the_section(results, tmp_path):
    out = str(tmp_path / "report")
    report_mod.build(results.root, out)
    md = open(os.path.join(out, "report.md")).read()
    assert "## Communication by mesh dimension" in md
    assert os.path.exists(os.path.join(out, "tables", "comm_volume.csv"))
