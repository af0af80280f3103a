# The report's "Python's overhead (OMB-Py)" section (the Codesign issue): for every micro point
# run by the Python twin (micro.impl mpi4py-numpy / mpi4py-torch, workloads/micro/omb_py.py),
# each size's time beside the C++ raw-MPI point (micro.impl = "mpi") of the same op, world,
# backend and size in the same results folder, and Python's overhead. Formula (docs/METRICS.md
# "Python's overhead (OMB-Py)"): overhead = t_python / t_cpp - 1, with t the size's mean_s
# series (collectives: the mean of each call's slowest rank; p2p: the slowest rank's mean
# iteration), the median over the points' repetitions; bandwidth ratio = t_cpp / t_python; and
# the same from each side's fastest repetition (*_min: on a machine with bursts of slowness
# the fastest run is the undisturbed one). A size without its C++ twin is left out.
import pandas as pd

PYTHON_IMPLS = ("mpi4py-numpy", "mpi4py-torch")
MATCH = ("micro.op", "world", "comm_backend", "micro.window", "micro.warmup", "threads")
COLUMNS = ["op", "impl", "world", "size_bytes", "repetitions", "cpp_us", "python_us", "overhead_pct", "bw_ratio",
           "cpp_min_us", "python_min_us", "bw_ratio_min"]


def _sizes(res, pid):
    s = res.series[res.series["point_id"] == pid]
    by = {n: g.sort_values("i")["value"].tolist() for n, g in s.groupby("name")}
    return list(zip(by.get("size_bytes", []), by.get("mean_s", [])))


def overhead_table(res):
    """Per (op, Python impl, world, size): the median over repetitions of each side's mean_s."""
    done = res.done()
    if not len(done) or not len(res.series):
        return pd.DataFrame(columns=COLUMNS)
    groups = {}  # (impl, MATCH values) -> the points (repetitions) of that configuration
    for pid in done["point_id"]:
        c = res.config.get(pid, {})
        if c.get("task") == "micro":
            groups.setdefault((c.get("micro.impl"),) + tuple(c.get(k) for k in MATCH), []).append(pid)

    def stats(pids):  # per size: (median, min) over the points' repetitions
        t = pd.DataFrame([r for pid in pids for r in _sizes(res, pid)], columns=["size", "t"])
        if not len(t):
            return {}, {}
        a = t.groupby("size")["t"].agg(["median", "min"])
        return a["median"].to_dict(), a["min"].to_dict()

    rows = []
    for key, pids in groups.items():
        impl, match = key[0], key[1:]
        if impl not in PYTHON_IMPLS or ("mpi",) + match not in groups:
            continue
        (cpp, cpp_min), (py, py_min) = stats(groups[("mpi",) + match]), stats(pids)
        c = dict(zip(MATCH, match))
        for size, t in py.items():
            if size not in cpp or not t > 0:
                continue
            rows.append({"op": c["micro.op"], "impl": impl, "world": c["world"], "size_bytes": int(size),
                         "repetitions": len(pids), "cpp_us": cpp[size] * 1e6, "python_us": t * 1e6,
                         "overhead_pct": (t / cpp[size] - 1) * 100, "bw_ratio": cpp[size] / t,
                         "cpp_min_us": cpp_min[size] * 1e6, "python_min_us": py_min[size] * 1e6,
                         "bw_ratio_min": cpp_min[size] / py_min[size]})
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(["op", "impl", "size_bytes"]).reset_index(drop=True) if len(out) else out


def section(res):
    """(blocks, table); no blocks without a Python twin point and its C++ twin."""
    t = overhead_table(res)
    if not len(t):
        return [], t
    return [("h2", "Python's overhead (OMB-Py)"),
            ("p", "Each Python twin point (micro.impl mpi4py-numpy or mpi4py-torch: the same cases "
                  "through mpi4py's buffer calls, workloads/micro/omb_py.py) beside the C++ raw-MPI "
                  "point (micro.impl = mpi) of the same op, world, backend and size from this "
                  "folder: mean time per call (collectives) or iteration (p2p), the median over repetitions, overhead = "
                  "python / C++ - 1, bw_ratio = C++ / python (the Python twin's share of C++'s "
                  "bandwidth); *_min: each side's fastest repetition (on a machine with bursts of "
                  "slowness the fastest run is the undisturbed one). Points run one after another; "
                  "with the suite's repetition_order = \"interleaved\" every repetition round runs "
                  "both sides (docs/METRICS.md)."),
            ("table", t)], t
