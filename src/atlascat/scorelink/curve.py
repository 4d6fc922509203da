"""The link's curves over theta: monotone spline, smoothed variance, local interval scale,
support (how many calibration models lie near each theta)."""
from __future__ import annotations

import numpy as np

from ..errors import BankError, ConfigError
from .settings import CHANCE, GRID, MIN_SUPPORT, SUPPORT_BANDWIDTH


def isotonic(values, weights) -> np.ndarray:
    """Weighted least-squares non-decreasing fit (pool adjacent violators; Barlow et al., 1972).

    Unlike a running maximum, a local bump is averaged with its neighbours instead of being
    carried to the end of the curve (a running maximum turned one high blip at the low end of
    WinoGrande's calibration range into a floor 3 points too high for every weak model).
    """
    v = np.asarray(values, float)
    w = np.maximum(np.asarray(weights, float), 1e-12)
    means, wts, sizes = [], [], []
    for vi, wi in zip(v, w):
        means.append(vi)
        wts.append(wi)
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            m2, w2, n2 = means.pop(), wts.pop(), sizes.pop()
            m1, w1, n1 = means.pop(), wts.pop(), sizes.pop()
            means.append((m1 * w1 + m2 * w2) / (w1 + w2))
            wts.append(w1 + w2)
            sizes.append(n1 + n2)
    return np.repeat(means, sizes)



#: fewest calibration models a score link is fitted on (a cubic spline with one interior knot
#: has 5 coefficients: 4 models per coefficient)
MIN_LINK_MODELS = 20


def knots_for(n: int, most: int = 6) -> int:
    """Interior knots of the link's spline for ``n`` models: 4 models per coefficient (a cubic
    spline with k interior knots has k + 4), so 1 knot at 20 models (0, a cubic polynomial, at
    16-19), the full ``most`` (6) from 40 up (the shipped banks' setting)."""
    return int(min(most, max(0, n // 4 - 4)))


def support_for(n: int) -> float:
    """Kernel-weighted models a theta-grid point needs to count as inside the link's data:
    :data:`MIN_SUPPORT` (10) from 400 models up, n / 40 below (at least 0.5: about one model
    within +-0.3 theta). The kernel count of N models spread over 4-6 theta units is about
    N / 8 at their density, so a fixed 10 (the shipped banks, 2,000-5,000 models) would put a
    population of 20-80 models 'outside its own data' almost everywhere (HELM MMLU, 83 models:
    70 of them flagged on their own answers)."""
    return float(min(MIN_SUPPORT, max(0.5, n / 40.0)))


def fit_monotone_spline(x, y, *, n_knots: int = 6, grid=GRID, monotone: bool = True) -> np.ndarray:
    """Least-squares cubic spline of y on x (interior knots at x quantiles) on ``grid``.

    With ``monotone`` the curve is made non-decreasing by a weighted isotonic regression of its
    grid values (weights: the density of x near each grid point, so that the fit matters where
    the data are); ``monotone=False`` keeps the spline as fitted (TruthfulQA's published mc2 is
    not monotone in ability: the weakest models score near the share of true options, models
    that confidently pick the common misconception score lower). Either way the curve is held
    constant outside [min x, max x]. Returns the curve's values on ``grid``.
    """
    from scipy.interpolate import make_lsq_spline

    x = np.asarray(x, float)
    y = np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 4 * (n_knots + 4):
        raise ConfigError(f"a score link with {n_knots} knot(s) needs at least "
                          f"{4 * (n_knots + 4)} calibration models with a published score, got "
                          f"{x.size}" + (f" (use n_knots={knots_for(x.size)})"
                                         if x.size >= MIN_LINK_MODELS else
                                         f"; a link needs at least {MIN_LINK_MODELS}"))
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    inner = np.unique(np.quantile(x, np.linspace(0, 1, n_knots + 2)[1:-1]))
    inner = inner[(inner > x[0]) & (inner < x[-1])]
    t = np.r_[[x[0]] * 4, inner, [x[-1]] * 4]
    spline = make_lsq_spline(x, y, t, k=3)
    grid = np.asarray(grid, float)
    values = spline(np.clip(grid, x[0], x[-1]))
    if not monotone:
        return values
    step = float(np.median(np.diff(grid))) if grid.size > 1 else 1.0
    density = np.exp(-0.5 * ((grid[:, None] - x[None, :]) / max(2 * step, 0.05)) ** 2).sum(1)
    return isotonic(values, density + 1e-3 * max(float(density.max()), 1e-12))



def smoothed_variance(x, resid, grid, bandwidth: float = 0.5, floor: float = 1e-6) -> np.ndarray:
    """Kernel (Gaussian) smoothed mean squared residual on ``grid``; constant beyond the data."""
    x = np.asarray(x, float)
    r2 = np.asarray(resid, float) ** 2
    g = np.clip(grid, x.min(), x.max())
    w = np.exp(-0.5 * ((g[:, None] - x[None, :]) / bandwidth) ** 2)
    w_sum = w.sum(1)
    # shrink towards the global variance where few models are near
    prior_n = 20.0
    var = (w @ r2 + prior_n * r2.mean()) / (w_sum + prior_n)
    return np.maximum(var, floor)



def local_scale(theta, z, grid, bandwidth: float = 0.5, prior_n: float = 50.0,
                 clip: float = 4.0) -> np.ndarray:
    """Interval width multiplier over theta: sqrt(local mean z^2 / overall mean z^2).

    ``z``: standardized errors of the calibration models' replayed predictions at their
    ``theta``; clipped at +-``clip`` (a few models whose published score disagrees with their
    answers by 15-20 points must not widen every interval near them); Gaussian kernel of
    ``bandwidth`` over theta, shrunk towards 1 with ``prior_n`` pseudo-models, constant beyond
    the data. Without it one global scale made the mid-range bands of GSM8K, where the score
    is steepest, cover 84-89% while the ends covered 97-99%.
    """
    x = np.asarray(theta, float)
    z2 = np.minimum(np.asarray(z, float) ** 2, clip ** 2)
    ok = np.isfinite(x) & np.isfinite(z2)
    x, z2 = x[ok], z2[ok]
    m = float(z2.mean()) if z2.size else 1.0
    if z2.size == 0 or m <= 0:
        return np.ones_like(np.asarray(grid, float))
    g = np.clip(grid, x.min(), x.max())
    w = np.exp(-0.5 * ((g[:, None] - x[None, :]) / bandwidth) ** 2)
    local = (w @ z2 + prior_n * m) / (w.sum(1) + prior_n)
    return np.sqrt(local / m)



def check_local(values, grid) -> np.ndarray:
    v = np.asarray(values, float)
    if v.shape != np.asarray(grid).shape or not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise BankError("a score link's local interval scale must be positive, one value per "
                        "theta-grid point")
    return v



def fit_support(theta, scores, grid, benchmark, chance=None, min_models: float = MIN_SUPPORT
                ) -> dict:
    """The link's support from the calibration models' theta and published scores
    (``min_models``: kernel-weighted models a supported grid point needs)."""
    th = np.asarray(theta, float)
    s = np.asarray(scores, float)
    ok = np.isfinite(th) & np.isfinite(s)
    th, s = th[ok], s[ok]
    count = np.exp(-0.5 * ((grid[:, None] - th[None, :]) / SUPPORT_BANDWIDTH) ** 2).sum(1)
    if chance is None:
        chance = CHANCE.get(str(benchmark).lower(), float(s.min()))
    chance = float(chance)
    if not 0.0 <= chance <= 1.0:
        raise ConfigError(f"chance must be a score in 0-1, got {chance!r}")
    return {"count": count, "bandwidth": SUPPORT_BANDWIDTH, "min_models": float(min_models),
            "theta_range": (float(th.min()), float(th.max())),
            "score_range": (float(s.min()), float(s.max())), "chance": chance,
            "floor": min(chance, float(np.quantile(s, 0.01))), "top": 1.0}



def finite_values(values) -> np.ndarray:
    v = np.asarray(values, float)
    return v[np.isfinite(v)]



def rounded(values, digits: int = 6) -> list:
    return [round(float(v), digits) for v in np.asarray(values, float)]
