# The report as one self-contained HTML page, from render's blocks: a table of contents,
# tables a reader can sort and filter (plain JavaScript in the page; it must open offline, from
# a cluster's file system), bytes and times in human units with the raw value kept in a
# data-v attribute for numeric sorting, provenance as a small key/value table, CSV names as
# links to the files beside the page, plots embedded as base64 PNG.
import base64
import collections
import html
import json
import os
import re

import numpy as np

from analysis import units

CSS = """body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
nav.toc{border:1px solid #ccc;background:#fafafa;padding:0.5em 1.5em;margin:1em 0 2em}
nav.toc ul{margin:0.2em 0;padding-left:1.2em}
.tbl{overflow-x:auto;margin:0.5em 0 1.5em}
table{border-collapse:collapse;font-size:0.85em}
table.data{width:max-content}
th,td{border:1px solid #bbb;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#eee}
.num{text-align:right;font-variant-numeric:tabular-nums}
table.data th{cursor:pointer;user-select:none}
table.data th[aria-sort=ascending]::after{content:" \\25B2"}
table.data th[aria-sort=descending]::after{content:" \\25BC"}
input.filter{margin:0.3em 0;padding:2px 4px;width:18em}
span.shown{color:#666;font-size:0.85em;margin-left:0.6em}
table.prov{font-size:0.8em}
figure{margin:1em 0 2em}img{max-width:100%;border:1px solid #ddd}
figcaption{font-style:italic;color:#444}
details{margin:0.5em 0 1.5em}summary{cursor:pointer;color:#333}"""

# Sorting and filtering. A cell's sort key is its data-v (raw number) when it has one, else
# its text; empty cells sort last in both directions so that gaps do not hide the extremes.
# The filter boxes are made here, not in the HTML, so that a page without script shows none;
# tables of a few rows get none (there is nothing to find).
SCRIPT = r"""(function () {
  var MIN_FILTER_ROWS = 5;
  function key(td) {
    if (!td) return null;
    var v = td.getAttribute('data-v');
    if (v !== null && v !== '') return parseFloat(v);
    var t = td.textContent.trim();
    return t === '' ? null : t;
  }
  function cmp(a, b) {
    if (typeof a === 'number' && typeof b === 'number') return a - b;
    return String(a).localeCompare(String(b), undefined, {numeric: true});
  }
  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    var dir = th.getAttribute('aria-sort') === 'ascending' ? -1 : 1;
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (r1, r2) {
      var a = key(r1.cells[col]), b = key(r2.cells[col]);
      if (a === null || b === null) return (a === null) - (b === null);
      return dir * cmp(a, b);
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) {
      h.removeAttribute('aria-sort');
    });
    th.setAttribute('aria-sort', dir === 1 ? 'ascending' : 'descending');
  }
  function filter(table, text, shown) {
    var q = text.toLowerCase(), n = 0, rows = table.tBodies[0].rows;
    Array.prototype.forEach.call(rows, function (r) {
      var hit = r.textContent.toLowerCase().indexOf(q) >= 0;
      r.hidden = !hit;
      if (hit) n++;
    });
    shown.textContent = n + ' of ' + rows.length + ' rows';
  }
  function addFilter(table) {
    var input = document.createElement('input'), shown = document.createElement('span');
    input.type = 'search';
    input.className = 'filter';
    input.placeholder = 'filter rows';
    shown.className = 'shown';
    table.parentNode.parentNode.insertBefore(input, table.parentNode);
    input.insertAdjacentElement('afterend', shown);
    filter(table, '', shown);
    input.addEventListener('input', function () { filter(table, input.value, shown); });
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.data'), function (table) {
    if (table.tBodies[0].rows.length > MIN_FILTER_ROWS) addFilter(table);
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.tabIndex = 0;
      th.title = 'sort';
      th.addEventListener('click', function () { sortBy(table, col, th); });
      th.addEventListener('keydown', function (e) {
        if (e.key === 'Enter') sortBy(table, col, th);
      });
    });
  });
})();"""

PROVENANCE_COLUMNS = {"suite", "suite_sha256", "git_commit", "versions", "hosts"}
CSV_NAME = re.compile(r"\btables/[\w.-]+\.csv\b")


def _anchors(blocks):
    """An id per h2/h3 block (by index), unique within the page."""
    ids, seen = {}, collections.Counter()
    for i, b in enumerate(blocks):
        if b[0] in ("h2", "h3"):
            base = re.sub(r"[^a-z0-9]+", "-", b[1].lower()).strip("-") or "section"
            seen[base] += 1
            ids[i] = base if seen[base] == 1 else f"{base}-{seen[base]}"
    return ids


def _toc(blocks, ids):
    """Nested list of the h2 sections and their h3 subsections."""
    out, open_li, open_sub = ["<nav class='toc' id='contents'><strong>Contents</strong><ul>"], \
        False, False
    for i, b in enumerate(blocks):
        if i not in ids:
            continue
        link = f"<a href='#{ids[i]}'>{html.escape(b[1])}</a>"
        if b[0] == "h3":
            out.append(("" if open_sub else "<ul>") + f"<li>{link}</li>")
            open_sub = True
            continue
        out.append(("</ul>" if open_sub else "") + ("</li>" if open_li else "") + f"<li>{link}")
        open_li, open_sub = True, False
    out.append(("</ul>" if open_sub else "") + ("</li>" if open_li else "") + "</ul></nav>")
    return "".join(out)


def _raw(v):
    """A number as data-v: every digit (the text shows 4), in a form parseFloat reads."""
    f = float(v)
    if f != f:
        return ""
    if f in (float("inf"), float("-inf")):
        return "Infinity" if f > 0 else "-Infinity"
    return str(int(v)) if isinstance(v, (int, np.integer)) else repr(f)


def _cell(v, unit):
    """A <td>: numbers right-aligned with their raw value in data-v (and as a tooltip when
    the text is in a human unit); text left-aligned."""
    text = html.escape(units.human(v, unit))
    if not units.is_number(v):
        return f"<td>{text}</td>"
    raw = _raw(v)
    if not raw:  # NaN: an empty cell, sorted last
        return "<td class='num'></td>"
    tip = f" title='{raw}'" if unit is not None else ""
    return f"<td class='num' data-v='{raw}'{tip}>{text}</td>"


def _table(df):
    cols = [str(c) for c in df.columns]
    col_units = [units.column_unit(c) for c in cols]
    metric = cols.index("metric") if "metric" in cols else None
    rows = list(df.itertuples(index=False))
    numeric = [any(units.is_number(r[j]) for r in rows) and
               all(units.is_number(r[j]) or r[j] is None for r in rows) for j in range(len(cols))]
    head = "".join(f"<th{' class=num' if numeric[j] else ''}>{html.escape(c)}</th>"
                   for j, c in enumerate(cols))
    body = []
    for r in rows:
        # Comparisons: the value columns carry the unit of the row's metric.
        row_unit = units.metric_label_unit(r[metric]) if metric is not None else None
        body.append("<tr>" + "".join(
            _cell(v, row_unit if cols[j] in units.METRIC_VALUE_COLUMNS else col_units[j])
            for j, v in enumerate(r)) + "</tr>")
    return (f"<div class='tbl'><table class='data'><thead><tr>{head}</tr></thead><tbody>"
            + "\n".join(body) + "</tbody></table></div>")


def _provenance_value(col, v):
    """versions: one row per library; hosts: each host with its rank count."""
    if col == "hosts":
        try:
            counts = collections.Counter(json.loads(v))
            return [("hosts", ", ".join(f"{h} x {n}" for h, n in counts.items()))]
        except (TypeError, ValueError):
            pass
    if col == "versions":
        try:
            return [(k, str(x)) for k, x in json.loads(v).items()]
        except (TypeError, ValueError, AttributeError):
            pass
    return [(col, units.fmt(v))]


def _provenance(df):
    """Transposed: one row per field, one column per distinct combination (usually one)."""
    builds = [dict(zip(df.columns, r)) for r in df.itertuples(index=False)]
    fields = collections.OrderedDict()
    for i, b in enumerate(builds):
        for col, v in b.items():
            for name, text in _provenance_value(col, v):
                fields.setdefault(name, [""] * len(builds))[i] = text
    # Points of different world sizes differ in hosts, so several columns need not mean
    # several builds; the report warns separately when commits or suite files differ.
    heads = ["value"] if len(builds) == 1 else [f"#{i + 1}" for i in range(len(builds))]
    out = ["<table class='prov'><tr><th>field</th>" +
           "".join(f"<th>{h}</th>" for h in heads) + "</tr>"]
    out += [f"<tr><th>{html.escape(name)}</th>" +
            "".join(f"<td>{html.escape(t)}</td>" for t in vals) + "</tr>"
            for name, vals in fields.items()]
    return "".join(out) + "</table>"


def _paragraph(text):
    """Escaped text with every tables/<name>.csv made a link to the file beside the page."""
    out, pos = [], 0
    for m in CSV_NAME.finditer(text):
        out.append(html.escape(text[pos:m.start()]))
        name = html.escape(m.group(0))
        out.append(f"<a href='{name}'>{name}</a>")
        pos = m.end()
    return "<p>" + "".join(out) + html.escape(text[pos:]) + "</p>"


def _figure(path, caption):
    with open(path, "rb") as fh:
        data = base64.b64encode(fh.read()).decode("ascii")
    name = os.path.basename(path)
    return (f"<figure><img alt='{html.escape(caption)}' data-file='{name}' "
            f"src='data:image/png;base64,{data}'><figcaption>{html.escape(caption)}"
            f"</figcaption></figure>")


def page(blocks, title):
    ids = _anchors(blocks)
    out = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
           f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"]
    toc_done = False
    for i, b in enumerate(blocks):
        kind = b[0]
        if kind in ("h2", "h3") and not toc_done:
            out.append(_toc(blocks, ids))  # after the title and its summary paragraphs
            toc_done = True
        if kind in ("h2", "h3"):
            out.append(f"<{kind} id='{ids[i]}'>{html.escape(b[1])}</{kind}>")
        else:
            out.append(_block(b))
    out.append(f"<script>{SCRIPT}</script></body></html>")
    return "\n".join(out) + "\n"


def _block(b):
    """A block other than h2/h3 (those carry the page's anchors)."""
    kind = b[0]
    if kind == "h1":
        return f"<h1>{html.escape(b[1])}</h1>"
    if kind == "p":
        return _paragraph(b[1])
    if kind == "table":
        prov = PROVENANCE_COLUMNS <= {str(c) for c in b[1].columns}
        return _provenance(b[1]) if prov else _table(b[1])
    if kind == "img":
        return _figure(b[1], b[2])
    if kind == "details":  # collapsed until the reader opens it
        return (f"<details><summary>{html.escape(b[1])}</summary>\n"
                + "\n".join(_block(x) for x in b[2]) + "\n</details>")
    raise ValueError(f"unknown report block {kind!r}")
