# The report's Serving section (analysis/serving.py): goodput is the highest swept rate at
# which SLO attainment >= 0.9 there and at every lower rate (a later lucky rate does not
# count), none when the lowest rate fails; x_static divides by static batching's goodput on
# the same line; the section and its plots appear in the report.
import math
import os

import make_fixture
from analysis import report, serving
from analysis.load import load_results


def _serve_cfg(policy, rate, batch=8):
    return make_fixture._cfg(task="serve", serve_policy=policy, request_rate=rate, batch=batch,
                             world=1, strategy="no_shard", slo_ttft_ms=1000.0, slo_tpot_ms=100.0)


def _write(root, lines):
    """lines: (policy, batch, [(rate, attainment), ...])"""
    i = 0
    for policy, batch, points in lines:
        for rate, att in points:
            reqs = [dict(request=k, arrival_s=0.1 * k, prompt_tokens=8, output_tokens=1 + k,
                         ttft_s=0.01 * (k + 1), tpot_s=0.002 * (k + 1), e2e_s=0.1) for k in range(5)]
            steps = [dict(step=k, start_s=0.01 * k, decode_rows=1 + k % 3) for k in range(6)]
            make_fixture.write_point(
                os.path.join(root, "points", f"{i}-s{i:03d}.h5"), index=i, point_id=f"s{i:03d}",
                name=f"{policy}-{batch}-{rate}", config=_serve_cfg(policy, rate, batch),
                scalars=dict(slo_attainment=att, ttft_p50_s=0.02, ttft_p99_s=0.05 * rate,
                             tpot_p50_s=0.004, tpot_p99_s=0.008 * rate, output_tokens_per_s=10 * rate,
                             requests_served=5, requests_refused=0),
                requests=reqs, serve_steps=steps)
            i += 1


LINES = [
    ("static", 8, [(1, 0.95), (2, 0.92), (4, 0.5)]),
    ("continuous", 8, [(1, 1.0), (2, 0.99), (4, 0.95), (8, 0.5)]),
    ("continuous", 4, [(1, 0.95), (2, 0.5), (4, 0.95)]),  # a lucky higher rate does not count
    ("static", 4, [(1, 0.8), (2, 0.95)]),                 # the lowest rate fails: no goodput
]


def test_goodput_is_the_highest_rate_below_the_first_failure(tmp_path):
    _write(str(tmp_path), LINES)
    res = load_results(str(tmp_path))
    pts = serving.serving_points(res)
    assert len(pts) == 12
    g = serving.goodput(pts).set_index(["serve_policy", "batch"])
    assert g.loc[("static", 8), "goodput_req_per_s"] == 2
    assert g.loc[("continuous", 8), "goodput_req_per_s"] == 4
    assert g.loc[("continuous", 8), "x_static"] == 2.0
    assert g.loc[("continuous", 4), "goodput_req_per_s"] == 1
    assert math.isnan(g.loc[("static", 4), "goodput_req_per_s"])
    assert g.loc[("static", 4), "note"] == "below the lowest rate swept (1 req/s)"
    assert math.isnan(g.loc[("continuous", 4), "x_static"])  # static of that line has none


def test_the_report_has_the_serving_section_and_plots(tmp_path):
    _write(str(tmp_path / "r"), LINES[:2])
    built = report.build(str(tmp_path / "r"), str(tmp_path / "out"))
    md = open(tmp_path / "out" / "report.md").read()
    assert "## Serving (task = serve)" in md and "### Goodput per policy" in md
    made = {p["stem"]: p for p in built["plots"]}
    for stem in ("serving_latency_vs_rate", "serving_cdfs", "serving_batch"):
        assert made[stem]["path"], (stem, made[stem]["note"])
    assert len(built["tables"]["requests"]) == 7 * 5
    assert list(built["tables"]["goodput"]["goodput_req_per_s"]) == [2, 4]
