# The report's "PyTorch peers (same machine)" section: each peer file of RESULTS/peers/
# (analysis/peer_file.py, written by suite/micro/torch_peers_bert.py --results) beside the
# folder's done inference points of the same model, with ours / peer per matching precision,
# withheld with the reason wherever the two did not measure the same thing on the same machine
# (docs/REPORTS.md, "PyTorch peers").
import json
import os
import shlex

import numpy as np
import pandas as pd

from analysis import peer_file

# Our `quantization` -> the peer modes its points are set beside. BEST_LOW stands for PyTorch's
# fastest low-precision mode of the file (int8-static has no PyTorch counterpart here, and the
# issue's target is against PyTorch's best).
BEST_LOW = "best low-precision"
MATCH = {"none": ("fp32",), "bf16": ("bf16", "bf16 torch.compile"),
         "int8-dynamic": ("int8-dynamic",), "int8-static": (BEST_LOW,)}
# The batches the peers time are the offline scenario's: `batch` samples per forward, each
# forward a step record (docs/QUANTIZATION.md, "The infer task").
SCENARIO = "offline"
# What our infer task records in `timed_output` when it times the LM / MLM logits, as the
# peers do (workloads/infer/infer_workload.cpp); labelled data times the class logits instead.
LOGITS_OUTPUT = "logits (batch, seq, vocab)"
COLUMNS = ["peer_file", "point_name", "quantization", "compute_dtype", "ours_ms", "peer_mode",
           "peer_ms", "peer_rounds_ms", "ours_over_peer", "note"]


def peers_folder_root(results_root):
    """The results folder that holds peers/ (load_results also takes RESULTS/points)."""
    root = os.path.normpath(results_root)
    if os.path.basename(root) == "points" and not os.path.isdir(os.path.join(root, "peers")):
        return os.path.dirname(root)
    return root


def infer_points(res, summary, conds):
    """Our done infer points: one row each with what the comparison needs."""
    done = res.done()
    c = conds.set_index("point_id") if len(conds) else pd.DataFrame()
    texts = res.texts[res.texts["name"] == "timed_output"] if len(res.texts) else res.texts
    timed = dict(texts[["point_id", "value"]].values) if len(texts) else {}
    rows = []
    for _, p in done.iterrows():
        pid = p["point_id"]
        cfg = res.config.get(pid, {})
        if cfg.get("task") != "infer" or pid not in summary.index:
            continue
        cond = c.loc[pid] if pid in c.index else {}
        rows.append({
            "point_id": pid, "point_name": p["point_name"], "model": cfg.get("model", ""),
            "quantization": cfg.get("quantization", "none"), "config": cfg,
            "batch": cfg.get("batch"), "seq": cfg.get("seq"),
            "threads": int(p.get("threads_per_rank", 0) or 0), "world": int(p["world_size"]),
            "compute_dtype": cond.get("compute_dtype", "") if len(cond) else "",
            "cpu_model": cond.get("cpu_model", "") if len(cond) else "",
            "hosts": "; ".join(sorted(set(json.loads(p.get("hosts") or "[]")))),
            "timed_output": timed.get(pid, ""),
            "ours_ms": 1e3 * float(summary.loc[pid, "step_time_s"]),
            "start_time": p.get("start_time", ""), "end_time": p.get("end_time", "")})
    return sorted(rows, key=lambda r: r["point_name"])


def unlike(peer, pt):
    """Why a ratio of this point to this peer file would not compare like with like, one
    phrase each ([] when it would)."""
    out = []
    cfg = pt["config"]
    scen = cfg.get("scenario", "single-stream")
    if scen != SCENARIO:
        out.append(f"our point ran the {scen} scenario: only offline's forwards are batches of "
                   f"batch x seq (set scenario = \"offline\")")
    total = cfg.get("queries", 0) * cfg.get("samples_per_query", 0)
    if scen == SCENARIO and total and pt["batch"] and total % pt["batch"]:
        out.append(f"our last batch is partial (queries x samples_per_query = {total} is not a "
                   f"multiple of batch {pt['batch']}), and the median mixes it in")
    ours = (pt["batch"], pt["seq"], pt["threads"])
    theirs = (peer["batch"], peer["seq"], peer["threads"])
    if ours != theirs:
        out.append("shapes differ: ours {} x {} on {} threads, the peer's {} x {} on {} threads"
                   .format(*ours, *theirs))
    if pt["world"] != 1:
        out.append(f"our point ran on {pt['world']} ranks, the peer in one process")
    if pt["timed_output"] and pt["timed_output"] != LOGITS_OUTPUT:
        out.append(f"our point timed the {pt['timed_output'].split(':')[0]}, the peer the MLM "
                   f"logits")
    if not pt["cpu_model"]:
        out.append("our point did not record its CPU (a file from before the machine "
                   "attribute)")
    elif pt["cpu_model"] != peer["cpu_model"]:
        out.append(f"CPU differs: ours {pt['cpu_model']}, the peer's {peer['cpu_model'] or '?'}")
    if pt["hosts"] != peer["hostname"]:
        out.append(f"host differs: ours {pt['hosts'] or '?'}, the peer's {peer['hostname']}")
    return out


def best_low(peer):
    """(mode, ms) of the peer's fastest mode other than fp32, or (None, None)."""
    low = {m: peer_file.mode_ms(peer, m) for r in peer["rounds"] for m in r if m != "fp32"}
    if not low:
        return None, None
    m = min(low, key=low.get)
    return m, low[m]


def _peer_cells(peer, mode):
    """(shown mode name, ms, per-round medians text) of a mode (BEST_LOW resolved)."""
    if mode == BEST_LOW:
        m, _ = best_low(peer)
        if m is None:
            return f"{BEST_LOW}: none timed", np.nan, ""
        shown, mode = f"{BEST_LOW}: {m}", m
    else:
        shown = mode
    ms = peer_file.mode_ms(peer, mode)
    rounds = " / ".join(f"{v:.4g}" for v in peer_file.round_medians(peer, mode))
    return shown, (np.nan if ms is None else ms), rounds


def peer_rows(peer, points):
    """The table of one peer file: each of our points of its model beside its matching
    modes, then the peer's modes no point of ours matched."""
    rows, matched = [], set()
    for pt in (p for p in points if p["model"] == peer["model"]):
        why = unlike(peer, pt)
        modes = MATCH.get(pt["quantization"], ())
        base = {"peer_file": peer["file"], "point_name": pt["point_name"],
                "quantization": pt["quantization"], "compute_dtype": pt["compute_dtype"],
                "ours_ms": pt["ours_ms"]}
        if not modes:
            rows.append({**base, "peer_mode": "", "peer_ms": np.nan, "peer_rounds_ms": "",
                         "ours_over_peer": np.nan,
                         "note": f"PyTorch has no peer of {pt['quantization']} here"})
        for mode in modes:
            shown, ms, rounds = _peer_cells(peer, mode)
            matched.add(shown.split(": ", 1)[-1] if mode == BEST_LOW else mode)
            ok = not why and np.isfinite(ms) and np.isfinite(pt["ours_ms"])
            rows.append({**base, "peer_mode": shown, "peer_ms": ms, "peer_rounds_ms": rounds,
                         "ours_over_peer": pt["ours_ms"] / ms if ok else np.nan,
                         "note": "" if ok else "ratio withheld: " + ("; ".join(why) or
                                                                     "a figure is missing")})
    modes = [m for r in peer["rounds"] for m in r]
    for mode in dict.fromkeys(modes):
        if mode not in matched:
            _, ms, rounds = _peer_cells(peer, mode)
            rows.append({"peer_file": peer["file"], "point_name": "", "quantization": "",
                         "compute_dtype": "", "ours_ms": np.nan, "peer_mode": mode,
                         "peer_ms": ms, "peer_rounds_ms": rounds, "ours_over_peer": np.nan,
                         "note": "no done point of ours in this precision"})
    return pd.DataFrame(rows, columns=COLUMNS)


def target_line(peer, table):
    """The issue's two figures, from comparable rows only: our fastest low-precision point
    against PyTorch's best low-precision mode and against its eager fp32 ("" when either side
    is missing)."""
    ok = table[table["ours_over_peer"].notna() & (table["quantization"] != "none")]
    mode, best = best_low(peer)
    fp32 = peer_file.mode_ms(peer, "fp32")
    if not len(ok) or mode is None or fp32 is None:
        return ""
    r = ok.loc[ok["ours_ms"].idxmin()]
    return (f"Our fastest low-precision point, {r['point_name']} ({r['quantization']}), "
            f"{r['ours_ms']:.4g} ms, is {best / r['ours_ms']:.3g}x as fast as PyTorch's best "
            f"low-precision mode ({mode}, {best:.4g} ms) and takes {r['ours_ms'] / fp32:.3g}x "
            f"PyTorch's eager fp32 time ({fp32:.4g} ms).")


def _command(model, batch, seq, threads, results):
    return (f"`.venv/bin/python suite/micro/torch_peers_bert.py --model {model} --batch {batch} "
            f"--seq {seq} --threads {threads} --results {shlex.quote(results)}`")


def how_to(points, results):
    """What to run for a peer file, one command per shape of the folder's offline points of a
    model the script builds."""
    shapes = sorted({(p["model"], p["batch"], p["seq"], p["threads"]) for p in points
                     if p["model"] in peer_file.SIZES
                     and p["config"].get("scenario") == SCENARIO})
    if not shapes:
        return (f"No peer file, and no done offline inference point of a model the peer script "
                f"builds ({', '.join(sorted(peer_file.SIZES))}) to measure one for.")
    cmds = "; ".join(_command(*s, results) for s in shapes)
    return (f"No peer file in {os.path.join(results, peer_file.PEERS_DIR)}/. To measure PyTorch "
            f"beside these points, run on the machine that ran them, from the repository root "
            f"(add `--ours build/micro/micro_bench_quant` for our micro-benchmark between two "
            f"rounds of the peers): {cmds}.")


INTRO = ("PyTorch's eager fp32, eager bf16, torch.compile bf16 and eager int8-dynamic on our "
         "benchmark's model with the MLM head (suite/micro/torch_peers_bert.py --results), "
         "beside this folder's done inference points of the same model. ours_ms = 1e3 x "
         "step_time_s (the median over timed steps of wall_s; an offline point's step is one "
         "forward of a batch of `batch` x `seq`); peer_ms = the median over rounds of the median "
         "over a round's timed forwards; ours_over_peer = ours_ms / peer_ms (below 1: ours is "
         "faster). Precisions match none = fp32, bf16 = bf16 (eager and compiled), int8-dynamic "
         "= int8-dynamic, and int8-static against PyTorch's best low-precision mode. A ratio is "
         "given only where both ran the same model, batch, seq and threads on one rank, ours in "
         "the offline scenario timing the MLM logits, on the same CPU model and host; elsewhere "
         "the note says what differs.")


def section(res, summary, conds):
    """(blocks, table of every peer file's rows). No blocks when the folder has neither a peer
    file nor a done inference point."""
    root = os.path.abspath(peers_folder_root(res.root))
    records, problems = peer_file.read_folder(root)
    points = infer_points(res, summary, conds)
    if not records and not problems and not points:
        return [], pd.DataFrame(columns=COLUMNS)
    B = [("h2", "PyTorch peers (same machine)"), ("p", INTRO)]
    for name, why in problems:
        B.append(("p", f"Peer file {peer_file.PEERS_DIR}/{name} not read: {why}."))
    if not records:
        return B + [("p", how_to(points, root))], pd.DataFrame(columns=COLUMNS)
    tables = []
    for peer in records:
        t = peer_rows(peer, points)
        tables.append(t)
        threads = f"{peer['threads']} thread{'s' if peer['threads'] != 1 else ''}"
        B += [("h3", f"{peer['model']}, {peer['batch']} x {peer['seq']}, {threads} "
                     f"({peer_file.PEERS_DIR}/{peer['file']})"),
              ("p", _about(peer) + _when(points, peer["model"]))]
        if not (t["point_name"] != "").any():
            B.append(("p", f"No done inference point of {peer['model']} in this folder."))
        paired = t[(t["point_name"] != "") & (t["peer_mode"] != "")]
        withheld = paired["ours_over_peer"].isna().sum()
        if withheld:
            B.append(("p", f"{withheld} of {len(paired)} ratios withheld: the peer and our point "
                           f"did not measure alike (the note says what differs)."))
        line = target_line(peer, t)
        if line:
            B.append(("p", line))
        B.append(("table", t.drop(columns=["peer_file"])))
    return B, pd.concat(tables, ignore_index=True)


def _when(points, model):
    """When our points of the model ran: a peer measured hours apart saw another machine state."""
    mine = [p for p in points if p["model"] == model and p["start_time"]]
    if not mine:
        return ""
    return (f" Our points of {model} ran from {min(p['start_time'] for p in mine)} to "
            f"{max(p['end_time'] for p in mine)}.")


def _about(peer):
    v = peer["versions"]
    rounds = len(peer["rounds"])
    return (f"Measured {peer['timestamp']} on {peer['hostname']}, CPU {peer['cpu_model'] or '?'} "
            f"({' '.join(peer['isa']) or 'no listed ISA flags'}); torch {v.get('torch', '?')}, "
            f"transformers {v.get('transformers', '?')}; {peer['iters']} timed forwards per "
            f"mode and round after a warm-up, {rounds} round{'s' if rounds > 1 else ''}; timed "
            f"output: {peer['timed_output']}.")
