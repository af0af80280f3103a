# The results index: every completed point of every sweep under a root folder, in one SQLite
# file (ROOT/index.sqlite), rebuilt from the HDF5 files on demand: a file is (re)read when it
# is new or its size or mtime changed, and rows of files that are gone are dropped. The HDF5
# files stay the truth; the index is a cache that can always be deleted.
#   shardbench query results "SELECT ... FROM points ..."      (analysis.index)
#   pandas: pd.read_sql("SELECT * FROM points", sqlite3.connect("results/index.sqlite"))
# Table `points`: one row per done point file: file, folder, point_id, point_name, suite,
# git_commit, start_time, end_time, hosts, cpu_model, flags, config (JSON, query it with
# json_extract(config, '$.strategy')), one column per summary metric (docs/METRICS.md), and
# versions / machine (JSON).
import argparse
import json
import os
import sqlite3
import sys

import pandas as pd

from analysis import conditions as cond_mod
from analysis.load import load_results
from analysis.metrics import SUMMARY_COLUMNS, summarize

INDEX_NAME = "index.sqlite"
METRIC_COLUMNS = [c for c in SUMMARY_COLUMNS if c not in ("point_id", "accuracy_metric")]
COLUMNS = (["file", "folder", "point_id", "point_name", "suite", "git_commit", "start_time",
            "end_time", "hosts", "cpu_model", "flags", "config", "versions", "machine"]
           + METRIC_COLUMNS)


def _result_folders(root):
    """Folders under root that hold points/*.h5 (each a sweep's results folder)."""
    for d, subdirs, files in os.walk(root):
        subdirs[:] = [s for s in subdirs if s not in ("report", "logs")]
        if os.path.basename(d) == "points" and any(f.endswith(".h5") for f in files):
            yield os.path.dirname(d)


def _stamp(path):
    st = os.stat(path)
    return f"{st.st_size}:{st.st_mtime_ns}"


def _connect(path):
    db = sqlite3.connect(path)
    cols = ", ".join(f'"{c}"' for c in COLUMNS)
    db.execute(f"CREATE TABLE IF NOT EXISTS points ({cols}, PRIMARY KEY (file))")
    db.execute("CREATE TABLE IF NOT EXISTS files (file TEXT PRIMARY KEY, stamp TEXT)")
    return db


def _rows(folder):
    """Index rows of a results folder's done points, keyed by absolute file path."""
    res = load_results(folder)
    summary = summarize(res)
    conds = cond_mod.conditions(res).set_index("point_id")
    rows = {}
    for _, p in res.done().iterrows():
        pid = p["point_id"]
        f = os.path.abspath(os.path.join(folder, "points", p["file"]))
        m = summary.loc[pid]
        rows[f] = {
            "file": f, "folder": os.path.abspath(folder), "point_id": pid,
            "point_name": p["point_name"], "suite": p["suite"], "git_commit": p["git_commit"],
            "start_time": p["start_time"], "end_time": p.get("end_time", ""), "hosts": p["hosts"],
            "cpu_model": conds.loc[pid, "cpu_model"], "flags": conds.loc[pid, "flags"],
            "config": json.dumps(res.config.get(pid, {}), sort_keys=True),
            "versions": p["versions"], "machine": p.get("machine", "{}"),
            **{c: (None if pd.isna(m[c]) else float(m[c])) for c in METRIC_COLUMNS}}
    return rows


def update(root):
    """Brings ROOT/index.sqlite up to date; returns (path, files read, rows dropped)."""
    path = os.path.join(root, INDEX_NAME)
    db = _connect(path)
    known = dict(db.execute("SELECT file, stamp FROM files"))
    seen, read = set(), 0
    for folder in _result_folders(root):
        pdir = os.path.join(folder, "points")
        files = {os.path.abspath(os.path.join(pdir, n)): None for n in os.listdir(pdir)
                 if n.endswith(".h5")}
        for f in files:
            files[f] = _stamp(f)
        seen |= set(files)
        if all(known.get(f) == s for f, s in files.items()):
            continue  # nothing new in this folder
        rows = _rows(folder)  # a folder is read as a whole: baselines and manifests span it
        for f, stamp in files.items():
            db.execute("DELETE FROM points WHERE file = ?", (f,))
            if f in rows:
                r = rows[f]
                db.execute(f"INSERT INTO points VALUES ({', '.join('?' * len(COLUMNS))})",
                           [r[c] for c in COLUMNS])
            db.execute("INSERT OR REPLACE INTO files VALUES (?, ?)", (f, stamp))
            read += 1
    gone = [f for f in known if f not in seen]
    for f in gone:
        db.execute("DELETE FROM points WHERE file = ?", (f,))
        db.execute("DELETE FROM files WHERE file = ?", (f,))
    db.commit()
    db.close()
    return path, read, len(gone)


def query(root, sql):
    """Runs sql against the up-to-date index; returns a DataFrame."""
    path, _, _ = update(root)
    with sqlite3.connect(path) as db:
        return pd.read_sql_query(sql, db)


def main(argv=None, out=sys.stdout):
    ap = argparse.ArgumentParser(prog="shardbench query",
                                 description="SQL over every done point under a results root "
                                             "(the index, ROOT/index.sqlite, is refreshed first)")
    ap.add_argument("root", help="folder holding results folders (e.g. results/)")
    ap.add_argument("sql", nargs="?", default=None,
                    help="a query over table `points` (default: a short listing)")
    ap.add_argument("--rebuild", action="store_true", help="delete the index and read every file")
    ap.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    a = ap.parse_args(argv)
    if not os.path.isdir(a.root):
        print(f"shardbench query: {a.root}: no such folder", file=sys.stderr)
        return 2
    if a.rebuild and os.path.exists(os.path.join(a.root, INDEX_NAME)):
        os.remove(os.path.join(a.root, INDEX_NAME))
    sql = a.sql or ("SELECT suite, point_name, git_commit, start_time, step_time_s, tokens_per_s "
                    "FROM points ORDER BY start_time")
    try:
        df = query(a.root, sql)
    except (sqlite3.Error, pd.errors.DatabaseError) as e:
        print(f"shardbench query: {e}\n  columns of table points: {', '.join(COLUMNS)}",
              file=sys.stderr)
        return 2
    print(df.to_csv(index=False) if a.csv else df.to_string(index=False), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
