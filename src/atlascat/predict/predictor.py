"""A benchmark-score predictor that stays right for models unlike the source models.

:class:`BenchmarkPredictor` is fitted from a calibrated :class:`~atlascat.irt.bank.ItemBank`,
the source models' answers (a :class:`~atlascat.responses.ResponseMatrix` over ALL the
benchmark's items, including any the bank dropped) and their scores (default: each model's mean
over all items, the benchmark score). It asks ``budget`` items one after another, each drawn with
a probability proportional to two models' uncertainty about it (the IRT model and a level model
made from the strongest source models' answers, mixed with uniform), and predicts the mean over
all items with the estimators of :mod:`atlascat.predict.estimators`: Des Raj's estimator with the
two models' predictions as control variates (unbiased whatever the models, with a variance
estimate valid by design), pooled with the source-calibrated model prediction (the IRT
prediction combined with a ridge regression of the score on the asked items' answers among the
source models, :mod:`atlascat.predict.regression`) while the two agree,
and reduced to the design-based estimate when they do not or when the target lies beyond the
source models (a target outside the source population). The 95% interval is the design-based
one, widened to contain the point prediction.

Fitting replays the same design on the source models (``n_replays`` runs each) to calibrate the
model prediction to their scores, G = alpha + beta * M + gamma * R, R each source model's
leave-one-out ridge prediction on its replayed items: from ``RIDGE_FIT_MIN_MODELS`` (40) source
models (alpha, beta, gamma) by least squares on the replays (stacking, Wolpert 1992); from fewer,
G = (G_M + G_R) / 2, the mean of the two predictions each calibrated alone (G_M = a_M + b_M M,
G_R = a_R + b_R R, least squares): the weights fitted on a few dozen models' replays are noisy,
and M's replays understate its error (the items are calibrated on those very models; R's are
left out), so an equal-weight mean is the safer combination (the "forecast combination puzzle",
Smith and Wallis 2009). Then tau^2, G's mean squared error on the replays (floored at
``min_tau`` ^ 2), and the range of their thetas.

Items the bank dropped (answered alike by every source model) keep a place in the score: they get
the bank's median slope and a difficulty one unit beyond the hardest (all failed) or easiest
(all solved) item; the design-based correction absorbs any error this makes.

References: Wolpert (1992). Stacked generalization. Neural Networks 5, 241-259. Smith and Wallis
(2009). A simple explanation of the forecast combination puzzle. Oxford Bulletin of Economics
and Statistics 71, 331-355.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..irt.defaults import QUADPTS, THETA_RANGE
from ..errors import ConfigError, ResponseDataError
from ..irt.quadrature import normal_quadrature
from ..responses import ResponseMatrix
from . import estimators as est
from . import regression

__all__ = ["BenchmarkPredictor", "MIN_SOURCE_MODELS"]

MIN_SOURCE_MODELS = 20
RIDGE_FIT_MIN_MODELS = 40  # the ridge part's weight fitted from this many source models (fewer:
#                           the mean of the calibrated IRT and ridge predictions)
STACK_MIN_MODELS = 60     # fitted_weight=None: D's weight fitted from this many source models
_KIND = "atlascat.predict.BenchmarkPredictor"
_SCORE_MAP_KEYS = ("intercept", "slope", "resid_sd")
_VERSION = 8
_READS = (2, 3, 4, 5, 6, 7, 8)  # version 2: no level model (the IRT model alone); 3: no ridge
#                          part; 4: the design estimate is the item mean even with scores given;
#                          5: a design estimate beyond the source scores flags whatever G is;
#                          6: no item dispersion (draws as for 0/1 answers); 7: the ridge part
#                          by default from 40 source models only (all read alike: G = alpha +
#                          beta M + gamma R, gamma None without a ridge part)


class BenchmarkPredictor:
    """Predicted full-benchmark score from a sequential sample of its items (module docstring).

    Parameters
    ----------
    budget : items asked per target (default 50)
    mix : share of each draw's probability proportional to the models' uncertainty, the rest
        uniform, 0-1 (default 0.7; 0 = simple random sampling)
    share : the level model's share of that uncertainty part, 0-1 (default 0.5; 0 = the IRT
        model's uncertainty alone; the level model is a control variate in either case)
    level_fraction : the strongest share of the source models (by score) whose proportions
        correct make the level model (default 0.25, at least 3 models; 0 = no level model, the
        IRT model alone)
    z_cut : a target whose design and model predictions differ by more than z_cut combined SEs
        is treated as outside the source population (default 3.0)
    theta_quantile : a target whose theta lies beyond the [q, 1 - q] quantiles of the source
        models' replayed thetas is treated as outside (default 0: beyond all of them)
    d_margin : a design estimate more than d_margin SEs beyond the source scores flags the
        target as outside (default 0: its point value)
    model_gate : a design estimate beyond the source scores flags the target only where the
        calibrated model prediction G lies within model_gate tau of the same edge (default 2.5;
        None: wherever G lies). A target beyond the strongest source models looks like them to
        the model; a design estimate beyond them for a target the model puts well inside is
        the design's sampling noise
    chance : the score of a model answering at random, 0-1 (default None: unknown). Where the
        weakest source model scores at chance (within two binomial SEs over the benchmark's
        items, sqrt(chance (1 - chance) / N)), no model can be much weaker, so a design estimate,
        prediction or theta below the source models is sampling noise, not a weaker target:
        only one beyond their top flags the target as outside
    ridge : combine the IRT prediction with a ridge regression of the score on the asked
        items' answers among the source models (the source models' answers are kept in
        predictor.json for it): their weights fitted on the replays from
        ``RIDGE_FIT_MIN_MODELS`` (40) source models, the mean of the two calibrated
        predictions from fewer (module docstring). Default None or True: the ridge part.
        False: the IRT prediction alone
    fitted_weight : D's weight in the pooled prediction fitted by least squares on the source
        models' replays (default None: from ``STACK_MIN_MODELS`` (60) source models; the replays
        of fewer models, on items calibrated on them, understate G's error for a new model).
        False: the precision-weighted mean
    n_replays : design replays per source model when fitting the calibration (default 2)
    min_tau : floor of the model prediction's RMS error, 0-1 (default 0.01)
    quadpts, theta_range : the theta grid (61 nodes on [-6, 6], N(0, 1) prior)
    score_range : (low, high) of the metric's own scale (a judge's 1-10, BLEU 0-100), as
        ``atlas build-bank --score-range`` keeps it in a bank folder's manifest (default None:
        a 0-1 score, printed in percent). The predictor models every answer and score on 0-1
        (give them mapped, (x - low) / (high - low), as ``fit``, ``replay``, ``session().record``
        and ``chance`` take them); its predictions are reported on the scale, low + (high -
        low) x score: a session's printed prediction (its fields stay 0-1) and :meth:`replay`'s
        columns, as a ``--score-range`` folder's ``atlas simulate`` writes them

    Fitted attributes: ``item_ids_``, ``a_``, ``b_``, ``c_``, ``u_`` (every benchmark item),
    ``level_x_``, ``level_c0_`` (the level model; None from a version-2 predictor.json),
    ``alpha_``, ``beta_``, ``gamma_`` (None without a ridge part), ``ridge_answers_``,
    ``ridge_scores_`` (the source models' answers and scores), ``design_weight_``,
    ``pooled_tau2_`` (None where not fitted), ``tau2_``, ``n_source_``, ``source_range_`` (min,
    max source score),
    ``model_range_`` (min, max of the source models' replayed IRT prediction M),
    ``theta_support_`` (the source thetas' quantiles), ``score_map_`` ((c0, c1, r) of
    :func:`score_map` when the scores are not the item mean, else None: the design estimate of
    the mean over the items is mapped to the score, s = c0 + c1 D, with SE sqrt(c1^2 SE_D^2 +
    r^2); r, the map's leave-one-out error on the source models, is 0 where the score is a
    linear rescaling of the mean, and only then is the interval valid by design alone).
    """

    @property
    def metric_range_(self):
        """(low, high) of the metric's own scale its predictions print on (``score_range``; a
        ``--score-range`` bank folder's, set by :func:`atlascat.bankdir.predict.load_predictor`),
        None: percent."""
        return _check_scale(self.score_range)

    @metric_range_.setter
    def metric_range_(self, value):
        self.score_range = None if value is None else tuple(value)

    def __init__(self, budget: int = 50, *, mix: float = 0.7, share: float = 0.5,
                 level_fraction: float = 0.25, z_cut: float = 3.0,
                 theta_quantile: float = 0.0, d_margin: float = 0.0, chance=None,
                 ridge=None, fitted_weight=None, model_gate=2.5, n_replays: int = 2,
                 min_tau: float = 0.01, quadpts: int = QUADPTS, theta_range=THETA_RANGE,
                 score_range=None):
        self.budget = budget
        self.mix = mix
        self.share = share
        self.level_fraction = level_fraction
        self.z_cut = z_cut
        self.theta_quantile = theta_quantile
        self.d_margin = d_margin
        self.chance = chance
        self.ridge = ridge
        self.fitted_weight = fitted_weight
        self.model_gate = model_gate
        self.n_replays = n_replays
        self.min_tau = min_tau
        self.quadpts = quadpts
        self.theta_range = tuple(theta_range)
        self.score_range = score_range

    # ------------------------------------------------------------------ fitting
    def _check(self, budget=None):
        from ..validation import check_finite

        budget = self.budget if budget is None else budget
        if float(check_finite(budget, "budget")) != int(float(budget)) or isinstance(
                budget, (str, bool)):   # text that is not a number: check_finite names it
            raise ConfigError(f"budget must be a whole number of items, got {budget!r}")
        for name, value in (("budget", budget), ("mix", self.mix), ("share", self.share),
                            ("level_fraction", self.level_fraction), ("z_cut", self.z_cut),
                            ("d_margin", self.d_margin), ("theta_quantile", self.theta_quantile),
                            ("min_tau", self.min_tau), ("chance", self.chance),
                            ("model_gate", self.model_gate)):
            if value is not None:
                check_finite(value, name)   # text or NaN: a ConfigError naming the setting
        if int(budget) < 2:
            raise ConfigError(f"budget must be at least 2 items, got {budget}")
        if not 0.0 <= float(self.mix) < 1.0:
            raise ConfigError(f"mix must be in [0, 1), got {self.mix}; 1 - mix is the uniform "
                              "share that keeps the estimate unbiased")
        if not 0.0 <= float(self.share) <= 1.0:
            raise ConfigError(f"share must be in [0, 1], got {self.share}")
        if not 0.0 <= float(self.level_fraction) <= 1.0:
            raise ConfigError(f"level_fraction must be in [0, 1], got {self.level_fraction}")
        if not float(self.d_margin) >= 0.0:
            raise ConfigError(f"d_margin must be >= 0, got {self.d_margin}")
        if self.chance is not None and not 0.0 <= float(self.chance) < 1.0:
            raise ConfigError(f"chance must be in [0, 1), got {self.chance}")
        if not 0.0 <= float(self.theta_quantile) < 0.5:
            raise ConfigError(f"theta_quantile must be in [0, 0.5), got {self.theta_quantile}")
        if not self.z_cut > 0 or not self.min_tau > 0:
            raise ConfigError("z_cut and min_tau must be positive")
        if self.model_gate is not None and not float(self.model_gate) >= 0.0:
            raise ConfigError(f"model_gate must be >= 0 or None, got {self.model_gate}")
        _check_scale(self.score_range)

    def fit(self, bank, source: ResponseMatrix, scores=None, *, rng=None) -> "BenchmarkPredictor":
        """Fit on the source models: ``bank`` calibrated on (part of) ``source``'s items
        (a ResponseMatrix, or a DataFrame with the models as its index and the item ids as its
        columns), ``scores`` their benchmark scores 0-1 (default their mean over all items)."""
        self._check()
        if isinstance(bank, (str, Path)) or not hasattr(bank, "item_ids"):
            from ..irt.bank import check_bank

            check_bank(bank)   # a ConfigError saying how to load a name or path
        labelled = isinstance(source, (ResponseMatrix, pd.DataFrame))
        if not isinstance(source, ResponseMatrix):
            source = self._unit_answers(ResponseMatrix, source)
        if source.n_subjects < MIN_SOURCE_MODELS:
            raise ResponseDataError(f"the predictor needs at least {MIN_SOURCE_MODELS} source "
                                    f"models, got {source.n_subjects}; add models' results")
        ids = [str(i) for i in source.item_ids]
        if len(ids) <= self.budget:
            raise ConfigError(f"the benchmark has {len(ids)} items, not more than the budget "
                              f"{self.budget}; score every item instead")
        y = source.values
        unknown = sorted(set(map(str, bank.item_ids)) - set(ids))
        if unknown:
            fix = ("give the matrix the bank was calibrated on" if labelled else
                   "an array has no item ids (its columns read as '0', '1', ...): give a "
                   "DataFrame with the item ids as its columns, or a ResponseMatrix")
            raise ResponseDataError(f"{len(unknown)} bank item(s) are not in the source "
                                    f"responses, e.g. {unknown[:3]}; {fix}")
        self.item_ids_ = np.asarray(ids, dtype=object)
        self.a_, self.b_, self.c_, self.u_ = _full_params(bank, ids, np.nanmean(y, axis=0))
        self.dispersion_ = None            # 0/1 answers: phi = 1 (the Bernoulli variance)
        if np.any((np.nan_to_num(y) != 0) & (np.nan_to_num(y) != 1)):
            tables, _, log_prior = self._grid()
            self.dispersion_ = est.item_dispersion(y, tables, log_prior)
        item_mean = np.nanmean(y, axis=1)
        try:
            truth = item_mean if scores is None else np.asarray(scores, float).reshape(-1)
        except (TypeError, ValueError):
            raise ResponseDataError(f"scores must be numbers (0-1), one per source model, got "
                                    f"{scores!r}"[:200]) from None
        if truth.shape != (source.n_subjects,) or not np.all(np.isfinite(truth)):
            raise ResponseDataError("scores must hold one finite value (0-1) per source model")
        self.score_map_ = None if scores is None else score_map(item_mean, truth)
        self.ridge_answers_ = self.ridge_scores_ = self.gamma_ = self._ridge_x = None
        n_src = source.n_subjects
        if self.ridge is None or self.ridge:       # at predictor.json's precision (1/250), so
            #                                          a predictor read back predicts alike
            self.ridge_answers_ = regression.unpack_answers(regression.pack_answers(y), y.shape)
            self.ridge_scores_ = truth.copy()
        self.level_x_, self.level_c0_ = None, None
        if float(self.level_fraction) > 0:     # a model of the answers: the item mean's scale
            self.level_x_ = est.level_logits(y, item_mean, float(self.level_fraction))
            self.level_c0_ = float(est.level_start(self.level_x_, item_mean.mean()))
        from ..validation import as_generator

        rng = as_generator(rng)
        reps = np.repeat(np.arange(source.n_subjects), int(self.n_replays))
        arr = self._replay_arrays(y[reps], rng, loo_rows=reps)
        model, t = arr["model"], truth[reps]
        self.alpha_, self.beta_, self.gamma_ = _stack(model, arr.get("ridge"), t,
                                                      fitted=n_src >= RIDGE_FIT_MIN_MODELS)
        calibrated = self._calibrated(arr)
        self.tau2_ = float(max(np.mean((t - calibrated) ** 2), self.min_tau ** 2))
        self.design_weight_ = self.pooled_tau2_ = None
        if self.fitted_weight or (self.fitted_weight is None and n_src >= STACK_MIN_MODELS):
            self.design_weight_, pooled = _design_weight(calibrated, arr["design"], t)
            self.pooled_tau2_ = float(max(np.mean((t - pooled) ** 2), self.min_tau ** 2))
        self.n_source_ = int(source.n_subjects)
        self.source_range_ = (float(truth.min()), float(truth.max()))
        self.model_range_ = (float(model.min()), float(model.max()))
        qq = float(self.theta_quantile)
        self.theta_support_ = tuple(float(v) for v in np.quantile(arr["theta"], [qq, 1 - qq]))
        return self

    def _unit_answers(self, read, answers):
        """``read(answers)``; answers off 0-1 given to a predictor with a ``score_range``: the
        one line says that it takes them mapped to 0-1, and how."""
        try:
            return read(answers)
        except ResponseDataError as exc:
            if self.metric_range_ is None or "outside [0, 1]" not in str(exc):
                raise
            lo, hi = self.metric_range_
            raise ResponseDataError(
                f"{str(exc).split(';')[0]}; the predictor takes answers on 0-1 and reports on "
                f"its score_range {lo:g}-{hi:g}: give them mapped, (score - {lo:g}) / "
                f"{hi - lo:g}") from None

    # ------------------------------------------------------------------ replay
    def _grid(self):
        """(P, log P, log Q) on the theta grid, nodes, log prior; with continuous scores the
        log tables divided by each item's dispersion (the extended quasi-likelihood's
        posterior, as the calibration's)."""
        quad = normal_quadrature(self.quadpts, self.theta_range)
        p, log_p, log_q = est.grid_tables(self.a_, self.b_, self.c_, self.u_, quad.nodes)
        phi = getattr(self, "dispersion_", None)
        if phi is not None:
            log_p, log_q = log_p / phi[None, :], log_q / phi[None, :]
        return (p, log_p, log_q), quad.nodes, quad.log_weights

    def _replay_arrays(self, y: np.ndarray, rng, budget=None, loo_rows=None) -> dict:
        """The design on every row of ``y`` (items in ``item_ids_`` order, NaN = not available;
        ``loo_rows``: the rows are these source models, whose ridge prediction leaves them out)."""
        budget = int(self.budget if budget is None else budget)
        tables, nodes, log_prior = self._grid()
        d = est.sequential_design(y, tables, log_prior, budget, float(self.mix), rng,
                                  level=self._level(), share=float(self.share),
                                  dispersion=getattr(self, "dispersion_", None))
        rows = np.broadcast_to(np.arange(y.shape[0])[:, None], d["item"].shape)
        asked = np.zeros(y.shape, dtype=bool)
        asked[rows[d["valid"]], d["item"][d["valid"]]] = True
        out = self._estimate(y, np.isfinite(y), asked, d["item"], d["q"], d["f"], d["f_rest"],
                             d["log_post"], d["valid"], d["g"], d["g_rest"], loo_rows)
        out["item"], out["valid"] = d["item"], d["valid"]
        return out

    def _level(self):
        """(x, c_0) of the level model, or None (a version-2 predictor: the IRT model alone)."""
        return None if self.level_x_ is None else (self.level_x_, self.level_c0_)

    def _estimate(self, y, avail, asked, item, q, f, f_rest, log_post, valid=None, g=None,
                  g_rest=None, loo_rows=None) -> dict:
        """D and its SE (capped at 1, the whole score range), M, theta and, with a ridge part,
        R; ``avail`` marks the items the score is the mean over. A row asked every available
        item gets its exact score (SE 0)."""
        tables, nodes, _ = self._grid()
        n_avail = np.maximum(avail.sum(1), 1)
        y_drawn = np.nan_to_num(np.take_along_axis(y, item, axis=1))
        if self._level() is None:
            g = g_rest = None
        total, se_total = est.des_raj(y_drawn, q, f, f_rest, valid, g, g_rest)
        model, theta = est.model_prediction(y, asked, avail, tables, nodes, log_post)
        design, se = total / n_avail, np.minimum(se_total / n_avail, 1.0)
        every = asked.sum(1) >= avail.sum(1)
        exact = np.where(asked, np.nan_to_num(y), 0.0).sum(1) / n_avail
        design, se = np.where(every, exact, design), np.where(every, 0.0, se)
        if self.score_map_ is not None:       # the item mean -> the published score
            c0, c1, resid = self.score_map_
            design, se = c0 + c1 * design, np.sqrt((c1 * se) ** 2 + resid ** 2)
        out = dict(model=model, design=design, se=se, theta=theta, n=asked.sum(1))
        if self.ridge_answers_ is not None:
            valid = np.ones(item.shape, dtype=bool) if valid is None else valid
            out["ridge"] = regression.ridge_scores(
                self._ridge_design(), self.ridge_scores_, item, valid,
                None if loo_rows is not None else y_drawn, loo_rows)
        return out

    def _ridge_design(self):
        """The source models' answers with a missing cell given its item's mean (cached)."""
        if getattr(self, "_ridge_x", None) is None:
            y = self.ridge_answers_
            seen = np.isfinite(y)
            means = np.where(seen, y, 0.0).sum(0) / np.maximum(seen.sum(0), 1)
            self._ridge_x = np.where(seen, y, means[None, :])
        return self._ridge_x

    def _calibrated(self, arr: dict):
        """G = alpha + beta M (+ gamma R): the model prediction calibrated on the source."""
        g = self.alpha_ + self.beta_ * arr["model"]
        if self.gamma_ is not None:
            g = g + self.gamma_ * arr["ridge"]
        return g

    def model_part(self, arr: dict):
        """The model part the prediction pools with the design estimate: G (the IRT
        prediction, with the ridge's where it is stacked, calibrated on the source models'
        replays), clipped to 0-1; ``model_score`` is the IRT prediction M alone."""
        return np.clip(self._calibrated(arr), 0.0, 1.0)

    def _combine(self, arr: dict, y=None, valid=None, avail=None):
        """est.combine of replay's arrays; with the answers ``y``, the outside test after
        fewer than SMALL_SAMPLE_DRAWS answers takes the design's SE from the small-sample
        interval's width (:meth:`_small_half`), so that a few answers do not flip the method
        from one step to the next (benchmarks/study_method_flips.py)."""
        z_se = None
        if y is not None:
            half, small = self._small_half(y, arr["item"], arr["se"], valid, avail)
            z_se = np.where(small, half / est.Z95, arr["se"])
        return est.combine(arr["model"], self._calibrated(arr), arr["design"], arr["se"],
                           arr["theta"], tau2=self.tau2_, weight=self.design_weight_,
                           pooled_tau2=self.pooled_tau2_,
                           z_cut=self.z_cut, source_range=self.source_range_,
                           model_range=self.model_range_,
                           theta_range=self.theta_support_, d_margin=float(self.d_margin),
                           check_below=not self.source_at_chance(),
                           model_gate=self.model_gate, z_se=z_se)

    def source_at_chance(self) -> bool:
        """Whether the weakest source model answers at chance (``chance``, within two binomial
        SEs over the benchmark's items): then no target can lie below the source models."""
        if self.chance is None:
            return False
        c, n = float(self.chance), len(self.item_ids_)
        return bool(self.source_range_[0] <= c + 2.0 * np.sqrt(c * (1.0 - c) / n))

    def predict_draws(self, y, item, q, f, f_rest, g=None, g_rest=None, avail=None) -> dict:
        """Predictions from draws already answered (rows = targets; ``y`` in ``item_ids_``
        order, NaN where not asked; the score is the mean over the items ``avail`` marks, by
        default ALL (a live model can be asked every item); ``item``, ``q``, ``f``,
        ``f_rest``, ``g``, ``g_rest`` one column per draw, as
        :func:`~atlascat.predict.estimators.sequential_design` returns them)."""
        self._require_fitted()
        y = np.asarray(y, float)
        item = np.asarray(item, int)
        rows = np.arange(y.shape[0])[:, None]
        asked = np.zeros(y.shape, dtype=bool)
        asked[rows, item] = True
        tables, _, log_prior = self._grid()
        lp = est.log_posterior(y, asked, tables, log_prior)
        avail = np.ones(y.shape, dtype=bool) if avail is None else np.asarray(avail, bool)
        arr = self._estimate(y, avail, asked, item, np.asarray(q, float), np.asarray(f, float),
                             np.asarray(f_rest, float), lp, None,
                             None if g is None else np.asarray(g, float),
                             None if g_rest is None else np.asarray(g_rest, float))
        arr["item"] = item
        score, lo, hi, sd, outside, z = self._combine(arr, y, None, avail)
        return dict(score=score, lower=lo, upper=hi, se=sd, model_score=arr["model"],
                    model_part=self.model_part(arr), design_score=arr["design"],
                    design_se=arr["se"], theta=arr["theta"], n_items=arr["n"],
                    outside=outside, z=z)

    def replay(self, targets: ResponseMatrix, *, budget=None, rng=None,
               seed: int | None = None, asked: bool = False,
               on_scale: bool = True) -> pd.DataFrame:
        """Replay the design on every target's real answers (one row per target).

        Each target is asked at most ``budget`` (default the predictor's) of the items it has
        answers for, drawn one after another (module docstring) from ``rng`` (one Generator for
        every row) or, with ``seed``, from each target's own
        :func:`~atlascat.predict.session.subject_generator`: then a target is asked what a live
        session of it seeded alike asks, whatever the other rows. Columns (the names of every
        bank's predictions: ``person_scores.csv``'s): ``subject_id``,
        ``n_items``, ``score``, ``score_lo``, ``score_hi`` (95%, 0-1; after fewer than
        ``SMALL_SAMPLE_DRAWS`` answers the small-sample interval of
        :meth:`step_interval`, as a live session shows it), ``se``,
        ``method`` ("design" for a target outside the source population, else "combined"),
        ``flag`` ("outside_source"; "no_answers" for a target with no answer to any item, whose
        predictions are NaN),
        ``model_score`` (the IRT prediction M), ``model_part`` (G, what is pooled with the
        design estimate: :meth:`model_part`), ``design_score``, ``theta``, ``full_score`` (the target's mean over its
        answered items, for studies); with ``asked``, ``items``: the ids of the items it was
        asked, in the order drawn. With ``score_range`` set (and ``on_scale``, the default),
        the scores (score to full_score) are on the metric's scale, low + (high - low) x
        score, and ``se`` times (high - low), as ``atlas simulate`` writes them for a
        ``--score-range`` folder; ``on_scale=False``: on 0-1, as the predictor models them.
        """
        self._require_fitted()
        self._check(budget)
        budget = int(self.budget if budget is None else budget)
        from ..responses import as_response_matrix

        targets = self._unit_answers(as_response_matrix, targets)
        if not np.isin(targets.item_ids, self.item_ids_).any():
            raise ResponseDataError(
                f"none of the targets' {targets.n_items} items is one of the predictor's (e.g. "
                f"{list(targets.item_ids[:3])} vs {list(self.item_ids_[:3])}); check the id "
                "format (R-style 'X514' vs '514')")
        y = targets.aligned_values(self.item_ids_, extra="ignore")
        from .session import subject_generator

        if seed is not None:
            gen = [subject_generator(seed, s) for s in targets.subject_ids]
        else:
            from ..validation import as_generator

            gen = as_generator(rng)
        arr = self._replay_arrays(y, gen, budget)
        score, lo, hi, sd, outside, z = self._combine(arr, y, arr["valid"], np.isfinite(y))
        lo, hi = self.step_interval(y, arr["item"], {
            "lower": lo, "upper": hi, "score": score, "design_score": arr["design"],
            "design_se": arr["se"]}, arr["valid"], np.isfinite(y))
        answered = np.isfinite(y)
        empty = ~answered.any(axis=1)   # no answer to any item: nothing to predict from

        def blank(v):
            return np.where(empty, np.nan, np.asarray(v, float))

        out = pd.DataFrame({
            "subject_id": list(targets.subject_ids), "n_items": arr["n"].astype(int),
            "score": blank(score), "score_lo": blank(lo), "score_hi": blank(hi), "se": blank(sd),
            "method": np.where(empty, "", np.where(outside, "design", "combined")),
            "flag": np.where(empty, "no_answers", np.where(outside, "outside_source", "")),
            "model_score": blank(arr["model"]), "model_part": blank(self.model_part(arr)),
            "design_score": blank(arr["design"]),
            "theta": blank(arr["theta"]),
            "full_score": np.where(empty, np.nan, np.nansum(y, axis=1)
                                   / np.maximum(answered.sum(axis=1), 1))})
        if on_scale and self.metric_range_ is not None:
            lo, hi = self.metric_range_
            for c in ("score", "score_lo", "score_hi", "model_score", "model_part",
                      "design_score", "full_score"):
                out[c] = lo + (hi - lo) * out[c]
            out["se"] = (hi - lo) * out["se"]
        if asked:
            ids = np.asarray(self.item_ids_).astype(str)
            out["items"] = [list(ids[row[ok]]) for row, ok in zip(arr["item"], arr["valid"])]
        return out

    def step_interval(self, y, item, pred: dict, valid=None, avail=None):
        """The 95% interval (lower, upper) per target after the answers to the draws ``item``
        (rows = targets, one column per draw in order, ``valid`` marking the answered ones: all by
        default; ``y`` in ``item_ids_`` order, NaN where not asked; ``pred`` what
        :meth:`predict_draws` returns for them, or replay's arrays alike;
        ``avail`` the items each target could be asked, the score being their mean: all by
        default). While k < SMALL_SAMPLE_DRAWS draws are answered, whatever the budget: after one
        answer the whole range 0-1, from two the small-sample interval of
        :func:`~atlascat.predict.estimators.small_sample_interval`, whose prior variance
        sigma_0^2 = sum_{i not asked} f_i (1 - f_i) / q_i takes f from the IRT posterior after the
        k answers and q as the next draw would (:func:`~atlascat.predict.estimators.
        draw_probabilities`), N the number of ``avail`` items; from SMALL_SAMPLE_DRAWS answers on,
        and for a target asked every item it could be (its exact score), ``pred``'s own. A live
        session and :meth:`replay` (its final interval) both use it, so they
        agree at every step. Vectorized over targets."""
        lower = np.array(pred["lower"], float)
        upper = np.array(pred["upper"], float)
        half, small = self._small_half(y, item, pred.get("design_se"), valid, avail)
        lower[small & np.isinf(half)], upper[small & np.isinf(half)] = 0.0, 1.0
        sel = np.flatnonzero(small & np.isfinite(half))
        if sel.size:
            score = np.asarray(pred["score"], float)[sel]
            design = np.asarray(pred["design_score"], float)[sel]
            lower[sel] = np.clip(np.minimum(design - half[sel], score), 0.0, 1.0)
            upper[sel] = np.clip(np.maximum(design + half[sel], score), 0.0, 1.0)
        return lower, upper

    def _small_half(self, y, item, design_se, valid=None, avail=None):
        """(half-width, small) per target: ``small`` where fewer than SMALL_SAMPLE_DRAWS draws
        are answered and an item remains (:meth:`step_interval`); the half-width of the
        small-sample interval there (inf after one answer: the whole range), NaN elsewhere."""
        item = np.asarray(item, int)
        valid = np.ones(item.shape, dtype=bool) if valid is None else np.asarray(valid, bool)
        k = valid.sum(1)
        half = np.full(item.shape[0], np.nan)
        small = k < est.SMALL_SAMPLE_DRAWS
        if not small.any():
            return half, small
        y = np.asarray(y, float)
        asked = np.zeros(y.shape, dtype=bool)
        rows = np.broadcast_to(np.arange(y.shape[0])[:, None], item.shape)
        asked[rows[valid], item[valid]] = True
        avail = np.ones(y.shape, dtype=bool) if avail is None else np.asarray(avail, bool)
        remaining = avail & ~asked
        small &= remaining.any(1)                  # every item asked: the exact score
        half[small & (k <= 1)] = np.inf
        sel = np.flatnonzero(small & (k >= 2))
        if sel.size == 0:
            return half, small
        ys, item_s, valid_s, rem = y[sel], item[sel], valid[sel], remaining[sel]
        tables, _, log_prior = self._grid()
        f = est.posterior(est.log_posterior(ys, asked[sel], tables, log_prior)) @ tables[0]
        level = self._level()
        g = None if level is None else est.level_prediction(
            level, item_s, np.nan_to_num(ys[np.arange(sel.size)[:, None], item_s]), valid_s)
        q = est.draw_probabilities(f, rem, float(self.mix), g, float(self.share),
                                   getattr(self, "dispersion_", None))
        _, c1, resid = (0.0, 1.0, 0.0) if self.score_map_ is None else self.score_map_
        half[sel] = est.small_sample_half(
            np.asarray(design_se, float)[sel], k[sel], est.draw_variance(f, rem, q),
            avail[sel].sum(1), slope=c1, resid=resid)
        return half, small

    def item_bank(self, *, model=None):
        """Every item the predictor draws from, as an :class:`~atlascat.irt.bank.ItemBank`
        with its parameters (dropped items with their stand-ins) and, for continuous scores,
        each item's dispersion (its ``dispersion`` column: a simulated model's answers are
        then scores with that variance, as the source models' were, not 0/1)."""
        from ..irt.bank import ItemBank

        self._require_fitted()
        bank = ItemBank(self.item_ids_, self.a_, self.b_, self.c_, self.u_, model=model)
        phi = getattr(self, "dispersion_", None)
        if phi is None:
            return bank
        from ..irt.dispersion import with_dispersion

        return with_dispersion(bank, phi)

    def session(self, *, budget=None, rng=None, available=None):
        """A live test for one target: :class:`atlascat.predict.session.PredictSession`
        (``available``: the item ids it can be asked, default all)."""
        from .session import PredictSession

        self._require_fitted()
        return PredictSession(self, budget=self.budget if budget is None else budget, rng=rng,
                              available=available)

    # ------------------------------------------------------------------ serialisation
    def score_map_info(self):
        """The score map as predictor.json and the manifest keep it ({intercept, slope,
        resid_sd}), or None where the score is the item mean."""
        if self.score_map_ is None:
            return None
        return dict(zip(_SCORE_MAP_KEYS, map(float, self.score_map_)))

    def _require_fitted(self):
        if not hasattr(self, "alpha_"):
            from ..errors import NotFittedError

            raise NotFittedError("the predictor is not fitted; call fit(bank, source) or "
                                 "from_dict")

    def get_params(self, deep: bool = True) -> dict:
        """The ``__init__`` settings as a dict (scikit-learn's ``get_params``; ``deep`` is
        accepted for its ``clone`` and has nothing nested to expand)."""
        from .._repr import get_settings

        return get_settings(self)

    def set_params(self, **params) -> "BenchmarkPredictor":
        """Change settings in place and return ``self`` (scikit-learn's ``set_params``); the
        next :meth:`fit` uses them."""
        from .._repr import set_settings

        if "theta_range" in params:    # as __init__ keeps it
            params = {**params, "theta_range": tuple(params["theta_range"])}
        return set_settings(self, params)

    def __repr__(self) -> str:
        from .._repr import changed_settings

        parts = [changed_settings(self)]
        if hasattr(self, "alpha_"):
            parts.append(f"fitted on {self.n_source_} source models, {len(self.item_ids_)} items")
        return f"BenchmarkPredictor({', '.join(p for p in parts if p)})"

    def to_dict(self) -> dict:
        """JSON-serialisable description (saved as ``predictor.json`` in a bank folder)."""
        self._require_fitted()
        return {"kind": _KIND, "version": _VERSION,
                "settings": {"budget": int(self.budget), "mix": float(self.mix),
                             "share": float(self.share),
                             "level_fraction": float(self.level_fraction),
                             "z_cut": float(self.z_cut),
                             "theta_quantile": float(self.theta_quantile),
                             "d_margin": float(self.d_margin),
                             "chance": None if self.chance is None else float(self.chance),
                             "ridge": None if self.ridge is None else bool(self.ridge),
                             "fitted_weight": (None if self.fitted_weight is None
                                               else bool(self.fitted_weight)),
                             "model_gate": (None if self.model_gate is None
                                            else float(self.model_gate)),
                             "n_replays": int(self.n_replays),
                             "min_tau": float(self.min_tau), "quadpts": int(self.quadpts),
                             "theta_range": [float(v) for v in self.theta_range],
                             **({} if self.metric_range_ is None else
                                {"score_range": list(self.metric_range_)})},
                "items": {"item_id": [str(i) for i in self.item_ids_],
                          "a": self.a_.tolist(), "b": self.b_.tolist(),
                          "c": self.c_.tolist(), "u": self.u_.tolist(),
                          "level_x": None if self.level_x_ is None else self.level_x_.tolist(),
                          "dispersion": (None if self.dispersion_ is None
                                         else self.dispersion_.tolist())},
                "calibration": {"alpha": self.alpha_, "beta": self.beta_, "tau2": self.tau2_,
                                "design_weight": self.design_weight_,
                                "pooled_tau2": self.pooled_tau2_,
                                "n_source": self.n_source_,
                                "source_range": list(self.source_range_),
                                "model_range": (None if self.model_range_ is None
                                                else list(self.model_range_)),
                                "theta_support": list(self.theta_support_),
                                "level_c0": self.level_c0_, "gamma": self.gamma_,
                                "score_map": self.score_map_info()},
                "ridge": None if self.ridge_answers_ is None else {
                    "shape": list(self.ridge_answers_.shape),
                    "answers": regression.pack_answers(self.ridge_answers_),
                    "scores": self.ridge_scores_.tolist()}}

    @classmethod
    def from_dict(cls, d: dict) -> "BenchmarkPredictor":
        if not isinstance(d, dict) or d.get("kind") != _KIND:
            raise ConfigError("not a predictor description (predictor.json); write it with "
                              "BenchmarkPredictor.to_dict")
        if d.get("version") not in _READS:
            raise ConfigError(f"predictor.json version {d.get('version')} is not one of "
                              f"{list(_READS)}; rebuild the bank with this version of atlascat")
        s = d["settings"]
        self = cls(s["budget"], mix=s["mix"], share=s.get("share", 0.0),
                   level_fraction=s.get("level_fraction", 0.0), z_cut=s["z_cut"],
                   theta_quantile=s["theta_quantile"], d_margin=s["d_margin"],
                   chance=s.get("chance"), ridge=s.get("ridge", False),
                   fitted_weight=s.get("fitted_weight", False),
                   model_gate=s.get("model_gate"), n_replays=s["n_replays"],
                   min_tau=s["min_tau"], quadpts=s["quadpts"], theta_range=s["theta_range"],
                   score_range=_check_scale(s.get("score_range")))
        it = d["items"]
        self.item_ids_ = np.asarray(it["item_id"], dtype=object)
        self.a_, self.b_, self.c_, self.u_ = (np.asarray(it[k], float) for k in "abcu")
        cal = d["calibration"]
        self.alpha_, self.beta_, self.tau2_ = cal["alpha"], cal["beta"], cal["tau2"]
        self.design_weight_ = cal.get("design_weight")
        self.pooled_tau2_ = cal.get("pooled_tau2")
        self.n_source_ = cal["n_source"]
        self.source_range_ = tuple(cal["source_range"])
        m = cal.get("model_range")
        self.model_range_ = None if m is None else tuple(m)
        self.theta_support_ = tuple(cal["theta_support"])
        x = it.get("level_x")
        self.level_x_ = None if x is None else np.asarray(x, float)
        phi = it.get("dispersion")
        self.dispersion_ = None if phi is None else np.asarray(phi, float)
        self.level_c0_ = cal.get("level_c0")
        self.gamma_, self._ridge_x = cal.get("gamma"), None
        sm = cal.get("score_map")
        self.score_map_ = None if sm is None else tuple(float(sm[k]) for k in _SCORE_MAP_KEYS)
        self.ridge_answers_ = self.ridge_scores_ = None
        r = d.get("ridge")
        if r is not None and self.gamma_ is not None:
            self.ridge_answers_ = regression.unpack_answers(r["answers"], r["shape"])
            self.ridge_scores_ = np.asarray(r["scores"], float)
            if self.ridge_answers_.shape != (len(r["scores"]), len(self.item_ids_)):
                raise ConfigError("predictor.json's ridge part does not match its items; "
                                  "rebuild the bank")
        else:
            self.gamma_ = None
        return self


def _check_scale(score_range):
    """``score_range`` as (low, high) floats, or None; a ConfigError naming the setting for
    anything but two finite numbers, low < high."""
    if score_range is None:
        return None
    try:
        if isinstance(score_range, (str, bytes)) or len(score_range) != 2:
            raise ValueError
        lo, hi = (float(v) for v in score_range)
    except (TypeError, ValueError):
        raise ConfigError(f"score_range must be two numbers (low, high), the metric's scale, "
                          f"got {score_range!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ConfigError(f"score_range (low, high) needs finite low < high, got {lo:g}, {hi:g}")
    return lo, hi


def score_map(item_mean, scores, min_inner: int = 10):
    """(c0, c1, r): the published score as a line in the item mean, s = c0 + c1 m + e, fitted
    by least squares on the source models, and r the RMS of its leave-one-out residuals
    e_i / (1 - h_ii) (PRESS; 0 where the score is an exact linear rescaling of the mean, as
    an accuracy normalised for chance, (m - chance) / (1 - chance)). Models scoring exactly 0
    or 1 are left out of the fit when ``min_inner`` others remain: a normalised score clipped
    at 0 (the Open LLM Leaderboard v2's) is linear above it, and the prediction is clipped to
    0-1 as well."""
    m, s = np.asarray(item_mean, float), np.asarray(scores, float)
    inner = (s > 0.0) & (s < 1.0)
    if inner.sum() < max(int(min_inner), 3):
        inner = np.ones(len(s), dtype=bool)
    m, s = m[inner], s[inner]
    if np.var(m) < 1e-12:
        return float(np.mean(s - m)), 1.0, float(np.std(s - m))
    x = np.column_stack([np.ones_like(m), m])
    coef = np.linalg.lstsq(x, s, rcond=None)[0]
    h = np.einsum("ij,ji->i", x, np.linalg.pinv(x))
    e = (s - x @ coef) / np.maximum(1.0 - h, 1e-6)
    return float(coef[0]), float(coef[1]), float(np.sqrt(np.mean(e ** 2)))


def _full_params(bank, ids, item_means):
    """(a, b, c, u) for every benchmark item: the bank's, or a stand-in for a dropped item."""
    index = {str(i): k for k, i in enumerate(bank.item_ids)}
    pos = np.array([index.get(i, -1) for i in ids])
    have = pos >= 0
    ba, bb = np.asarray(bank.a, float), np.asarray(bank.b, float)
    a = np.full(len(ids), float(np.median(ba)))
    b = np.where(np.nan_to_num(item_means, nan=0.5) <= 0.5, bb.max() + 1.0, bb.min() - 1.0)
    c, u = np.zeros(len(ids)), np.ones(len(ids))
    a[have], b[have] = ba[pos[have]], bb[pos[have]]
    c[have], u[have] = np.asarray(bank.c, float)[pos[have]], np.asarray(bank.u, float)[pos[have]]
    return a, b, c, u


def _line(x, truth):
    """(a, b) of the least-squares line truth ~ a + b x (b = 1 where x is constant)."""
    var = np.var(x)
    b = float(np.cov(x, truth, bias=True)[0, 1] / var) if var > 1e-12 else 1.0
    return float(truth.mean() - b * x.mean()), b


def _stack(model, ridge, truth, fitted=True):
    """(alpha, beta, gamma) of the calibration G = alpha + beta M (+ gamma R) on the source
    models' replays; gamma None without a ridge part. ``fitted``: (alpha, beta, gamma) by least
    squares; else G = (G_M + G_R) / 2, each of M and R calibrated alone by its own line."""
    if ridge is None:
        return (*_line(model, truth), None)
    if not fitted:
        (a_m, b_m), (a_r, b_r) = _line(model, truth), _line(ridge, truth)
        return 0.5 * (a_m + a_r), 0.5 * b_m, 0.5 * b_r
    design = np.column_stack([np.ones_like(model), model, ridge])
    coef = np.linalg.lstsq(design, truth, rcond=None)[0]
    return float(coef[0]), float(coef[1]), float(coef[2])


def _design_weight(calibrated, design, truth):
    """(w, C): the least-squares weight of the design estimate D in C = G + w (D - G) on the
    source models' replays, clipped to 0-1, and C there."""
    g, d, t = (np.asarray(v, float) for v in (calibrated, design, truth))
    diff = d - g
    den = float(np.sum(diff * diff))
    w = float(np.clip(np.sum((t - g) * diff) / den, 0.0, 1.0)) if den > 1e-12 else 0.0
    return w, g + w * diff
