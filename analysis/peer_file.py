# The peer file: PyTorch's figures on our benchmark's model, shapes and threads, one JSON file
# per run of suite/micro/torch_peers_bert.py under RESULTS/peers/ (docs/REPORTS.md, "PyTorch
# peers"). The one definition of its layout, for the writer (that script, under .venv's
# Python, which has no pandas: so this module uses the standard library only) and the reader
# (analysis/peers.py, the report's section). JSON rather than HDF5: a few dozen numbers and
# strings, readable by both Pythons without h5py and by a person with `cat`.
import datetime
import json
import os
import platform
import statistics

PEERS_DIR = "peers"
KIND = "shardbench-pytorch-peers"
VERSION = 1
# key -> (type, what it holds). Every key is required; a file without one is refused.
KEYS = {
    "kind": (str, f"always {KIND!r}"),
    "version": (int, "this layout's version; a reader refuses another"),
    "script": (str, "the script that measured (suite/micro/torch_peers_bert.py)"),
    "model": (str, "our preset's name (bert-large, ...): the model the peers built"),
    "timed_output": (str, "what a timed forward returns: the MLM logits (batch, seq, vocab)"),
    "batch": (int, "sequences per forward"),
    "seq": (int, "tokens per sequence"),
    "threads": (int, "torch.get_num_threads() during the timing"),
    "iters": (int, "timed forwards per mode and round, after one warm-up"),
    "rounds": (list, "per round, {mode: [ms of each timed forward]}; with --ours two rounds, "
                     "before and after our micro_bench_quant"),
    "versions": (dict, "torch, transformers, python"),
    "cpu_model": (str, "/proc/cpuinfo 'model name', as the harness records it"),
    "isa": (list, "the matrix-unit and vector ISA flags present (ISA_FLAGS)"),
    "hostname": (str, "the short host name (before the first dot), as the harness records it"),
    "timestamp": (str, "end of the measurement, ISO 8601 UTC"),
    "command_line": (str, "the script's command line"),
}
# Optional: our micro_bench_quant's ms per mode when the script ran it between the rounds
# (kept for the reader; the report compares the peers with the sweep's points instead).
OPTIONAL_KEYS = {"micro_bench_quant": dict}
# The models the script builds, with our presets' sizes (`shardbench models`): layers, d,
# heads, d_ff, vocab, positions. Here, not in the script, so that the report can say which of
# a folder's points the script can be run beside.
SIZES = {
    "bert-tiny": (2, 64, 4, 256, 128, 128),
    "bert-base": (12, 768, 12, 3072, 30522, 512),
    "bert-large": (24, 1024, 16, 4096, 30522, 512),
}
# The modes the script times, in its order.
MODES = ("fp32", "bf16", "bf16 torch.compile", "int8-dynamic")
# The flags the harness records (harness/core/machine.cpp kIsaFlags), so that the two lists
# read alike in a report.
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
             "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16",
             "amx_int8", "amx_fp16", "asimd", "sve", "bf16")


def cpu_info(cpuinfo="/proc/cpuinfo"):
    """{"cpu_model", "isa"} of this machine, read as the harness reads them ("" and [] when
    /proc/cpuinfo is absent)."""
    model, flags = "", set()
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and not model:
                    model = value.strip()
                if key.strip() in ("flags", "Features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return {"cpu_model": model, "isa": [f for f in ISA_FLAGS if f in flags]}


def cpu_line():
    """The CPU model and its vector ISA flags in one line, for the peers' printed headers."""
    cpu = cpu_info()
    shown = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
    flags = [f for f in cpu["isa"] if f in shown]
    return f"{cpu['cpu_model'] or platform.processor()}; {' '.join(flags) or 'no AVX-512/AMX'}"


def short_hostname(name):
    return name.split(".", 1)[0]


def file_name(record):
    """peers/<script stem>-<model>-b<batch>-s<seq>-t<threads>-<timestamp>.json: one per run,
    never overwritten by a later run."""
    stamp = record["timestamp"].replace("-", "").replace(":", "")
    stem = os.path.splitext(os.path.basename(record["script"]))[0]
    return (f"{stem}-{record['model']}-b{record['batch']}-s{record['seq']}-"
            f"t{record['threads']}-{stamp}.json")


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def check(record):
    """The problems of a record as one sentence each ([] when it is a valid peer file)."""
    if not isinstance(record, dict):
        return ["not a JSON object"]
    if record.get("kind") != KIND:
        return [f"kind is {record.get('kind')!r}, not {KIND!r}: not a peer file"]
    if record.get("version") != VERSION:
        return [f"version {record.get('version')!r}, this analysis reads {VERSION}: rerun "
                f"suite/micro/torch_peers_bert.py with this checkout"]
    out = [f"key {k!r} missing ({doc})" for k, (_, doc) in KEYS.items() if k not in record]
    out += [f"key {k!r} is {type(record[k]).__name__}, not {t.__name__}"
            for k, (t, _) in {**KEYS, **{k: (t, "") for k, t in OPTIONAL_KEYS.items()}}.items()
            if k in record and not isinstance(record[k], t)]
    if out:
        return out
    for i, r in enumerate(record["rounds"]):
        if not isinstance(r, dict) or not r:
            out.append(f"rounds[{i}] is not a non-empty object of mode -> [ms]")
            continue
        out += [f"rounds[{i}][{m!r}] is not a non-empty list of positive ms"
                for m, ms in r.items() if not isinstance(ms, list) or not ms or
                not all(isinstance(x, (int, float)) and x > 0 for x in ms)]
    if not record["rounds"]:
        out.append("rounds is empty")
    return out


def write(results_dir, record):
    """Writes the record atomically: a temporary file in the same folder, flushed to disk,
    then renamed, so a reader sees the whole file or none. Raises ValueError on an invalid
    record. Returns the final path."""
    problems = check(record)
    if problems:
        raise ValueError("peer record: " + "; ".join(problems))
    folder = os.path.join(results_dir, PEERS_DIR)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, file_name(record))
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as fh:
            json.dump(record, fh, indent=1)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def read_folder(results_dir):
    """(records, problems) of RESULTS/peers: records sorted by file name, each with its
    "file" added; problems as (file, reason): unreadable or invalid files and unfinished
    writes (a temporary file without its final one)."""
    folder = os.path.join(results_dir, PEERS_DIR)
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    records, problems = [], []
    for name in names:
        if ".json.tmp" in name:
            if name[:name.index(".json.tmp") + 5] not in names:
                problems.append((name, "temporary file only: the write never completed"))
            continue
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(folder, name)) as fh:
                rec = json.load(fh)
        except (OSError, ValueError) as e:
            problems.append((name, f"unreadable: {type(e).__name__}: {e}"))
            continue
        bad = check(rec)
        if bad:
            problems.append((name, "; ".join(bad)))
            continue
        records.append({**rec, "file": name})
    return records, problems


def mode_ms(record, mode):
    """The peer's figure of a mode: the median over rounds of each round's median ms (rounds
    without the mode left out); None when no round has it."""
    per_round = [statistics.median(r[mode]) for r in record["rounds"] if mode in r]
    return statistics.median(per_round) if per_round else None


def round_medians(record, mode):
    return [statistics.median(r[mode]) for r in record["rounds"] if mode in r]
