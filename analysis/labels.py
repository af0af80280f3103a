# Short labels for points drawn or listed together: the configuration keys whose values differ
# among them ("strategy=full_shard compression=hybrid"), instead of the full point name (110
# characters in paper-small, which clipped the plots' axes and made bars read alike). Every
# plot that labels points uses point_labels; the report's per-point table, varying_keys.
import json
import os
import textwrap

# Keys a reader looks for first, in this order; any other varying key follows alphabetically.
FIRST = ("task", "model", "teacher", "strategy", "compression", "quantization", "pruning",
         "dtype", "device", "comm_backend", "attention", "world", "threads", "batch", "seq",
         "scenario", "serve_policy", "request_rate", "micro.op", "micro.impl")
# Set by expansion, not by a suite: repetitions of one point are drawn and tabled as one.
IGNORED = frozenset({"repetition", "repetitions"})
LINE_WIDTH = 18   # characters per label line (wrapped between key=value pairs)
VALUE_WIDTH = 24  # longer values are cut in the middle (a path to its last component first)


def _canonical(v):
    return json.dumps(v, sort_keys=True)


def _order(key):
    return (FIRST.index(key), "") if key in FIRST else (len(FIRST), key)


def varying_keys(configs, drop=(), ignore=IGNORED):
    """The keys whose values are not the same in every config (a key one config lacks counts
    as differing), FIRST's keys first. `ignore` and `drop` are left out."""
    configs = list(configs)
    keys = set().union(*configs) - set(ignore) - set(drop) if configs else set()
    vary = [k for k in keys if len({_canonical(c.get(k)) for c in configs}) > 1]
    return sorted(vary, key=_order)


def short_value(v, width=VALUE_WIDTH, path=True):
    """A value as label text: a path (path=True) by its last component, anything longer than
    width cut in the middle with an ellipsis."""
    text = "none" if v is None else str(v)
    if path and "/" in text and len(text) > width:
        text = os.path.basename(text.rstrip("/")) or text
    if len(text) > width:
        keep = width - 1
        text = text[:(keep + 1) // 2] + "\u2026" + text[len(text) - keep // 2:]
    return text


def _join(config, keys, width):
    pairs = [f"{k}={short_value(config.get(k), width)}" for k in keys]
    return "\n".join(textwrap.wrap(" ".join(pairs), LINE_WIDTH, break_long_words=False,
                                   break_on_hyphens=False))


def point_labels(configs, names=None, drop=(), fallback=("model",)):
    """One label per config, multi-line ("key=value" pairs wrapped at LINE_WIDTH): the keys
    that vary among these configs (varying_keys). When none varies (one point, or points that
    differ only in `drop`), the `fallback` keys they have, else their names. Labels stay
    distinct: values are cut only where that keeps them apart, and configs equal on every
    shown key get " (1)", " (2)", ... in order."""
    configs = list(configs)
    keys = varying_keys(configs, drop) or [k for k in fallback if any(k in c for c in configs)]
    if keys:
        labels = [_join(c, keys, VALUE_WIDTH) for c in configs]
        if len(set(labels)) < len(set(_join(c, keys, 10**6) for c in configs)):
            labels = [_join(c, keys, 10**6) for c in configs]  # cutting made two alike
    else:
        labels = [short_value(n, 2 * LINE_WIDTH, path=False)
                  for n in (names or [""] * len(configs))]
    seen = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if labels.count(lab) == 1 else f"{lab} ({seen[lab]})")
    return out
