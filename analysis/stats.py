# Small pure statistics used by the comparisons, tables and plots (formulas documented in
# docs/METRICS.md, "Analysis"): repetition test, alpha-beta fit, scaling efficiency.
from math import comb

import numpy as np
from scipy.optimize import nnls
from scipy.stats import mannwhitneyu

ALPHA = 0.05  # significance level of the repetition test


def min_attainable_p(n1, n2):
    """Smallest two-sided exact Mann-Whitney p-value for sample sizes n1, n2: the two most
    extreme rankings out of C(n1+n2, n1). Above ALPHA no outcome could be significant."""
    if n1 < 1 or n2 < 1:
        return 1.0
    return min(1.0, 2.0 / comb(n1 + n2, n1))


def repetition_test(a, b):
    """Mann-Whitney U between two groups of repetition values. Returns (U of a, p, warning);
    the warning is "" or says why the test cannot tell."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    floor = min_attainable_p(len(a), len(b))
    warning = ""
    if floor > ALPHA:
        warning = (f"too few repetitions ({len(a)} vs {len(b)}): the smallest attainable "
                   f"p is {floor:.3g} > {ALPHA}")
    if len(a) == 0 or len(b) == 0:
        return np.nan, np.nan, warning
    res = mannwhitneyu(a, b, alternative="two-sided")
    return float(res.statistic), float(res.pvalue), warning


def size_spread(nbytes, seconds):
    """Per distinct size, ascending: (sizes, median, min, max, q1, q3, count) as arrays.
    Quartiles by numpy's linear interpolation."""
    x, y = np.asarray(nbytes, float), np.asarray(seconds, float)
    sizes = np.unique(x)
    groups = [y[x == s] for s in sizes]
    stat = [np.array([f(g) for g in groups]) for f in (
        np.median, np.min, np.max, lambda g: np.percentile(g, 25),
        lambda g: np.percentile(g, 75), len)]
    return (sizes, *stat)


def fit_alpha_beta(nbytes, seconds):
    """t = alpha + beta * bytes fitted to the per-size medians m_i (docs/METRICS.md, "Alpha-beta
    model"): minimizes sum_i ((alpha + beta x_i - m_i) / m_i)^2, the relative error, so that a
    1 us message counts as much as a 10 ms one, subject to alpha >= 0 and beta >= 0 (no
    message takes negative time): NNLS on the rows [1, x_i] / m_i against 1. Returns
    (alpha_s, beta_s_per_byte, r2), r2 weighted as the fit (weights 1/m_i^2); NaNs with
    fewer than two distinct sizes of positive median (the line is not determined)."""
    sizes, med = size_spread(nbytes, seconds)[:2]
    keep = med > 0  # a weight of 1/0 has no meaning
    x, m = sizes[keep], med[keep]
    if len(x) < 2:
        return np.nan, np.nan, np.nan
    A = np.column_stack([1.0 / m, x / m])
    # Columns scaled to unit norm: 1/m is ~1e6 and x/m ~1e13 for microsecond collectives of
    # megabytes, too far apart for the active-set iterations in plain units.
    norm = np.linalg.norm(A, axis=0)
    w, _ = nnls(A / norm, np.ones(len(x)))
    alpha, beta = w / norm
    rel = (alpha + beta * x - m) / m
    weight = 1.0 / m ** 2
    mean = float((weight * m).sum() / weight.sum())
    ss_tot = float((weight * (m - mean) ** 2).sum())
    ss_res = float((rel ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else np.nan)
    return float(alpha), float(beta), r2


def scaling_efficiency(world, throughput):
    """E(N) = (T(N) / T(N0)) / (N / N0), N0 the smallest world size: 1.0 is linear scaling
    of global throughput. Inputs are parallel sequences; returns a list in the same order."""
    world, throughput = np.asarray(world, float), np.asarray(throughput, float)
    i0 = int(np.argmin(world))
    return list((throughput / throughput[i0]) / (world / world[i0]))


def percent_change(new, base):
    """(new - base) / base * 100: positive is an increase."""
    return (new - base) / base * 100.0 if base else np.nan


def percent_reduction(new, base):
    """(base - new) / base * 100: the paper's "77% reduction"."""
    return (base - new) / base * 100.0 if base else np.nan
