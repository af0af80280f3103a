#!/usr/bin/env bash
# `shardbench search` (analysis/search.py: Optuna's TPE over a suite's matrix) on a synthetic
# objective with a known optimum: the probe task sleeping probe.sleep_s a step, 10 sleeps x 4
# message sizes = 40 points, minimizing step_time_s within a budget of 12 points. The best point
# found is the 2 ms sleep; the search ran at most 12 points, each an ordinary result that
# `status` counts as done (the rest pending) and `report` reads; its JSON names every trial.
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
"$sb" search probe.toml --objective step_time_s --budget 12 --seed 3 > search.log 2>&1 || { cat search.log; fail "search"; }
grep -q "^best: step_time_s .*probe.sleep_s=0.002); ran [0-9]* of 40 points" search.log || { cat search.log; fail "the optimum (2 ms) not found"; }
/usr/bin/python3 - results/search-probe/search-step_time_s.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["points_run"] <= 12 and s["points"] == 40 and s["direction"] == "min", s
assert s["best"]["config"]["probe.sleep_s"] == 0.002, s["best"]
assert all(t["value"] is None or t["value"] > 0 for t in s["trials"])
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
