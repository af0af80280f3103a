# Small pure statistics used by the comparisons, tables and plots (formulas documented in
# docs/METRICS.md, "Analysis"): repetition test, alpha-beta fit, scaling efficiency.
from math import comb

import numpy as np
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


def fit_alpha_beta(nbytes, seconds):
    """Least squares t = alpha + beta * bytes. Returns (alpha_s, beta_s_per_byte, r2); NaNs
    with fewer than two distinct sizes (the line is not determined)."""
    x, y = np.asarray(nbytes, float), np.asarray(seconds, float)
    if len(np.unique(x)) < 2:
        return np.nan, np.nan, np.nan
    A = np.column_stack([np.ones_like(x), x])
    (alpha, beta), *_ = np.linalg.lstsq(A, y, rcond=None)
    resid = y - (alpha + beta * x)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid ** 2).sum()) / ss_tot if ss_tot > 0 else 1.0
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
