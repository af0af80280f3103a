# Human units for the report's tables: which column holds bytes or a time (from its name) and
# how to show it ("1.25 GiB", "185 ms"). The raw value is kept beside the text by the HTML
# renderer, so sorting stays numeric; the CSVs keep every raw digit.
import math
import re

import numpy as np

from analysis.compare import COMPARED

# Binary prefixes, as the plots' byte axes (plots.byte_unit): a rank's memory is sized in
# powers of two.
_BYTE_UNITS = [(2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")]
_TIME_UNITS = [(3600.0, "h"), (60.0, "min"), (1.0, "s"), (1e-3, "ms"), (1e-6, "us"),
               (1e-9, "ns")]
# Seconds per unit of a time column's suffix.
_TIME_SUFFIX = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
# Columns of the comparisons table whose unit is that of the row's `metric`.
METRIC_VALUE_COLUMNS = {"median", "min", "max", "baseline_median", "baseline_min",
                        "baseline_max"}


def fmt(v):
    """A cell as plain text: 4 significant digits, integers without a decimal point, NaN and
    None empty."""
    if v is None:
        return ""
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if math.isnan(v):
            return ""
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.4g}"
    return str(v)


def is_number(v):
    # bool is an int to Python, but a yes/no column reads as text.
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
        v, (bool, np.bool_))


def column_unit(name):
    """('bytes', 1) or ('time', seconds per unit) from a column name, else None.
    Rates (`samples_per_s`, `bandwidth_GB_per_s`) and `beta_s_per_byte` are not times."""
    name = str(name)
    if "_per_" in name:
        return ("bytes", 1.0) if name.endswith("_bytes_per_step") else None
    if name == "bytes" or name.endswith("_bytes"):
        return ("bytes", 1.0)
    m = re.search(r"_(s|ms|us|ns)$", name)
    if m:
        return ("time", _TIME_SUFFIX[m.group(1)])
    return None


def human_bytes(v):
    v = float(v)
    for div, unit in _BYTE_UNITS:
        if abs(v) >= div:
            return f"{v / div:.3g} {unit}"
    return f"{v:.0f} B"


def human_seconds(v):
    v = float(v)
    if v == 0:
        return "0 s"
    for div, unit in _TIME_UNITS:
        if abs(v) >= div:
            return f"{v / div:.3g} {unit}"
    return f"{v / 1e-9:.3g} ns"


def human(v, unit):
    """The text of a numeric cell in its column's unit (from column_unit); plain fmt when
    the unit is None or the value is not finite."""
    if unit is None or not is_number(v) or not math.isfinite(float(v)):
        return fmt(v)
    kind, scale = unit
    return human_bytes(v) if kind == "bytes" else human_seconds(float(v) * scale)


def metric_label_unit(label):
    """The unit of a comparisons row, from its metric label (compare.COMPARED)."""
    for name, lab, _ in COMPARED:
        if lab == label:
            return column_unit(name)
    return None
