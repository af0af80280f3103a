# Inference results under LoadGen's rules (analysis/metrics.py query_summary): a server point
# that did not keep up with its target rate or broke its latency bound is INVALID, offline
# reports samples/s without percentiles of its one query, rows sort by model and scenario.
import numpy as np
import pandas as pd
import pytest

from analysis.load import Results
from analysis.metrics import query_summary, server_validity


def _results(points, queries, config):
    empty = pd.DataFrame()
    return Results(root="", points=pd.DataFrame(points), steps=empty, ranks=empty, comm=empty,
                   queries=pd.DataFrame(queries), scalars=empty, series=empty, texts=empty,
                   problems=empty, config=config)


def _q(pid, scen, issues, latencies, samples=1):
    return [{"point_id": pid, "scenario": scen, "query": i, "issue_s": t, "latency_s": l,
             "samples": samples, "tokens": 0} for i, (t, l) in enumerate(zip(issues, latencies))]


def test_the_issue_s_overloaded_server_is_invalid_and_a_keeping_up_one_valid():
    pts = [{"point_id": p, "point_name": n, "status": "done"} for p, n in
           (("slow", "bert/server"), ("ok", "bert/server-ok"), ("off", "gpt2/offline"),
            ("ss", "bert/single"))]
    cfg = {"slow": {"model": "bert", "target_qps": 20.0, "server_latency_ms": 100.0},
           "ok": {"model": "bert", "target_qps": 20.0, "server_latency_ms": 100.0},
           "off": {"model": "gpt2"}, "ss": {"model": "bert"}}
    n = 20
    arrivals = np.arange(n) / 20.0  # 20 queries/s offered
    # Overloaded: each query takes 1.3 s of service, so completions come at 0.76/s.
    slow_done = 1.3 * (np.arange(n) + 1)
    q = (_q("slow", "server", arrivals, slow_done - arrivals) +
         _q("ok", "server", arrivals, np.full(n, 0.01)) +
         _q("off", "offline", [0.0], [2.0], samples=64) +
         _q("ss", "single-stream", np.arange(4.0), np.full(4, 0.02)))
    s = query_summary(_results(pts, q, cfg))
    assert list(zip(s["model"], s["scenario"])) == [
        ("bert", "server"), ("bert", "server"), ("bert", "single-stream"), ("gpt2", "offline")]
    s = s.set_index("point_id")
    assert s.loc["slow", "achieved_qps"] == pytest.approx(n / (1.3 * n))
    assert s.loc["slow", "validity"].startswith("INVALID: achieved 0.769 queries/s < 90% of the "
                                                "target 20; p99 latency ")
    assert s.loc["ok", "validity"] == "VALID"
    assert s.loc["ss", "validity"] == ""
    assert np.isnan(s.loc["off", "p50_ms"]) and np.isnan(s.loc["off", "p99_ms"])
    assert s.loc["off", "samples_per_s"] == pytest.approx(32.0)


def test_latency_bound_alone_invalidates():
    assert server_validity(20.0, 20.0, 150.0, 100.0) == "INVALID: p99 latency 150 ms > bound 100 ms"
    assert server_validity(19.0, 20.0, 50.0, 100.0) == "VALID"
