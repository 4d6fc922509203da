"""Score link: from an adaptive test's theta (+- SE) to the published leaderboard score.

A shipped content bank is a few dozen to a few hundred items of a benchmark whose leaderboard
score is the accuracy on all of its items (ARC 1,172, HellaSwag 10,042, MMLU 14,042 over 57
subjects, ...; TruthfulQA's published score is mc2 while the bank holds mc1 answers). A
:class:`ScoreLink` maps what a test observed to that published score, fitted on the calibration
models (their answers on the bank and their published scores):

    score = g(theta, SE) + c_0 + sum_{j answered} w_j (y_j - P_j(theta))   (answers optional)

- ``g`` is a least-squares cubic spline of the published score on the calibration models'
  whole-bank EAP theta (knots at theta quantiles), made non-decreasing and held constant outside
  the calibration models' theta range. Fitting on theta directly, rather than going through the
  bank's expected accuracy and a straight line, is what makes a short adaptive test predict the
  score well (see ``docs/leaderboard.md``): the published score is not linear in the bank's
  expected accuracy, and theta weights the items as the model says they discriminate.
- For a short test, ``g`` is blended (by the SE) towards a second curve fitted on the theta of
  an adaptive test replayed on the calibration models (the default test, SE <= 0.2): the
  published score regressed on the short test's own estimate, which absorbs the estimate's
  shrinkage and the prior's misfit. At the whole bank's SE the first curve is used, at the
  replayed test's median SE and above the second.
- The answer correction (used when ``responses`` are given): a regression estimator on the
  residuals of the answered items, with one weight per item (ridge regression of the published
  score's deviation from ``g`` on the residuals, fitted on the adaptive test replayed on the
  calibration models, penalty by cross-validation). Some items' residuals predict how a model
  does on the rest of the benchmark beyond what theta says. ``anchor_items`` are the few items
  whose residual predicts it best: a test that asks them in addition to its adaptive items gets
  the ``anchors`` correction (fitted with them always answered); otherwise the ``cat`` one.
- The 95% interval adds the score's spread around ``g`` at that theta (residual variance of the
  calibration models, kernel-smoothed over theta) to the spread of ``g`` over N(theta, se^2),
  times a factor chosen so that the interval covers 95% of the calibration models' replayed
  adaptive tests (for the answer corrections: of their cross-validated predictions).

A link is plain numbers (grids of theta, score and variance; the bank's item parameters and
correction weights); :meth:`ScoreLink.to_dict` / :meth:`ScoreLink.from_dict` round-trip through JSON.
:func:`load_score_link` reads the one shipped with a bundled bank
(``datasets/data/banks/<bench>_link.json``).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from ..errors import AtlasError, BankError, ConfigError

__all__ = ["ScoreLink", "ScorePrediction", "load_score_link", "score_link_path",
           "bundled_link", "load_bundled_bank", "predict_frame",
           "fit_monotone_spline", "LINK_BENCHMARKS"]

LINK_BENCHMARKS = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
_Z95 = 1.959963984540054
_GRID = np.linspace(-6.0, 6.0, 241)


@dataclass(frozen=True)
class ScorePrediction:
    """A predicted leaderboard score (0-1) with its 95% interval and percentile."""

    score: float
    lo: float
    hi: float
    percentile: float | None = None
    benchmark: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        pct = "" if self.percentile is None else f", percentile {self.percentile:.0f}"
        return (f"{100 * self.score:.1f} (95% {100 * self.lo:.1f}-{100 * self.hi:.1f}{pct})")


def _isotonic(values, weights) -> np.ndarray:
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


def fit_monotone_spline(x, y, *, n_knots: int = 6, grid=_GRID, monotone: bool = True) -> np.ndarray:
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
        raise ConfigError(f"a score link needs at least {4 * (n_knots + 4)} calibration models "
                          f"with a published score, got {x.size}")
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
    return _isotonic(values, density + 1e-3 * max(float(density.max()), 1e-12))


def _smoothed_variance(x, resid, grid, bandwidth: float = 0.5, floor: float = 1e-6) -> np.ndarray:
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


class ScoreLink:
    """Map theta (+- SE), and optionally the observed answers, to the published score (0-1).

    Build one with :meth:`fit`; predict with :meth:`predict` (one examinee) or
    :meth:`predict_many` (arrays). See the module docstring for the model.
    """

    def __init__(self, benchmark: str, theta_grid, score_grid, var_grid, *,
                 interval_scale: float = 1.0, item_ids=None, item_params=None,
                 quantiles=None, info: Mapping | None = None, short_grid=None, se_anchor=None,
                 corrections: Mapping | None = None, anchor_items=None):
        self.benchmark = str(benchmark)
        self.theta_grid = np.asarray(theta_grid, float)
        self.score_grid = np.asarray(score_grid, float)
        self.var_grid = np.asarray(var_grid, float)
        if not (self.theta_grid.ndim == 1 and self.theta_grid.shape == self.score_grid.shape
                == self.var_grid.shape and self.theta_grid.size >= 2):
            raise BankError("a score link needs theta, score and variance grids of one length")
        if np.any(np.diff(self.theta_grid) <= 0):
            raise BankError("the score link's theta grid must be increasing")
        self.interval_scale = float(interval_scale)
        self.item_ids = None if item_ids is None else [str(i) for i in item_ids]
        self.item_params = None if item_params is None else np.asarray(item_params, float)
        if self.item_params is not None and self.item_params.shape != (len(self.item_ids), 4):
            raise BankError("score link item_params must be (n_items, 4): a, b, c, u")
        self.quantiles = None if quantiles is None else np.sort(np.asarray(quantiles, float))
        self.info = dict(info or {})
        self.short_grid = None if short_grid is None else np.asarray(short_grid, float)
        if self.short_grid is not None and self.short_grid.shape != self.theta_grid.shape:
            raise BankError("the score link's short-test grid must match its theta grid")
        self.se_anchor = None if se_anchor is None else tuple(float(v) for v in se_anchor)
        #: observed-answer corrections: {"cat" | "anchors": {"weights", "intercept", "scale"}}
        self.corrections = {}
        for key, c in dict(corrections or {}).items():
            w = np.asarray(c["weights"], float)
            if self.item_ids is None or w.shape != (len(self.item_ids),):
                raise BankError("score link correction weights must have one value per item")
            self.corrections[str(key)] = {"weights": w, "intercept": float(c["intercept"]),
                                          "scale": float(c["scale"])}
        self.anchor_items = [str(i) for i in (anchor_items or [])]

    def __repr__(self) -> str:
        return (f"ScoreLink({self.benchmark!r}, corrections={sorted(self.corrections)}, "
                f"anchors={len(self.anchor_items)}, interval_scale={self.interval_scale:.3g})")

    # ---------------------------------------------------------------- fitting
    @classmethod
    def fit(cls, bank, responses, scores, *, benchmark: str = "", theta=None,
            leaderboard_scores=None, n_knots: int = 6, cat_config=None, rng=None,
            use_answers: bool = True, n_anchors: int = 5,
            extra_se_stops=(), monotone: bool = True) -> "ScoreLink":
        """Fit on calibration models.

        Parameters
        ----------
        bank : the calibrated ItemBank
        responses : their answers, a ResponseMatrix or an (n, J) array in bank order
        scores : their published scores, 0-1, shape (n,) (NaN rows are ignored)
        theta : their whole-bank theta (default: EAP on all bank items, N(0, 1), 61 nodes)
        leaderboard_scores : every leaderboard model's score (0-1), for :meth:`percentile`
            (default: ``scores``)
        cat_config : CATConfig of the adaptive test replayed on the calibration models to fit
            the short-test curve, the answer corrections and the interval scales (default:
            ``CATConfig(se_stop=0.2)``); ``False`` skips the replay (theta link only)
        use_answers : fit the observed-answer corrections (item weights)
        n_anchors : number of score anchors (items whose residual best predicts the published
            score beyond theta; asked in addition to the adaptive items)
        extra_se_stops : further SE stops replayed for the answer corrections (their rows are
            stacked with the main replay's, so that the item weights fit tests of several
            lengths; cross-validation folds keep each model's rows together)
        monotone : make the curves non-decreasing in theta (isotonic); False for a benchmark
            whose published score is not monotone in the bank's ability (TruthfulQA mc2)
        """
        from ..irt.ability import eap, response_array

        y = response_array(responses, bank, extra="ignore") if not isinstance(
            responses, np.ndarray) else np.asarray(responses, float)
        s = np.asarray(scores, float)
        if y.shape[0] != s.shape[0]:
            raise ConfigError(f"{y.shape[0]} calibration models but {s.shape[0]} scores")
        keep = np.isfinite(s)
        y, s = y[keep], s[keep]
        if np.nanmax(s) > 1.0 + 1e-9:
            raise ConfigError("scores must be in 0-1 (divide published percentages by 100)")
        th_eap, se_eap = eap(y, bank)
        th = th_eap if theta is None else np.asarray(theta, float)[keep]
        grid = _GRID
        curve = fit_monotone_spline(th, s, n_knots=n_knots, grid=grid, monotone=monotone)
        resid = s - np.interp(th, grid, curve)
        var = _smoothed_variance(th, resid, grid)
        a, b, c, u = bank.params
        quant = np.quantile(_finite(leaderboard_scores if leaderboard_scores is not None else s),
                            np.linspace(0, 1, 201))
        link = cls(benchmark, grid, curve, var, item_ids=list(bank.item_ids),
                   item_params=np.c_[a, b, c, u], quantiles=quant,
                   info={"n_models": int(s.size), "n_items": int(len(bank)),
                         "model": getattr(bank, "model", None), "monotone": bool(monotone),
                         "rmse_full_bank": float(np.sqrt(np.mean(resid ** 2))),
                         "mae_full_bank": float(np.mean(np.abs(resid)))})
        if cat_config is False:
            return link
        from ..cat.config import CATConfig
        from ..cat.engine import simulate_cat

        cfg = cat_config or CATConfig(se_stop=0.2)
        rng = np.random.default_rng(0) if rng is None else np.random.default_rng(rng)
        res = simulate_cat(bank, cfg, responses=y, rng=rng)
        th_c = res.persons["theta"].to_numpy(float)
        se_c = res.persons["se"].to_numpy(float)
        asked = res.asked_mask()
        # the published score regressed on the short test's own theta: E[score | theta_hat]
        # at that precision (absorbs the estimate's shrinkage and the prior's misfit)
        link.short_grid = fit_monotone_spline(th_c, s, n_knots=n_knots, grid=grid,
                                              monotone=monotone)
        link.se_anchor = (float(np.median(se_eap)), float(np.median(se_c)))
        base = link._curve(th_c, se_c)
        sd = np.sqrt(link._variance(th_c, se_c))
        # smallest scale with 95% of the replayed calibration models inside the interval
        link.interval_scale = float(max(1.0, np.quantile(np.abs(s - base) / sd, 0.95) / _Z95))
        link.info.update({"cat_se_stop": cfg.se_stop, "cat_mean_items": float(asked.sum(1).mean()),
                          "cat_mae_calibration": float(np.mean(np.abs(s - base)))})
        if use_answers:
            P_full = link._probabilities(th)
            e_full = np.nan_to_num(y) - P_full
            delta_full = resid
            ec = e_full - e_full.mean(0)
            dc = delta_full - delta_full.mean()
            corr = (ec * dc[:, None]).sum(0) / np.sqrt((ec ** 2).sum(0) * (dc ** 2).sum(0) + 1e-300)
            anchors = np.argsort(-np.abs(corr), kind="stable")[:max(0, int(n_anchors))]
            link.anchor_items = [link.item_ids[k] for k in anchors]
            runs = [(th_c, se_c, asked)]
            for stop in extra_se_stops:
                rx = simulate_cat(bank, cfg.replace(se_stop=float(stop)), responses=y, rng=rng)
                runs.append((rx.persons["theta"].to_numpy(float),
                             rx.persons["se"].to_numpy(float), rx.asked_mask()))
            groups = np.concatenate([np.arange(len(s))] * len(runs))
            for key in ("cat", "anchors"):
                if key == "anchors" and anchors.size == 0:
                    continue
                E, D, SD = [], [], []
                for th_r, se_r, ask_r in runs:
                    mask = _with(ask_r, anchors) if key == "anchors" else ask_r
                    e = np.nan_to_num(y) - link._probabilities(th_r)
                    E.append(np.where(mask, e, 0.0))
                    D.append(s - link._curve(th_r, se_r))
                    SD.append(np.sqrt(link._variance(th_r, se_r)))
                fit = _ridge_correction(np.vstack(E), np.concatenate(D), np.concatenate(SD),
                                        rng, groups=groups)
                link.corrections[key] = fit
                link.info[f"cat_mae_calibration_{key}"] = fit.pop("cv_mae")
                link.info[f"ridge_lambda_{key}"] = fit.pop("lambda")
            link.info["correction_se_stops"] = [cfg.se_stop, *map(float, extra_se_stops)]
        return link

    # ---------------------------------------------------------------- pieces
    def _curve(self, theta, se=None):
        """g at theta: the whole-bank curve, blended towards the short-test curve as the SE
        grows from the whole bank's median SE to the replayed short test's median SE."""
        full = np.interp(theta, self.theta_grid, self.score_grid)
        if se is None or self.short_grid is None or self.se_anchor is None:
            return full
        lo, hi = self.se_anchor
        w = np.clip((np.asarray(se, float) - lo) / max(hi - lo, 1e-9), 0.0, 1.0)
        return (1.0 - w) * full + w * np.interp(theta, self.theta_grid, self.short_grid)

    def _variance(self, theta, se):
        """Predictive variance before ``interval_scale``: spread of g over N(theta, se^2) plus
        the residual variance at theta."""
        theta = np.asarray(theta, float)
        se = np.asarray(se, float)
        z = np.linspace(-3.0, 3.0, 25)
        w = np.exp(-0.5 * z ** 2)
        w /= w.sum()
        pts = theta[..., None] + se[..., None] * z
        g = self._curve(pts)
        mean = (g * w).sum(-1)
        var_g = ((g - mean[..., None]) ** 2 * w).sum(-1)
        return var_g + np.interp(theta, self.theta_grid, self.var_grid)

    def _probabilities(self, theta, cols=None):
        p = self.item_params if cols is None else self.item_params[cols]
        a, b, c, u = p.T
        t = np.asarray(theta, float)[..., None]
        return c + (u - c) / (1.0 + np.exp(-a * (t - b)))

    def _correction_key(self, answered) -> str | None:
        """Which correction applies to a set of answered item indices (None: no answers)."""
        if not self.corrections or len(answered) == 0:
            return None
        if "anchors" in self.corrections and self.anchor_items:
            index = {i: k for k, i in enumerate(self.item_ids)}
            if all(index[a] in answered for a in self.anchor_items):
                return "anchors"
        return "cat" if "cat" in self.corrections else None

    def _correct(self, key, theta, cols, ys) -> float:
        c = self.corrections[key]
        P = self._probabilities(float(theta), np.asarray(cols))
        return float(c["intercept"] + np.sum(c["weights"][cols] * (np.asarray(ys) - P)))

    def _answers(self, responses: Mapping | None):
        if not responses or self.item_ids is None:
            return [], []
        index = {i: k for k, i in enumerate(self.item_ids)}
        cols, ys = [], []
        for item, value in responses.items():
            k = index.get(str(item))
            if k is None or value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            cols.append(k)
            ys.append(float(value))
        return cols, ys

    # ---------------------------------------------------------------- prediction
    def predict(self, theta, se, responses: Mapping | None = None) -> ScorePrediction:
        """Predicted published score (0-1) of one examinee with a 95% interval and percentile.

        ``responses``: optional mapping item_id -> 0/1 of the answers observed (items not in
        the link's bank are ignored); used for the observed-answer correction (the ``anchors``
        one when every item of :attr:`anchor_items` is answered).
        """
        theta = float(theta)
        se = float(se)
        if not (np.isfinite(theta) and np.isfinite(se) and se >= 0):
            raise ConfigError(f"predict needs a finite theta and SE >= 0, got {theta}, {se}")
        cols, ys = self._answers(responses)
        key = self._correction_key(set(cols))
        r = self._correct(key, theta, cols, ys) if key else 0.0
        scale = self.corrections[key]["scale"] if key else self.interval_scale
        score, lo, hi = (float(v[0]) for v in self._predict_arrays(
            np.array([theta]), np.array([se]), np.array([r]), scale))
        return ScorePrediction(score, lo, hi, self.percentile(score), self.benchmark)

    def _predict_arrays(self, theta, se, r, scale):
        score = np.clip(self._curve(theta, se) + r, 0.0, 1.0)
        half = _Z95 * np.asarray(scale) * np.sqrt(self._variance(theta, se))
        return score, np.clip(score - half, 0.0, 1.0), np.clip(score + half, 0.0, 1.0)

    def predict_many(self, theta, se, *, asked=None, y=None):
        """Vectorized :meth:`predict`: arrays ``(score, lo, hi)``.

        ``asked`` (n, J) boolean and ``y`` (n, J) 0/1 in the link's item order switch on the
        observed-answer correction (the anchor version for rows that answered every anchor).
        """
        theta = np.asarray(theta, float)
        se = np.broadcast_to(np.asarray(se, float), theta.shape)
        r = np.zeros_like(theta)
        scale = np.full(theta.shape, self.interval_scale)
        if asked is not None and y is not None and self.corrections:
            asked = np.asarray(asked, bool)
            e = np.where(asked, np.nan_to_num(np.asarray(y, float)) - self._probabilities(theta),
                         0.0)
            use = asked.any(1)
            keys = np.where(use, "cat", "")
            if "anchors" in self.corrections and self.anchor_items:
                cols = np.asarray([self.item_ids.index(a) for a in self.anchor_items])
                keys = np.where(use & asked[:, cols].all(1), "anchors", keys)
            for key in ("cat", "anchors"):
                rows = keys == key
                if key in self.corrections and rows.any():
                    c = self.corrections[key]
                    r[rows] = c["intercept"] + e[rows] @ c["weights"]
                    scale[rows] = c["scale"]
        return self._predict_arrays(theta, se, r, scale)

    def percentile(self, score) -> float:
        """Percentile (0-100) of ``score`` (0-1) among the leaderboard models."""
        if self.quantiles is None:
            raise BankError("this score link carries no leaderboard distribution")
        q = self.quantiles
        levels = np.linspace(0.0, 100.0, q.size)
        s = float(score)
        if s <= q[0]:
            return 0.0
        if s >= q[-1]:
            return 100.0
        # average over ties of the quantile curve
        lo = np.searchsorted(q, s, side="left")
        hi = np.searchsorted(q, s, side="right")
        if hi > lo:
            return float(levels[lo:hi].mean())
        return float(np.interp(s, q, levels))

    # ---------------------------------------------------------------- I/O
    def to_dict(self) -> dict:
        d = {"format": "atlascat-score-link/1", "benchmark": self.benchmark,
             "theta_grid": _round(self.theta_grid), "score_grid": _round(self.score_grid),
             "var_grid": _round(self.var_grid, 8), "interval_scale": self.interval_scale,
             "quantiles": None if self.quantiles is None else _round(self.quantiles),
             "info": self.info}
        if self.short_grid is not None:
            d["short_grid"] = _round(self.short_grid)
            d["se_anchor"] = list(self.se_anchor)
        if self.corrections:
            d["corrections"] = {k: {"weights": _round(c["weights"], 7), "intercept": c["intercept"],
                                    "scale": c["scale"]} for k, c in self.corrections.items()}
            d["anchor_items"] = list(self.anchor_items)
        if self.item_params is not None:
            d["item_ids"] = list(self.item_ids)
            d["item_params"] = [_round(row) for row in self.item_params]
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "ScoreLink":
        try:
            return cls(d["benchmark"], d["theta_grid"], d["score_grid"], d["var_grid"],
                       interval_scale=d.get("interval_scale", 1.0),
                       item_ids=d.get("item_ids"), item_params=d.get("item_params"),
                       quantiles=d.get("quantiles"), info=d.get("info"),
                       short_grid=d.get("short_grid"), se_anchor=d.get("se_anchor"),
                       corrections=d.get("corrections"), anchor_items=d.get("anchor_items"))
        except KeyError as exc:
            raise BankError(f"score link is missing field {exc.args[0]!r}; rebuild it with "
                            "python -m atlascat.live.build_bank") from None

    def write(self, path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), separators=(",", ":")) + "\n")
        return path

    @classmethod
    def read(cls, path) -> "ScoreLink":
        path = Path(path)
        if not path.exists():
            raise BankError(f"score link file {str(path)!r} does not exist")
        return cls.from_dict(json.loads(path.read_text()))


def _with(mask, cols) -> np.ndarray:
    out = np.array(mask, bool, copy=True)
    out[:, cols] = True
    return out


def _ridge(E, d, lam):
    Em = E.mean(0)
    dm = d.mean()
    Ec = E - Em
    w = np.linalg.solve(Ec.T @ Ec + lam * np.eye(E.shape[1]), Ec.T @ (d - dm))
    return w, float(dm - Em @ w)


def _ridge_correction(E, delta, sd, rng, lams=(3.0, 10.0, 30.0, 100.0, 300.0),
                      groups=None) -> dict:
    """Item weights for the residuals: ridge of delta on E, penalty by 2-fold cross-validation;
    the interval scale from the out-of-fold errors (so it is honest for new models)."""
    n = E.shape[0]
    groups = np.arange(n) if groups is None else np.asarray(groups)
    ids = np.unique(groups)
    fold = np.isin(groups, rng.permutation(ids)[: ids.size // 2])
    best = None
    for lam in lams:
        oof = np.empty(n)
        for f in (fold, ~fold):
            w, b = _ridge(E[~f], delta[~f], lam)
            oof[f] = b + E[f] @ w
        mae = float(np.mean(np.abs(delta - oof)))
        if best is None or mae < best[0]:
            best = (mae, lam, oof)
    mae, lam, oof = best
    w, b = _ridge(E, delta, lam)
    scale = float(np.quantile(np.abs(delta - oof) / sd, 0.95) / _Z95)
    return {"weights": w, "intercept": b, "scale": scale, "lambda": lam, "cv_mae": mae}


def _finite(values) -> np.ndarray:
    v = np.asarray(values, float)
    return v[np.isfinite(v)]


def _round(values, digits: int = 6) -> list:
    return [round(float(v), digits) for v in np.asarray(values, float)]


def score_link_path(bench: str) -> Path:
    """Path of the score link shipped with the bundled content bank ``bench``."""
    from ..datasets import data_path

    name = str(bench).lower()
    if name not in LINK_BENCHMARKS:
        raise ConfigError(f"no score link for {bench!r}; bundled: {', '.join(LINK_BENCHMARKS)}")
    try:
        return data_path(f"banks/{name}_link.json")
    except AtlasError:
        raise BankError(f"the score link of {name!r} is not in this package; build it with "
                        "python -m atlascat.live.build_bank") from None


def load_score_link(bench: str) -> ScoreLink:
    """The score link shipped with the bundled content bank ``bench`` (arc, hellaswag, ...)."""
    return ScoreLink.read(score_link_path(bench))


def bundled_link(bank_arg) -> ScoreLink | None:
    """The score link of ``bank_arg`` when it names a bundled content bank (not a file path).

    ``atlas simulate --bank arc`` (and friends) use it to add the predicted leaderboard score.
    """
    name = str(bank_arg)
    if Path(name).exists() or name.lower() not in LINK_BENCHMARKS:
        return None
    try:
        return load_score_link(name.lower())
    except BankError:
        return None


def load_bundled_bank(bench: str):
    """The shipped content bank ``datasets/data/banks/<bench>.parquet`` (item content kept)."""
    from ..live.items import load_content_bank

    name = str(bench).lower()
    if name not in LINK_BENCHMARKS:
        raise ConfigError(f"no bundled content bank {bench!r}; "
                          f"bundled: {', '.join(LINK_BENCHMARKS)}")
    return load_content_bank(name)


def predict_frame(link: ScoreLink, persons, administered):
    """Predicted leaderboard score per examinee of a ``simulate_cat`` result.

    ``persons``: frame with subject_id, theta, se; ``administered``: frame with subject_id,
    item_id, score (the answers observed). Returns a frame with ``leaderboard_accuracy``,
    ``leaderboard_lo``, ``leaderboard_hi`` (0-1) and ``leaderboard_percentile`` (0-100), in the
    order of ``persons``.
    """
    import pandas as pd

    answers = {sid: dict(zip(g["item_id"].astype(str), g["score"]))
               for sid, g in administered.groupby("subject_id", sort=False)}
    rows = []
    for sid, th, se in zip(persons["subject_id"], persons["theta"], persons["se"]):
        if not (np.isfinite(th) and np.isfinite(se)):
            rows.append((np.nan, np.nan, np.nan, np.nan))
            continue
        p = link.predict(th, se, responses=answers.get(sid))
        rows.append((p.score, p.lo, p.hi, p.percentile))
    return pd.DataFrame(rows, columns=["leaderboard_accuracy", "leaderboard_lo",
                                       "leaderboard_hi", "leaderboard_percentile"])
