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

    .venv/bin/python suite/micro/torch_peers_bert.py [--model bert-large] [--batch 8] [--seq 128]
        [--threads 2] [--iters 3] [--ours build/micro/micro_bench_quant]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import time

import torch

SIZES = {  # our presets (`shardbench models`): layers, d, heads, d_ff, vocab, positions
    "bert-tiny": (2, 64, 4, 256, 128, 128),
    "bert-base": (12, 768, 12, 3072, 30522, 512),
    "bert-large": (24, 1024, 16, 4096, 30522, 512),
}


def cpu_line():
    model, flags = platform.processor(), []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    flags = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16",
                                         "amx_int8") if f in have]
                    break
    except OSError:
        pass
    return f"{model}; {' '.join(flags) or 'no AVX-512/AMX'}"


def build(name):
    from transformers import BertConfig, BertForMaskedLM
    layers, d, heads, d_ff, vocab, positions = SIZES[name]
    cfg = BertConfig(vocab_size=vocab, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=d_ff, max_position_embeddings=positions)  # attention: transformers' default (sdpa)
    torch.manual_seed(1)
    return BertForMaskedLM(cfg).eval()


def timed(fn, ids, iters):
    with torch.inference_mode():
        fn(ids)  # warm-up (oneDNN primitives, the allocator; compile's first call compiles)
        ms = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn(ids)
            ms.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(ms)


def peers(name, ids, iters):
    fp32 = build(name)
    bf16 = build(name).to(torch.bfloat16)
    compiled = torch.compile(bf16)
    int8 = torch.ao.quantization.quantize_dynamic(build(name), {torch.nn.Linear}, dtype=torch.qint8)
    out = {}
    for mode, model in (("fp32", fp32), ("bf16", bf16), ("bf16 torch.compile", compiled),
                        ("int8-dynamic", int8)):
        out[mode] = timed(lambda x: model(input_ids=x).logits, ids, iters)
    return out


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
    a = ap.parse_args()
    if (a.batch, a.seq, a.threads) != (8, 128, 2) and a.ours:
        ap.error("micro_bench_quant runs 8 x 128 on 2 threads: keep --batch 8 --seq 128 --threads 2 "
                 "with --ours")
    torch.set_num_threads(a.threads)
    ids = torch.randint(0, SIZES[a.model][4], (a.batch, a.seq), generator=torch.Generator().manual_seed(5))
    print(f"# {a.model} with the MLM head, {a.batch} x {a.seq} tokens, {a.threads} threads; "
          f"torch {torch.__version__}; CPU: {cpu_line()}")
    rounds = [peers(a.model, ids, a.iters)]
    mine, engine = ours(a.ours, a.model) if a.ours else ({}, [])
    if a.ours:
        rounds.append(peers(a.model, ids, a.iters))
    print(f"{'mode':<20} {'PyTorch ms':>22} {'x its fp32':>11} {'shardbench ms':>14} {'x our fp32':>11}")
    for mode in ("fp32", "bf16", "bf16 torch.compile", "int8-dynamic", "int8-static", "int8-weight-channel", "fp16"):
        theirs = [r[mode] for r in rounds if mode in r]
        t = " / ".join(f"{v:.0f}" for v in theirs) if theirs else "-"
        tx = f"{theirs[0] / rounds[0]['fp32']:.3f}" if theirs else "-"
        m = mine.get(mode)
        mx = f"{m / mine['fp32']:.3f}" if m and "fp32" in mine else "-"
        print(f"{mode:<20} {t:>22} {tx:>11} {'-' if m is None else f'{m:.0f}':>14} {mx:>11}")
    if mine:
        best_peer = min(v for r in rounds for k, v in r.items() if k != "fp32")
        low = {k: v for k, v in mine.items() if k != "fp32"}
        best = min(low, key=low.get)
        print(f"# our fastest low-precision mode: {best}, {low[best]:.0f} ms; PyTorch's best "
              f"low-precision figure in this run: {best_peer:.0f} ms; ours is {best_peer / low[best]:.2f}x "
              f"faster (target >= 1.2); {low[best] / min(r['fp32'] for r in rounds):.3f}x PyTorch's eager "
              f"fp32 (target <= 0.22)")
        for line in engine:
            print(line)


if __name__ == "__main__":
    main()
