#!/usr/bin/env python3
"""PyTorch's own pipeline parallelism on the CPU, the peer of our `mesh.pp` (the Parallel3d
issue): GPT-2 (our preset's shapes: pre-LN blocks, GELU tanh, learned positions, naive
attention) cut into `--pp` stages as ours cuts it (gpt2 at pp 2: 9 + 3 blocks, the LM head on
the last stage), each rank a `torch.distributed.pipelining.PipelineStage` over Gloo, stepped by
ScheduleGPipe, Schedule1F1B or ScheduleInterleaved1F1B (2 stages per rank, cut 4 ways) with
`--microbatches` micro-batches, then AdamW. Differences from ours, stated: the LM head is its
own weight on the last stage (pipelining does not tie weights across stages; ours keeps a
copy of the embedding there and sums the two gradients), so the last stage updates V x d more
parameters; one rank per stage, no data parallelism. Runs from the project's venv:

    .venv/bin/python suite/micro/torch_pp_gpt2.py [--model gpt2] [--batch 16] [--seq 256]
        [--microbatches 8] [--schedule 1f1b|gpipe|interleaved_1f1b] [--steps 3] [--dtype bf16|fp32]

Prints tokens/s (the global batch's tokens per second, median step after one warm-up) beside
the machine's CPU model and flags; run `shardbench sweep suite/pipeline-parallel.toml` in the
same minutes for ours (tokens_per_s of its points).
"""
import argparse
import math
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                          ScheduleInterleaved1F1B)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from analysis import peer_file  # noqa: E402  (the repository root: the machine's CPU line)
from torch_tp_gpt2 import SHAPES  # noqa: E402  (the tensor-parallel peer's: our GPT-2 presets)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h, self.dh = h, d // h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.attn(self.ln1(x)).view(B, T, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.dh)  # naive, as our default attention
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, -1))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Stage(nn.Module):
    """Blocks [first, last) with the embeddings on the first stage and ln_f + head on the last."""

    def __init__(self, shape, first, last, is_first, is_last, dtype):
        super().__init__()
        vocab, ctx, d, layers, heads = shape
        self.dtype = dtype
        self.wte = nn.Embedding(vocab, d) if is_first else None
        self.wpe = nn.Embedding(ctx, d) if is_first else None
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(first, last))
        self.ln_f = nn.LayerNorm(d) if is_last else None
        self.head = nn.Linear(d, vocab, bias=False) if is_last else None

    def forward(self, x):
        with torch.autocast("cpu", dtype=self.dtype, enabled=self.dtype != torch.float32):
            if self.wte is not None:
                x = self.wte(x) + self.wpe(torch.arange(x.shape[1]))
            for b in self.blocks:
                x = b(x)
            if self.head is not None:
                return self.head(self.ln_f(x)).float()
            return x.to(self.dtype)  # what goes to the next stage: the compute dtype, as ours


def cut(model, stages):
    # ours, line by line (models/pipeline.cpp balance_stages): blocks of equal cost, the tied
    # LM head's 6 V d per row on the last stage; the cut minimizing the most expensive stage,
    # by dynamic programming over the split points with the same tie-breaking
    vocab, _, d, layers, _ = SHAPES[model]
    cost, head = [6 * (12 * d * d + 13 * d)] * layers, 6 * (2 * d + vocab * d)
    prefix = [0]
    for c in cost:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    best = [[inf] * (layers + 1) for _ in range(stages + 1)]
    at = [[0] * (layers + 1) for _ in range(stages + 1)]
    best[0][0] = 0
    for s in range(1, stages + 1):
        for l in range(s, layers + 1):
            for k in range(s - 1, l):
                c = max(prefix[l] - prefix[k] + (head if s == stages else 0), best[s - 1][k])
                if c < best[s][l]:
                    best[s][l], at[s][l] = c, k
    b = [0] * (stages + 1)
    b[stages] = layers
    for s in range(stages, 0, -1):
        b[s - 1] = at[s][b[s]]
    return b


def worker(rank, args, init_file):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=args.pp)
    torch.manual_seed(rank)
    shape = SHAPES[args.model]
    dt = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    v = 2 if args.schedule == "interleaved_1f1b" else 1
    n = args.pp * v
    bounds = cut(args.model, n)
    mine = [rank + c * args.pp for c in range(v)]  # stage s on rank s % pp, as ours
    mods = [Stage(shape, bounds[s], bounds[s + 1], s == 0, s == n - 1, dt) for s in mine]
    stages = [PipelineStage(m, s, n, torch.device("cpu")) for m, s in zip(mods, mine)]
    loss_fn = lambda logits, y: F.cross_entropy(logits.flatten(0, 1), y.flatten())
    if args.schedule == "gpipe":
        sched = ScheduleGPipe(stages[0], args.microbatches, loss_fn=loss_fn)
    elif args.schedule == "1f1b":
        sched = Schedule1F1B(stages[0], args.microbatches, loss_fn=loss_fn)
    else:
        sched = ScheduleInterleaved1F1B(stages, args.microbatches, loss_fn=loss_fn)
    opt = torch.optim.AdamW([p for m in mods for p in m.parameters()], lr=1e-4, foreach=True)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(shape[0], (args.batch, args.seq + 1), generator=g)
    x, y = idx[:, :-1], idx[:, 1:]
    times = []
    for s in range(args.steps + 1):
        dist.barrier()
        t0 = time.perf_counter()
        losses = []
        if rank == 0:
            sched.step(x, target=y if n - 1 in mine else None, losses=losses)
        else:
            sched.step(target=y if n - 1 in mine else None, losses=losses)
        opt.step()
        opt.zero_grad(set_to_none=True)
        dist.barrier()
        if s > 0:
            times.append(time.perf_counter() - t0)
    if rank == args.pp - 1:
        step = statistics.median(times)
        loss = sum(float(l.detach()) for l in losses) / max(1, len(losses))
        print(f"# PyTorch {torch.__version__} pipelining over gloo: {args.model}, pp {args.pp} "
              f"({args.schedule}, stages {bounds}), batch {args.batch} x seq {args.seq} in "
              f"{args.microbatches} micro-batches, {args.dtype} (autocast), {args.threads} thread(s) "
              f"per rank, on {peer_file.cpu_line()}")
        print(f"step_s {step:.3f}  tokens_per_s {args.batch * args.seq / step:.1f}  loss {loss:.4f}"
              f"  (median of {len(times)} steps after a warm-up)")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2", choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--schedule", default="1f1b", choices=["gpipe", "1f1b", "interleaved_1f1b"])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(worker, args=(args, os.path.join(d, "init")), nprocs=args.pp, join=True)


if __name__ == "__main__":
    main()
