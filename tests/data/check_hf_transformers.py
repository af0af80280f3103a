"""Loads a folder shardbench exported (config.json + model.safetensors + tokenizer files)
into Hugging Face transformers and compares its logits with shardbench's, written beside it
as expected.safetensors (input_ids as float, logits, and for BERT class_logits), and, when
expected.json is there, the tokenizer and the classification pipeline with shardbench's
(text, ids: our tokenizer's ids of text; BERT: labels, our label for text and its probability).
Run from the project's venv: .venv/bin/python tests/data/check_hf_transformers.py DIR
Exit 0 when every loaded model reports no missing or unexpected weights, every logit agrees
within 1e-4, AutoTokenizer gives our ids and the pipeline our label names, label and
probability; else a message naming what differs."""
import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import (AutoConfig, AutoTokenizer, BertForMaskedLM,
                          BertForSequenceClassification, GPT2LMHeadModel, pipeline)

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
    if os.path.exists(f"{d}/expected.json"):
        check_tokenizer_and_pipeline(d, cfg)


def check_tokenizer_and_pipeline(d, cfg):
    with open(f"{d}/expected.json") as f:
        want = json.load(f)
    got = AutoTokenizer.from_pretrained(d)(want["text"])["input_ids"]
    if got != want["ids"]:
        sys.exit(f"AutoTokenizer of {d}: {want['text']!r} -> {got}, shardbench {want['ids']}")
    print(f"AutoTokenizer ({type(AutoTokenizer.from_pretrained(d)).__name__}): ids {got}")
    if cfg.model_type != "bert":
        return
    names = [cfg.id2label[i] for i in range(len(cfg.id2label))]
    if names != want["labels"] or cfg.label2id != {n: i for i, n in enumerate(names)}:
        sys.exit(f"config.json labels: id2label {cfg.id2label}, label2id {cfg.label2id}; "
                 f"want {want['labels']}")
    out = pipeline("text-classification", model=d)(want["text"])[0]
    if out["label"] != want["label"] or not abs(out["score"] - want["score"]) <= TOL:
        sys.exit(f"pipeline: {out}, shardbench {want['label']} {want['score']:.6f}")
    print(f"pipeline text-classification: {out}")


if __name__ == "__main__":
    main(sys.argv[1])
