# The analysis fixture: a suite of points described as data, written either through the C++
# writer (the test program analysis_fixture_writer) or with h5py as a mirror of it (when the
# C++ side is not built, and for the tests that damage a file). The record columns, their types,
# units and docs are not listed here: they come from `shardbench schema --json` (SB_SHARDBENCH_BIN,
# which ctest sets) or, without a build, from the generated tables of docs/HDF5_SCHEMA.md (a
# ctest keeps those equal to that command's output). Nor are the root attributes: they come
# from analysis/root_attributes.py (`shardbench schema --python`, kept equal by a ctest), which
# analysis/load.py reads too.
# The numbers are chosen so that every table value can be computed by hand (see test_*.py).
import functools
import json
import os
import re
import subprocess

import sys

import h5py
import numpy as np

STR = h5py.string_dtype()  # variable-length UTF-8, as the C++ writer stores strings
# `shardbench schema` type names -> h5py dtypes.
DTYPES = {"int8": np.int8, "int32": np.int32, "int64": np.int64, "uint64": np.uint64,
          "float64": np.float64, "string": STR}
# Fixture defaults of fields a record leaves out, where the schema's zero would not do
# (and in /steps, `step` defaults to the record's position).
DEFAULTS = {"ranks": {"host": "localhost"}, "queries": {"samples": 1},
            "comm": {"peer": -1, "dim": "world"}}

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:  # run as a script: `import analysis` from the checkout
    sys.path.insert(0, REPO)
from analysis.root_attributes import ROOT_ATTRIBUTES  # noqa: E402
SCHEMA_DOC = os.path.join(REPO, "docs", "HDF5_SCHEMA.md")
# The generated region's markers (tests/harness/check_schema_doc.sh writes and checks it).
DOC_BEGIN = ("<!-- BEGIN generated: shardbench schema --markdown --only columns "
             "(from harness/trace/records.h) -->")
DOC_END = "<!-- END generated -->"


def schema_from_binary(binary):
    """`BINARY schema --json`, parsed."""
    proc = subprocess.run([binary, "schema", "--json"], capture_output=True, text=True,
                          timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"{binary} schema --json failed ({proc.returncode}): {proc.stderr}")
    return json.loads(proc.stdout)


def schema_from_doc(path=SCHEMA_DOC):
    """The same structure as `schema --json` (without schema_version), read back from the
    generated region of docs/HDF5_SCHEMA.md: a line `/<group>`: <doc> (<origin>). per group,
    then its table rows | `<column>` | <dtype> | <unit> | <doc> |."""
    text = open(path, encoding="utf-8").read()
    start = text.index(DOC_BEGIN) + len(DOC_BEGIN)
    region = text[start:text.index(DOC_END, start)]
    groups = []
    for line in region.splitlines():
        g = re.match(r"^`/(\w+)`: (.*) \((recorded on rank 0|gathered from every rank)\)\.$", line)
        c = re.match(r"^\| `(\w+)` \| (\w+) \| (.*?) \| (.*) \|$", line)
        if g:
            groups.append({"name": g.group(1), "doc": g.group(2),
                           "from_every_rank": g.group(3) == "gathered from every rank",
                           "columns": []})
        elif c:
            unit, doc = (x.strip().replace("\\|", "|") for x in c.group(3, 4))
            groups[-1]["columns"].append({"name": c.group(1), "dtype": c.group(2),
                                          "unit": unit, "doc": doc})
    return {"groups": groups}


@functools.lru_cache(maxsize=None)
def schema():
    binary = os.environ.get("SB_SHARDBENCH_BIN")
    return schema_from_binary(binary) if binary else schema_from_doc()


def groups():
    return schema()["groups"]


def _column(group, name, values, dtype):
    # 1-D, chunked, extendible: the schema's rule for every dataset, empty ones included.
    data = np.asarray(values, dtype=object if dtype is STR else dtype)
    return group.create_dataset(name, data=data, dtype=dtype, maxshape=(None,), chunks=(64,))


def point_record(path, *, index, point_id, name, config, baseline_id="", reference=None,
                 status="done", failure_reason="", steps=(), ranks=(), comm=(), queries=(),
                 scalars=None, series=None, texts=None, suite="fixture", requests=(),
                 serve_steps=(), routing=(), machine=None):
    """One point as plain data: root attributes and complete records (every column of the
    schema present; omitted fields take DEFAULTS or 0). Either writer takes it. machine: the
    `machine` attribute as an object (default: none recorded); threads_per_rank is the
    config's `threads` (default 1)."""
    world = int(config.get("world", 1))
    meta = root_attributes(
        status=status, failure_reason=failure_reason, suite=suite,
        suite_file=f"suite/{suite}.toml", suite_sha256="0" * 64, point_index=index,
        point_id=point_id, point_name=name, baseline_id=baseline_id,
        config=json.dumps(config, sort_keys=True), reference=json.dumps(reference or {}),
        git_commit="fixture", shardbench_version="0.1.0",
        versions=json.dumps({"hdf5": h5py.version.hdf5_version}),
        hosts=json.dumps(["localhost"] * world), world_size=world,
        threads_per_rank=int(config.get("threads", 1)), machine=json.dumps(machine or {}),
        slurm_job_id="", slurm_array_job_id="", slurm_array_task_id="",
        command_line="make_fixture.py", start_time="2026-12-02T10:00:00Z",
        end_time="2026-12-02T10:01:00Z", elapsed_s=60.0)
    return dict(path=path, meta=meta,
                **_records(dict(steps=steps, ranks=ranks, comm=comm, queries=queries,
                                requests=requests, serve_steps=serve_steps, routing=routing)),
                scalars={k: float(v) for k, v in (scalars or {}).items()},
                series={k: [float(x) for x in v] for k, v in (series or {}).items()},
                texts=dict(texts or {}))


def root_attributes(**given):
    """Every root attribute of the schema (analysis/root_attributes.py), in file order: the
    given value, else the attribute's default. A name that is no root attribute is an error."""
    unknown = sorted(set(given) - {a.name for a in ROOT_ATTRIBUTES})
    if unknown:
        raise KeyError(f"no root attribute {', '.join(unknown)}")
    return {a.name: _value(a.dtype, given.get(a.name, a.default)) for a in ROOT_ATTRIBUTES}


def _value(dtype, v):
    return str(v) if dtype == "string" else float(v) if dtype == "float64" else int(v)


def _records(given):
    """Every record group of the schema -> its complete records: a value for every column
    (given, or DEFAULTS, or the type's zero). A key that is no column is an error."""
    out = {}
    for g in groups():
        cols = g["columns"]
        names = {c["name"] for c in cols}
        out[g["name"]] = rows = []
        for i, r in enumerate(given.get(g["name"], ())):
            unknown = sorted(set(r) - names)
            if unknown:
                raise KeyError(f"/{g['name']} has no column {', '.join(unknown)}")
            defaults = {"step": i} if g["name"] == "steps" else {}
            defaults.update(DEFAULTS.get(g["name"], {}))
            rows.append({c["name"]: _value(c["dtype"], r.get(c["name"], defaults.get(
                c["name"], "" if c["dtype"] == "string" else 0))) for c in cols})
    return out


def write_h5(rec):
    """The h5py mirror of the C++ writer (harness/trace/hdf5_sink.cpp, hdf5_table.cpp)."""
    os.makedirs(os.path.dirname(rec["path"]), exist_ok=True)
    with h5py.File(rec["path"], "w") as f:
        m = rec["meta"]
        for a in ROOT_ATTRIBUTES:  # as hdf5_sink.cpp writes them, typed by the schema
            f.attrs[a.name] = m[a.name] if a.dtype == "string" else DTYPES[a.dtype](m[a.name])

        for grp in groups():  # as hdf5_table.cpp writes them
            g = f.create_group(grp["name"])
            g.attrs["doc"] = grp["doc"]
            g.attrs.create("columns", [c["name"] for c in grp["columns"]], dtype=STR)
            for c in grp["columns"]:
                ds = _column(g, c["name"], [r[c["name"]] for r in rec[grp["name"]]],
                             DTYPES[c["dtype"]])
                ds.attrs["unit"], ds.attrs["doc"] = c["unit"], c["doc"]
        g = f.create_group("scalars")
        for k, v in rec["scalars"].items():
            g.attrs[k] = np.float64(v)
        g = f.create_group("series")
        for k, v in rec["series"].items():
            _column(g, k, v, np.float64)
        g = f.create_group("texts")
        for k, v in rec["texts"].items():
            g.attrs[k] = v


def write_point(path, **kw):
    """Writes one point file with h5py (keyword arguments of point_record)."""
    write_h5(point_record(path, **kw))


def write_records(records, writer=None, json_path=None):
    """Writes point records with h5py, or, given the path of the C++ test program
    analysis_fixture_writer, through the real writer (sb::write_result_hdf5)."""
    if not writer:
        for rec in records:
            write_h5(rec)
        return
    for rec in records:
        os.makedirs(os.path.dirname(rec["path"]), exist_ok=True)
    with open(json_path, "w") as fh:
        json.dump({"points": records}, fh)
    proc = subprocess.run([writer, json_path], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{writer} {json_path} failed ({proc.returncode}): {proc.stderr}")


# ---- The fixture suite ------------------------------------------------------------------
# Every figure below is referenced by a hand computation in the tests.

def _train_steps(samples_per_s, seq_len, losses, wall_s=1.0, fwd=0.3, bwd=0.5, opt=0.1,
                 exposed=0.05, warmup_first=True):
    """One warm-up step (values that would distort every statistic: 1 sample/s, loss 99)
    followed by one step per loss. samples/s go -1, +1, -1, ... around samples_per_s (0 for
    an odd last step), so their median and mean over the timed steps are exactly samples_per_s."""
    steps = []
    if warmup_first:
        steps.append(dict(step=0, warmup=True, wall_s=9.0, forward_s=3, backward_s=3,
                          optimizer_s=1, comm_exposed_s=1, loss=99.0, samples_per_s=1.0,
                          tokens_per_s=float(seq_len)))
    paired = 2 * (len(losses) // 2)
    for i, loss in enumerate(losses):
        sps = samples_per_s + ((-1.0 if i % 2 == 0 else 1.0) if i < paired else 0.0)
        steps.append(dict(step=len(steps), wall_s=wall_s, forward_s=fwd, backward_s=bwd,
                          optimizer_s=opt, comm_exposed_s=exposed, loss=loss, grad_norm=1.0,
                          samples_per_s=sps, tokens_per_s=sps * seq_len, mfu=0.4))
    return steps


def _ranks(world, param, grad, optim, gathered):
    return [dict(rank=r, host="localhost", param_bytes=param, grad_bytes=grad,
                 optim_bytes=optim, gathered_bytes=gathered,
                 model_state_bytes=param + grad + optim,
                 peak_model_state_bytes=param + grad + optim + gathered,
                 peak_rss_bytes=10 * (param + grad + optim + gathered)) for r in range(world)]


def _fsdp_comm(world, steps, gather_logical, gather_wire, rs_logical, rs_wire):
    """Per step per rank: one parameter all-gather and one gradient reduce-scatter; step 0
    (the warm-up) also broadcasts 1 MB of initial parameters, which per-step figures of timed
    steps must leave out."""
    ev = [dict(step=0, rank=r, op="broadcast", group="world", kind="other",
               logical_bytes=1_000_000, wire_bytes=1_000_000, start_s=0.0, duration_s=0.1)
          for r in range(world)]
    for s in steps:
        for r in range(world):
            ev.append(dict(step=s, rank=r, op="all_gather", group="world",
                           kind="param_all_gather", logical_bytes=gather_logical,
                           wire_bytes=gather_wire, start_s=0.0, duration_s=0.01))
            ev.append(dict(step=s, rank=r, op="reduce_scatter", group="world",
                           kind="grad_reduce_scatter", logical_bytes=rs_logical,
                           wire_bytes=rs_wire, start_s=0.0, duration_s=0.02))
    return ev


def _cfg(**kw):
    base = dict(model="gpt2-tiny", task="train", strategy="full_shard", compression="none",
                quantization="none", attention="naive", dtype="fp32", world=2, threads=1,
                batch=8, seq=128, steps=6, warmup=1, seed=1, repetitions=1, repetition=0)
    base.update(kw)
    return base


# Alpha-beta ground truth of the micro point: t = alpha + beta * wire_bytes.
ALPHA_BETA = {"all_reduce": (5e-6, 1e-10), "all_gather": (2e-6, 2e-10)}
MICRO_SIZES = [1 << k for k in range(10, 25, 2)]  # 1 KiB .. 16 MiB


def fixture_points():
    """The fixture suite as (index, id, name, kwargs for write_point) in expansion order."""
    P = []

    def add(pid, name, config, **kw):
        P.append((len(P), pid, name, dict(config=config, **kw)))

    # Paper: BERT-Large inference, fp32 baseline vs int8-dynamic. Steps are batches.
    # The paper's workload (offline: batches of 8 x 128, each timed) on a trained checkpoint,
    # which the latency and accuracy rows need to compare like with like.
    inf = dict(model="bert-large", task="infer", strategy="no_shard", world=1, batch=8,
               scenario="offline", checkpoint="ckpt/bert-large.safetensors")
    base_lat, opt_lat = [0.190, 0.180, 0.185], [0.044, 0.040, 0.042]

    def infer_steps(lat):
        return [dict(step=0, warmup=True, wall_s=2.0)] + \
            [dict(step=i + 1, wall_s=w, samples_per_s=8 / w, tokens_per_s=8 * 128 / w)
             for i, w in enumerate(lat)]

    def queries(scale):
        q = [dict(scenario="single-stream", query=i, issue_s=float(i), samples=1,
                  latency_s=scale * (1 + i / 10.0)) for i in range(10)]
        q += [dict(scenario="offline", query=i, issue_s=0.0, samples=8,
                   latency_s=scale * 8 * (1 + i / 20.0)) for i in range(10)]
        return q

    add("a0000001", "bert-large/infer/none", _cfg(quantization="none", **inf),
        reference={"latency_ms": 185, "memory_gb": 3.2},
        steps=infer_steps(base_lat), ranks=_ranks(1, 1_340_000_000, 0, 0, 0),
        queries=queries(0.02), scalars={"model_bytes": 1.34e9, "mlm_accuracy": 0.600,
                                        "latency_p50_s": 0.185})
    add("a0000002", "bert-large/infer/int8-dynamic", _cfg(quantization="int8-dynamic", **inf),
        baseline_id="a0000001",
        reference={"latency_ms": 42, "memory_gb": 0.8, "accuracy_delta_pct": 0.5},
        steps=infer_steps(opt_lat), ranks=_ranks(1, 402_000_000, 0, 0, 0),
        queries=queries(0.005), scalars={"model_bytes": 0.402e9, "mlm_accuracy": 0.597,
                                         "latency_p50_s": 0.042})

    # Paper: training throughput, baseline vs optimized, 4 repetitions each.
    tr = dict(model="bert-large", task="train", world=2, steps=4, repetitions=4)
    for rep, sps in enumerate([30, 31, 32, 33]):
        add(f"b00000{rep}0", f"bert-large/no_shard/r{rep}",
            _cfg(strategy="no_shard", repetition=rep, **tr),
            baseline_id="", reference={"samples_per_s": 32},
            steps=_train_steps(sps, 128, [3.0, 2.9, 2.8]), ranks=_ranks(2, 100, 100, 200, 0))
    for rep, sps in enumerate([120, 122, 124, 126]):
        add(f"b00000{rep}1", f"bert-large/full_shard/r{rep}",
            _cfg(strategy="full_shard", repetition=rep, **tr),
            baseline_id=f"b00000{rep}0", reference={"samples_per_s": 124},
            steps=_train_steps(sps, 128, [3.0, 2.9, 2.8]), ranks=_ranks(2, 50, 50, 100, 25))

    # Compression policies on gpt2-tiny full_shard at 2 ranks (also the w2 scaling point).
    loss_none = [4.0, 3.0, 2.5, 2.2, 2.1, 2.0]
    loss_naive = [4.0, 3.1, 2.7, 2.4, 2.2, 2.1]
    loss_hybrid = [4.0, 3.0, 2.5, 2.2, 2.1, 2.005]
    flops = {"model_flops_per_token": 6e6}
    # Collectives in steps 0..6; step 0 is the warm-up, left out of per-step bytes.
    add("c0000000", "gpt2-tiny/full_shard/none/w2", _cfg(compression="none"),
        steps=_train_steps(100, 128, loss_none), ranks=_ranks(2, 1000, 1000, 2000, 500),
        comm=_fsdp_comm(2, range(0, 7), 4000, 4000, 4000, 4000), scalars=flops,
        series={"eval_loss": [3.5, 2.6, 2.05]})
    add("c0000001", "gpt2-tiny/full_shard/naive/w2", _cfg(compression="naive"),
        baseline_id="c0000000",
        reference={"tflops_gain_pct": 22.5, "samples_gain_pct": 23.6, "reached_baseline_loss": 0},
        steps=_train_steps(123.6, 128, loss_naive), ranks=_ranks(2, 1000, 1000, 2000, 500),
        comm=_fsdp_comm(2, range(0, 7), 4000, 1000, 4000, 1000), scalars=flops)
    add("c0000002", "gpt2-tiny/full_shard/hybrid/w2", _cfg(compression="hybrid"),
        baseline_id="c0000000",
        reference={"tflops_gain_pct": 17.3, "samples_gain_pct": 12.7, "reached_baseline_loss": 1},
        steps=_train_steps(112.7, 128, loss_hybrid), ranks=_ranks(2, 1000, 1000, 2000, 500),
        comm=_fsdp_comm(2, range(0, 7), 4000, 2000, 4000, 400), scalars=flops)

    # Scaling: full_shard at 1 and 4 ranks (2 ranks is c0000000), no_shard at 1 and 2.
    add("d0000001", "gpt2-tiny/full_shard/none/w1", _cfg(world=1),
        steps=_train_steps(55, 128, loss_none), ranks=_ranks(1, 2000, 2000, 4000, 0))
    add("d0000004", "gpt2-tiny/full_shard/none/w4", _cfg(world=4),
        steps=_train_steps(180, 128, loss_none), ranks=_ranks(4, 500, 500, 1000, 500))
    add("e0000001", "gpt2-tiny/no_shard/none/w1", _cfg(strategy="no_shard", world=1),
        steps=_train_steps(60, 128, loss_none), ranks=_ranks(1, 2000, 2000, 4000, 0))
    add("e0000002", "gpt2-tiny/no_shard/none/w2", _cfg(strategy="no_shard", world=2),
        steps=_train_steps(90, 128, loss_none), ranks=_ranks(2, 2000, 2000, 4000, 0))

    # Micro-benchmark: collectives over sizes, durations exactly on the alpha-beta line.
    ev = []
    for op, (alpha, beta) in ALPHA_BETA.items():
        for i, n in enumerate(MICRO_SIZES):
            for r in range(2):
                ev.append(dict(step=i, rank=r, op=op, group="world", kind="other",
                               logical_bytes=n, wire_bytes=n, start_s=float(i),
                               duration_s=alpha + beta * n))
    add("f0000000", "micro/collectives/w2", _cfg(task="micro", model="none"), comm=ev)

    # Serving: static and continuous batching at one rate (tests/analysis/test_serving.py
    # checks goodput on its own sweeps).
    for k, policy in enumerate(["static", "continuous"]):
        reqs = [dict(request=i, arrival_s=0.1 * i, prompt_tokens=16, output_tokens=8,
                     ttft_s=0.02 * (i + 1 + k), tpot_s=0.004 * (1 + k), e2e_s=0.05)
                for i in range(6)]
        add(f"90000{k:03d}", f"gpt2-tiny/serve/{policy}",
            _cfg(task="serve", serve_policy=policy, request_rate=10.0, world=1,
                 strategy="no_shard", slo_ttft_ms=100.0, slo_tpot_ms=10.0),
            requests=reqs, serve_steps=[dict(step=i, start_s=0.01 * i, decode_rows=1 + i % 4)
                                        for i in range(10)],
            scalars=dict(slo_attainment=1.0 - 0.1 * k, ttft_p50_s=0.05, ttft_p99_s=0.1,
                         tpot_p50_s=0.004, tpot_p99_s=0.006, output_tokens_per_s=80.0,
                         requests_served=6, requests_refused=0))
    return P


# A collective micro-benchmark suite as suite/collectives.toml expands it: 5 operations x
# up to 5 implementations (21 points), each time t = alpha + beta * bytes times a spread of
# 0.8 to 1.2 over 5 calls per size and one call 5x slower (a preempted rank): the medians
# lie on the line, the min-max bars show the spread.
COLLECTIVE_OPS = ["all_gather", "reduce_scatter", "all_reduce", "broadcast", "all_to_all"]
COLLECTIVE_IMPLS = {"mpi": (3e-6, 1e-10), "ours": (4e-6, 1e-10), "ours-async": (6e-6, 1.1e-10),
                    "int8": (8e-6, 0.3e-10), "topk": (10e-6, 0.05e-10)}
CALL_SPREAD = [0.8, 0.9, 1.0, 1.0, 1.2, 5.0]  # per rank and size; median 1.0


def collective_points():
    """The collectives suite's points as (index, id, name, kwargs for write_point)."""
    P = []
    for op in COLLECTIVE_OPS:
        for impl, (alpha, beta) in COLLECTIVE_IMPLS.items():
            if op in ("broadcast", "all_to_all") and impl in ("int8", "topk"):
                continue  # the suite's [[exclude]]
            ev = [dict(step=i, rank=r, op=op, group="world", kind="other", logical_bytes=n,
                       wire_bytes=n, start_s=float(i), duration_s=(alpha + beta * n) * f)
                  for i, n in enumerate(MICRO_SIZES) for r in range(2) for f in CALL_SPREAD]
            cfg = _cfg(task="micro", model="gpt2-tiny", steps=1, warmup=0)
            cfg.update({"micro.op": op, "micro.impl": impl})
            P.append((len(P), f"c0{len(P):06d}", f"{op}/{impl}", dict(config=cfg, comm=ev)))
    return P


def write_points(folder, points, writer=None):
    """Writes (index, id, name, kwargs) points under folder/points, numbered in list order,
    through the C++ writer when given (as write_fixture)."""
    pts = os.path.join(folder, "points")
    recs = [point_record(os.path.join(pts, f"{i}-{pid}.h5"), index=i, point_id=pid, name=name,
                         **kw) for i, (_, pid, name, kw) in enumerate(points)]
    write_records(recs, writer, os.path.join(folder, "fixture.json"))


def write_fixture(results_dir, with_problems=True, writer=None):
    """Writes the fixture suite under results_dir/points, with h5py or (writer given) the
    C++ writer. with_problems adds a failed point, a corrupt file, an unfinished write and
    an index gap (a missing point)."""
    pts = os.path.join(results_dir, "points")
    os.makedirs(pts, exist_ok=True)
    P = fixture_points()
    recs = [point_record(os.path.join(pts, f"{i}-{pid}.h5"), index=i, point_id=pid, name=name, **kw)
            for i, pid, name, kw in P]
    if with_problems:
        recs += problem_records(pts, len(P))
    write_records(recs, writer, os.path.join(results_dir, "fixture.json"))
    if with_problems:
        i = len(P)
        with open(os.path.join(pts, f"{i + 1}-c0ffee00.h5"), "wb") as fh:
            fh.write(b"\x89HDF\r\n\x1a\n" + b"\x00garbage" * 64)  # HDF5 magic, then nonsense
        # The C++ writer's temporary name: <final name>.tmp.<pid>.
        with open(os.path.join(pts, f"{i + 2}-7e3a0000.h5.tmp.4242"), "wb") as fh:
            fh.write(b"partial")
    return P


def problem_records(pts, i):
    """A failed point at index i, and a done point at i + 4 so that i + 3 is a visible gap
    (i + 1 and i + 2 are the corrupt and the unfinished files)."""
    return [
        point_record(os.path.join(pts, f"{i}-f0000bad.h5"), index=i, point_id="f0000bad",
                     name="gpt2-tiny/full_shard/none/w8", config=_cfg(world=8), status="failed",
                     failure_reason="rank 3 on localhost: out of memory "
                                    "(workloads/fsdp/full_shard.cpp:88)"),
        point_record(os.path.join(pts, f"{i + 4}-0dd00000.h5"), index=i + 4,
                     point_id="0dd00000", name="gpt2-tiny/full_shard/none/w3",
                     config=_cfg(world=3), steps=_train_steps(140, 128, [2.0, 1.9, 1.8]),
                     ranks=_ranks(3, 700, 700, 1400, 300)),
    ]


if __name__ == "__main__":
    write_fixture(sys.argv[1] if len(sys.argv) > 1 else "results/fixture")
