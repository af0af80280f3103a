"""`shardbench search`: adaptive search of a suite's matrix (the Codesign issue).

The space is the suite's own matrix: every key whose value differs among its points (the
repetition aside) is a categorical parameter with the values the points take, and a trial is
the point whose config has the suggested values (a combination the suite excludes is no point:
the trial is pruned and costs nothing). The sampler is Optuna's TPE (Tree-structured Parzen
Estimator; Debian's python3-optuna): maintained, made for categorical and conditional spaces
like a suite's axes, and good from a few dozen trials, where a Gaussian process over one-hot
categories is not. Each chosen point runs through the ordinary sweep (`shardbench sweep SUITE
--points ID`), so results, index, status and report are those of any sweep; a point already
done (this search's or an earlier sweep's) is read, not rerun, and does not count against the
budget. The objective is a column of the report's per-point metrics (analysis.metrics
summarize: step_time_s, tokens_per_s, ...), the median over the point's repetitions. It stops
after `budget` points it ran (or when every point was tried) and writes RESULTS/search-
<objective>.json: every trial, the best point and the share of the matrix run.
"""
import argparse
import json
import os
import subprocess
import sys

import pandas as pd

SMALLER_IS_BETTER = ("_s", "_bytes", "_us", "_ms", "latency", "loss", "perplexity")
RATES = ("_per_s", "_gbps", "_GBps", "_MBps")  # per second: larger is better


def default_direction(objective):
    if objective.endswith(RATES):
        return "max"
    return "min" if objective.endswith(SMALLER_IS_BETTER) else "max"


def plan(sb, suite):
    out = subprocess.run([sb, "plan", suite, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr.strip() or f"shardbench plan {suite} failed")
    return json.loads(out.stdout)


def derived(k, keys, points):
    """Whether k's value is a function of the other keys' (a canonicalized key such as
    mesh.dp_shard from world, or grad_accum from microbatches): not a dimension to search."""
    seen = {}
    for p in points:
        rest = tuple(json.dumps(p["config"].get(o)) for o in keys if o != k)
        v = json.dumps(p["config"].get(k))
        if seen.setdefault(rest, v) != v:
            return False
    return True


def space_of(points):
    """(keys, values per key, configuration -> point ids): the keys the points vary, less those
    the others determine."""
    keys = sorted({k for p in points for k in p["config"]} - {"repetition"})
    varying = [k for k in keys if len({json.dumps(p["config"].get(k)) for p in points}) > 1]
    for k in list(varying):
        if len(varying) > 1 and derived(k, varying, points):
            varying.remove(k)
    values = {k: sorted({json.dumps(p["config"].get(k)) for p in points}) for k in varying}
    by_combo = {}
    for p in points:
        combo = tuple(json.dumps(p["config"].get(k)) for k in varying)
        by_combo.setdefault(combo, []).append(p)
    return varying, values, by_combo


def objective_values(results, objective, loaded=None):
    """point id -> the objective (NaN where the point has none), from the results folder (or
    its already loaded records)."""
    from analysis.load import load_results
    from analysis.metrics import summarize
    res = loaded if loaded is not None else load_results(results)
    if not len(res.points):
        return {}
    s = summarize(res)
    if objective not in s.columns:
        raise SystemExit(f"--objective {objective}: not a metric of this results folder; known: "
                         f"{', '.join(sorted(s.columns))}")
    return pd.to_numeric(s[objective], errors="coerce").to_dict()


def rank_in(full, keys, config, objective, direction):
    """The rank of a configuration among a full sweep's own measurements of the matrix
    (docs/METRICS.md "Search"): 1 + the configurations whose objective there (the median over
    their repetitions) is better than this configuration's there."""
    from analysis.load import load_results
    res = load_results(full)
    by = {}
    for pid, v in objective_values(full, objective, res).items():
        if pd.notna(v):
            cfg = res.config.get(pid, {})
            by.setdefault(tuple(json.dumps(cfg.get(k)) for k in keys), []).append(v)
    medians = {c: float(pd.Series(v).median()) for c, v in by.items()}
    mine = tuple(json.dumps(config[k]) for k in keys)
    if mine not in medians:
        raise SystemExit(f"--compare {full}: the best configuration ("
                         f"{', '.join(f'{k}={v}' for k, v in config.items())}) has no {objective} "
                         f"there; sweep the whole suite into that folder first")
    better = [v for v in medians.values()
              if (v < medians[mine] if direction == "min" else v > medians[mine])]
    top = (min if direction == "min" else max)(medians.values())
    return {"folder": full, "rank": len(better) + 1, "configurations": len(medians),
            "value_there": medians[mine], "best_there": top}


def run_points(sb, suite, results, ids, oversubscribe):
    cmd = [sb, "sweep", suite, "--results", results, "--points", ",".join(ids)]
    if oversubscribe:
        cmd.append("--allow-oversubscribe")
    return subprocess.run(cmd).returncode


def main(argv=None):
    ap = argparse.ArgumentParser(prog="shardbench search")
    ap.add_argument("suite")
    ap.add_argument("--objective", required=True)
    ap.add_argument("--shardbench", required=True)
    ap.add_argument("--budget", type=int, default=0)
    ap.add_argument("--direction", choices=("min", "max"), default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--results", default="")
    ap.add_argument("--allow-oversubscribe", action="store_true")
    ap.add_argument("--compare", default="")
    a = ap.parse_args(argv)
    try:
        import optuna
    except ImportError:
        raise SystemExit("shardbench search needs Optuna (Debian's python3-optuna): run "
                         "jobscripts/install-deps.sh")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    p = plan(a.shardbench, a.suite)
    points = p["points"]
    results = a.results or os.path.join("results", p["suite"])
    keys, values, by_combo = space_of(points)
    if not keys:
        raise SystemExit(f"{a.suite}: its {len(points)} point(s) vary no key; nothing to search")
    distinct = len(by_combo)
    budget = a.budget or max(1, distinct // 4)
    direction = a.direction or default_direction(a.objective)
    print(f"search {p['suite']}: {distinct} configurations of {len(keys)} keys ({', '.join(keys)}), "
          f"{len(points)} points; {direction}imize {a.objective}; budget {budget} points; "
          f"Optuna {optuna.__version__} TPE, seed {a.seed}")
    sampler = optuna.samplers.TPESampler(seed=a.seed, n_startup_trials=min(10, max(2, budget // 3)))
    study = optuna.create_study(direction="minimize" if direction == "min" else "maximize", sampler=sampler)
    ran, tried, trials = [], set(), []
    have = objective_values(results, a.objective) if os.path.isdir(results) else {}
    asks = idle = 0
    # Stops at the budget, when every configuration was tried, or when the sampler has proposed
    # only known configurations for a while (converged: more asks would run nothing new).
    while len(ran) < budget and len(tried) < distinct and idle < 4 * distinct:
        asks += 1
        idle += 1
        trial = study.ask()
        combo = tuple(trial.suggest_categorical(k, values[k]) for k in keys)
        if combo not in by_combo:  # excluded by the suite
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        pts = by_combo[combo]
        ids = [q["id"] for q in pts]
        if combo in tried:  # known: told again, not rerun, not listed
            got = [have.get(i) for i in ids if pd.notna(have.get(i))]
            if got:
                study.tell(trial, float(pd.Series(got).median()))
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        idle = 0
        todo = [i for i in ids if not pd.notna(have.get(i))]
        if todo:
            run_points(a.shardbench, a.suite, results, todo, a.allow_oversubscribe)
            ran.extend(todo)
            have = objective_values(results, a.objective)
        got = [have.get(i) for i in ids if pd.notna(have.get(i))]
        tried.add(combo)
        if not got:  # failed or without the metric: the sampler avoids it
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            trials.append({"points": ids, "value": None, "ran": bool(todo)})
            continue
        value = float(pd.Series(got).median())
        study.tell(trial, value)
        trials.append({"points": ids, "value": value, "ran": bool(todo),
                       "config": {k: json.loads(v) for k, v in zip(keys, combo)}})
        print(f"  trial {len(trials):>3}: {a.objective} {value:.6g}  "
              f"{', '.join(f'{k}={json.loads(v)}' for k, v in zip(keys, combo))}"
              f"{'' if todo else '  (done before)'}", flush=True)
    scored = [t for t in trials if t["value"] is not None]
    if not scored:
        raise SystemExit(f"search {p['suite']}: no point gave {a.objective}")
    best = (min if direction == "min" else max)(scored, key=lambda t: t["value"])
    share = len(set(ran)) / len(points)
    out = {"suite": p["suite"], "objective": a.objective, "direction": direction, "seed": a.seed,
           "sampler": f"optuna {optuna.__version__} TPESampler", "budget": budget,
           "configurations": distinct, "points": len(points), "points_run": len(set(ran)),
           "share_run": share, "best": best, "trials": trials}
    if a.compare:
        out["compare"] = rank_in(a.compare, keys, best["config"], a.objective, direction)
    os.makedirs(results, exist_ok=True)
    path = os.path.join(results, f"search-{a.objective}.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(out, fh, indent=2)
    os.replace(path + ".tmp", path)
    print(f"best: {a.objective} {best['value']:.6g} at point {', '.join(best['points'])} ("
          f"{', '.join(f'{k}={v}' for k, v in best['config'].items())}); ran {len(set(ran))} of "
          f"{len(points)} points ({share:.0%} of the matrix) in {len(trials)} trials; {path}")
    if a.compare:
        c = out["compare"]
        print(f"compared: in {c['folder']} that configuration measured {a.objective} "
              f"{c['value_there']:.6g} (best there {c['best_there']:.6g}): rank {c['rank']} of "
              f"{c['configurations']} (top {100 * c['rank'] / c['configurations']:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
