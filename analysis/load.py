# Reads RESULTS/points/*.h5 (docs/HDF5_SCHEMA.md) into tidy pandas tables. Never fatal: a
# failed, incomplete, unreadable or missing point becomes a row of `problems` instead.
import json
import os
import re
from dataclasses import dataclass, field

import h5py
import numpy as np
import pandas as pd

from analysis.root_attributes import ROOT_ATTRIBUTES, SCHEMA_VERSION

# The root attributes (analysis/root_attributes.py, generated from the harness's one table of
# them) become each point's row of Results.points, except these JSON objects, which are parsed
# into Results.config (whose keys join the row) and Results.reference.
JSON_ATTRIBUTES = ("config", "reference")
# <index>-<id>.h5, or while being written <index>-<id>.h5.tmp (the schema's name) or
# <index>-<id>.h5.tmp.<pid> (the C++ writer's per-process name).
FILE_RE = re.compile(r"^(\d+)-([^.]+)\.h5(\.tmp(?:\.\d+)?)?$")

# The per-record groups (docs/HDF5_SCHEMA.md). Their columns are read from the file, not
# listed here: every dataset of the group, in the order of the group's `columns` attribute
# (the writer's table order; `shardbench schema` prints it), each with its `unit` and `doc`
# attributes (Results.schema).
RECORD_GROUPS = ["steps", "ranks", "comm", "queries", "requests", "serve_steps", "routing"]
# Groups a file from before the serve task (or the MoE routing trace) lacks: read as empty
# tables, not as a defect.
OPTIONAL_GROUPS = {"requests", "serve_steps", "routing"}
# The columns the analysis (metrics, plots, report) reads from each group. A file without one
# of them is listed as unreadable, naming the column, rather than failing inside a metric:
# "datasets missing" when the file's `columns` say it was written (a damaged file), "the
# shardbench that wrote this file did not record it" when they do not (a file from another
# version). tests/analysis/test_schema_columns.py checks that the harness writes each of them
# and that the analysis reads no column of a record group that is not listed here.
REQUIRED_COLUMNS = {
    "steps": ["step", "warmup", "wall_s", "forward_s", "backward_s", "optimizer_s",
              "comm_exposed_s", "loss", "tokens_per_s", "samples_per_s", "mfu"],
    "ranks": ["param_bytes", "grad_bytes", "optim_bytes", "gathered_bytes",
              "model_state_bytes", "peak_model_state_bytes", "peak_rss_bytes"],
    "comm": ["step", "op", "group", "kind", "logical_bytes", "wire_bytes", "duration_s"],
    "queries": ["scenario", "issue_s", "latency_s", "samples"],
    "requests": ["request", "arrival_s", "output_tokens", "refused", "ttft_s", "tpot_s"],
    "serve_steps": ["start_s", "decode_rows"],
    "routing": ["step", "rank", "layer", "token", "expert"],
}
SCHEMA_COLUMNS = ["group", "column", "dtype", "unit", "doc"]
PROBLEM_COLUMNS = ["point_index", "point_id", "file", "kind", "reason"]


@dataclass
class Results:
    """Everything found under one results folder. Record tables carry a point_id column."""
    root: str
    points: pd.DataFrame      # one row per readable file: identity, status, config keys
    steps: pd.DataFrame
    ranks: pd.DataFrame
    comm: pd.DataFrame
    queries: pd.DataFrame
    scalars: pd.DataFrame     # point_id, name, value
    series: pd.DataFrame      # point_id, name, i, value
    texts: pd.DataFrame       # point_id, name, value
    problems: pd.DataFrame    # PROBLEM_COLUMNS
    config: dict = field(default_factory=dict)     # point_id -> config dict
    reference: dict = field(default_factory=dict)  # point_id -> reference dict
    # The record columns as the files describe them (SCHEMA_COLUMNS): group, column, dtype
    # ("string" or numpy's name), unit and doc ("" in files written before they were stored).
    schema: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SCHEMA_COLUMNS))
    requests: pd.DataFrame = field(default_factory=pd.DataFrame)     # serve: one row per request
    serve_steps: pd.DataFrame = field(default_factory=pd.DataFrame)  # serve: one row per step
    routing: pd.DataFrame = field(default_factory=pd.DataFrame)  # MoE: token x MoE layer

    def done(self):
        """Points whose file is complete and whose status is `done`: the only ones measured."""
        return self.points[self.points["status"] == "done"]

    def scalar(self, point_id, name, default=np.nan):
        s = self.scalars
        hit = s[(s["point_id"] == point_id) & (s["name"] == name)]
        return float(hit["value"].iloc[0]) if len(hit) else default


def _text(v):
    """An attribute as printable text. Files written before reasons were sanitized may hold
    bytes that are not UTF-8 (h5py then hands back bytes, or str with surrogate escapes):
    replace them rather than fail later when the report is written."""
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    s = str(v)
    return s.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


def _read_column(ds):
    if h5py.check_string_dtype(ds.dtype) is not None:
        return np.array(ds.asstr()[()], dtype=object)
    return ds[()]


def _column_order(g, group):
    """The group's column names in the writer's order: its `columns` attribute; in files
    written before it, the columns the analysis reads first (in their order), then the rest."""
    present = [k for k, v in g.items() if isinstance(v, h5py.Dataset)]
    if "columns" in g.attrs:
        declared = [_text(c) for c in g.attrs["columns"]]
        absent = [c for c in declared if c not in g]
        if absent:
            raise ValueError(f"/{group}: datasets missing: {', '.join(absent)}")
        return declared + [c for c in present if c not in declared], True
    absent = [c for c in REQUIRED_COLUMNS[group] if c not in g]
    if absent:  # no list of what was written: a damaged file and an old one look alike
        raise ValueError(f"/{group}: datasets missing: {', '.join(absent)}")
    first = REQUIRED_COLUMNS[group]
    return first + sorted(c for c in present if c not in first), False


def _read_group(f, group, pid):
    """(table, schema rows) of one record group: every column the file has."""
    if group not in f:
        if group in OPTIONAL_GROUPS:  # written before the serve task existed: no rows
            empty = pd.DataFrame(columns=["point_id"] + REQUIRED_COLUMNS[group])
            return empty, []
        raise ValueError(f"/{group}: group missing (docs/HDF5_SCHEMA.md: always present)")
    g = f[group]
    order, declared = _column_order(g, group)
    older = [c for c in REQUIRED_COLUMNS[group] if c not in order]
    if declared and older:
        them = "it" if len(older) == 1 else "them"
        raise ValueError(
            f"/{group}: no column {', '.join(older)}, which the analysis needs: the shardbench "
            f"that wrote this file did not record {them} (it wrote {', '.join(order)}); rerun "
            f"the point with this one")
    cols = {c: _read_column(g[c]) for c in order}
    lengths = {len(v) for v in cols.values()}
    if len(lengths) > 1:
        raise ValueError(f"/{group}: datasets of unequal length {sorted(lengths)}")
    df = pd.DataFrame(cols)
    df.insert(0, "point_id", pid)
    schema = [(group, c, _dtype_name(g[c]), _text(g[c].attrs.get("unit", "")),
               _text(g[c].attrs.get("doc", ""))) for c in order]
    return df, schema


def _dtype_name(ds):
    # The names `shardbench schema --json` uses.
    return "string" if h5py.check_string_dtype(ds.dtype) is not None else ds.dtype.name


def _attribute(dtype, v):
    return _text(v) if dtype == "string" else float(v) if dtype == "float64" else int(v)


def _root_attributes(attrs):
    """Every root attribute of ROOT_ATTRIBUTES, typed; one added after a file was written (not
    `always`) reads as its default there (machine: "{}", conditions unknown). The version is
    checked first: another version's file may lack or mean other attributes."""
    version = int(attrs["schema_version"])
    if version != SCHEMA_VERSION:
        raise ValueError(f"schema_version {version}, this analysis reads {SCHEMA_VERSION}")
    missing = [a.name for a in ROOT_ATTRIBUTES if a.always and a.name not in attrs]
    if missing:
        raise ValueError(f"root attributes missing: {', '.join(missing)}")
    return {a.name: _attribute(a.dtype, attrs[a.name]) if a.name in attrs else a.default
            for a in ROOT_ATTRIBUTES}


def read_point(path):
    """One point file -> identity, config, reference, record tables, scalars, series, texts and
    the record columns' schema rows (SCHEMA_COLUMNS). Raises on any defect."""
    with h5py.File(path, "r") as f:
        root = _root_attributes(f.attrs)
        pid = root["point_id"]
        p = {k: v for k, v in root.items() if k not in JSON_ATTRIBUTES}
        p["file"] = os.path.basename(path)
        config = json.loads(root["config"])
        reference = json.loads(root["reference"] or "{}")
        read = {g: _read_group(f, g, pid) for g in RECORD_GROUPS}
        tables = {g: df for g, (df, _) in read.items()}
        schema = [row for _, rows in read.values() for row in rows]
        for g in ("scalars", "series", "texts"):
            if g not in f:
                raise ValueError(f"/{g}: group missing (docs/HDF5_SCHEMA.md: always present)")
        scalars = [(pid, k, float(v)) for k, v in f["scalars"].attrs.items()]
        series = [(pid, k, i, float(x)) for k, ds in f["series"].items()
                  for i, x in enumerate(ds[()])]
        texts = [(pid, k, _text(v)) for k, v in f["texts"].attrs.items()]
    return p, config, reference, tables, scalars, series, texts, schema


def _read_manifest(root):
    """The points listed in RESULTS/manifest.json (written by sweep and submit), or None."""
    try:
        with open(os.path.join(root, "manifest.json")) as fh:
            return list(json.load(fh)["points"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or unreadable: fall back to index gaps


def load_results(root):
    """Loads root/points. Returns Results; problems lists failed, incomplete, unreadable,
    unfinished (.h5.tmp[.pid]), stale (an earlier expansion's index) and missing points (index
    gaps, baselines without a file)."""
    pdir = os.path.join(root, "points")
    if not os.path.isdir(pdir) and os.path.isdir(root):
        pdir = root  # RESULTS/points itself was given
    names = sorted(os.listdir(pdir)) if os.path.isdir(pdir) else []
    problems, rows, configs, refs = [], [], {}, {}
    tables = {g: [] for g in RECORD_GROUPS}
    schema = {}  # (group, column) -> schema row, the first file that has it
    scalars, series, texts = [], [], []
    seen_index, seen_id, final_names = set(), set(), set(n for n in names if n.endswith(".h5"))
    manifest = _read_manifest(root)
    # A point's file from an earlier expansion of an edited suite, whose index has changed: the
    # manifest (the latest expansion) lists the same id at another index. It is listed, not
    # read twice (one point, one row).
    now_at = {mp.get("id", ""): int(mp["index"]) for mp in manifest or []}

    for name in names:
        m = FILE_RE.match(name)
        if not m:
            continue
        index, pid, tmp = int(m.group(1)), m.group(2), bool(m.group(3))
        if pid in now_at and now_at[pid] != index:
            problems.append((index, pid, name, "stale",
                             f"an earlier expansion's file: the suite now has this point at index "
                             f"{now_at[pid]}; delete {name}"))
            continue
        seen_index.add(index)
        seen_id.add(pid)
        if tmp:
            # A rerun may be rewriting a point whose older final file still exists: only a
            # temporary file without a final one means the point has no result yet.
            if name[:name.index(".h5") + 3] not in final_names:
                problems.append((index, pid, name, "unfinished",
                                 "temporary file only: the write never completed"))
            continue
        try:
            p, cfg, ref, tb, sc, se, tx, sch = read_point(os.path.join(pdir, name))
        except Exception as e:  # noqa: BLE001 -- any defect in one file is that file's problem
            problems.append((index, pid, name, "unreadable", f"{type(e).__name__}: {e}"))
            continue
        rows.append({**p, **{k: v for k, v in cfg.items() if k not in p}})
        configs[p["point_id"]], refs[p["point_id"]] = cfg, ref
        seen_id.add(p["point_id"])
        if p["status"] != "done":
            problems.append((p["point_index"], p["point_id"], name, p["status"],
                             p["failure_reason"] or "(no reason recorded)"))
        for g in tables:
            tables[g].append(tb[g])
        for row in sch:
            schema.setdefault(row[:2], row)
        scalars += sc
        series += se
        texts += tx

    # Missing: the suite's points that have no file at all. sweep and submit write every
    # point to RESULTS/manifest.json; without it, indices below the highest one seen (the
    # expansion order has no holes). Then baselines named by a point that have no file.
    if manifest:
        for mp in manifest:
            if int(mp["index"]) not in seen_index:
                problems.append((int(mp["index"]), mp.get("id", ""), "", "missing",
                                 f"no result file for {mp.get('name', '?')} (manifest.json)"))
                seen_id.add(mp.get("id", ""))
    else:
        for i in sorted(set(range(max(seen_index) + 1)) - seen_index) if seen_index else []:
            problems.append((i, "", "", "missing", "no result file for this index"))
    for r in rows:
        b = r["baseline_id"]
        if b and b not in seen_id:
            problems.append((np.nan, b, "", "missing",
                             f"baseline of {r['point_name']} has no result file"))
            seen_id.add(b)

    def frame(parts, group):
        if parts:
            return pd.concat(parts, ignore_index=True)
        return pd.DataFrame(columns=["point_id"] + REQUIRED_COLUMNS[group])

    points = pd.DataFrame(rows)
    if len(points):
        points = points.sort_values("point_index").reset_index(drop=True)
    else:
        points = pd.DataFrame(columns=["point_index", "point_id", "point_name", "status",
                                       "failure_reason", "baseline_id", "world_size", "file"])
    probs = pd.DataFrame(problems, columns=PROBLEM_COLUMNS)
    probs = probs.sort_values(["point_index", "kind"], na_position="last").reset_index(drop=True)
    return Results(
        root=root, points=points,
        steps=frame(tables["steps"], "steps"), ranks=frame(tables["ranks"], "ranks"),
        comm=frame(tables["comm"], "comm"), queries=frame(tables["queries"], "queries"),
        requests=frame(tables["requests"], "requests"),
        serve_steps=frame(tables["serve_steps"], "serve_steps"),
        routing=frame(tables["routing"], "routing"),
        scalars=pd.DataFrame(scalars, columns=["point_id", "name", "value"]),
        series=pd.DataFrame(series, columns=["point_id", "name", "i", "value"]),
        texts=pd.DataFrame(texts, columns=["point_id", "name", "value"]),
        problems=probs, config=configs, reference=refs,
        schema=pd.DataFrame(list(schema.values()), columns=SCHEMA_COLUMNS))
