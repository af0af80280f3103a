#!/usr/bin/env python3
"""Converts a Hugging Face model folder's PyTorch weights (pytorch_model.bin, or
pytorch_model.bin.index.json and its shards) into safetensors beside them, which is what
shardbench reads: model.safetensors, or model-0000i-of-0000n.safetensors shards and
model.safetensors.index.json. Tensors keep their names, dtypes and values; the .bin files stay.
Run with the project's Python (torch and safetensors are in .venv):
  .venv/bin/python suite/data/convert_to_safetensors.py path/to/model-folder
Why not read the .bin in C++: it is a zip of Python pickles, which may name any Python class;
only Python reads every one of them faithfully (torch.load with weights_only=True refuses
anything but tensors and plain containers, so a hostile file runs no code here either)."""
import json
import os
import sys

import torch
from safetensors.torch import save_file


def load_bin(path):
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        sys.exit(f"{path}: not a state dict of tensors (a plain name -> tensor mapping)")
    # safetensors stores no shared or strided views: tied weights (an MLM decoder, GPT-2's
    # lm_head) become copies, which shardbench skips by name anyway.
    return {name: t.detach().contiguous().clone() for name, t in state.items()}


def write(path, tensors):
    if os.path.exists(path):
        sys.exit(f"{path} exists already: nothing converted (remove it to convert again)")
    tmp = path + ".tmp"
    save_file(tensors, tmp, metadata={"format": "pt"})
    os.replace(tmp, path)
    print(f"wrote {path}: {len(tensors)} tensors")


def convert(folder):
    single = os.path.join(folder, "pytorch_model.bin")
    index = os.path.join(folder, "pytorch_model.bin.index.json")
    if os.path.exists(single):
        write(os.path.join(folder, "model.safetensors"), load_bin(single))
        return
    if not os.path.exists(index):
        sys.exit(f"{folder}: neither pytorch_model.bin nor pytorch_model.bin.index.json")
    with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    shards = sorted(set(weight_map.values()))
    new_map, total = {}, 0
    for i, shard in enumerate(shards, 1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        tensors = load_bin(os.path.join(folder, shard))
        write(os.path.join(folder, name), tensors)
        for t in tensors:
            new_map[t] = name
        total += sum(t.numel() * t.element_size() for t in tensors.values())
    missing = sorted(set(weight_map) - set(new_map))
    if missing:
        sys.exit(f"{index} names tensors no shard holds: {missing[:8]}")
    out = os.path.join(folder, "model.safetensors.index.json")
    with open(out + ".tmp", "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": new_map}, f, indent=2)
    os.replace(out + ".tmp", out)
    print(f"wrote {out}: {len(new_map)} tensors in {len(shards)} shards")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    convert(sys.argv[1])
