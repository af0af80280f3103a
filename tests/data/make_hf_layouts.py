"""Writes small model folders in the layouts transformers saves (and saved in 4.x), each with
the logits transformers itself computes on them, for tests/unit/data_safetensors.cpp:
  bertmodel-4x/   BertModel (no "bert." prefix, a pooler, no MLM head) plus the I64
                  embeddings.position_ids buffer 4.x saved
  pretraining/    BertForPreTraining (MLM head and the NSP head cls.seq_relationship)
  maskedlm/       BertForMaskedLM (no pooler)
  gpt2-4x/        GPT2LMHeadModel plus 4.x's buffers: attn.bias (the causal mask, BOOL and
                  U8) and attn.masked_bias (F32)
  classifier-bin/ BertForSequenceClassification with label names, pytorch_model.bin only
Each folder holds expected.safetensors: input_ids (as F32) and logits (MLM / LM logits;
classifier-bin: the class logits). Run from the project's venv (torch, transformers):
  .venv/bin/python tests/data/make_hf_layouts.py OUT"""
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import (BertConfig, BertForMaskedLM, BertForPreTraining,
                          BertForSequenceClassification, BertModel, GPT2Config,
                          GPT2LMHeadModel)

BERT = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=256, max_position_embeddings=128)
GPT2 = dict(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=128)


def ids(vocab):
    return (torch.arange(16) * 7 % vocab).view(2, 8)


def save(model, d, logits, extra=None):
    model.save_pretrained(d)
    st = os.path.join(d, "model.safetensors")
    if extra:  # buffers transformers 4.x wrote into the file
        tensors = load_file(st)
        tensors.update(extra)
        save_file(tensors, st, metadata={"format": "pt"})
    save_file({"input_ids": ids(model.config.vocab_size).float(), "logits": logits.contiguous()},
              os.path.join(d, "expected.safetensors"))


def main(out):
    torch.manual_seed(0)
    with torch.no_grad():
        m = BertModel(BertConfig(**BERT)).eval()
        x = ids(m.config.vocab_size)
        save(m, f"{out}/bertmodel-4x", m(x).last_hidden_state,
             {"embeddings.position_ids": torch.arange(128, dtype=torch.int64).view(1, 128)})

        m = BertForPreTraining(BertConfig(**BERT)).eval()
        save(m, f"{out}/pretraining", m(x).prediction_logits)

        m = BertForMaskedLM(BertConfig(**BERT)).eval()
        save(m, f"{out}/maskedlm", m(x).logits)

        m = GPT2LMHeadModel(GPT2Config(**GPT2)).eval()
        g = ids(m.config.vocab_size)
        mask = torch.tril(torch.ones(128, 128, dtype=torch.bool)).view(1, 1, 128, 128)
        buffers = {}
        for layer in range(GPT2["n_layer"]):
            buffers[f"h.{layer}.attn.bias"] = mask.clone() if layer == 0 else mask.to(torch.uint8)
            buffers[f"h.{layer}.attn.masked_bias"] = torch.tensor(-1e4)
        save(m, f"{out}/gpt2-4x", m(g).logits, buffers)

        cfg = BertConfig(**BERT, id2label={0: "negative", 1: "neutral", 2: "positive"},
                         label2id={"negative": 0, "neutral": 1, "positive": 2})
        m = BertForSequenceClassification(cfg).eval()
        d = f"{out}/classifier-bin"
        os.makedirs(d, exist_ok=True)
        cfg.save_pretrained(d)
        torch.save(m.state_dict(), f"{d}/pytorch_model.bin")
        save_file({"input_ids": x.float(), "logits": m(x).logits.contiguous()},
                  f"{d}/expected.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
