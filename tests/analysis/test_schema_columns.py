# The record columns come from one table (harness/trace/records.h, printed by `shardbench
# schema`); the analysis reads them, with their units and docs, from each file. These tests
# check that the analysis asks only for columns the harness writes, that the fixtures are
# written from that schema, and how files with fewer or more columns than this version's load.
import glob
import os
import re

import h5py
import numpy as np
import pytest

import make_fixture
from analysis.load import REQUIRED_COLUMNS, RECORD_GROUPS, load_results

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def schema_columns():
    return {g["name"]: [c["name"] for c in g["columns"]] for g in make_fixture.groups()}


def test_the_doc_tables_are_the_binarys_schema():
    # Without a build the fixtures read the schema from docs/HDF5_SCHEMA.md; it must be the
    # one `shardbench schema --json` prints (the ctest schema.doc_matches_records checks the
    # markdown itself).
    binary = os.environ.get("SB_SHARDBENCH_BIN")
    if not binary:
        pytest.skip("SB_SHARDBENCH_BIN not set (ctest sets it)")
    want = make_fixture.schema_from_binary(binary)
    assert want["schema_version"] == 1
    assert make_fixture.schema_from_doc() == {"groups": want["groups"]}


def test_the_analysis_needs_only_columns_the_harness_writes():
    cols = schema_columns()
    assert list(cols) == RECORD_GROUPS
    for g, need in REQUIRED_COLUMNS.items():
        assert sorted(set(need) - set(cols[g])) == [], f"/{g}: the harness does not write these"


def test_every_record_column_the_analysis_reads_is_required():
    # A column read as table["name"] that is not in REQUIRED_COLUMNS would, in a file that
    # lacks it, fail inside a metric instead of naming the column when loading.
    all_cols = {c for cols in schema_columns().values() for c in cols}
    required = {c for cols in REQUIRED_COLUMNS.values() for c in cols}
    read = set()
    for path in glob.glob(os.path.join(REPO, "analysis", "*.py")):
        if os.path.basename(path) != "load.py":
            read |= set(re.findall(r'\[\s*"([a-z0-9_]+)"\s*\]', open(path, encoding="utf-8").read()))
    assert {"wall_s", "wire_bytes", "latency_s"} <= read & all_cols  # the scan works
    assert sorted((read & all_cols) - required) == []


def test_units_and_docs_are_read_from_the_files(fixture_dir):
    r = load_results(fixture_dir)
    got = {(g, c): (d, u, doc) for g, c, d, u, doc in r.schema.itertuples(index=False)}
    for grp in make_fixture.groups():
        for c in grp["columns"]:
            assert got[(grp["name"], c["name"])] == (c["dtype"], c["unit"], c["doc"])
    # Tables keep the writer's column order.
    assert list(r.steps.columns) == ["point_id"] + schema_columns()["steps"]


def _point(tmp_path):
    path = str(tmp_path / "points" / "0-aaaa.h5")
    make_fixture.write_point(path, index=0, point_id="aaaa", name="p", config=make_fixture._cfg(),
                             steps=make_fixture._train_steps(10, 8, [1.0, 0.9]))
    return path


def _drop(f, group, column):
    """As a writer that never had `column`: no dataset, and not in the group's `columns`."""
    del f[f"{group}/{column}"]
    cols = [c for c in f[group].attrs["columns"] if c != column]
    f[group].attrs.create("columns", cols, dtype=h5py.string_dtype())


def test_a_needed_column_the_writer_did_not_record_is_named(tmp_path):
    path = _point(tmp_path)
    with h5py.File(path, "r+") as f:
        _drop(f, "steps", "mfu")
    r = load_results(str(tmp_path))
    assert len(r.points) == 0
    assert r.problems.iloc[0]["kind"] == "unreadable"
    reason = r.problems.iloc[0]["reason"]
    assert reason.startswith("ValueError: /steps: no column mfu, which the analysis needs: the "
                             "shardbench that wrote this file did not record it (it wrote step, "
                             "warmup, wall_s,"), reason
    assert reason.endswith("rerun the point with this one")


def test_fewer_or_more_columns_than_the_analysis_reads_load(tmp_path):
    path = _point(tmp_path)
    with h5py.File(path, "r+") as f:
        _drop(f, "steps", "grad_norm")  # not read by the analysis
        g = f["steps"]  # a column a newer writer adds
        g.create_dataset("energy_j", data=np.arange(len(g["step"]), dtype=np.float64),
                         maxshape=(None,))
        g["energy_j"].attrs["unit"], g["energy_j"].attrs["doc"] = "J", "energy of the step"
        g.attrs.create("columns", list(g.attrs["columns"]) + ["energy_j"],
                       dtype=h5py.string_dtype())
    r = load_results(str(tmp_path))
    assert len(r.problems) == 0
    assert "grad_norm" not in r.steps.columns
    assert list(r.steps["energy_j"]) == [0.0, 1.0, 2.0]
    assert r.schema.set_index(["group", "column"]).loc[("steps", "energy_j"), "unit"] == "J"


def test_files_from_before_the_column_attributes_load(tmp_path):
    # Files written before the writer stored `columns`, `unit` and `doc`: same datasets.
    path = _point(tmp_path)
    with h5py.File(path, "r+") as f:
        for g in RECORD_GROUPS:
            for k in ("columns", "doc"):
                del f[g].attrs[k]
            for ds in f[g].values():
                del ds.attrs["unit"], ds.attrs["doc"]
    r = load_results(str(tmp_path))
    assert len(r.problems) == 0 and len(r.points) == 1
    assert set(r.steps.columns) == {"point_id"} | set(schema_columns()["steps"])
    # The columns the analysis reads come first, in its order; units are unknown.
    assert list(r.steps.columns[1:12]) == REQUIRED_COLUMNS["steps"]
    assert set(r.schema["unit"]) == {""}
