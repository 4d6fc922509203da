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

The link is fitted by :class:`atlascat.scorelink.fit.ScoreLinkEstimator`; its honesty rules
are in :mod:`atlascat.scorelink.honesty`.

**Honest outside the data.** The fit also stores the link's *support*: a Gaussian-kernel count
of calibration models per theta-grid point (bandwidth 0.25: about the number of models within
+- 0.3), their theta and published-score ranges and the benchmark's chance level
(:data:`CHANCE`). Where theta's 95% range (theta +- 1.96 SE) reaches a region with fewer than
``min_models`` (10) effective calibration models, the interval's side towards that region goes
to the bound the data cannot exclude: the *floor* (chance level, or the lowest calibration score
if lower) below, ``top`` (1.0) above; below the support the point estimate also falls towards
the floor as the bank's expected accuracy falls towards its guessing floor (instead of being held
at the lowest calibrated score). Answers that do not fit the IRT model (Snijders' lz* < -2.33,
one-sided 1%) widen the interval to its union with the interval the number correct alone
supports. Each case adds a one-line warning to :class:`ScorePrediction`. Inside the support,
with fitting answers, nothing changes.

A link is plain numbers (grids of theta, score and variance; the bank's item parameters and
correction weights); :meth:`ScoreLink.to_dict` / :meth:`ScoreLink.from_dict` round-trip through JSON.
:func:`atlascat.catalogue.load_score_link` reads the one shipped with a bundled bank
(``datasets/data/banks/<bench>_link.json``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

import numpy as np

from ..errors import BankError, ConfigError, warn_user
from . import honesty
from .curve import check_local, rounded
from .prediction import ScorePrediction, with_stop_note
from .settings import (BOTTOM_TOLERANCE, BOUND_MARGIN, CHANCE, LZ_CRITICAL, MIN_FIT_ITEMS, MIN_INFO_STOP,
                       MIN_SUPPORT, PRECISION_FLOOR, PRECISION_RATIO, SUPPORT_BANDWIDTH, Z95)

__all__ = ["ScoreLink", "percentile_of", "with_link_stops"]


def percentile_of(quantiles, score) -> float:
    """Percentile (0-100) of ``score`` on the curve of equally spaced ``quantiles`` (0 below
    the first, 100 above the last, averaged over ties)."""
    q = np.asarray(quantiles, float)
    levels = np.linspace(0.0, 100.0, q.size)
    s = float(score)
    if s <= q[0]:
        return 0.0
    if s >= q[-1]:
        return 100.0
    lo = np.searchsorted(q, s, side="left")
    hi = np.searchsorted(q, s, side="right")
    if hi > lo:
        return float(levels[lo:hi].mean())
    return float(np.interp(s, q, levels))


class ScoreLink:
    """Map theta (+- SE), and optionally the observed answers, to the published score (0-1).

    Fit one with :class:`atlascat.scorelink.fit.ScoreLinkEstimator`; predict with :meth:`predict` (one examinee) or
    :meth:`predict_many` (arrays). See the module docstring for the model.
    """

    def __init__(self, benchmark: str, theta_grid, score_grid, var_grid, *,
                 interval_scale: float = 1.0, item_ids=None, item_params=None, local_scale=None,
                 quantiles=None, info: Mapping | None = None, short_grid=None, se_anchor=None,
                 corrections: Mapping | None = None, anchor_items=None,
                 support: Mapping | None = None, length_factor: Mapping | None = None):
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
        #: interval width multiplier over theta for the theta-only prediction (1 = none)
        self.local_scale = None if local_scale is None else check_local(local_scale,
                                                                         self.theta_grid)
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
            if c.get("local") is not None:
                self.corrections[str(key)]["local"] = check_local(c["local"], self.theta_grid)
        self.anchor_items = [str(i) for i in (anchor_items or [])]
        #: interval width multiplier by the number of answered items, {"counts", "factors"}
        #: (measured on held-out models; :meth:`_length`), None: 1 at every length
        self.length_factor = None
        if length_factor is not None:
            counts = np.asarray(length_factor["counts"], float)
            factors = np.asarray(length_factor["factors"], float)
            if counts.ndim != 1 or counts.shape != factors.shape or counts.size < 1 \
                    or np.any(np.diff(counts) <= 0) or np.any(counts <= 0) \
                    or np.any(~np.isfinite(factors)) or np.any(factors <= 0):
                raise BankError("the score link's length factor needs increasing positive "
                                "counts and one positive factor each")
            self.length_factor = {"counts": counts, "factors": factors}
        self.support = self._normalize_support(support)
        self._bank_cache = None
        self._index = None   # item id -> column, built on first use (_answers)

    def _normalize_support(self, support: Mapping | None) -> dict:
        """What the link knows of its calibration data, with fallbacks for links written
        before the support was stored: the theta range is where ``var_grid`` stops being
        constant (it is held constant beyond the calibration models' thetas), the chance level
        :data:`CHANCE` (else the curve's lowest value), no per-theta count."""
        d = dict(support or {})
        grid = self.theta_grid
        count = d.get("count")
        if count is not None:
            count = np.asarray(count, float)
            if count.shape != grid.shape:
                raise BankError("the score link's support count must match its theta grid")
        theta_range = d.get("theta_range")
        if theta_range is None:
            moving = np.flatnonzero(np.abs(np.diff(self.var_grid)) > 0)
            theta_range = ((grid[moving[0]], grid[moving[-1] + 1]) if moving.size
                           else (grid[0], grid[-1]))
        chance = d.get("chance")
        if chance is None:
            chance = CHANCE.get(self.benchmark.lower(), float(np.min(self.score_grid)))
        floor = d.get("floor")
        floor = float(chance) if floor is None else float(floor)
        score_range = d.get("score_range")
        return {"count": count, "bandwidth": float(d.get("bandwidth", SUPPORT_BANDWIDTH)),
                "min_models": float(d.get("min_models", MIN_SUPPORT)),
                "theta_range": tuple(float(v) for v in theta_range),
                "score_range": None if score_range is None else tuple(float(v) for v in score_range),
                "chance": float(chance), "floor": floor, "top": float(d.get("top", 1.0))}

    @property
    def chance(self) -> float:
        """The benchmark's chance level (0-1) as this link knows it."""
        return self.support["chance"]

    @property
    def knows_chance(self) -> bool:
        """Whether :attr:`chance` is a chance level, not the scale's 0 put in its place (a bank
        folder built from a matrix: ``info["chance_from"] == "matrix"``)."""
        return self.info.get("chance_from") != "matrix"

    @property
    def floor_word(self) -> str:
        """What the notes call the lowest score a weak model's interval reaches: "chance", or
        "the bottom of the scale" where the link knows no chance level (:attr:`knows_chance`)."""
        return "chance" if self.knows_chance else "the bottom of the scale"

    @property
    def metric_range(self) -> tuple[float, float] | None:
        """(low, high) of the metric's own scale its notes and warnings are written on
        (``info["metric_range"]``: a bank folder built with ``--score-range``; low + (high -
        low) x score), or None: percent of 0-1."""
        rng = self.info.get("metric_range")
        return None if rng is None else (float(rng[0]), float(rng[1]))

    def support_bounds(self) -> tuple[float, float]:
        """(low, high) theta between which the link saw enough calibration models: at least
        ``min_models`` kernel-weighted models (bandwidth ``bandwidth``) and inside the
        calibration models' theta range; and, when the whole-bank curve bottoms out more than
        ``BOTTOM_TOLERANCE`` above the floor, above the theta where it goes flat (no calibration
        model scored lower, so a model below it may be at chance). Outside it a prediction carries a warning and its
        interval extends to the floor / top."""
        lo, hi = self.data_bounds()
        # a curve whose flat bottom is above the floor: below where it flattens, the link saw
        # no model score lower, so a lower score (down to chance) is not excluded
        bottom = float(self.score_grid.min())
        if bottom > self.support["floor"] + BOTTOM_TOLERANCE:
            flat = np.flatnonzero(self.score_grid <= bottom + 1e-9)
            lo = max(lo, float(self.theta_grid[flat[-1]]))
        return lo, hi

    def source_abilities(self):
        """(theta nodes, weights) of the calibration models' abilities: the link's theta grid
        weighted by how many of them lie near each point (the support's Gaussian kernel count,
        bandwidth ``support["bandwidth"]``), for :func:`atlascat.design.optimal.theta_design`;
        None when the link keeps no count."""
        count = None if self.support is None else self.support.get("count")
        if count is None or not np.sum(count) > 0:
            return None
        keep = np.asarray(count, float) > 1e-6 * float(np.max(count))
        return self.theta_grid[keep], np.asarray(count, float)[keep]

    def data_bounds(self) -> tuple[float, float]:
        """(low, high) theta with enough calibration models (count and range only)."""
        lo, hi = self.support["theta_range"]
        count = self.support["count"]
        if count is None:
            return lo, hi
        ok = np.flatnonzero(count >= self.support["min_models"])
        if ok.size == 0:
            return lo, lo   # nothing is supported: every theta is outside
        return max(lo, float(self.theta_grid[ok[0]])), min(hi, float(self.theta_grid[ok[-1]]))

    def stop_settings(self, margin: float = BOUND_MARGIN, z: float = 1.96,
                      precision: float | None = None, precision_floor: float | None = None
                      ) -> dict:
        """CATConfig fields of the floor / ceiling and score-precision stopping rules.

        ``floor_theta``: the highest theta at which the short-test curve is still within
        ``margin`` (0-1 score units) of its lowest value; ``ceiling_theta``: the lowest theta at
        which it is within ``margin`` of its highest. An adaptive test whose theta +- z SE lies
        wholly beyond one of them stops (after ``min_items``): more items cannot move the
        predicted score by more than ``margin`` through the curve.

        ``score_curve`` / ``score_sd_stop`` (unless ``precision`` is 0): the short-test
        curve and max(``precision`` x the published score's residual SD around the curve,
        ``precision_floor``) (defaults :data:`PRECISION_RATIO`, :data:`PRECISION_FLOOR`), on
        ``linspace(-6, 6, 49)``: the test stops (after ``min_items``) once the part of the
        score's uncertainty due to theta is that small next to the part no item can remove
        (with 0.5 more items could narrow the interval by at most 1 - 1/sqrt(1.25) = 11%).
        ``min_info_stop`` (with the score-precision rule): stop once no item left has Fisher
        information :data:`MIN_INFO_STOP` at theta (at the ends of the range, where the content
        banks have no item left that could move the estimate: ARC's best item below theta -2.5
        carries < 0.5, its 30th best 0.05; weak models otherwise ran to the end of the bank).
        ``min_items``: the bank's shortest test, when its build set one (``info["min_items"]``;
        ``build_bank.MIN_ITEMS``: ARC, TruthfulQA, WinoGrande 45, GSM8K 55); a user's own
        ``--min-items`` wins over it. Use as ``config.replace(**link.stop_settings())``.
        """
        margin = float(margin)
        if not (np.isfinite(margin) and margin >= 0):
            raise ConfigError(f"the floor/ceiling margin must be >= 0 (score units 0-1), "
                              f"got {margin!r}")
        curve = self.short_grid if self.short_grid is not None else self.score_grid
        grid = self.theta_grid
        # the curve must stay within the margin over the WHOLE region beyond the bound (the
        # same as "within margin of its lowest value" for a monotone curve; a U-shaped one such
        # as TruthfulQA's gets no floor where its low end rises again)
        below = np.maximum.accumulate(curve) - np.minimum.accumulate(curve)
        above = (np.maximum.accumulate(curve[::-1]) - np.minimum.accumulate(curve[::-1]))[::-1]
        low = np.flatnonzero(below <= margin)
        high = np.flatnonzero(above <= margin)
        floor_theta, ceiling_theta = float(grid[low[-1]]), float(grid[high[0]])
        out = {"floor_theta": floor_theta, "ceiling_theta": ceiling_theta, "bound_z": float(z)}
        if floor_theta >= ceiling_theta:   # a flat link: no room for either rule
            out.update(floor_theta=None, ceiling_theta=None)
        precision = PRECISION_RATIO if precision is None else precision
        precision_floor = PRECISION_FLOOR if precision_floor is None else precision_floor
        if precision:
            precision = float(precision)
            if not (np.isfinite(precision) and precision > 0):
                raise ConfigError(f"the score-precision ratio must be > 0, got {precision!r}")
            coarse = np.linspace(-6.0, 6.0, 49)
            out["score_curve"] = tuple(np.round(np.interp(coarse, grid, curve), 6))
            sd = np.sqrt(np.interp(coarse, grid, self.var_grid))
            out["score_sd_stop"] = tuple(np.round(np.maximum(precision * sd,
                                                             float(precision_floor)), 6))
        if precision:
            out["min_info_stop"] = MIN_INFO_STOP
        if self.info.get("min_items") is not None:
            out["min_items"] = int(self.info["min_items"])
        return out

    def __repr__(self) -> str:
        return (f"ScoreLink({self.benchmark!r}, corrections={sorted(self.corrections)}, "
                f"anchors={len(self.anchor_items)}, interval_scale={self.interval_scale:.3g})")

    # ---------------------------------------------------------------- pieces
    def curve(self, theta, se=None):
        """g at theta: the whole-bank curve, blended towards the short-test curve as the SE
        grows from the whole bank's median SE to the replayed short test's median SE."""
        full = np.interp(theta, self.theta_grid, self.score_grid)
        if se is None or self.short_grid is None or self.se_anchor is None:
            return full
        lo, hi = self.se_anchor
        w = np.clip((np.asarray(se, float) - lo) / max(hi - lo, 1e-9), 0.0, 1.0)
        return (1.0 - w) * full + w * np.interp(theta, self.theta_grid, self.short_grid)

    def variance(self, theta, se):
        """Predictive variance before ``interval_scale``: spread of g over N(theta, se^2) plus
        the residual variance at theta."""
        theta = np.asarray(theta, float)
        se = np.asarray(se, float)
        z = np.linspace(-3.0, 3.0, 25)
        w = np.exp(-0.5 * z ** 2)
        w /= w.sum()
        pts = theta[..., None] + se[..., None] * z
        g = self.curve(pts)
        mean = (g * w).sum(-1)
        var_g = ((g - mean[..., None]) ** 2 * w).sum(-1)
        return var_g + np.interp(theta, self.theta_grid, self.var_grid)

    def probabilities(self, theta, cols=None):
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
        P = self.probabilities(float(theta), np.asarray(cols))
        return float(c["intercept"] + np.sum(c["weights"][cols] * (np.asarray(ys) - P)))

    def _answers(self, responses: Mapping | None):
        if not responses or self.item_ids is None:
            return [], []
        if self._index is None:
            self._index = {i: k for k, i in enumerate(self.item_ids)}
        index, cols, ys, unknown = self._index, [], [], []
        for item, value in responses.items():
            k = index.get(str(item))
            if k is None:
                unknown.append(str(item))
            if k is None or value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            cols.append(k)
            ys.append(float(value))
        if unknown:
            shown = ", ".join(repr(i) for i in unknown[:3]) + (", ..." if len(unknown) > 3 else "")
            warn_user(f"{len(unknown)} of {len(responses)} answers are to items the "
                      f"{self.benchmark} score link does not have ({shown}; its ids look like "
                      f"{self.item_ids[0]!r}): ignored")
        return cols, ys

    # ---------------------------------------------------------------- prediction
    def predict(self, theta, se, responses: Mapping | None = None, *,
                stop_reason: str | None = None, lz_star: float | None = None) -> ScorePrediction:
        """Predicted published score (0-1) of one examinee with a 95% interval and percentile.

        ``responses``: optional mapping item_id -> 0/1 of the answers observed (items not in
        the link's bank are ignored with a warning); used for the observed-answer correction (the ``anchors``
        one when every item of :attr:`anchor_items` is answered) and, from ``MIN_FIT_ITEMS``
        answers on, for person fit (lz*). ``stop_reason``: the adaptive test's stop reason;
        ``"floor"`` / ``"ceiling"`` (the floor/ceiling rule of :meth:`stop_settings`) add the
        note "at or near chance (<= X%)" / "at or near the top (>= X%)". ``lz_star``: the
        answers' lz* at ``theta`` if already computed (:meth:`lz_star_many`).

        Outside the link's data (theta +- 1.96 SE beyond :meth:`support_bounds`) the interval
        extends to the floor (below) or the top (above), and when the answers do not fit the
        IRT model (lz* < ``LZ_CRITICAL``) it becomes the union with the interval the number
        correct alone supports (see :meth:`_accuracy_interval`); each adds a warning.
        """
        if np.size(theta) != 1 or np.size(se) != 1:
            raise ConfigError("predict takes one examinee's theta and se (numbers); for many "
                              "at once use predict_many(theta, se)")
        try:
            theta = float(np.asarray(theta, dtype=float).reshape(-1)[0])
            se = float(np.asarray(se, dtype=float).reshape(-1)[0])
        except (TypeError, ValueError):
            raise ConfigError(f"predict needs a number for theta and for se, got {theta!r}, "
                              f"{se!r}"[:160]) from None
        if not (np.isfinite(theta) and np.isfinite(se) and se >= 0):
            raise ConfigError(f"predict needs a finite theta and SE >= 0, got {theta}, {se}")
        cols, ys = self._answers(responses)
        key = self._correction_key(set(cols))
        r = self._correct(key, theta, cols, ys) if key else 0.0
        scale = (self.corrections[key]["scale"] if key else self.interval_scale) * float(
            self._local(key, np.array([theta]))[0]) * float(self._length(len(cols)))
        th, sv = np.array([theta]), np.array([se])
        score, lo, hi = self._predict_arrays(th, sv, np.array([r]), scale)
        score, lo, hi, below, above = self.honest(th, sv, score, lo, hi)
        score, lo, hi = float(score[0]), float(lo[0]), float(hi[0])
        lz = None
        if len(cols) >= MIN_FIT_ITEMS and self.item_params is not None:
            if lz_star is None:
                row = np.full((1, len(self.item_ids)), np.nan)
                row[0, cols] = ys
                lz_star = float(self._lz_star(th, row)[0])
            lz = lz_star if np.isfinite(lz_star) else None
        misfit = lz is not None and lz < LZ_CRITICAL
        if misfit:
            alo, ahi = honesty.accuracy_interval(self, cols, ys, scale)
            lo, hi = min(lo, alo), max(hi, ahi)
        guess = bool(honesty.chance_not_excluded(self, np.array([len(cols)]),
                                                 np.array([float(np.sum(ys))]))[0])
        if guess:
            lo = min(lo, self.chance)
        warnings, flags = honesty.warnings_for(
            self, theta, se, bool(below[0]), bool(above[0]), lz if misfit else None,
            (int(np.sum(ys)), len(cols)) if guess else None)
        pred = ScorePrediction(score, lo, hi, self.percentile(score), self.benchmark,
                               tuple(warnings), "+".join(flags), lz, self.metric_range)
        return with_stop_note(pred, stop_reason, self.chance, self.metric_range, self.floor_word)

    def _local(self, key, theta) -> np.ndarray:
        """The interval width multiplier at ``theta`` for correction ``key`` (None: theta
        only); 1 for links fitted before it existed."""
        grid = self.local_scale if key is None else self.corrections[key].get("local")
        if grid is None:
            return np.ones(np.shape(theta))
        return np.interp(theta, self.theta_grid, grid)

    def _length(self, count) -> np.ndarray:
        """The interval width multiplier of a test that answered ``count`` of the link's items:
        :attr:`length_factor` interpolated in log count (its end values beyond its ends); 1
        without answers or without a length factor."""
        count = np.asarray(count, float)
        if self.length_factor is None:
            return np.ones(count.shape)
        lf = self.length_factor
        f = np.interp(np.log(np.maximum(count, 1.0)), np.log(lf["counts"]), lf["factors"])
        return np.where(count > 0, f, 1.0)

    def _predict_arrays(self, theta, se, r, scale):
        score = np.clip(self.curve(theta, se) + r, 0.0, 1.0)
        half = Z95 * np.asarray(scale) * np.sqrt(self.variance(theta, se))
        return score, np.clip(score - half, 0.0, 1.0), np.clip(score + half, 0.0, 1.0)

    def expected_accuracy(self, theta, cols=None):
        return self.probabilities(theta, cols).mean(-1)

    def honest(self, theta, se, score, lo, hi):
        """:func:`atlascat.scorelink.honesty.honest` of this link: outside its data the
        interval reaches the floor / top and, below it, the score falls towards the floor.
        Returns (score, lo, hi, below, above)."""
        return honesty.honest(self, theta, se, score, lo, hi)

    def honest_curve(self, theta) -> np.ndarray:
        """The whole-bank curve at ``theta`` (any shape), falling towards the floor below the
        link's data as :meth:`predict` does (no interval)."""
        flat = np.asarray(theta, float).reshape(-1)
        g = np.interp(flat, self.theta_grid, self.score_grid)
        out = self.honest(flat, np.zeros_like(flat), g, g.copy(), g.copy())[0]
        return out.reshape(np.shape(theta))

    def _item_bank(self):
        if self._bank_cache is None:
            from ..irt.bank import ItemBank

            a, b, c, u = self.item_params.T
            self._bank_cache = ItemBank(self.item_ids, a, b, c, u)
        return self._bank_cache

    def _lz_star(self, theta, y):
        """Snijders' lz* of the answered items (NaN = not asked) at the test's theta, with the
        MAP estimating equation and the N(0, 1) prior (the adaptive test's EAP is close to the
        MAP; its lz* correction is the nearest of the three lz* knows)."""
        from ..irt.fit import person_fit

        pf = person_fit(np.asarray(y, float), self._item_bank(), method="map",
                        theta=np.asarray(theta, float))
        return pf["lz_star"].to_numpy(float)

    def lz_star_many(self, theta, responses) -> np.ndarray:
        """lz* of n examinees in one pass, as :meth:`predict` computes it for one (``responses``:
        n mappings item_id -> 0/1 or None); NaN below ``MIN_FIT_ITEMS`` answers in the bank."""
        theta = np.asarray(theta, float).reshape(-1)
        out = np.full(theta.shape, np.nan)
        if self.item_params is None or theta.size == 0:
            return out
        y = np.full((theta.size, len(self.item_ids)), np.nan)
        for i, (cols, ys) in enumerate(map(self._answers, responses)):
            y[i, cols] = ys
        if (enough := (np.sum(~np.isnan(y), 1) >= MIN_FIT_ITEMS) & np.isfinite(theta)).any():
            out[enough] = self._lz_star(theta[enough], y[enough])
        return out

    def predict_many(self, theta, se, *, asked=None, y=None, flags: bool = False):
        """Vectorized :meth:`predict`: arrays ``(score, lo, hi)`` (and ``flag``, an object array
        of :attr:`ScorePrediction.flag` strings, with ``flags=True``).

        ``asked`` (n, J) boolean and ``y`` (n, J) 0/1 in the link's item order switch on the
        observed-answer correction (the anchor version for rows that answered every anchor)
        and person fit.
        """
        theta = np.asarray(theta, float)
        se = np.broadcast_to(np.asarray(se, float), theta.shape)
        r = np.zeros_like(theta)
        scale = np.full(theta.shape, self.interval_scale)
        misfit = np.zeros(theta.shape, bool)
        if asked is not None and y is not None and self.corrections:
            asked = np.asarray(asked, bool)
            e = np.where(asked, np.nan_to_num(np.asarray(y, float)) - self.probabilities(theta),
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
                    scale[rows] = c["scale"] * self._local(key, theta[rows])
        if asked is None or y is None or not self.corrections:
            scale = scale * self._local(None, theta)
        else:
            plain = ~np.asarray(asked, bool).any(1)
            scale[plain] = scale[plain] * self._local(None, theta[plain])
        if asked is not None:
            scale = scale * self._length(np.asarray(asked, bool).sum(-1))
        score, lo, hi = self._predict_arrays(theta, se, r, scale)
        score, lo, hi, below, above = self.honest(theta, se, score, lo, hi)
        if asked is not None and y is not None and self.item_params is not None:
            asked = np.asarray(asked, bool)
            enough = asked.sum(1) >= MIN_FIT_ITEMS
            if enough.any():
                yy = np.where(asked, np.asarray(y, float), np.nan)[enough]
                lz = np.full(theta.shape, np.nan)
                lz[enough] = self._lz_star(theta[enough], yy)
                misfit = np.nan_to_num(lz, nan=0.0) < LZ_CRITICAL
                for i in np.flatnonzero(misfit):
                    cols = np.flatnonzero(asked[i])
                    alo, ahi = honesty.accuracy_interval(self, cols,
                                                         np.asarray(y, float)[i, cols], scale[i])
                    lo[i], hi[i] = min(lo[i], alo), max(hi[i], ahi)
        guess = np.zeros(theta.shape, bool)
        if asked is not None and y is not None:
            asked = np.asarray(asked, bool)
            k = np.where(asked, np.nan_to_num(np.asarray(y, float)), 0.0).sum(1)
            guess = honesty.chance_not_excluded(self, asked.sum(1), k)
            lo = np.where(guess, np.minimum(lo, self.chance), lo)
        if not flags:
            return score, lo, hi
        names = np.array(["+".join(n for n, f in zip(("below_data", "above_data", "misfit",
                                                      "chance"), fl) if f)
                          for fl in zip(below, above, misfit, guess)], dtype=object)
        return score, lo, hi, names

    def percentile(self, score) -> float:
        """Percentile (0-100) of ``score`` (0-1) among the leaderboard models."""
        if self.quantiles is None:
            raise BankError("this score link carries no leaderboard distribution")
        return percentile_of(self.quantiles, score)

    # ---------------------------------------------------------------- I/O
    def to_dict(self) -> dict:
        d = {"format": "atlascat-score-link/1", "benchmark": self.benchmark,
             "theta_grid": rounded(self.theta_grid), "score_grid": rounded(self.score_grid),
             "var_grid": rounded(self.var_grid, 8), "interval_scale": self.interval_scale,
             "quantiles": None if self.quantiles is None else rounded(self.quantiles),
             "info": self.info}
        if self.local_scale is not None:
            d["local_scale"] = rounded(self.local_scale, 4)
        if self.short_grid is not None:
            d["short_grid"] = rounded(self.short_grid)
            d["se_anchor"] = list(self.se_anchor)
        if self.corrections:
            d["corrections"] = {k: {"weights": rounded(c["weights"], 7), "intercept": c["intercept"],
                                    "scale": c["scale"],
                                    **({"local": rounded(c["local"], 4)} if "local" in c else {})}
                                for k, c in self.corrections.items()}
            d["anchor_items"] = list(self.anchor_items)
        if self.length_factor is not None:
            d["length_factor"] = {k: rounded(v, 4) for k, v in self.length_factor.items()}
        sup = self.support
        d["support"] = {"count": None if sup["count"] is None else rounded(sup["count"], 3),
                        "bandwidth": sup["bandwidth"], "min_models": sup["min_models"],
                        "theta_range": list(sup["theta_range"]),
                        "score_range": None if sup["score_range"] is None
                        else list(sup["score_range"]),
                        "chance": sup["chance"], "floor": sup["floor"], "top": sup["top"]}
        if self.item_params is not None:
            d["item_ids"] = list(self.item_ids)
            d["item_params"] = [rounded(row) for row in self.item_params]
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "ScoreLink":
        if not isinstance(d, Mapping):
            raise BankError(f"a score link is a JSON object, not a {type(d).__name__}")
        try:
            return cls(d["benchmark"], d["theta_grid"], d["score_grid"], d["var_grid"],
                       interval_scale=d.get("interval_scale", 1.0),
                       local_scale=d.get("local_scale"), item_ids=d.get("item_ids"), item_params=d.get("item_params"),
                       quantiles=d.get("quantiles"), info=d.get("info"),
                       short_grid=d.get("short_grid"), se_anchor=d.get("se_anchor"),
                       corrections=d.get("corrections"), anchor_items=d.get("anchor_items"),
                       support=d.get("support"), length_factor=d.get("length_factor"))
        except KeyError as exc:
            raise BankError(f"score link is missing field {exc.args[0]!r}; rebuild it with "
                            "python -m atlascat.live.build_bank") from None
        except (TypeError, ValueError) as exc:   # a hand-edited field of the wrong shape
            raise BankError(f"score link {d.get('benchmark')!r} is malformed ({exc})") from None

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
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BankError(f"score link file {str(path)!r} cannot be read ({exc})") from None
        return cls.from_dict(d)


def with_link_stops(config, settings: dict, min_items_given: bool = False):
    """``config`` (a :class:`~atlascat.cat.config.CATConfig`) with a score link's stopping
    rules (:meth:`ScoreLink.stop_settings`).

    The bank's own shortest test (``settings["min_items"]``) applies only when the user gave no
    minimum of their own (``min_items_given``: ``--min-items``), and never above the config's
    ``max_items``.
    """
    settings = dict(settings)
    if min_items_given or "min_items" not in settings:
        settings.pop("min_items", None)
    else:
        settings["min_items"] = min(int(settings["min_items"]), config.stopping.max_items)
    return config.replace(**settings)
