"""Loads a folder shardbench exported (config.json + model.safetensors) into Hugging Face
transformers and compares its logits with shardbench's, written beside it as
expected.safetensors (input_ids as float, logits, and for BERT class_logits).
Run from the project's venv: .venv/bin/python tests/data/check_hf_transformers.py DIR
Exit 0 when every loaded model reports no missing or unexpected weights and every logit
agrees within 1e-4; else a message naming what differs."""
import sys

import torch
from safetensors.torch import load_file
from transformers import (AutoConfig, BertForMaskedLM, BertForSequenceClassification,
                          GPT2LMHeadModel)

TOL = 1e-4


# Our BERT checkpoint holds both task heads; each transformers class uses one of them, and
# BertForMaskedLM has no pooler: those, and only those, may be left unused.
OTHER_HEAD = {
    "BertForMaskedLM": ("bert.pooler.", "classifier."),
    "BertForSequenceClassification": ("cls.predictions.",),
}


def load(cls, d):
    model, info = cls.from_pretrained(d, output_loading_info=True)
    allowed = OTHER_HEAD.get(cls.__name__, ())
    unused = [k for k in info.get("unexpected_keys", []) if not k.startswith(allowed)]
    bad = {"missing_keys": list(info.get("missing_keys", [])), "unexpected_keys": unused,
           "mismatched_keys": list(info.get("mismatched_keys", []))}
    if any(bad.values()):
        sys.exit(f"{cls.__name__} from {d}: {bad}")
    return model.eval()


def check(name, got, want):
    diff = (got.float() - want.float()).abs().max().item()
    if got.shape != want.shape or not diff <= TOL:
        sys.exit(f"{name}: shape {tuple(got.shape)} vs {tuple(want.shape)}, max |diff| {diff:.3g} > {TOL}")
    print(f"{name}: max |diff| {diff:.3g}")


def main(d):
    exp = load_file(f"{d}/expected.safetensors")
    ids = exp["input_ids"].long()
    cfg = AutoConfig.from_pretrained(d)
    with torch.no_grad():
        if cfg.model_type == "gpt2":
            check("GPT2LMHeadModel logits", load(GPT2LMHeadModel, d)(ids).logits, exp["logits"])
        else:
            check("BertForMaskedLM logits", load(BertForMaskedLM, d)(ids).logits, exp["logits"])
            check("BertForSequenceClassification logits",
                  load(BertForSequenceClassification, d)(ids).logits, exp["class_logits"])


if __name__ == "__main__":
    main(sys.argv[1])
