"""Prints the expected pieces of tests/unit/data_tokenizers.cpp's BertWordPiece.CleaningAsTheReference
from transformers' Python BERT tokenizer (BertTokenizerLegacy: BasicTokenizer._clean_text, the
reference) and checks that the fast one (tokenizers' BertNormalizer) agrees, naming where not.
Run from the project's venv; nothing is downloaded:
  .venv/bin/python tests/data/wordpiece_reference.py"""
import os
import sys
import tempfile

from transformers import BertTokenizer
from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

VOCAB = ["[UNK]", "[CLS]", "[SEP]", "hello", "world", "you", "soft", "##ware", "\u20ac", "##5",
         "\u00a9", "##2024", "\u2014", "\u201c", "\u201d", "\u00bf", "ok", "?", "!", "\u2764",
         "hi", "bob", ",", "the", "costs", ".", "thanks", "a"]

CASES = [
    "hello\u00a0world",                      # Zs no-break space: a space
    "soft\u00adware",                        # Cf soft hyphen: dropped
    "soft\u200dware", "soft\u2060ware",      # Cf zero-width joiner, word joiner
    "\ufeffhello",                           # Cf byte-order mark
    "soft\x0bware", "soft\x0cware",          # Cc vertical tab, form feed: dropped, not spaces
    "soft\x85ware", "soft\x1fware", "soft\x7fware",  # Cc next line, unit separator, delete
    "hello\u2028world\u2029you",             # Zl, Zp: split by str.split()
    "hello\u3000world\u202fyou\u2007ok\u1680a",  # more Zs
    "soft\ue000ware",                        # Co private use
    "soft\u0378ware",                        # Cn unassigned (the fast tokenizer keeps it)
    "soft\U000e0001ware",                    # Cf language tag
    "\u2764\ufe0f you",                      # Mn variation selector after an emoji
    "\u20ac5 \u00a92024",                    # Sc, So: symbols stay in the word
    "hello\u2014world \u201cyou\u201d",      # Pd, Pi, Pf: punctuation
    "\u00bfok?",                             # Po
    "soft\x00ware", "soft\ufffdware",        # NUL, U+FFFD
    "Hi\u00a0Bob,\r\n\r\nThe soft\u00adware costs \u20ac5.\u200b Thanks!\u00a0\u2764\ufe0f",
]


def cpp(s):
    """A C++ string literal: octal escapes for ASCII controls, \\u / \\U for the rest."""
    out = ""
    for ch in s:
        cp = ord(ch)
        if 0x20 <= cp < 0x7f:
            out += "\\" + ch if ch in '"\\' else ch
        elif cp < 0x80:
            out += f"\\{cp:03o}"
        else:
            out += f"\\u{cp:04X}" if cp < 0x10000 else f"\\U{cp:08X}"
    return '"' + out + '"'


def main():
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "vocab.txt"), "w") as f:
            f.write("\n".join(VOCAB) + "\n")
        slow = BertTokenizerLegacy(vocab_file=os.path.join(d, "vocab.txt"))
        fast = BertTokenizer.from_pretrained(d)
        for c in CASES:
            want, other = slow.tokenize(c), fast.tokenize(c)
            note = "" if want == other else f"  // the fast tokenizer: {other}"
            pieces = ", ".join(cpp(w) for w in want)
            print(f"      {{std::string({cpp(c)}, {len(c.encode())}), {{{pieces}}}}},{note}")


if __name__ == "__main__":
    sys.exit(main())
