"""The score link's honesty rules: what a prediction says outside what its data support.

Each takes the fitted :class:`~atlascat.scorelink.score_link.ScoreLink` and arrays (one row per
examinee) and is called by its predictions (:meth:`ScoreLink.predict`,
:meth:`ScoreLink.predict_many`, :mod:`atlascat.scorelink.batch`):

- :func:`honest`: outside the link's data the interval's side towards the empty region goes to
  the floor / top, and below it the point estimate falls towards the floor with the bank's
  expected accuracy;
- :func:`accuracy_interval`: the score interval the number correct alone supports (Wilson's
  interval mapped through the expected proportion correct), for answers that do not fit the
  IRT model;
- :func:`chance_not_excluded`: answers that cannot be told from guessing (binomial tail);
- :func:`warnings_for`: the one-line warning and flag of each case.

References
----------
Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference.
Journal of the American Statistical Association, 22, 209-212.
"""
from __future__ import annotations

import numpy as np

from .settings import ANSWER_CHANCE, CHANCE_ALPHA, LZ_CRITICAL, Z95

__all__ = ["honest", "beyond_support", "accuracy_interval", "chance_not_excluded", "warnings_for"]


def honest(link, theta, se, score, lo, hi):
    """Outside the link's data (vectorized): the interval's side towards the empty region
    goes to the floor / top; below the support the point estimate falls from the curve's
    value at the support's edge L towards the floor in proportion to the bank's expected
    accuracy above its guessing floor, (A(theta) - A(-inf)) / (A(L) - A(-inf)), A = mean
    P_j (the curve is held constant there, which would keep a model at chance at the
    lowest calibrated score). Returns (score, lo, hi, below, above)."""
    theta = np.asarray(theta, float)
    se = np.asarray(se, float)
    score, lo, hi = (np.array(v, float, copy=True) for v in (score, lo, hi))
    data_low = link.data_bounds()[0]
    floor = link.support["floor"]
    lo, hi, below, above = beyond_support(link, theta, se, lo, hi)
    out = (theta < data_low) & (score > floor)
    if out.any() and link.item_params is not None:
        a_min = float(np.mean(link.item_params[:, 2]))
        a_low = float(link.expected_accuracy(data_low))
        ratio = (np.clip((link.expected_accuracy(theta[out]) - a_min) / (a_low - a_min),
                         0.0, 1.0) if a_low > a_min else 1.0)
        score[out] = floor + (score[out] - floor) * ratio
    return np.clip(score, lo, hi), lo, hi, below, above


def beyond_support(link, theta, se, lo, hi):
    """(lo, hi, below, above): whether theta's 95% interval at ``se`` reaches below / above
    the link's support, and the score interval (``lo``, ``hi``) with its side towards that
    empty region at the floor / top (vectorized; a NaN theta or SE reaches nowhere)."""
    low, high = link.support_bounds()
    with np.errstate(invalid="ignore"):
        below = theta - Z95 * se < low
        above = theta + Z95 * se > high
    return (np.where(below, np.minimum(lo, link.support["floor"]), lo),
            np.where(above, np.maximum(hi, link.support["top"]), hi), below, above)


def accuracy_interval(link, cols, ys, scale) -> tuple[float, float]:
    """The score interval the number correct alone supports, whatever the pattern.

    The Wilson 95% interval of the proportion correct on the answered items is mapped to
    theta through their expected proportion correct, mean_j P_j(theta) (increasing), then to
    the score through the curve +- 1.96 x scale x the residual SD there. An end beyond the
    support (or beyond what the items can express: all at guessing / at the top) goes to
    the floor / top.
    """
    n = len(ys)
    p = float(np.mean(ys))
    z = Z95
    den = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    grid = link.theta_grid
    E = np.maximum.accumulate(link.expected_accuracy(grid, np.asarray(cols)))
    E = E + 1e-12 * np.arange(E.size)   # strictly increasing for interp
    low, high = link.support_bounds()
    floor, top = link.support["floor"], link.support["top"]
    sd = lambda t: np.sqrt(float(np.interp(t, grid, link.var_grid)))  # noqa: E731
    p_lo, p_hi = centre - half, centre + half
    if p_lo <= E[0]:
        lo = floor
    else:
        t = float(np.interp(p_lo, E, grid))
        lo = floor if t < low else float(link.curve(t)) - z * scale * sd(t)
    if p_hi >= E[-1]:
        hi = top
    else:
        t = float(np.interp(p_hi, E, grid))
        hi = top if t > high else float(link.curve(t)) + z * scale * sd(t)
    return max(0.0, lo), min(1.0, hi)


def chance_not_excluded(link, n, k) -> np.ndarray:
    """Rows whose k right of n answered cannot be told from guessing: the binomial
    P(X >= k | n, answer chance) >= :data:`CHANCE_ALPHA`. Their interval then reaches down to
    the benchmark's chance level: a real weak LLM's wrong answers are systematic (the link
    learns where such patterns publish), but a pure guesser with the same number right
    would publish chance, and its answers cannot exclude that (uniform 0/1 answers at 0.25
    on ARC read 29.5% (23-36%) on the link: 22% of their intervals missed 25%)."""
    from scipy.special import betainc  # binom.sf(x) = I_p(x + 1, n - x) without scipy.stats

    p = ANSWER_CHANCE.get(link.benchmark)
    n = np.asarray(n, float)
    k = np.asarray(k, float)
    if p is None or link.chance is None:
        return np.zeros(n.shape, bool)
    if p <= 0:
        return (n > 0) & (k <= 0)
    x = np.floor(k - 1)
    with np.errstate(invalid="ignore"):
        tail = np.where(x < 0, 1.0, np.where(x >= n, 0.0, betainc(x + 1, n - x, p)))
    return (n > 0) & (tail >= CHANCE_ALPHA)


def warnings_for(link, theta, se, below, above, lz, guess=None):
    from .prediction import level

    low, high = link.support_bounds()
    sup = link.support
    scale = link.metric_range
    warnings, flags = [], []
    reach = f"theta's 95% interval {theta - Z95 * se:.2f} to {theta + Z95 * se:.2f}"
    models = link.info.get("population") or "the link's calibration models"
    if below:
        flags.append("below_data")
        warnings.append(f"{reach} reaches below {models} (supported "
                        f"from theta {low:.2f}): the score may be as low as "
                        f"{level(sup['floor'], scale)}"
                        + (f" (chance {level(sup['chance'], scale)})" if link.knows_chance
                           else ""))
    if above:
        flags.append("above_data")
        warnings.append(f"{reach} reaches above {models} (supported "
                        f"to theta {high:.2f}): the score may be as high as "
                        f"{level(sup['top'], scale)}")
    if lz is not None:
        flags.append("misfit")
        warnings.append(f"the answers do not fit the IRT model (person fit lz* = {lz:.2f} "
                        f"< {LZ_CRITICAL:.2f}, its 1% tail: rights and wrongs in a pattern "
                        "unlikely at its theta): interval widened to what the number correct "
                        "supports")
    if guess is not None:
        flags.append("chance")
        warnings.append(f"{guess[0]} of {guess[1]} right cannot be told from guessing: the "
                        f"score may be as low as {link.floor_word} ({level(link.chance, scale)})")
    return warnings, flags
