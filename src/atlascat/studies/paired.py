"""Paired comparison of two models: the difference of their predicted scores with a 95%
interval (measured in ``benchmarks/bench_paired.py``: ``benchmarks/results/paired.md``).

Each prediction carries a 95% interval, [score - l, score + u]. The difference d = score_a -
score_b gets each side of its interval from the two sides that bound it (MOVER, Zou and Donner
2008; :func:`limits_difference`):

    lo = d - scale x sqrt(l_a^2 + u_b^2 - 2 rho l_a u_b),   hi = d + scale x sqrt(u_a^2 + l_b^2 - 2 rho u_a l_b)

which for symmetric intervals (l = u = 1.96 sd) is d +- 1.96 scale x sqrt(sd_a^2 + sd_b^2 - 2 rho
sd_a sd_b) (:func:`difference_interval`). An interval is asymmetric where the benchmark
predictor pools two estimates, near a bound, or where the number correct widens it.

``rho`` is the correlation of the two predictions' errors. For two unrelated models it is 0:
their published scores deviate from what their answers say independently (measured on the
leaderboard: the correlation of two calibration models' residuals is 0.00 +- 0.01 for all but
the pairs whose answers agree far beyond what their accuracy explains, :func:`excess_agreement`;
for the 0.1% that agree most it reaches 0.4-0.6 on ARC: near-duplicates such as merges or
checkpoints of one model). ``scale`` is the pair scale: each link's interval is calibrated to
cover 97% of single models, so their combination in quadrature covers more than 95% of pairs;
:data:`PAIR_SCALE` holds, per benchmark, the factor that covers 95% of the calibration models'
pairs (adaptive test at SE 0.2), fitted by ``bench_paired.py``. It holds for two single-bank
runs: a suite run's member predictions cover about 95% of single models, and at these scales
their pairs covered only 88-94% of held-out pairs (1.0: 95-97%), so
:func:`atlascat.live.compare.compare_runs` combines them plainly.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..errors import ConfigError
from ..scorelink.settings import Z95

__all__ = ["difference_interval", "limits_difference", "paired_difference", "excess_agreement",
           "PAIR_SCALE", "Z95"]

#: per benchmark, the factor on both sides of :func:`limits_difference`'s interval that covers
#: 95% of the calibration pairs (``python benchmarks/bench_paired.py --lengths adaptive``, seed
#: 0, adaptive test; benchmarks/results/paired.md); 1.0 for a bank not listed (the plain combination, which covers more than 95%). ``average``:
#: a suite's average (openllm-v1, 150 items), fitted to cover 95% of every pair of held-out
#: models (whole population) of two tuning splits, seeds 2 and 3
#: (``benchmarks/suite_pair_scale.py``, :func:`limits_difference`'s interval): 0.93. With it
#: the two reported splits (seeds 0 / 1) cover 93.6% / 95.7% of the dense held-out pairs and
#: 94.2% / 94.4% of the whole population's (the plain combination: 94.9% / 96.6% and 95.3% /
#: 95.7%).
PAIR_SCALE: dict[str, float] = {"arc": 0.82, "hellaswag": 0.78, "mmlu": 0.73, "truthfulqa": 0.84,
                                "winogrande": 0.73, "gsm8k": 0.84, "average": 0.93}


def _sd(lo, hi) -> np.ndarray:
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    if np.any(hi < lo):
        raise ConfigError("an interval's upper bound is below its lower bound")
    return (hi - lo) / (2 * Z95)


def difference_interval(diff, sd_a, sd_b, *, rho=0.0, scale: float = 1.0) -> dict:
    """The difference ``diff`` (a - b) with its 95% interval from the two sds (vectorized).

    Returns arrays ``diff``, ``sd``, ``lo``, ``hi`` and ``told_apart`` (the interval excludes
    0)."""
    diff = np.asarray(diff, float)
    sd_a, sd_b, rho = (np.asarray(v, float) for v in (sd_a, sd_b, rho))
    if not np.all((rho >= -1) & (rho <= 1)):   # NaN too: it would make every interval NaN
        raise ConfigError(f"rho must lie in [-1, 1], got {rho}")
    if not (np.isfinite(scale) and scale > 0):
        raise ConfigError(f"the pair scale must be > 0, got {scale!r}")
    var = sd_a ** 2 + sd_b ** 2 - 2 * rho * sd_a * sd_b
    sd = scale * np.sqrt(np.maximum(var, 0.0))
    lo, hi = diff - Z95 * sd, diff + Z95 * sd
    return {"diff": diff, "sd": sd, "lo": lo, "hi": hi, "told_apart": (lo > 0) | (hi < 0)}


def limits_difference(a, lo_a, hi_a, b, lo_b, hi_b, *, rho=0.0, scale: float = 1.0) -> dict:
    """The difference a - b with its 95% interval from the two predictions' own 95% intervals,
    each side from the sides that bound it (vectorized; MOVER, Zou and Donner 2008):

        lo = d - scale sqrt(l_a^2 + u_b^2 - 2 rho l_a u_b),   l = score - lo, u = hi - score
        hi = d + scale sqrt(u_a^2 + l_b^2 - 2 rho u_a l_b)

    The same as :func:`difference_interval` when both intervals are symmetric. A prediction's
    interval is asymmetric where the score is near a bound, where the number correct widens it
    on one side, or where the benchmark predictor pools two estimates; one sd per
    prediction, (hi - lo) / 3.92 around the point, puts the difference's interval on the wrong
    side: on held-out pairs of a bank folder, far pairs (over 10 points apart) were covered
    less than 95% (benchmarks/results/paired.md). Returns arrays ``diff``, ``sd`` (the
    interval's width / 3.92), ``lo``, ``hi`` and ``told_apart`` (the interval excludes 0)."""
    a, lo_a, hi_a, b, lo_b, hi_b = (np.asarray(v, float) for v in (a, lo_a, hi_a, b, lo_b, hi_b))
    _sd(lo_a, hi_a), _sd(lo_b, hi_b)                    # an upper bound below its lower: an error
    rho = np.asarray(rho, float)
    if not np.all((rho >= -1) & (rho <= 1)):
        raise ConfigError(f"rho must lie in [-1, 1], got {rho}")
    if not (np.isfinite(scale) and scale > 0):
        raise ConfigError(f"the pair scale must be > 0, got {scale!r}")
    l_a, u_a = np.maximum(a - lo_a, 0.0), np.maximum(hi_a - a, 0.0)
    l_b, u_b = np.maximum(b - lo_b, 0.0), np.maximum(hi_b - b, 0.0)
    diff = a - b
    down = scale * np.sqrt(np.maximum(l_a ** 2 + u_b ** 2 - 2 * rho * l_a * u_b, 0.0))
    up = scale * np.sqrt(np.maximum(u_a ** 2 + l_b ** 2 - 2 * rho * u_a * l_b, 0.0))
    lo, hi = diff - down, diff + up
    return {"diff": diff, "sd": (hi - lo) / (2 * Z95), "lo": lo, "hi": hi,
            "told_apart": (lo > 0) | (hi < 0)}


def paired_difference(a: Mapping, b: Mapping, *, benchmark: str | None = None,
                      rho: float = 0.0, scale: float | None = None) -> dict:
    """Difference of two predictions (mappings with ``score``, ``lo``, ``hi``, both on one
    scale), first minus second, with its 95% interval (:func:`limits_difference`: each side
    from the two intervals' sides that bound it); ``scale`` defaults to the benchmark's
    :data:`PAIR_SCALE` (1.0 if none)."""
    for name, p in (("first", a), ("second", b)):
        missing = [k for k in ("score", "lo", "hi") if p.get(k) is None]
        if missing:
            raise ConfigError(f"the {name} prediction has no {', '.join(missing)}: compare runs "
                              "that predicted a score")
    if scale is None:
        scale = PAIR_SCALE.get(str(benchmark).lower(), 1.0) if benchmark else 1.0
    out = limits_difference(*(float(p[k]) for p in (a, b) for k in ("score", "lo", "hi")),
                            rho=rho, scale=scale)
    return {k: (bool(v) if k == "told_apart" else float(v)) for k, v in out.items()} | {
        "scale": float(scale), "rho": float(rho)}


def excess_agreement(y_a, y_b, mask=None) -> np.ndarray:
    """How much more two models' 0/1 answers agree than their accuracies explain, on the items
    of ``mask`` (default: both answered), row by row:

        mean(y_a == y_b) - (p_a p_b + (1 - p_a)(1 - p_b)),   p = accuracy on those items

    Near 0 for unrelated models; large for near-duplicates (merges, checkpoints of one model).
    """
    ya, yb = np.atleast_2d(np.asarray(y_a, float)), np.atleast_2d(np.asarray(y_b, float))
    both = np.isfinite(ya) & np.isfinite(yb)
    m = both if mask is None else both & np.atleast_2d(np.asarray(mask, bool))
    n = m.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        pa = np.where(m, ya, 0).sum(1) / n
        pb = np.where(m, yb, 0).sum(1) / n
        agree = np.where(m, ya == yb, False).sum(1) / n
        return agree - (pa * pb + (1 - pa) * (1 - pb))
