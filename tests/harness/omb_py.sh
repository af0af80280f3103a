#!/usr/bin/env bash
# The micro task's Python twin (OMB-Py; workloads/micro/python_twin.h, omb_py.py) end to end:
# a sweep of two collectives and two point-to-point benchmarks, each by C++ raw MPI and by
# mpi4py on NumPy arrays and on torch tensors, at 2 ranks. Every point is done with no wrong
# element; a Python point's tables have the C++ point's columns, its series the same names, its
# comm rows the same count, sizes and logical and wire bytes; its versions name torch only for
# the torch twin and its texts the Python side; the report's overhead table has a row per
# Python point and size (sizes 4 B to 1 MiB: the largest in the twin's placed, 2 MiB-aligned
# buffers). A Python point whose world does not match is refused at plan like any.
# Usage: omb_py.sh build/shardbench
source "$(dirname "$0")/preamble.sh"
cd "$d"
cat > omb.toml <<'TOML'
[suite]
name = "omb"
[base]
task = "micro"
world = 2
threads = 1
"micro.min_bytes" = 4
"micro.max_bytes" = 1048576
"micro.factor" = 64
"micro.iters" = 20
[axes]
"micro.op" = ["all_reduce", "all_to_all", "p2p_latency", "p2p_bibw"]
"micro.impl" = ["mpi", "mpi4py-numpy", "mpi4py-torch"]
TOML
"$sb" sweep omb.toml > sweep.log 2>&1 || { cat sweep.log; fail "sweep"; }
"$sb" report results/omb > report.log 2>&1 || { cat report.log; fail "report"; }
/usr/bin/python3 - results/omb <<'PY'
import glob, json, sys, h5py, numpy as np
pts = {}
for f in glob.glob(f"{sys.argv[1]}/points/*.h5"):
    h = h5py.File(f)
    c = json.loads(h.attrs["config"])
    pts[(c["micro.op"], c["micro.impl"])] = h
assert len(pts) == 12, sorted(pts)
cols = lambda h, t: sorted(h[t]) if isinstance(h[t], h5py.Group) else list(h[t].dtype.names)
for (op, impl), h in pts.items():
    assert h.attrs["status"] == "done", (op, impl, h.attrs["failure_reason"])
    assert h["scalars"].attrs["wrong"] == 0, (op, impl)
    cpp = pts[(op, "mpi")]
    for t in ("steps", "comm", "ranks"):
        assert cols(h, t) == cols(cpp, t), (op, impl, t)
    assert sorted(h["series"]) == sorted(cpp["series"]), (op, impl)
    assert list(h["series"]["size_bytes"][:]) == list(cpp["series"]["size_bytes"][:]), (op, impl)
    assert list(h["series"]["wire_bytes"][:]) == list(cpp["series"]["wire_bytes"][:]), (op, impl)
    for k in ("step", "rank", "logical_bytes", "wire_bytes", "op", "kind"):
        a, b = np.sort(h["comm"][k][:]), np.sort(cpp["comm"][k][:])
        assert len(a) == len(b) == 2 * 20 * 4 and (a == b).all(), (op, impl, k)
    assert (h["comm"]["duration_s"][:] > 0).all()
    v = json.loads(h.attrs["versions"])
    if impl != "mpi":
        texts = dict(h["texts"].attrs)
        assert "python_version" in texts and "mpi4py_version" in texts, texts
        assert (v["torch"] != "") == (impl == "mpi4py-torch"), (impl, v)
        assert set(h["comm"]["backend"][:]) == {b"mpi4py"}, set(h["comm"]["backend"][:])
        assert json.loads(h.attrs["hosts"]) and json.loads(h.attrs["machine"])["nodes"], h.attrs["machine"]
import csv
rows = list(csv.DictReader(open(f"{sys.argv[1]}/report/tables/python_overhead.csv")))
assert len(rows) == 4 * 2 * 4, len(rows)  # ops x Python impls x sizes
assert all(float(r["cpp_us"]) > 0 and float(r["python_us"]) > 0 for r in rows)
for r in rows:  # one repetition: the fastest is the median
    assert float(r["cpp_min_us"]) == float(r["cpp_us"]) and float(r["python_min_us"]) == float(r["python_us"]), r
    assert abs(float(r["bw_ratio_min"]) - float(r["cpp_min_us"]) / float(r["python_min_us"])) < 1e-9, r
print(f"omb_py: 12 points, Python twins' tables equal C++'s; {len(rows)} overhead rows")
PY
grep -q "Python's overhead (OMB-Py)" results/omb/report/report.md || fail "no overhead section"
echo "omb_py: ok"
