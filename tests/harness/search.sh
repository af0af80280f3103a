#!/usr/bin/env bash
# `shardbench search` (analysis/search.py: Optuna's TPE over a suite's matrix) on a synthetic
# objective with a known optimum: the probe task sleeping probe.sleep_s a step, 10 sleeps x 4
# message sizes = 40 points, minimizing step_time_s within a budget of 12 points. The best point
# found is the 2 ms sleep; the search ran at most 12 points, each an ordinary result that
# `status` counts as done (the rest pending) and `report` reads; its JSON names every trial.
# --compare ranks the best configuration among another folder's sweep of the suite.
# An objective that is no metric is refused naming the known ones.
# Usage: search.sh build/tests/harness/shardbench_probe
source "$(dirname "$0")/preamble.sh"
cd "$d"
cat > probe.toml <<'TOML'
[suite]
name = "search-probe"
[base]
task = "probe"
world = 1
steps = 4
warmup = 1
[axes]
"probe.sleep_s" = [0.02, 0.018, 0.016, 0.014, 0.012, 0.01, 0.008, 0.006, 0.004, 0.002]
"probe.elements" = [8, 64, 512, 4096]
TOML
# --compare: the best configuration ranked among another folder's measurements of the suite
# (here a sweep of the 2 ms and 20 ms sleeps at every message size: 8 configurations, of which
# the search's best, a 2 ms one, ranks among the first 4).
ids=$("$sb" plan probe.toml --json | /usr/bin/python3 -c 'import json, sys; print(",".join(p["id"] for p in json.load(sys.stdin)["points"] if p["config"]["probe.sleep_s"] in (0.002, 0.02)))')
"$sb" sweep probe.toml --results full --points "$ids" > full.log 2>&1 || { cat full.log; fail "the comparison's sweep"; }
"$sb" search probe.toml --objective step_time_s --budget 12 --seed 3 --compare full > search.log 2>&1 || { cat search.log; fail "search"; }
grep -q "^best: step_time_s .*probe.sleep_s=0.002); ran [0-9]* of 40 points" search.log || { cat search.log; fail "the optimum (2 ms) not found"; }
grep -q "^compared: in full that configuration measured step_time_s .*: rank [1-4] of 8 (top" search.log || { cat search.log; fail "the comparison's rank"; }
/usr/bin/python3 - results/search-probe/search-step_time_s.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["points_run"] <= 12 and s["points"] == 40 and s["direction"] == "min", s
assert s["best"]["config"]["probe.sleep_s"] == 0.002, s["best"]
assert all(t["value"] is None or t["value"] > 0 for t in s["trials"])
assert s["compare"]["rank"] <= 4 and s["compare"]["configurations"] == 8, s["compare"]
print(f"search: best {s['best']['value']:.4f} s after {s['points_run']} of 40 points")
PY
"$sb" status results/search-probe > status.log 2>&1 || true
n=$(grep -c " done " status.log || true)
grep -q "^$n done, $((40 - n)) pending$" status.log || { cat status.log; fail "status"; }
(( n >= 1 && n <= 12 )) || fail "$n points done"
"$sb" report results/search-probe > report.log 2>&1 || { cat report.log; fail "report"; }
grep -q "step_time_s" results/search-probe/report/tables/metrics.csv || fail "report's metrics"
if "$sb" search probe.toml --objective no_such_metric --budget 1 > bad.log 2>&1; then fail "a bad objective ran"; fi
grep -q "no_such_metric: not a metric of this results folder; known: .*step_time_s" bad.log || { cat bad.log; fail "bad objective message"; }
echo "search: ok"
