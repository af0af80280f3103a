#!/usr/bin/env python3
"""A small labelled dataset and BERT vocabulary for suite/finetune*.toml (stdlib only):
  python3 suite/data/make_finetune_demo.py results/finetune-demo [--validation N]
writes vocab.txt (BERT's special tokens and 60 words: fits bert-tiny's vocabulary of 128),
train.jsonl (1200 examples) and validation.jsonl (300, or N: the first 300 are the same for
any N, so accuracy bounds can be measured on 2,000 held-out examples): sentences of 6-14 words; the label is
"positive" when the sentence has more positive than negative words, else "negative" (ties are
not drawn), then flipped for 10% of the examples: learnable, with a ceiling near 90%, so that
accuracies of different modes can differ. Deterministic (seed 7).
Replace these paths with your own model folder and data: docs/DATA.md."""
import argparse
import json
import os
import random

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
POSITIVE = ["good", "great", "fine", "superb", "lovely", "bright", "warm", "clever", "fun", "kind"]
NEGATIVE = ["bad", "poor", "dull", "awful", "weak", "grim", "cold", "boring", "sad", "rude"]
NEUTRAL = ["the", "a", "film", "plot", "actor", "scene", "music", "story", "ending", "cast",
           "was", "is", "and", "but", "very", "quite", "rather", "not", "so", "too",
           "this", "that", "its", "with", "of", "in", "on", "for", "it", "all",
           "then", "again", "still", "just", "more", "less", "some", "much", "each", "one"]


def sentence(rng):
    while True:
        n = rng.randint(6, 14)
        words = [rng.choice(NEUTRAL) for _ in range(n)]
        pos, neg = rng.randint(0, 3), rng.randint(0, 3)
        if pos == neg:
            continue
        for w in [rng.choice(POSITIVE) for _ in range(pos)] + [rng.choice(NEGATIVE) for _ in range(neg)]:
            words.insert(rng.randint(0, len(words)), w)
        label = (pos > neg) != (rng.random() < 0.1)  # 10% label noise
        return " ".join(words), "positive" if label else "negative"


def main(out, validation=300):
    os.makedirs(out, exist_ok=True)
    rng = random.Random(7)
    with open(os.path.join(out, "vocab.txt"), "w") as f:
        f.write("\n".join(SPECIAL + POSITIVE + NEGATIVE + NEUTRAL) + "\n")
    for name, n in (("train.jsonl", 1200), ("validation.jsonl", validation)):
        with open(os.path.join(out, name), "w") as f:
            for _ in range(n):
                text, label = sentence(rng)
                f.write(json.dumps({"text": text, "label": label}) + "\n")
    print(f"wrote {out}/vocab.txt, train.jsonl (1200), validation.jsonl ({validation})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="the fine-tuning demo's data")
    ap.add_argument("out", nargs="?", default="results/finetune-demo")
    ap.add_argument("--validation", type=int, default=300, help="held-out examples (default 300)")
    a = ap.parse_args()
    main(a.out, a.validation)
