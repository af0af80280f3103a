#!/usr/bin/env python3
"""Eager PyTorch GPT-2 training, the comparison point of the Lowprec issue's targets
(docs/PERFORMANCE.md): the same model as ours (gpt2 124M: 12 layers, 12 heads, d 768,
vocab 50257, context 1024, tied LM head, pre-LN, GELU tanh), AdamW, batch B x T of random
tokens, in fp32 and under CPU autocast bf16, interleaved, printing tokens/s of each and the
ratio. Runs from the project's venv (the torch wheel; nothing is downloaded):

    .venv/bin/python suite/micro/eager_gpt2.py [--batch 4] [--seq 128] [--steps 3] [--threads 2]
        [--compile: also torch.compile's bf16 step, PyTorch's best on a CPU]

AdamW is PyTorch's fused CPU kernel (fused=True) where this torch has it, its fastest.

Compare with `build/micro/micro_bench_train` (ours, same B x T and threads) in the same minutes.
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        # naive attention, as our default `attention = "naive"`
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.h)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self, vocab=50257, ctx=1024, d=768, layers=12, heads=12):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile's bf16 step")
    ap.add_argument("--no-fp32", action="store_true",
                    help="skip the fp32 step (on a CPU whose fp32 step is 10x the bf16 one)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Gpt2()
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, fused=True)
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    compiled = torch.compile(model) if a.compile else None
    idx = torch.randint(0, 50257, (a.batch, a.seq + 1))
    x, y = idx[:, :-1], idx[:, 1:]

    modes = {"bf16": (model, True)} if a.no_fp32 else {"fp32": (model, False), "bf16": (model, True)}
    if compiled is not None:
        modes["compile bf16"] = (compiled, True)

    def step(mode):
        m, bf16 = modes[mode]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = m(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for mode in modes:  # warm-up each (compile's first step compiles)
        step(mode)
    times = {mode: [] for mode in modes}
    for _ in range(a.steps):  # interleaved: drift reaches every mode alike
        for mode in modes:
            t0 = time.perf_counter()
            step(mode)
            times[mode].append(time.perf_counter() - t0)
    tok = a.batch * a.seq
    # The median step, as micro_bench_lowprec reports ours, and the best one.
    rate = {mode: tok / statistics.median(t) for mode, t in times.items()}
    best = {mode: tok / min(t) for mode, t in times.items()}
    print(f"# PyTorch {torch.__version__} gpt2 124M train B={a.batch} T={a.seq}, {a.threads} threads, "
          f"{a.steps} interleaved steps each, AdamW fused={opt.defaults.get('fused')}; tokens/s of "
          f"the median step (best step)")
    print(", ".join(f"{mode} {rate[mode]:.1f} ({best[mode]:.1f}) tokens/s" for mode in rate) +
          (f"; bf16/fp32 {rate['bf16'] / rate['fp32']:.2f}" if "fp32" in rate else ""))


if __name__ == "__main__":
    main()
