# Loading: tidy tables equal the raw datasets; failed, unreadable, unfinished and missing
# points become problems with exact reasons, never exceptions.
import json
import os

import h5py
import numpy as np
import pytest

import make_fixture
from analysis.load import load_results


def test_problems_of_the_mirror_are_listed_exactly(fixture_dir):
    r = load_results(fixture_dir)
    got = [(int(i) if i == i else None, pid, f, k, why) for i, pid, f, k, why in
           r.problems.itertuples(index=False)]
    assert got == [
        (20, "f0000bad", "20-f0000bad.h5", "failed",
         "rank 3 on localhost: out of memory (workloads/fsdp/full_shard.cpp:88)"),
        (21, "c0ffee00", "21-c0ffee00.h5", "unreadable",
         "OSError: Unable to open file (bad byte number in an address)"),
        (22, "7e3a0000", "22-7e3a0000.h5.tmp.4242", "unfinished",
         "temporary file only: the write never completed"),
        (23, "", "", "missing", "no result file for this index"),
    ]
    # The failed point is known (its config is readable) but not measured.
    assert "f0000bad" in set(r.points["point_id"])
    assert "f0000bad" not in set(r.done()["point_id"])


def test_record_tables_equal_the_raw_datasets(results):
    folder, _ = results
    r = load_results(folder)
    assert len(r.done()) >= 1
    for pid, fname in r.done()[["point_id", "file"]].itertuples(index=False):
        with h5py.File(os.path.join(folder, "points", fname), "r") as f:
            for group, table in (("steps", r.steps), ("ranks", r.ranks), ("comm", r.comm),
                                 ("queries", r.queries), ("requests", r.requests),
                                 ("serve_steps", r.serve_steps)):
                mine = table[table["point_id"] == pid]
                for col, ds in f[group].items():
                    raw = ds.asstr()[()] if h5py.check_string_dtype(ds.dtype) else ds[()]
                    assert list(mine[col]) == list(raw), (pid, group, col)
            assert json.loads(f.attrs["config"]) == r.config[pid]
            for k, v in f["scalars"].attrs.items():
                assert r.scalar(pid, k) == float(v)


def test_baseline_without_a_file_is_missing(tmp_path):
    pts = tmp_path / "points"
    make_fixture.write_point(str(pts / "0-aaaa.h5"), index=0, point_id="aaaa", name="p",
                             config=make_fixture._cfg(), baseline_id="bbbb")
    r = load_results(str(tmp_path))
    assert list(r.problems[["point_id", "kind", "reason"]].itertuples(index=False, name=None)) == \
        [("bbbb", "missing", "baseline of p has no result file")]


def test_other_schema_version_is_unreadable_not_fatal(tmp_path):
    path = str(tmp_path / "points" / "0-aaaa.h5")
    make_fixture.write_point(path, index=0, point_id="aaaa", name="p", config=make_fixture._cfg())
    with h5py.File(path, "r+") as f:
        f.attrs["schema_version"] = np.int64(2)
    r = load_results(str(tmp_path))
    assert len(r.points) == 0
    assert r.problems.iloc[0]["reason"] == \
        "ValueError: schema_version 2, this analysis reads 1"


def test_columns_of_unequal_length_are_unreadable(tmp_path):
    path = str(tmp_path / "points" / "0-aaaa.h5")
    make_fixture.write_point(path, index=0, point_id="aaaa", name="p", config=make_fixture._cfg(),
                             steps=make_fixture._train_steps(10, 8, [1.0, 0.9]))
    with h5py.File(path, "r+") as f:
        f["steps/loss"].resize((1,))
    r = load_results(str(tmp_path))
    assert r.problems.iloc[0]["kind"] == "unreadable"
    assert r.problems.iloc[0]["reason"] == \
        "ValueError: /steps: datasets of unequal length [1, 3]"


def test_a_tmp_beside_its_final_file_is_not_a_problem(tmp_path):
    # A rerun rewriting a point: the older complete file still counts.
    pts = tmp_path / "points"
    make_fixture.write_point(str(pts / "0-aaaa.h5"), index=0, point_id="aaaa", name="p",
                             config=make_fixture._cfg())
    (pts / "0-aaaa.h5.tmp").write_bytes(b"partial")
    (pts / "0-aaaa.h5.tmp.77").write_bytes(b"partial")
    assert len(load_results(str(tmp_path)).problems) == 0


@pytest.mark.parametrize("make", ["nothing", "empty points"])
def test_empty_results_load(tmp_path, make):
    if make == "empty points":
        (tmp_path / "points").mkdir()
    r = load_results(str(tmp_path))
    assert len(r.points) == 0 and len(r.problems) == 0 and len(r.steps) == 0


def test_missing_dataset_is_named(tmp_path):
    path = str(tmp_path / "points" / "0-aaaa.h5")
    make_fixture.write_point(path, index=0, point_id="aaaa", name="p", config=make_fixture._cfg())
    with h5py.File(path, "r+") as f:
        del f["comm/wire_bytes"]
    r = load_results(str(tmp_path))
    assert r.problems.iloc[0]["reason"] == "ValueError: /comm: datasets missing: wire_bytes"


def test_incomplete_point_is_listed_and_not_measured(tmp_path):
    make_fixture.write_point(str(tmp_path / "points" / "0-aaaa.h5"), index=0, point_id="aaaa",
                             name="p", config=make_fixture._cfg(), status="incomplete",
                             failure_reason="stopped by SIGTERM after step 3")
    r = load_results(str(tmp_path / "points"))  # the points folder itself works too
    assert list(r.problems[["kind", "reason"]].itertuples(index=False, name=None)) == \
        [("incomplete", "stopped by SIGTERM after step 3")]
    assert len(r.done()) == 0


def test_manifest_lists_points_that_never_ran(tmp_path):
    # sweep and submit write RESULTS/manifest.json with every point of the suite; points past
    # the highest index seen are missing too (a sweep stopped half way).
    make_fixture.write_point(str(tmp_path / "points" / "0-aaaa.h5"), index=0, point_id="aaaa",
                             name="p0", config=make_fixture._cfg())
    (tmp_path / "manifest.json").write_text(json.dumps({"points": [
        {"id": "aaaa", "index": 0, "name": "p0", "world": 2},
        {"id": "bbbb", "index": 1, "name": "p1", "world": 2},
        {"id": "cccc", "index": 2, "name": "p2", "world": 4}]}))
    r = load_results(str(tmp_path))
    assert list(r.problems[["point_index", "point_id", "kind", "reason"]].itertuples(
        index=False, name=None)) == [
        (1, "bbbb", "missing", "no result file for p1 (manifest.json)"),
        (2, "cccc", "missing", "no result file for p2 (manifest.json)")]


def test_an_earlier_expansions_file_of_the_same_point_is_listed_not_read(tmp_path):
    # An edited suite moved point "aaaa" from index 0 to 1: the manifest says 1; the old file
    # is a "stale" problem and the point is read once.
    cfg = make_fixture._cfg()
    for i in (0, 1):
        make_fixture.write_point(str(tmp_path / "points" / f"{i}-aaaa.h5"), index=i, point_id="aaaa",
                                 name="p", config=cfg, steps=make_fixture._train_steps(10, 8, [1.0]))
    make_fixture.write_point(str(tmp_path / "points" / "0-bbbb.h5"), index=0, point_id="bbbb",
                             name="q", config=cfg, steps=make_fixture._train_steps(10, 8, [1.0]))
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"points": [{"index": 0, "id": "bbbb", "name": "q"}, {"index": 1, "id": "aaaa", "name": "p"}]}))
    r = load_results(str(tmp_path))
    assert sorted(r.points["point_id"]) == ["aaaa", "bbbb"]
    assert [(k, f) for k, f in zip(r.problems["kind"], r.problems["file"])] == [("stale", "0-aaaa.h5")]
