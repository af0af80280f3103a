#!/usr/bin/python3
"""Writes a gpt2-tiny checkpoint the way Hugging Face names and lays it out, with only json and
struct, so the C++ reader is tested against an independent writer. Values are
sin(0.01 * i + k) for flat index i of the k-th tensor (file order). c_attn/c_proj/c_fc weights
are stored (in, out) as GPT-2's Conv1D does; wte is F16, wpe is BF16, the rest F32; names
carry the "transformer." prefix; the attn.bias buffer and lm_head.weight are included (both
must be skipped by the loader). Usage: make_gpt2_safetensors.py OUT.safetensors"""
import json
import math
import struct
import sys

V, P, D, L = 256, 128, 64, 2
tensors = [("wte.weight", [V, D], "F16"), ("wpe.weight", [P, D], "BF16")]
for i in range(L):
    h = f"h.{i}."
    tensors += [(h + "ln_1.weight", [D], "F32"), (h + "ln_1.bias", [D], "F32"),
                (h + "attn.bias", [1, 1, 4, 4], "F32"),
                (h + "attn.c_attn.weight", [D, 3 * D], "F32"), (h + "attn.c_attn.bias", [3 * D], "F32"),
                (h + "attn.c_proj.weight", [D, D], "F32"), (h + "attn.c_proj.bias", [D], "F32"),
                (h + "ln_2.weight", [D], "F32"), (h + "ln_2.bias", [D], "F32"),
                (h + "mlp.c_fc.weight", [D, 4 * D], "F32"), (h + "mlp.c_fc.bias", [4 * D], "F32"),
                (h + "mlp.c_proj.weight", [4 * D, D], "F32"), (h + "mlp.c_proj.bias", [D], "F32")]
tensors += [("ln_f.weight", [D], "F32"), ("ln_f.bias", [D], "F32"), ("lm_head.weight", [V, D], "F32")]


def encode(values, dtype):
    if dtype == "F32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "F16":
        return struct.pack(f"<{len(values)}e", *values)
    # BF16: the upper half of the float32 bits (truncation), little-endian
    out = bytearray()
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        out += struct.pack("<H", bits >> 16)
    return bytes(out)


header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
for k, (name, shape, dtype) in enumerate(tensors):
    n = math.prod(shape)
    blob = encode([math.sin(0.01 * i + k) for i in range(n)], dtype)
    header["transformer." + name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
    offset += len(blob)
    blobs.append(blob)
head = json.dumps(header).encode()
head += b" " * ((8 - len(head) % 8) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(head)))
    f.write(head)
    for b in blobs:
        f.write(b)
