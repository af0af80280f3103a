# Renders a report, given as a list of blocks, to Markdown and to one self-contained HTML file
# (plots embedded as base64 PNG). Blocks: ("h1"|"h2"|"h3"|"p", text), ("table", DataFrame),
# ("img", path, caption). Numbers are shown to 4 significant digits; the CSVs keep them all.
import base64
import html
import math
import os

import pandas as pd

CSS = """body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.85em}
th,td{border:1px solid #bbb;padding:3px 7px;text-align:right}
th{background:#eee}td:first-child,th:first-child{text-align:left}
figure{margin:1em 0 2em}img{max-width:100%;border:1px solid #ddd}
figcaption{font-style:italic;color:#444}"""


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.4g}"
    return str(v)


def _cells(df):
    rows = [[fmt(v) for v in row] for row in df.itertuples(index=False)]
    return [str(c) for c in df.columns], rows


def to_markdown(blocks, image_dir_rel):
    out = []
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + b[1] + "\n")
        elif kind == "p":
            out.append(b[1] + "\n")
        elif kind == "table":
            head, rows = _cells(b[1])
            esc = [[c.replace("|", "\\|") for c in r] for r in [head] + rows]
            out.append("| " + " | ".join(esc[0]) + " |")
            out.append("|" + "---|" * len(head))
            out += ["| " + " | ".join(r) + " |" for r in esc[1:]]
            out.append("")
        elif kind == "img":
            rel = os.path.join(image_dir_rel, os.path.basename(b[1]))
            out.append(f"![{b[2]}]({rel})\n\n*{b[2]}*\n")
    return "\n".join(out) + "\n"


def to_html(blocks, title):
    out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
           f"</title><style>{CSS}</style></head><body>"]
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2", "h3", "p"):
            out.append(f"<{kind}>{html.escape(b[1])}</{kind}>")
        elif kind == "table":
            head, rows = _cells(b[1])
            out.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) +
                       "</tr>")
            out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                    for r in rows]
            out.append("</table>")
        elif kind == "img":
            with open(b[1], "rb") as fh:
                data = base64.b64encode(fh.read()).decode("ascii")
            name = os.path.basename(b[1])
            out.append(f"<figure><img alt='{html.escape(b[2])}' data-file='{name}' "
                       f"src='data:image/png;base64,{data}'><figcaption>{html.escape(b[2])}"
                       f"</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def empty(df):
    return df is None or (isinstance(df, pd.DataFrame) and len(df) == 0)
