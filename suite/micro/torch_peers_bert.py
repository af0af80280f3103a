#!/usr/bin/env python3
"""PyTorch's best on our inference benchmark's model, shapes and threads, in the same run as
ours: BERT with the MLM head on every token (transformers' BertForMaskedLM, built from a config
with our preset's sizes and random weights: nothing is downloaded), a batch of B x T random
tokens, T threads, in each mode PyTorch offers on a CPU:

  eager fp32, eager bf16 (model.to(torch.bfloat16)), torch.compile bf16, eager int8-dynamic
  (torch.ao.quantization.quantize_dynamic on every nn.Linear, the engine PyTorch picks)

and, with --ours BINARY, our `micro_bench_quant` (SB_QUANT_MODEL=MODEL) run between two rounds
of the peers, so that a drift of the machine's speed shows in the peers' two figures. Prints
one table: ms per batch (the median of --iters timed forwards after one warm-up; torch.compile
also after its compilation), and each figure over the same run's eager fp32. Also the CPU
model and its matrix-unit flags, which decide what the figures mean (docs/PERFORMANCE.md).

With --results RESULTS (a sweep's results folder), also writes every timed forward's ms, the
versions, the CPU and the host to RESULTS/peers/<name>.json (analysis/peer_file.py, written
atomically), which `shardbench report RESULTS` sets beside that sweep's inference points
(docs/REPORTS.md, "PyTorch peers").

    .venv/bin/python suite/micro/torch_peers_bert.py [--model bert-large] [--batch 8] [--seq 128]
        [--threads 2] [--iters 3] [--ours build/micro/micro_bench_quant] [--results RESULTS]
"""
import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from analysis import peer_file  # noqa: E402  (the repository root: the peer file's one layout)

SIZES = peer_file.SIZES  # the models this script builds (the report names them too)


def build(name):
    from transformers import BertConfig, BertForMaskedLM
    layers, d, heads, d_ff, vocab, positions = SIZES[name]
    cfg = BertConfig(vocab_size=vocab, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=d_ff, max_position_embeddings=positions)  # attention: transformers' default (sdpa)
    torch.manual_seed(1)
    return BertForMaskedLM(cfg).eval()


def timed(fn, ids, iters):
    """ms of each of `iters` timed forwards, after one warm-up."""
    with torch.inference_mode():
        fn(ids)  # warm-up (oneDNN primitives, the allocator; compile's first call compiles)
        ms = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn(ids)
            ms.append(1e3 * (time.perf_counter() - t0))
    return ms


def peers(name, ids, iters):
    fp32 = build(name)
    bf16 = build(name).to(torch.bfloat16)
    compiled = torch.compile(bf16)
    int8 = torch.ao.quantization.quantize_dynamic(build(name), {torch.nn.Linear}, dtype=torch.qint8)
    out = {}  # mode -> [ms of each timed forward]
    for mode, model in zip(peer_file.MODES, (fp32, bf16, compiled, int8)):
        out[mode] = timed(lambda x: model(input_ids=x).logits, ids, iters)
    return out


def peer_record(a, rounds, mine):
    """The peer file's record (analysis/peer_file.py KEYS) of this run."""
    import transformers
    rec = {"kind": peer_file.KIND, "version": peer_file.VERSION,
           "script": "suite/micro/torch_peers_bert.py", "model": a.model,
           "timed_output": "MLM logits (batch, seq, vocab): BertForMaskedLM",
           "batch": a.batch, "seq": a.seq, "threads": torch.get_num_threads(), "iters": a.iters,
           "rounds": rounds,
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "python": platform.python_version()},
           **peer_file.cpu_info(), "hostname": peer_file.short_hostname(socket.gethostname()),
           "timestamp": peer_file.now_utc(), "command_line": " ".join(sys.argv)}
    if mine:
        rec["micro_bench_quant"] = mine
    return rec


def ours(binary, name):
    env = dict(os.environ, SB_QUANT_MODEL=name)
    run = subprocess.run([binary, "--benchmark_format=json"], env=env, capture_output=True, text=True,
                         check=True)
    j = json.loads(run.stdout[run.stdout.index("{"):run.stdout.rindex("}") + 1])
    got = {}
    for b in j["benchmarks"]:
        mode = b["name"].split("/")[1]
        got["fp32" if mode == "none" else mode] = b["real_time"]  # ms (the benchmark's unit)
    engine = [l for l in run.stdout.splitlines() + run.stderr.splitlines() if "int8-dynamic engine" in l]
    return got, engine


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bert-large", choices=sorted(SIZES))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--ours", help="our micro_bench_quant, run between two rounds of the peers")
    ap.add_argument("--results", help="a results folder: write the figures to RESULTS/peers/ for "
                                      "`shardbench report RESULTS`")
    a = ap.parse_args()
    if (a.batch, a.seq, a.threads) != (8, 128, 2) and a.ours:
        ap.error("micro_bench_quant runs 8 x 128 on 2 threads: keep --batch 8 --seq 128 --threads 2 "
                 "with --ours")
    if a.results and not os.path.isdir(a.results):  # before minutes of timing, not after
        ap.error(f"--results {a.results}: no such folder (give a sweep's results folder, the one "
                 f"holding points/)")
    torch.set_num_threads(a.threads)
    ids = torch.randint(0, SIZES[a.model][4], (a.batch, a.seq), generator=torch.Generator().manual_seed(5))
    print(f"# {a.model} with the MLM head, {a.batch} x {a.seq} tokens, {a.threads} threads; "
          f"torch {torch.__version__}; CPU: {peer_file.cpu_line()}")
    rounds = [peers(a.model, ids, a.iters)]
    mine, engine = ours(a.ours, a.model) if a.ours else ({}, [])
    if a.ours:
        rounds.append(peers(a.model, ids, a.iters))
    print(f"{'mode':<20} {'PyTorch ms':>22} {'x its fp32':>11} {'shardbench ms':>14} {'x our fp32':>11}")
    med = [{m: statistics.median(ms) for m, ms in r.items()} for r in rounds]
    for mode in ("fp32", "bf16", "bf16 torch.compile", "int8-dynamic", "int8-static", "int8-weight-channel", "fp16"):
        theirs = [r[mode] for r in med if mode in r]
        t = " / ".join(f"{v:.0f}" for v in theirs) if theirs else "-"
        tx = f"{theirs[0] / med[0]['fp32']:.3f}" if theirs else "-"
        m = mine.get(mode)
        mx = f"{m / mine['fp32']:.3f}" if m and "fp32" in mine else "-"
        print(f"{mode:<20} {t:>22} {tx:>11} {'-' if m is None else f'{m:.0f}':>14} {mx:>11}")
    if mine:
        best_peer = min(v for r in med for k, v in r.items() if k != "fp32")
        low = {k: v for k, v in mine.items() if k != "fp32"}
        best = min(low, key=low.get)
        print(f"# our fastest low-precision mode: {best}, {low[best]:.0f} ms; PyTorch's best "
              f"low-precision figure in this run: {best_peer:.0f} ms; ours is {best_peer / low[best]:.2f}x "
              f"faster (target >= 1.2); {low[best] / min(r['fp32'] for r in med):.3f}x PyTorch's eager "
              f"fp32 (target <= 0.22)")
        for line in engine:
            print(line)
    if a.results:
        print(f"# wrote {peer_file.write(a.results, peer_record(a, rounds, mine))}")


if __name__ == "__main__":
    main()
