# Measurement conditions (analysis/conditions.py, docs/METRICS.md "Measurement conditions"):
# the figures read from the `machine` attribute and the flags computed from them, on
# hand-built tables; and on a real sweep, that every point carries its machine.
import json

import numpy as np
import pandas as pd
import pytest

from analysis import conditions as C
from analysis.load import Results, load_results


def _results(points, steps):
    empty = pd.DataFrame()
    return Results(root="", points=pd.DataFrame(points), steps=pd.DataFrame(steps), ranks=empty,
                   comm=empty, queries=empty, scalars=empty, series=empty, texts=empty,
                   problems=empty)


def _machine(cores, ranks, other=0.0, steal=0.0, load=0.1):
    return json.dumps({"ranks_per_node": len(ranks), "nodes": [{
        "host": "h", "cpu_model": "Test CPU", "isa": ["avx2", "amx_bf16"], "cores": cores,
        "rank_cpus": cores, "ranks": ranks, "loadavg_1m_start": load, "loadavg_1m_end": load,
        "other_cpus": other, "steal_cpus": steal}]})


def _steps(pid, walls):
    return [{"point_id": pid, "step": i, "warmup": int(i == 0), "wall_s": w}
            for i, w in enumerate(walls)]


def test_flags_oversubscription_noise_other_work_and_steal():
    pts = [
        {"point_id": "clean", "threads_per_rank": 1, "machine": _machine(2, [0, 1])},
        {"point_id": "over", "threads_per_rank": 2, "machine": _machine(2, [0, 1, 2, 3])},
        {"point_id": "noisy", "threads_per_rank": 1, "machine": _machine(4, [0])},
        {"point_id": "busy", "threads_per_rank": 1, "machine": _machine(4, [0], other=0.8)},
        {"point_id": "stolen", "threads_per_rank": 1, "machine": _machine(4, [0], steal=0.5)},
        {"point_id": "old", "threads_per_rank": 1, "machine": "{}"},
    ]
    steps = (_steps("clean", [9, 1.0, 1.01, 0.99]) + _steps("over", [9, 1, 1, 1]) +
             _steps("noisy", [9, 1.0, 1.5, 0.7]) + _steps("busy", [9, 1, 1, 1]) +
             _steps("stolen", [9, 1, 1, 1]) + _steps("old", [9, 1, 1, 1]))
    c = C.conditions(_results(pts, steps)).set_index("point_id")
    assert c.loc["clean", "flags"] == ""
    assert c.loc["clean", "step_time_cv"] == pytest.approx(np.std([1.0, 1.01, 0.99], ddof=1))
    assert c.loc["over", "oversubscription"] == pytest.approx(4.0)
    assert c.loc["over", "flags"] == "oversubscribed 4.0x (4 ranks x 2 threads on 2 cores)"
    cv = np.std([1.0, 1.5, 0.7], ddof=1) / np.mean([1.0, 1.5, 0.7])
    assert c.loc["noisy", "flags"] == f"noisy: step-time CV {100 * cv:.0f}% > 10%"
    assert c.loc["busy", "flags"] == "other work: 0.80 CPUs busy with other processes"
    assert c.loc["stolen", "flags"] == "stolen: the hypervisor took 0.50 CPUs"
    # Files from before the machine was recorded: unknown, not "fine" and not flagged.
    assert np.isnan(c.loc["old", "cores"]) and c.loc["old", "flags"] == ""
    assert C.describe(c.loc["old"]) == "conditions not recorded"
    assert C.describe(c.loc["over"]) == "4 ranks x 2 threads on 2 cores, Test CPU"
    assert c.loc["clean", "isa"] == "avx2 amx_bf16"


def test_describe_says_which_dtype_an_inference_computed_in():
    pts = [{"point_id": "q", "threads_per_rank": 2, "machine": _machine(2, [0])},
           {"point_id": "t", "threads_per_rank": 2, "machine": _machine(2, [0])}]
    r = _results(pts, _steps("q", [9, 1, 1, 1]) + _steps("t", [9, 1, 1, 1]))
    r.texts = pd.DataFrame([{"point_id": "q", "name": "compute_dtype", "value": "fp32"}])
    c = C.conditions(r).set_index("point_id")
    assert C.describe(c.loc["q"]) == "1 ranks x 2 threads on 2 cores, Test CPU, computed in fp32"
    assert C.describe(c.loc["t"]) == "1 ranks x 2 threads on 2 cores, Test CPU"


def test_cv_needs_three_timed_steps():
    assert np.isnan(C.step_time_cv([1.0, 2.0]))
    assert C.step_time_cv([1.0, 1.0, 1.0]) == 0.0


def test_every_point_of_a_real_sweep_records_its_machine(results):
    folder, source = results
    if source != "shardbench":
        pytest.skip("needs a real sweep (SB_SHARDBENCH_BIN)")
    r = load_results(folder)
    c = C.conditions(r)
    assert len(c) == len(r.points) > 0
    assert (c["cores"] >= 1).all() and (c["ranks_per_node"] >= 1).all()
    assert (c["other_cpus"] >= 0).all() and (c["steal_cpus"] >= 0).all()
    assert (c["cpu_model"] != "").all()
