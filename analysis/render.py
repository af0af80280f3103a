# Renders a report, given as a list of blocks, to Markdown and to one self-contained HTML file
# (html_report.py: contents, sortable tables, human units, plots embedded as base64 PNG).
# Blocks: ("h1"|"h2"|"h3"|"p", text), ("table", DataFrame), ("img", path, caption), and
# ("details", summary, [blocks]): a collapsed section (<details>, in Markdown too). Numbers are
# shown to 4 significant digits; the CSVs keep them all.
import html
import os

import pandas as pd

from analysis import html_report
from analysis.units import fmt


def _cells(df):
    rows = [[fmt(v) for v in row] for row in df.itertuples(index=False)]
    return [str(c) for c in df.columns], rows


def to_markdown(blocks, image_dir_rel):
    out = []
    for b in blocks:
        if b[0] == "details":
            # GitHub and most viewers render the HTML element; a blank line lets Markdown
            # inside it be read as Markdown.
            out.append(f"<details><summary>{html.escape(b[1])}</summary>\n")
            out.append(to_markdown(b[2], image_dir_rel))
            out.append("</details>\n")
            continue
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + b[1] + "\n")
        elif kind == "p":
            # CSV names as links: they lie beside report.md, as beside report.html.
            out.append(html_report.CSV_NAME.sub(lambda m: f"[{m[0]}]({m[0]})", b[1]) + "\n")
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
    """One self-contained page (analysis/html_report.py)."""
    return html_report.page(blocks, title)


def empty(df):
    return df is None or (isinstance(df, pd.DataFrame) and len(df) == 0)
