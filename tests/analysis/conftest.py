# Fixtures of the analysis tests.
# `fixture_dir`: the fixture suite of make_fixture.py, whose numbers the tests check by hand,
#   written through the real C++ writer (the test program analysis_fixture_writer, named by
#   SB_FIXTURE_WRITER; ctest sets it) or, when that is not built, with the h5py schema mirror.
# `results`: a tiny real sweep when SB_SHARDBENCH_BIN names the built shardbench (or the test
#   binary shardbench_probe), with problems added beside it; else fixture_dir.
import os
import shutil
import subprocess
import sys

import h5py
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the repo root: `import analysis`

import make_fixture  # noqa: E402

PROBE_SUITE = os.environ.get("SB_PROBE_SUITE", os.path.join(HERE, "probe_suite.toml"))


@pytest.fixture(scope="session")
def fixture_dir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("fixture"))
    make_fixture.write_fixture(d, with_problems=True, writer=os.environ.get("SB_FIXTURE_WRITER"))
    return d


def _sweep(binary, out):
    # Local scheduler, one point after another; the sweep's own exit status may be non-zero
    # when a point failed, which the tests then see as a failed point, so it is not asserted.
    proc = subprocess.run([binary, "sweep", PROBE_SUITE, "--results", out],
                          capture_output=True, text=True, timeout=600)
    pts = os.path.join(out, "points")
    if not os.path.isdir(pts) or not any(n.endswith(".h5") for n in os.listdir(pts)):
        pytest.fail(f"{binary} sweep {PROBE_SUITE} wrote no point files (exit "
                    f"{proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


def _add_problems_to_real(out):
    """A failed point (a real file with its status set to failed), a corrupt file and an
    unfinished write next to the C++ writer's files, and one point of the sweep's manifest
    made missing by removing its file."""
    pts = os.path.join(out, "points")
    files = sorted((n for n in os.listdir(pts) if n.endswith(".h5")),
                   key=lambda n: int(n.split("-")[0]))
    top = int(files[-1].split("-")[0])
    failed = os.path.join(pts, f"{top + 1}-fa11ed00.h5")
    shutil.copyfile(os.path.join(pts, files[0]), failed)
    with h5py.File(failed, "r+") as f:
        f.attrs["status"] = "failed"
        f.attrs["failure_reason"] = "rank 1 on localhost: injected by the analysis tests"
        f.attrs["point_index"] = top + 1
        f.attrs["point_id"] = "fa11ed00"
        f.attrs["baseline_id"] = ""
    with open(os.path.join(pts, f"{top + 2}-c0ffee00.h5"), "wb") as fh:
        fh.write(b"\x89HDF\r\n\x1a\n" + b"\x00garbage" * 64)
    with open(os.path.join(pts, f"{top + 3}-7e3a0000.h5.tmp.4242"), "wb") as fh:
        fh.write(b"partial")
    if os.path.exists(os.path.join(out, "manifest.json")):
        os.remove(os.path.join(pts, files[-1]))  # listed in the manifest, now without a file
    else:
        # No manifest: an index gap (top + 4) shows the missing point.
        shutil.copyfile(os.path.join(pts, files[0]), os.path.join(pts, f"{top + 5}-0dd00000.h5"))
        with h5py.File(os.path.join(pts, f"{top + 5}-0dd00000.h5"), "r+") as f:
            f.attrs["point_index"] = top + 5
            f.attrs["point_id"] = "0dd00000"


@pytest.fixture(scope="session")
def results(tmp_path_factory, fixture_dir):
    """(folder, source): a real sweep's files when SB_SHARDBENCH_BIN is set, else fixture_dir."""
    binary = os.environ.get("SB_SHARDBENCH_BIN")
    if not binary:
        return fixture_dir, "fixture"
    out = str(tmp_path_factory.mktemp("real"))
    _sweep(binary, out)
    _add_problems_to_real(out)
    return out, "shardbench"
