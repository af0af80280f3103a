# The HTML report a person reads (issue #15): contents, sortable and filterable tables with
# human units over raw values, text left and numbers right, CSV names as links, provenance
# as a small table; and the page in headless Chromium: a screenshot, no console errors,
# every image loaded, sorting numeric, the filter working and the full configuration
# collapsed (issue 28).
import json
import os
import re
import shutil
import subprocess

import pandas as pd
import pytest

from analysis import html_report, report, units

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def page(fixture_dir, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("html_report"))
    report.build(fixture_dir, out)
    with open(os.path.join(out, "report.html")) as fh:
        return out, fh.read()


def _cells(text, column):
    """(td attributes, text) of every cell of the first table that has `column`."""
    for table in re.findall(r"<table class='data'>.*?</table>", text, re.S):
        heads = [re.sub(r"<.*?>", "", h) for h in re.findall(r"<th[^>]*>.*?</th>", table)]
        if column not in heads:
            continue
        j = heads.index(column)
        rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)
        return [re.findall(r"<td([^>]*)>(.*?)</td>", r)[j] for r in rows]
    raise AssertionError(f"no table with column {column}")


def test_table_of_contents_links_every_section(page):
    _, text = page
    toc = re.search(r"<nav class='toc' id='contents'>(.*?)</nav>", text, re.S).group(1)
    targets = re.findall(r"href='#([^']+)'", toc)
    heads = re.findall(r"<h[23] id='([^']+)'>", text)
    assert targets == heads and len(set(heads)) == len(heads)
    assert {"provenance", "plots", "tables-as-csv"} <= set(heads)


def test_bytes_and_times_in_human_units_with_raw_values(page):
    _, text = page
    # bert-large fp32: model_bytes 1.34e9 (memory_bytes), batches 190/180/185 ms (median 185).
    memory = dict((a, t) for a, t in _cells(text, "memory_bytes"))
    assert memory[" class='num' data-v='1340000000.0' title='1340000000.0'"] == "1.25 GiB"
    step = [t for a, t in _cells(text, "step_time_s") if "data-v='0.185'" in a]
    assert step == ["185 ms"]
    # Comparisons: value columns carry the unit of the row's metric.
    medians = [t for _, t in _cells(text, "median")]
    assert "383 MiB" in medians and "42 ms" in medians
    assert units.human_seconds(3725) == "1.03 h" and units.human_bytes(512) == "512 B"
    assert units.column_unit("samples_per_s") is None
    assert units.column_unit("wire_bytes_per_step") == ("bytes", 1.0)
    assert units.column_unit("p99_ms") == ("time", 1e-3)


def test_numbers_right_text_left(page):
    _, text = page
    assert ".num{text-align:right" in text and "text-align:left" in text
    for attrs, _ in _cells(text, "timed_steps"):
        assert "class='num'" in attrs
    for attrs, _ in _cells(text, "point_name"):
        assert "class" not in attrs and "data-v" not in attrs


def test_csv_names_are_links_to_the_files(page):
    out, text = page
    links = re.findall(r"<a href='(tables/[^']+\.csv)'>\1</a>", text)
    assert "tables/metrics.csv" in links and "tables/alpha_beta.csv" in links
    assert all(os.path.isfile(os.path.join(out, link)) for link in links)
    md = open(os.path.join(out, "report.md")).read()
    assert "[tables/metrics.csv](tables/metrics.csv)" in md


def test_provenance_is_a_small_key_value_table(page):
    _, text = page
    prov = re.search(r"<h2 id='provenance'>Provenance</h2>\s*(<table class='prov'>.*?</table>)",
                     text, re.S).group(1)
    fields = re.findall(r"<tr><th>([^<]+)</th>", prov)
    # A header row, then one row per field (the fixture's world sizes give several columns).
    assert fields[:5] == ["field", "suite", "suite_sha256", "git_commit", "shardbench_version"]
    assert "hdf5" in fields and "hosts" in fields and fields[-1] == "points"
    assert "localhost x 2" in prov           # hosts counted, not a JSON list
    assert '{"hdf5"' not in prov and "&quot;" not in prov


def test_page_needs_no_network(page):
    _, text = page
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", text)
    assert "<script>" in text and html_report.SCRIPT in text


# Put first in <head> so that it sees everything the page's own script does: records errors
# (uncaught, console.error, failed resource loads); after load, every image's state, then
# sorts the metrics table by memory_bytes twice and filters it, and writes all of it into the
# DOM for --dump-dom.
PROBE = r"""<script>
window.__sb = {errors: []};
window.addEventListener('error', function (e) {
  __sb.errors.push(e.message || ('failed to load ' + (e.target.src || e.target.href)));
}, true);
window.addEventListener('unhandledrejection', function (e) {
  __sb.errors.push(String(e.reason));
});
(function (orig) {
  console.error = function () {
    __sb.errors.push([].join.call(arguments, ' '));
    orig.apply(console, arguments);
  };
})(console.error);
window.addEventListener('load', function () {
  var r = __sb;
  r.images = [].map.call(document.images, function (i) {
    return {file: i.getAttribute('data-file'), ok: i.complete && i.naturalWidth > 0};
  });
  var t = [].filter.call(document.querySelectorAll('table.data'), function (t) {
    return [].some.call(t.tHead.rows[0].cells, function (h) {
      return h.textContent === 'memory_bytes';
    });
  })[0];
  var col = [].map.call(t.tHead.rows[0].cells, function (h) {
    return h.textContent;
  }).indexOf('memory_bytes');
  function column() {
    return [].map.call(t.tBodies[0].rows, function (row) {
      return row.cells[col].getAttribute('data-v');
    });
  }
  t.tHead.rows[0].cells[col].click(); r.ascending = column();
  t.tHead.rows[0].cells[col].click(); r.descending = column();
  var input = t.parentNode.previousElementSibling.previousElementSibling;
  r.filter_box = input.tagName + ':' + input.className;
  input.value = 'int8'; input.dispatchEvent(new Event('input'));
  r.shown = [].filter.call(t.tBodies[0].rows, function (row) { return !row.hidden; }).length;
  r.expected = [].filter.call(t.tBodies[0].rows, function (row) {
    return row.textContent.toLowerCase().indexOf('int8') >= 0;
  }).length;
  r.details = [].map.call(document.querySelectorAll('details'), function (d) {
    return {open: d.open, summary: d.querySelector('summary').textContent,
            tables: d.querySelectorAll('table.data').length,
            // The closed element's content is skipped by rendering (content-visibility),
            // not sized to zero: ask whether it is visible.
            hidden: !d.querySelector('table.data').checkVisibility()};
  });
  var pre = document.createElement('pre'); pre.id = 'sb-probe'; pre.textContent = JSON.stringify(r);
  document.body.appendChild(pre);
});
</script>"""


def _chromium(args, tmp_path):
    cmd = [CHROMIUM, "--headless", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0"] + args
    if os.geteuid() == 0:
        cmd.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package "
                    "chromium; jobscripts/install-deps.sh installs it)")
def test_page_in_headless_chromium(page, tmp_path):
    out, text = page
    probed = os.path.join(out, "report_probed.html")  # beside the page: same relative links
    with open(probed, "w") as fh:
        fh.write(text.replace("<head>", "<head>" + PROBE, 1))
    proc = _chromium(["--virtual-time-budget=10000", "--dump-dom", "file://" + probed], tmp_path)
    dom = re.search(r"<pre id=\"sb-probe\">(.*?)</pre>", proc.stdout, re.S)
    assert dom, "the probe did not run:\n" + proc.stdout[-2000:] + proc.stderr[-2000:]
    r = json.loads(dom.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert r["errors"] == []
    assert re.findall(r":CONSOLE[^\]]*\].*", proc.stderr) == []  # the page logs nothing
    pngs = sorted(f for f in os.listdir(os.path.join(out, "plots")) if f.endswith(".png"))
    assert sorted(i["file"] for i in r["images"]) == pngs
    assert all(i["ok"] for i in r["images"]), r["images"]
    # Numeric order of the raw bytes (text order would put "383 MiB" after "1.25 GiB"),
    # empty cells last both ways.
    asc = [float(v) for v in r["ascending"] if v]
    desc = [float(v) for v in r["descending"] if v]
    assert asc == sorted(asc) and desc == sorted(desc, reverse=True) and len(asc) > 5
    assert all(not v for v in r["ascending"][len(asc):])
    assert r["filter_box"] == "INPUT:filter"
    assert 0 < r["shown"] == r["expected"] < len(r["ascending"])
    # The full configuration: collapsed, its tables not laid out until opened.
    assert r["details"] == [{"open": False, "tables": 2, "hidden": True,
                             "summary": "Full configuration of every point (22 keys)"}]

    shot = tmp_path / "report.png"
    _chromium(["--hide-scrollbars", "--window-size=1280,2400", f"--screenshot={shot}",
               "file://" + os.path.join(out, "report.html")], tmp_path)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20000  # more than a blank page


# ---- Issue 28: the per-point table shows what differs, the full configuration collapsed ----

# The fixture's done points differ in these keys (hand-checked against make_fixture.py:
# inference adds scenario and checkpoint, the bert-large training points run 4 steps in 4
# repetitions, the serve points add their policy, rate and SLOs), in labels.FIRST's order,
# then alphabetically. The other 7 (attention, batch, dtype, seed, seq, threads, warmup) are
# the same everywhere.
VARYING = ["task", "model", "strategy", "compression", "quantization", "world", "scenario",
           "serve_policy", "request_rate", "checkpoint", "repetition", "repetitions",
           "slo_tpot_ms", "slo_ttft_ms", "steps"]
SAME = {"attention": "naive", "batch": "8", "dtype": "fp32", "seed": "1", "seq": "128",
        "threads": "1", "warmup": "1"}


def _heads(table):
    return [re.sub(r"<.*?>", "", h) for h in re.findall(r"<th[^>]*>.*?</th>",
                                                       table.split("<tbody>")[0])]


def _rows(table):
    return [[re.sub(r"<.*?>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)]
            for r in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)]


def test_per_point_table_shows_the_keys_that_vary_and_collapses_the_rest(page):
    out, text = page
    section = text.split("<h2 id='per-point-metrics-medians-over-timed-steps'>")[1]
    section = section.split("<h2")[0]
    shown, rest = section.split("<details>", 1)
    (table,) = re.findall(r"<table class='data'>.*?</table>", shown, re.S)
    heads = _heads(table)
    assert heads[:1 + len(VARYING)] == ["point_id"] + VARYING
    metrics = heads[1 + len(VARYING):]
    assert {"step_time_s", "tokens_per_s", "memory_bytes", "final_loss"} <= set(metrics)
    assert not set(SAME) & set(heads) and "point_name" not in heads
    assert "flags" not in heads  # no point has one: an empty column says nothing
    done = pd.read_csv(os.path.join(out, "tables", "metrics.csv"))
    assert [r[0] for r in _rows(table)] == list(done["point_id"])

    # Collapsed (no `open`): the keys shared by every point, then every key of every point.
    summary = re.match(r"<summary>Full configuration of every point \((\d+) keys\)</summary>",
                       rest)
    assert summary and int(summary.group(1)) == len(VARYING) + len(SAME)
    same, full = re.findall(r"<table class='data'>.*?</table>", rest.split("</details>")[0],
                            re.S)
    assert dict(_rows(same)) == SAME
    assert _heads(full) == ["point_id", "point_name"] + sorted(VARYING + list(SAME))
    by_point = {r[0]: dict(zip(_heads(full), r)) for r in _rows(full)}
    assert by_point["a0000002"]["quantization"] == "int8-dynamic"
    assert by_point["a0000002"]["point_name"] == "bert-large/infer/int8-dynamic"
    assert by_point["b0000030"]["repetition"] == "3"
    assert all(p["attention"] == "naive" for p in by_point.values())

    # The CSV keeps every key of every point; Markdown collapses the same block.
    assert set(VARYING) | set(SAME) <= set(done.columns)
    md = open(os.path.join(out, "report.md")).read()
    assert ("<details><summary>Full configuration of every point (22 keys)</summary>" in md
            and "</details>" in md)
