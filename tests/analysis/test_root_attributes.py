# The root attributes come from one table (Table<ResultMeta>, harness/trace/result.h), which
# `shardbench schema --python` writes as analysis/root_attributes.py (a ctest keeps the file equal
# to it). These tests check that the module is the binary's table, that both fixture writers
# write exactly its attributes with its types, and that load.py reads every one of them.
import os

import h5py
import numpy as np
import pytest

import make_fixture
from analysis.load import JSON_ATTRIBUTES, load_results
from analysis.root_attributes import ROOT_ATTRIBUTES, SCHEMA_VERSION

# HDF5 type of each schema dtype as h5py shows an attribute: (kind, itemsize; 0 = variable).
H5_KIND = {"int64": ("i", 8), "float64": ("f", 8), "string": ("O", 0)}


def _attribute_types(path):
    with h5py.File(path, "r") as f:
        out = {}
        for name in f.attrs:
            t = f.attrs.get_id(name).dtype
            out[name] = ("O", 0) if h5py.check_string_dtype(t) else (t.kind, t.itemsize)
        return out


def test_the_module_is_the_binarys_table():
    binary = os.environ.get("SB_SHARDBENCH_BIN")
    if not binary:
        pytest.skip("SB_SHARDBENCH_BIN not set (ctest sets it)")
    want = make_fixture.schema_from_binary(binary)
    assert SCHEMA_VERSION == want["schema_version"]
    assert [a._asdict() for a in ROOT_ATTRIBUTES] == want["attributes"]


def test_names_are_unique_and_json_attributes_exist():
    names = [a.name for a in ROOT_ATTRIBUTES]
    assert len(names) == len(set(names))
    assert set(JSON_ATTRIBUTES) <= set(names)
    assert {"schema_version", "status", "point_id", "elapsed_s"} <= set(names)


@pytest.mark.parametrize("writer", ["h5py", "c++"])
def test_each_fixture_writer_writes_exactly_the_tables_attributes(tmp_path, writer):
    exe = os.environ.get("SB_FIXTURE_WRITER") if writer == "c++" else None
    if writer == "c++" and not exe:
        pytest.skip("SB_FIXTURE_WRITER not set (ctest sets it)")
    path = str(tmp_path / "points" / "0-aaaa.h5")
    rec = make_fixture.point_record(path, index=0, point_id="aaaa", name="p",
                                    config=make_fixture._cfg())
    make_fixture.write_records([rec], exe, str(tmp_path / "fixture.json"))
    got = _attribute_types(path)
    assert sorted(got) == sorted(a.name for a in ROOT_ATTRIBUTES)
    for a in ROOT_ATTRIBUTES:
        assert got[a.name] == H5_KIND[a.dtype], a.name


def test_fixture_refuses_an_attribute_that_is_not_in_the_table():
    with pytest.raises(KeyError, match="no root attribute colour"):
        make_fixture.root_attributes(colour="blue")


def test_every_root_attribute_is_read_into_the_points_table(fixture_dir):
    r = load_results(fixture_dir)
    row = r.points[r.points["point_id"] == "a0000001"].iloc[0]
    with h5py.File(os.path.join(fixture_dir, "points", row["file"]), "r") as f:
        for a in ROOT_ATTRIBUTES:
            if a.name in JSON_ATTRIBUTES:
                assert a.name not in r.points.columns  # parsed into r.config / r.reference
                continue
            raw = f.attrs[a.name]
            want = raw if a.dtype == "string" else float(raw) if a.dtype == "float64" else int(raw)
            assert row[a.name] == want, a.name
    assert r.config["a0000001"]["quantization"] == "none"
    assert r.reference["a0000001"] == {"latency_ms": 185, "memory_gb": 3.2}


def _point(tmp_path):
    path = str(tmp_path / "points" / "0-aaaa.h5")
    make_fixture.write_point(path, index=0, point_id="aaaa", name="p", config=make_fixture._cfg())
    return path


def test_an_attribute_every_file_has_is_required(tmp_path):
    path = _point(tmp_path)
    with h5py.File(path, "r+") as f:
        del f.attrs["status"]
        del f.attrs["world_size"]
    r = load_results(str(tmp_path))
    assert len(r.points) == 0
    assert r.problems.iloc[0]["reason"] == "ValueError: root attributes missing: status, world_size"


def test_an_attribute_added_later_reads_as_its_default(tmp_path):
    path = _point(tmp_path)
    with h5py.File(path, "r+") as f:
        del f.attrs["machine"]
    r = load_results(str(tmp_path))
    assert len(r.problems) == 0
    assert r.points.iloc[0]["machine"] == "{}"
    assert [a.name for a in ROOT_ATTRIBUTES if not a.always] == ["machine"]
    assert all(np.isscalar(a.default) for a in ROOT_ATTRIBUTES)
