# The report: /usr/bin/python3 -m analysis.report RESULTS [--out DIR]. Writes report.md, a
# self-contained report.html, tables/*.csv and plots/*.png. Partial results are reported,
# never fatal (docs/REPORTS.md).
import argparse
import datetime
import json
import os
import re
import sys

import pandas as pd

from analysis import conditions as cond_mod
from analysis import comm_volume, modelcomp, paper, peers, render, serving
from analysis.compare import Groups, compare
from analysis.labels import varying_keys
from analysis.load import load_results
from analysis.metrics import query_summary, summarize
from analysis import network as network_mod
from analysis import predict3d
from analysis import memory as memory_mod
from analysis import exflow, omb_py, shapes
from analysis.plots import (PREDICT_ASSUMPTIONS, PREDICT_BYTES, PREDICT_WORKERS,
                            alpha_beta_fits, make_plots)
from analysis.references import reference_checks


def slug(title):
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")


def build(results_dir, out_dir, network="lassen"):
    """Loads, analyses and writes everything. Returns a dict of what was written. network: the
    compression-vs-network section's network (a preset name or a table, analysis/network.py)."""
    res = load_results(results_dir)
    summary = summarize(res)
    groups = Groups(res)
    comparisons = compare(res, summary, groups)
    conds = cond_mod.conditions(res)
    seed = paper.seed_tables(groups, summary, conds.set_index("point_id"), res.steps)
    seed_list = paper.seed_summary(seed)
    compression = paper.compression_tables(groups, summary)
    queries = query_summary(res)
    serve_points = serving.serving_points(res)
    goodput = serving.goodput(serve_points)
    distilled = modelcomp.distillation_table(res)
    frontier = modelcomp.accuracy_latency_points(res)
    fit_sizes, fits = alpha_beta_fits(res)
    net = network if isinstance(network, dict) else network_mod.load(network)
    net_table = network_mod.compression_table(fits, net, PREDICT_BYTES, PREDICT_WORKERS)
    peer_blocks, peer_table = peers.section(res, summary, conds)
    volume_blocks, volume = comm_volume.section(res)
    predict_blocks, predict_table = predict3d.section(res, net)
    memory_blocks, memory_table = memory_mod.section(res)
    omb_blocks, omb_table = omb_py.section(res)
    names = (res.points.set_index("point_id")["point_name"] if len(res.points)
             else pd.Series(dtype=str))

    tables_dir, plots_dir = os.path.join(out_dir, "tables"), os.path.join(out_dir, "plots")
    os.makedirs(tables_dir, exist_ok=True)
    plots = make_plots(res, summary, groups, plots_dir)
    affinity_blocks, affinity_table = exflow.section(res, plots_dir, results_dir)
    ep_blocks, ep_table = exflow.inference_section(res)
    shape_blocks, shape_table = shapes.section(res)

    checks = reference_checks(res, summary)
    metrics = with_config(summary.reset_index(), res, conds).copy()  # one block: a frame built column by column warns on insert
    metrics.insert(1, "point_name", metrics["point_id"].map(names))
    queries.insert(1, "point_name", queries["point_id"].map(names))
    csv = {
        "points": res.points, "metrics": metrics, "comparisons": comparisons,
        "problems": res.problems, "steps": res.steps, "ranks": res.ranks, "comm": res.comm,
        "queries": res.queries, "query_summary": queries, "scalars": res.scalars,
        "series": res.series, "alpha_beta": fits, "alpha_beta_sizes": fit_sizes,
        "conditions": conds,
        "reference_checks": checks,
        "serving": serve_points.drop(columns=["series"]), "goodput": goodput,
        "requests": res.requests, "serve_steps": res.serve_steps,
        "distillation": distilled, "accuracy_latency": frontier.drop(columns=["setting"]),
        "peers": peer_table, "comm_volume": volume, "compression_vs_network": net_table,
    }
    if len(predict_table):
        csv["predict3d"] = predict_table
    if len(memory_table):
        csv["memory"] = memory_table
    if len(omb_table):
        csv["python_overhead"] = omb_table
    if len(affinity_table):
        csv["expert_affinity"] = affinity_table
    if len(ep_table):
        csv["ep_inference_layers"] = ep_table
    if len(shape_table):
        csv["model_shapes"] = shape_table
    if len(seed_list):
        csv["paper_results"] = seed_list
    csv.update({"paper_" + slug(t): df for t, df in seed.items()})
    csv.update({slug(t): df for t, df in compression.items()})
    for name, df in csv.items():
        df.to_csv(os.path.join(tables_dir, name + ".csv"), index=False)

    blocks = _blocks(res, results_dir, metrics, comparisons, seed_list, seed, compression,
                     queries, fits, plots, sorted(csv), conds, checks,
                     serving_blocks(serve_points, goodput) + modelcomp.blocks(distilled, frontier),
                     peer_blocks + volume_blocks + network_blocks(net_table, net) + predict_blocks
                     + memory_blocks + omb_blocks + affinity_blocks + ep_blocks + shape_blocks)
    title = "shardbench report"
    with open(os.path.join(out_dir, "report.md"), "w") as fh:
        fh.write(render.to_markdown(blocks, "plots"))
    with open(os.path.join(out_dir, "report.html"), "w") as fh:
        fh.write(render.to_html(blocks, title))
    return {"results": res, "plots": plots, "tables": csv, "out": out_dir}


def with_config(metrics, res, conds):
    """metrics.csv carries each point's config keys (so it can be filtered and grouped without
    joining points.csv) and its measurement flags."""
    cfg = pd.DataFrame([{"point_id": pid, **res.config.get(pid, {})} for pid in metrics["point_id"]])
    extra = [c for c in cfg.columns if c != "point_id" and c not in metrics.columns]
    out = metrics.merge(cfg[["point_id"] + extra], on="point_id", how="left") if extra else metrics
    return out.merge(conds[["point_id", "step_time_cv", "flags"]], on="point_id", how="left")


def per_point_blocks(metrics, res):
    """The per-point table: the configuration keys whose values differ among the points, then
    the metrics (columns no point has a value for left out); every point's full configuration
    in a collapsible block below it (and in tables/metrics.csv)."""
    if not len(metrics):
        return [("p", "No done points.")]
    configs = [res.config.get(pid, {}) for pid in metrics["point_id"]]
    every_key = sorted(set().union(*configs))
    # Rows are points: a repetition is a row of its own, so its key is shown when it varies.
    vary = varying_keys(configs, ignore=())
    not_metrics = set(every_key) | {"point_id", "point_name"}
    metric_cols = [c for c in metrics.columns if c not in not_metrics
                   and metrics[c].replace("", pd.NA).notna().any()]
    shown = metrics[["point_id"] + vary + metric_cols]
    same = pd.DataFrame([(k, configs[0].get(k)) for k in every_key if k not in vary],
                        columns=["key", "value"])
    full = pd.DataFrame([{"point_id": pid, "point_name": name, **cfg} for pid, name, cfg in
                         zip(metrics["point_id"], metrics["point_name"], configs)],
                        columns=["point_id", "point_name"] + every_key)
    return [("p", f"Configuration keys whose values differ among the points: "
                  f"{', '.join(vary) if vary else '(none)'}; the other {len(same)} keys have "
                  f"one value for every point (below). Every key of every point: the collapsed "
                  f"block and tables/metrics.csv."),
            ("table", shown),
            ("details", f"Full configuration of every point ({len(every_key)} keys)",
             [("p", "Keys with one value for every point:"), ("table", same),
              ("p", "Every key of every point:"), ("table", full)])]


def conditions_blocks(res, conds):
    """Under which conditions each point ran, and which timings are suspect."""
    B = [("h2", "Measurement conditions")]
    if not len(conds):
        return B + [("p", "No readable points.")]
    names = res.points.set_index("point_id")["point_name"]
    t = conds.assign(point_name=conds["point_id"].map(names))
    flagged = t[t["flags"] != ""]
    B.append(("p", f"{len(flagged)} of {len(t)} points have timings to distrust (oversubscribed, "
                   f"step-time CV > {100 * cond_mod.CV_LIMIT:.0f}%, other work > "
                   f"{cond_mod.OTHER_CPUS_LIMIT} CPUs or stolen time > "
                   f"{cond_mod.STEAL_CPUS_LIMIT} CPUs during the point; docs/METRICS.md, "
                   f"\"Measurement conditions\")."))
    B.append(("table", t[["point_name", "cpu_model", "cores", "ranks_per_node",
                          "threads_per_rank", "other_cpus", "steal_cpus", "loadavg_1m_start",
                          "step_time_cv", "flags"]]))
    isa = sorted(set(t["isa"]) - {""})
    if isa:
        B.append(("p", "CPU ISA extensions: " + " | ".join(isa)))
    return B


def table_blocks(df):
    """A table, with what every row shares said once above it instead of in every row: one
    repetition throughout, or one warning (e.g. "too few repetitions") on every row."""
    B = []
    if "repetitions" in df.columns and len(df) and (df["repetitions"] == 1).all():
        B.append(("p", "Every row is a single repetition: no spread and no significance test "
                       "(add a `repetition` axis to the suite for both)."))
        df = df.drop(columns=["repetitions"])
    for col in ("warning", "note"):
        if col in df.columns and len(df) > 1 and df[col].nunique() == 1 and df[col].iloc[0]:
            B.append(("p", f"Every row: {df[col].iloc[0]}."))
            df = df.drop(columns=[col])
    return B + [("table", df)]


def checks_blocks(checks):
    """The suite's tolerance checks ([[reference]] NAME = [value, lower, upper])."""
    if not len(checks):
        return []
    out = checks[checks["verdict"] != "within"]
    B = [("h2", "Reference checks (the suite's expected figures with tolerances)"),
         ("p", f"{len(out)} of {len(checks)} checks are outside their tolerance or not "
               f"measured" + (": " + "; ".join(f"{r.point_name} {r.metric} {r.measured:.4g} "
                                                f"not in [{r.low:.4g}, {r.high:.4g}]"
                                                for r in out.itertuples()) if len(out) else "")
               + ".")]
    return B + [("table", checks.drop(columns=["point_id"]))]


def _validity_blocks(queries):
    """Server points that broke LoadGen's rules, said before the table that lists them."""
    bad = queries[queries["validity"].str.startswith("INVALID")]
    if not len(bad):
        return []
    lines = "; ".join(f"{r.point_name}: {r.validity[len('INVALID: '):]}" for r in bad.itertuples())
    return [("p", f"INVALID (LoadGen's server rules: completions keep up with the target rate, "
                  f"p99 latency within server_latency_ms): {len(bad)} server point"
                  f"{'s' if len(bad) > 1 else ''}, whose latencies are not results: {lines}.")]


def serving_blocks(points, goodput):
    """Serve points: each point's latencies, then each policy's goodput over its rate sweep."""
    if not len(points):
        return []
    shown = points.drop(columns=["point_id", "series"])
    B = [("h2", "Serving (task = serve)"),
         ("p", "Latencies on the server's clock (docs/METRICS.md, \"Serving\"): TTFT from "
               "arrival to the first token, TPOT = (last - first token) / (tokens - 1), "
               "p50/p99 over served requests; slo_attainment = requests meeting both SLOs / "
               "all requests."), ("table", shown)]
    if len(goodput):
        B += [("h3", "Goodput per policy"),
              ("p", f"Goodput = the highest request_rate at which SLO attainment >= "
                    f"{serving.GOODPUT_ATTAINMENT:g} there and at every lower rate of the same "
                    f"sweep; x_static = goodput / static batching's goodput on the same line."),
              ("table", goodput)]
    return B


def network_blocks(table, net):
    """The compression-vs-network section: where each measured compressor starts to pay."""
    if not len(table):
        return []
    return [("h2", f"Compression against the network ({net['name']})"),
            ("p", "Each compressed collective's codec cost per logical byte, as measured by the "
                  "micro-benchmarks on this machine (its time per logical byte minus the plain "
                  "series' network time of its wire bytes), apart from the network: compression "
                  "pays on networks slower than pays_below = (1 - wire/logical) / codec cost. "
                  f"Times: one collective of {PREDICT_BYTES / 1e6:.1f} MB on {PREDICT_WORKERS} "
                  f"ranks of {net['name']} ({net.get('source', 'given')}: "
                  f"{net['ranks_per_node']} ranks per node, alpha {net['alpha_intra_us']} / "
                  f"{net['alpha_inter_us']} us and {net['bw_intra_GBps']} / "
                  f"{net['bw_inter_GBps']} GB/s within / between nodes), ring volumes, the codec "
                  "at the speed measured here (on the cluster's own processors it would differ: "
                  "read pays_below against its bandwidth). docs/METRICS.md, \"Network model\"."),
            ("table", table)]


def provenance(points):
    """Distinct (suite file hash, commit, versions, hosts) with how many points each."""
    keys = ["suite", "suite_sha256", "git_commit", "shardbench_version", "versions", "hosts"]
    t = points.groupby(keys, sort=False).size().reset_index(name="points")
    t["suite_sha256"] = t["suite_sha256"].str[:12]
    return t


def _blocks(res, results_dir, metrics, comparisons, seed_list, seed, compression, queries, fits,
            plots, csv_names, conds, checks, serving_section=(), peer_section=()):
    suites = ", ".join(sorted(set(res.points["suite"]))) if len(res.points) else "(none)"
    done = len(res.done())
    B = [("h1", f"shardbench report: {suites}"),
         ("p", f"Results: {os.path.abspath(results_dir)}. Generated "
               f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. "
               f"{len(res.points)} readable point files, {done} done, "
               f"{len(res.problems)} problems.")]

    if len(res.points):
        B += [("h2", "Provenance"), ("table", provenance(res.points))]
        if res.points["git_commit"].nunique() > 1 or res.points["suite_sha256"].nunique() > 1:
            B.append(("p", "Warning: these results come from more than one build or suite file "
                           "version; comparisons across them may not be like for like."))

    B.append(("h2", "Problems: failed, incomplete, unreadable and missing points"))
    if len(res.problems):
        B.append(("table", res.problems))
    else:
        B.append(("p", "None: every point has a complete result."))

    B += conditions_blocks(res, conds)

    B.append(("h2", "The paper's tables"))
    if seed:
        B.append(("p", "Paper figures are the suite's reference values; ours are medians over "
                       "repetitions (docs/REPORTS.md says which points form each table)."))
        B += [("h3", "Performance results (the seed paper's list)")] + table_blocks(seed_list)
        for t, df in seed.items():
            B += [("h3", t)] + table_blocks(df)
    else:
        B.append(("p", "No done point carries the paper's reference figures (latency_ms, "
                       "memory_gb, samples_per_s, accuracy_delta_pct) with a baseline."))
    if compression:
        for t, df in compression.items():
            B += [("h3", t)] + table_blocks(df)
    else:
        B.append(("p", "No hybrid-compression table: no training points that differ only in "
                       "the compression policy and include `none`."))

    B += checks_blocks(checks)

    B.append(("h2", "Comparisons against baselines"))
    if len(comparisons):
        shown = comparisons[["group", "baseline", "metric", "n", "median", "min", "max",
                             "baseline_n", "baseline_median", "ratio", "pct", "p", "warning"]]
        B += [("p", "ratio = median / baseline median; pct = (ratio - 1) x 100; p: two-sided "
                    "Mann-Whitney U over repetitions.")] + table_blocks(shown)
    else:
        B.append(("p", "No point names a baseline with a done result."))

    B.append(("h2", "Per-point metrics (medians over timed steps)"))
    B += per_point_blocks(metrics, res)
    if len(queries):
        B += [("h2", "Inference query latency by scenario")] + _validity_blocks(queries)
        B.append(("table", queries.drop(columns=["point_id"])))
    B += list(peer_section)
    B += list(serving_section)
    if len(fits):
        B += [("h2", "Alpha-beta fits of collective time (t = alpha + beta x bytes)"),
              ("p", "Collective micro-benchmarks only (task = micro), fitted to the median "
                    "time of each message size by least squares on the relative error with "
                    "alpha, beta >= 0 (docs/METRICS.md; the medians and spread per size: "
                    "tables/alpha_beta_sizes.csv). " + PREDICT_ASSUMPTIONS),
              ("table", fits)]

    B.append(("h2", "Plots"))
    for p in plots:
        if p["path"]:
            B.append(("img", p["path"], p["caption"]))
        else:
            B.append(("p", f"Skipped: {p['caption']}: {p['note']}."))
    B += [("h2", "Tables as CSV"), ("p", ", ".join(f"tables/{n}.csv" for n in csv_names))]
    return B


def summary_json(built):
    """What `report --json` prints: where it wrote, problems, per-point metrics (with config
    columns and flags) and conditions, as plain JSON (NaN -> null)."""
    res, t = built["results"], built["tables"]

    def records(df):
        return json.loads(df.to_json(orient="records"))
    return json.dumps({"results": os.path.abspath(res.root), "out": os.path.abspath(built["out"]),
                       "points_read": len(res.points), "done": len(res.done()),
                       "problems": records(res.problems), "metrics": records(t["metrics"]),
                       "conditions": records(t["conditions"])}, indent=1)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m analysis.report",
                                 description="Comparison report, paper tables and plots from "
                                             "a shardbench results folder.")
    ap.add_argument("results", help="results folder (holds points/)")
    ap.add_argument("--out", help="output folder (default RESULTS/report)")
    ap.add_argument("--network", default="lassen",
                    help="network of the compression-vs-network section: a preset "
                         f"({', '.join(sorted(network_mod.NETWORKS))}) or a TOML file with a "
                         "[network] table")
    ap.add_argument("--json", action="store_true",
                    help="print the summary (problems, per-point metrics, conditions) as JSON")
    a = ap.parse_args(argv)
    if not os.path.isdir(a.results):
        print(f"analysis.report: {a.results}: no such results folder", file=sys.stderr)
        return 2
    out = a.out or os.path.join(a.results, "report")
    try:
        net = network_mod.load(a.network)
    except (KeyError, OSError, ValueError) as e:
        print(f"analysis.report: --network {a.network}: {e}", file=sys.stderr)
        return 2
    r = build(a.results, out, net)
    res = r["results"]
    if a.json:
        print(summary_json(r))
        return 0
    print(f"{len(res.points)} point files read, {len(res.done())} done, "
          f"{len(res.problems)} problems")
    for _, p in res.problems.iterrows():
        print(f"  {p['kind']}: {p['file'] or p['point_id'] or 'index ' + str(p['point_index'])}: "
              f"{p['reason']}")
    for p in r["plots"]:
        if not p["path"]:
            print(f"  plot skipped: {p['stem']}: {p['note']}")
    print(f"wrote {os.path.join(out, 'report.md')}, {os.path.join(out, 'report.html')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
