#!/usr/bin/env python3
"""PyTorch's own tensor parallelism on the CPU, the peer of our `mesh.tp` (the Parallel3d
issue): GPT-2 (the shapes of our preset: pre-LN blocks, GELU tanh, learned positions) trained
with `torch.distributed.tensor.parallel` over Gloo, torchtitan's plan: q, k, v and the MLP's
first projection ColwiseParallel, the attention output and the MLP's second RowwiseParallel,
the word embedding RowwiseParallel (vocabulary-parallel) and the LM head ColwiseParallel with
`loss_parallel` (the logits never gathered). Not torchtitan's SequenceParallel: our GPT-2
adds learned positions to whole rows, which its plan has no style for. Differences from ours, stated: the LM head is its own weight
(DTensor cannot tie the embedding's and the head's here, torchtitan does not), so AdamW updates
V x d more parameters; same FLOPs per step otherwise. Runs from the project's venv:

    .venv/bin/python suite/micro/torch_tp_gpt2.py [--model gpt2-medium] [--batch 2] [--seq 1024]
        [--steps 3] [--tp 2] [--dtype bf16|fp32]

Prints tokens/s (the global batch's tokens per second, median step after one warm-up) beside
the machine's CPU model and flags; run `shardbench sweep suite/tensor-parallel.toml` in the
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
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, loss_parallel,
                                               parallelize_module)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from analysis import peer_file  # noqa: E402  (the repository root: the machine's CPU line)

SHAPES = {  # vocab, positions, d, layers, heads (our presets, workloads/models/model.cpp)
    "gpt2": (50257, 1024, 768, 12, 12),
    "gpt2-medium": (50257, 1024, 1024, 24, 16),
}


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h, self.dh = h, d // h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, _ = x.shape
        h = self.ln1(x)
        # -1 heads: this rank's heads under tensor parallelism (the local width / head size)
        q, k, v = (m(h).view(B, T, -1, self.dh).transpose(1, 2) for m in (self.q, self.k, self.v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.dh)  # naive, as our default attention
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, -1))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self, vocab, ctx, d, layers, heads):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def parallelize(model, mesh):
    # torchtitan's plan (torchtitan/models/llama/parallelize_llama.py, apply_tp), without its
    # sequence parallelism (our GPT-2's learned positions are added to whole rows)
    parallelize_module(model, mesh, {
        "wte": RowwiseParallel(input_layouts=Replicate()),
        "head": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False),
    })
    for b in model.blocks:
        parallelize_module(b, mesh, {
            "q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
            "proj": RowwiseParallel(), "fc": ColwiseParallel(), "out": RowwiseParallel()})
    return model


def worker(rank, args, init_file):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=args.tp)
    mesh = init_device_mesh("cpu", (args.tp,))
    torch.manual_seed(0)
    vocab, ctx, d, layers, heads = SHAPES[args.model]
    model = Gpt2(vocab, ctx, d, layers, heads)
    model = parallelize(model, mesh)
    # foreach AdamW cannot mix DTensors (the parallelized layers) and plain tensors
    # (LayerNorms, positions): one optimizer for each kind
    from torch.distributed.tensor import DTensor
    params = list(model.parameters())
    opts = [torch.optim.AdamW(ps, lr=1e-4, foreach=True)
            for ps in ([p for p in params if isinstance(p, DTensor)],
                       [p for p in params if not isinstance(p, DTensor)]) if ps]
    dt = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(vocab, (args.batch, args.seq + 1), generator=g)
    x, y = idx[:, :-1], idx[:, 1:]
    times = []
    for s in range(args.steps + 1):
        dist.barrier()
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=dt, enabled=dt != torch.float32):
            logits = model(x)
        with loss_parallel():
            loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
            loss.backward()
        for opt in opts:
            opt.step()
            opt.zero_grad(set_to_none=True)
        dist.barrier()
        if s > 0:
            times.append(time.perf_counter() - t0)
    if rank == 0:
        step = statistics.median(times)
        print(f"# PyTorch {torch.__version__} tensor parallel over gloo: {args.model}, tp {args.tp}"
              f", batch {args.batch} x seq {args.seq}, "
              f"{args.dtype} (autocast), {args.threads} thread(s) per rank, on {peer_file.cpu_line()}")
        print(f"step_s {step:.3f}  tokens_per_s {args.batch * args.seq / step:.1f}  loss {loss.item():.4f}"
              f"  (median of {len(times)} steps after a warm-up)")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2-medium", choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(worker, args=(args, os.path.join(d, "init")), nprocs=args.tp, join=True)


if __name__ == "__main__":
    main()
