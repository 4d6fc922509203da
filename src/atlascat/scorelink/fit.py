"""Fitting a score link on calibration models: :class:`ScoreLinkEstimator`.

The estimator follows scikit-learn's contract: ``__init__`` stores the settings, :meth:`fit`
takes the calibration models' answers and published scores and sets the fitted attributes
``link_`` (the :class:`~atlascat.scorelink.score_link.ScoreLink` that predicts) and
``n_models_``. What the link is (the curves, the answer corrections, the interval scales and
its support) is in :mod:`atlascat.scorelink.score_link`'s docstring; how it is fitted:

1. the whole-bank EAP theta of every calibration model, and a monotone cubic spline of the
   published score on it (:func:`~atlascat.scorelink.curve.fit_monotone_spline`), with the
   residual variance kernel-smoothed over theta and the support counted
   (:func:`~atlascat.scorelink.curve.fit_support`);
2. an adaptive test replayed on the models' answers (``cat_config``): the short-test curve, the
   SE anchors of the blend, and the interval scales that cover :data:`COVERAGE_TARGET` of the
   replayed models;
3. with ``use_answers``, the answer corrections: ridge regressions of the score's deviation
   from the curve on the answered items' residuals (:func:`~atlascat.scorelink.correction.
   ridge_correction`), one for the adaptive items and one with the anchor items answered.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .correction import ridge_correction, with_columns
from .curve import (MIN_LINK_MODELS, finite_values, fit_monotone_spline, fit_support,
                    knots_for, local_scale, smoothed_variance)
from .score_link import ScoreLink
from .settings import COVERAGE_TARGET, GRID, MIN_SUPPORT, Z95

__all__ = ["ScoreLinkEstimator"]


class ScoreLinkEstimator:
    """Fit a :class:`~atlascat.scorelink.score_link.ScoreLink` on calibration models.

    Parameters
    ----------
    benchmark : the benchmark's name (its chance level from :data:`CHANCE` when known)
    n_knots : interior knots of the spline (default :func:`knots_for` the number of models:
        6 from 40 models up, 1 at 20; fewer than 20 models are refused)
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
    chance : the benchmark's chance level (0-1); default :data:`CHANCE` for a known
        ``benchmark``, else the lowest calibration score. The interval's floor outside
        the data is min(chance, the 1% quantile of the calibration scores).
    min_models : fewest calibration models accepted (:data:`MIN_LINK_MODELS`, 20; a
        cross-fitting fold may go lower, with ``n_knots=0``: a cubic polynomial)
    min_support : kernel-weighted models a theta region needs to count as inside the data
        (default :data:`MIN_SUPPORT`, 10, the shipped banks'; a small population wants
        :func:`atlascat.scorelink.curve.support_for` its size, as the bank builder passes)
    random_state : seed (or Generator) of the replayed adaptive tests and the
        cross-validation folds (default 0)

    Attributes
    ----------
    link_ : the fitted ScoreLink
    n_models_ : calibration models with a score
    """

    def __init__(self, benchmark: str = "", *, n_knots: int | None = None, cat_config=None,
                 use_answers: bool = True, n_anchors: int = 5, extra_se_stops=(),
                 monotone: bool = True, chance: float | None = None,
                 min_models: int = MIN_LINK_MODELS, min_support: float | None = None,
                 random_state=None):
        self.benchmark = benchmark
        self.n_knots = n_knots
        self.cat_config = cat_config
        self.use_answers = use_answers
        self.n_anchors = n_anchors
        self.extra_se_stops = extra_se_stops
        self.monotone = monotone
        self.chance = chance
        self.min_models = min_models
        self.min_support = min_support
        self.random_state = random_state

    def fit(self, bank, responses, scores, *, theta=None,
            population_scores=None) -> "ScoreLinkEstimator":
        """Fit on calibration models; sets ``link_`` and ``n_models_``, returns self.

        Parameters
        ----------
        bank : the calibrated ItemBank
        responses : their answers, a ResponseMatrix or an (n, J) array in bank order
        scores : their published scores, 0-1, shape (n,) (NaN rows are ignored)
        theta : their whole-bank theta (default: EAP on all bank items, N(0, 1), 61 nodes)
        population_scores : the score (0-1) of every model of the population a percentile
            ranks among (:meth:`ScoreLink.percentile`; default ``scores``)
        """
        benchmark, cat_config, monotone = self.benchmark, self.cat_config, self.monotone
        use_answers, n_anchors = self.use_answers, self.n_anchors
        extra_se_stops, chance = tuple(self.extra_se_stops), self.chance
        min_models, min_support, rng = self.min_models, self.min_support, self.random_state
        n_knots = self.n_knots
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
        if s.size < min_models:
            raise ConfigError(f"a score link needs at least {min_models} calibration models "
                              f"with a published score, got {s.size}; add models' results")
        n_knots = knots_for(s.size) if n_knots is None else int(n_knots)
        th_eap, se_eap = eap(y, bank)
        th = th_eap if theta is None else np.asarray(theta, float)[keep]
        grid = GRID
        curve = fit_monotone_spline(th, s, n_knots=n_knots, grid=grid, monotone=monotone)
        resid = s - np.interp(th, grid, curve)
        var = smoothed_variance(th, resid, grid)
        a, b, c, u = bank.params
        quant = np.quantile(finite_values(population_scores if population_scores is not None else s),
                            np.linspace(0, 1, 201))
        link = ScoreLink(benchmark, grid, curve, var, item_ids=list(bank.item_ids),
                   item_params=np.c_[a, b, c, u], quantiles=quant,
                   info={"n_models": int(s.size), "n_items": int(len(bank)),
                         "model": getattr(bank, "model", None), "monotone": bool(monotone),
                         "rmse_full_bank": float(np.sqrt(np.mean(resid ** 2))),
                         "mae_full_bank": float(np.mean(np.abs(resid)))},
                   support=fit_support(th, s, grid, benchmark, chance,
                                       min_models=MIN_SUPPORT if min_support is None
                                       else float(min_support)))
        if cat_config is False:
            return self._fitted(link)
        from ..cat.config import CATConfig
        from ..cat.simulate import simulate_cat

        cfg = cat_config or CATConfig(se_stop=0.2)
        rng = np.random.default_rng(0 if rng is None else rng)
        res = simulate_cat(bank, cfg, responses=y, rng=rng)
        th_c = res.persons["theta"].to_numpy(float)
        se_c = res.persons["se"].to_numpy(float)
        asked = res.asked_mask()
        # the published score regressed on the short test's own theta: E[score | theta_hat]
        # at that precision (absorbs the estimate's shrinkage and the prior's misfit)
        link.short_grid = fit_monotone_spline(th_c, s, n_knots=n_knots, grid=grid,
                                              monotone=monotone)
        link.se_anchor = (float(np.median(se_eap)), float(np.median(se_c)))
        base = link.curve(th_c, se_c)
        sd = np.sqrt(link.variance(th_c, se_c))
        # the interval's width over theta follows the replayed models' standardized errors
        # (kernel-smoothed, shrunk to 1 where few models are), then the smallest overall scale
        # with 95% of the replayed calibration models inside the interval
        z = (s - base) / sd
        link.local_scale = local_scale(th_c, z, grid)
        f = np.interp(th_c, grid, link.local_scale)
        link.interval_scale = float(max(1.0, np.quantile(np.abs(z) / f, COVERAGE_TARGET)
                                        / Z95))
        link.info.update({"cat_se_stop": cfg.stopping.se_stop, "cat_mean_items": float(asked.sum(1).mean()),
                          "cat_mae_calibration": float(np.mean(np.abs(s - base)))})
        if use_answers:
            P_full = link.probabilities(th)
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
                    mask = with_columns(ask_r, anchors) if key == "anchors" else ask_r
                    e = np.nan_to_num(y) - link.probabilities(th_r)
                    E.append(np.where(mask, e, 0.0))
                    D.append(s - link.curve(th_r, se_r))
                    SD.append(np.sqrt(link.variance(th_r, se_r)))
                fit = ridge_correction(np.vstack(E), np.concatenate(D), np.concatenate(SD),
                                        rng, groups=groups,
                                        theta=np.concatenate([r[0] for r in runs]), grid=grid)
                link.corrections[key] = fit
                link.info[f"cat_mae_calibration_{key}"] = fit.pop("cv_mae")
                link.info[f"ridge_lambda_{key}"] = fit.pop("lambda")
            link.info["correction_se_stops"] = [cfg.stopping.se_stop, *map(float, extra_se_stops)]
        return self._fitted(link)

    def _fitted(self, link: ScoreLink) -> "ScoreLinkEstimator":
        self.link_ = link
        self.n_models_ = int(link.info["n_models"])
        return self
