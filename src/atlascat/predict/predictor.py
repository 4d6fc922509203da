"""A benchmark-score predictor that stays right for models unlike the source models.

:class:`BenchmarkPredictor` is fitted from a calibrated :class:`~atlascat.irt.bank.ItemBank`,
the source models' answers (a :class:`~atlascat.responses.ResponseMatrix` over ALL the
benchmark's items, including any the bank dropped) and their scores (default: each model's mean
over all items, the benchmark score). It asks a simple random sample of ``budget`` items and
predicts the mean over all items with the estimators of :mod:`atlascat.predict.estimators`:
the IRT prediction as a control variate, corrected by the cross-fitted residuals of the random
items (unbiased whatever the model), pooled with the source-calibrated IRT prediction while the
two agree, and reduced to the design-based estimate when they do not (a target outside the
source population). The 95% interval is the design-based one (valid by design), widened to
contain the point prediction.

Fitting replays the same design on the source models (``n_replays`` random samples each) to
calibrate the IRT prediction to their scores (least squares G = alpha + beta * M) and to measure
its error tau^2 there (floored at ``min_tau`` ^ 2).

Items the bank dropped (answered alike by every source model) keep a place in the score: they get
the bank's median slope and a difficulty one unit beyond the hardest (all failed) or easiest
(all solved) item; the design-based correction absorbs any error this makes.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import ConfigError, ResponseDataError
from ..irt.quadrature import normal_quadrature
from ..responses import ResponseMatrix
from . import estimators as est

__all__ = ["BenchmarkPredictor", "MIN_SOURCE_MODELS"]

MIN_SOURCE_MODELS = 20
_KIND = "atlascat.predict.BenchmarkPredictor"


class BenchmarkPredictor:
    """Predicted full-benchmark score from a random sample of its items (see module docstring).

    Parameters
    ----------
    budget : items asked per target (default 50)
    n_folds : cross-fitting folds of the design correction (default 5)
    z_cut : a target whose design and model predictions differ by more than z_cut combined SEs
        is treated as outside the source population (default 2.0)
    n_replays : random samples per source model when fitting the calibration (default 2)
    min_tau : floor of the model prediction's RMS error, 0-1 (default 0.01)
    quadpts, theta_range : the theta grid (61 nodes on [-6, 6], N(0, 1) prior)

    Fitted attributes: ``item_ids_``, ``a_``, ``b_``, ``c_``, ``u_`` (every benchmark item),
    ``alpha_``, ``beta_``, ``tau2_``, ``n_source_``, ``source_range_`` (min, max source score).
    """

    def __init__(self, budget: int = 50, *, n_folds: int = 5, z_cut: float = 2.0,
                 n_replays: int = 2, min_tau: float = 0.01, quadpts: int = 61,
                 theta_range=(-6.0, 6.0)):
        self.budget = budget
        self.n_folds = n_folds
        self.z_cut = z_cut
        self.n_replays = n_replays
        self.min_tau = min_tau
        self.quadpts = quadpts
        self.theta_range = tuple(theta_range)

    # ------------------------------------------------------------------ fitting
    def _check(self):
        if int(self.budget) < 2 * int(self.n_folds):
            raise ConfigError(f"budget {self.budget} is below 2 x n_folds ({2 * self.n_folds}); "
                              "ask at least two items per cross-fitting fold")
        if int(self.n_folds) < 2:
            raise ConfigError(f"n_folds must be at least 2, got {self.n_folds}")
        if not self.z_cut > 0 or not self.min_tau > 0:
            raise ConfigError("z_cut and min_tau must be positive")

    def fit(self, bank, source: ResponseMatrix, scores=None, *, rng=None) -> "BenchmarkPredictor":
        """Fit on the source models: ``bank`` calibrated on (part of) ``source``'s items,
        ``scores`` their benchmark scores 0-1 (default their mean over all items)."""
        self._check()
        if not isinstance(source, ResponseMatrix):
            source = ResponseMatrix(source)
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
            raise ResponseDataError(f"{len(unknown)} bank item(s) are not in the source "
                                    f"responses, e.g. {unknown[:3]}; give the matrix the bank "
                                    "was calibrated on")
        self.item_ids_ = np.asarray(ids, dtype=object)
        self.a_, self.b_, self.c_, self.u_ = _full_params(bank, ids, np.nanmean(y, axis=0))
        truth = np.nanmean(y, axis=1) if scores is None else np.asarray(scores, float).reshape(-1)
        if truth.shape != (source.n_subjects,) or not np.all(np.isfinite(truth)):
            raise ResponseDataError("scores must hold one finite value (0-1) per source model")
        rng = np.random.default_rng(rng)
        reps = np.repeat(np.arange(source.n_subjects), int(self.n_replays))
        model = self._replay_arrays(y[reps], rng)["model"]
        t = truth[reps]
        var = np.var(model)
        beta = float(np.cov(model, t, bias=True)[0, 1] / var) if var > 1e-12 else 1.0
        alpha = float(t.mean() - beta * model.mean())
        resid = t - (alpha + beta * model)
        self.alpha_, self.beta_ = alpha, beta
        self.tau2_ = float(max(np.mean(resid ** 2), self.min_tau ** 2))
        self.n_source_ = int(source.n_subjects)
        self.source_range_ = (float(truth.min()), float(truth.max()))
        return self

    # ------------------------------------------------------------------ replay
    def _grid(self):
        quad = normal_quadrature(self.quadpts, self.theta_range)
        tables = est.grid_tables(self.a_, self.b_, self.c_, self.u_, quad.nodes)
        return tables, quad.nodes, quad.log_weights

    def _replay_arrays(self, y: np.ndarray, rng, budget=None) -> dict:
        """The design on every row of ``y`` (items in ``item_ids_`` order, NaN = not available)."""
        budget = int(self.budget if budget is None else budget)
        n_rows, n_items = y.shape
        keys = rng.random((n_rows, n_items))
        keys[np.isnan(y)] = np.inf                     # only available items are drawn
        order = np.argsort(keys, axis=1)[:, :budget]
        rows = np.arange(n_rows)[:, None]
        asked = np.zeros((n_rows, n_items), dtype=bool)
        asked[rows, order] = np.isfinite(keys[rows, order])
        folds = np.full((n_rows, n_items), -1)
        folds[rows, order] = np.arange(budget)[None, :] % int(self.n_folds)
        tables, nodes, log_prior = self._grid()
        model, design, se, theta, n = est.model_and_design(
            y, asked, folds, tables, nodes, log_prior, int(self.n_folds))
        return dict(model=model, design=design, se=se, theta=theta, n=n)

    def predict_arrays(self, y: np.ndarray, asked: np.ndarray, folds: np.ndarray) -> dict:
        """Predictions for answers already collected (rows = targets, items in ``item_ids_``
        order; ``asked`` a simple random sample per row, ``folds`` its cross-fitting folds)."""
        tables, nodes, log_prior = self._grid()
        model, design, se, theta, n = est.model_and_design(
            y, asked, folds, tables, nodes, log_prior, int(self.n_folds))
        score, lo, hi, sd, outside, z = est.combine(model, design, se, self.alpha_, self.beta_,
                                                    self.tau2_, self.z_cut, self.source_range_)
        return dict(score=score, lower=lo, upper=hi, se=sd, model_score=model,
                    design_score=design, design_se=se, theta=theta, n_items=n,
                    outside=outside, z=z)

    def replay(self, targets: ResponseMatrix, *, budget=None, rng=None) -> pd.DataFrame:
        """Replay the design on every target's real answers (one row per target).

        Each target is asked a simple random sample of at most ``budget`` (default the
        predictor's) of the items it has answers for. Columns: ``subject``, ``n_items``,
        ``score``, ``lower``, ``upper`` (95%, 0-1), ``se``, ``method`` ("design" for a target
        outside the source population, else "combined"), ``flag``, ``model_score``,
        ``design_score``, ``theta``, ``full_score`` (the target's mean over its answered items,
        for studies).
        """
        self._require_fitted()
        budget = int(self.budget if budget is None else budget)
        if budget < 2 * int(self.n_folds):
            raise ConfigError(f"budget {budget} is below 2 x n_folds ({2 * self.n_folds})")
        if not isinstance(targets, ResponseMatrix):
            targets = ResponseMatrix(targets)
        y = targets.aligned_values(self.item_ids_, extra="ignore")
        rng = np.random.default_rng(rng)
        arr = self._replay_arrays(y, rng, budget)
        score, lo, hi, sd, outside, z = est.combine(arr["model"], arr["design"], arr["se"],
                                                    self.alpha_, self.beta_, self.tau2_,
                                                    self.z_cut, self.source_range_)
        return pd.DataFrame({
            "subject": list(targets.subject_ids), "n_items": arr["n"].astype(int),
            "score": score, "lower": lo, "upper": hi, "se": sd,
            "method": np.where(outside, "design", "combined"),
            "flag": np.where(outside, "outside_source", ""),
            "model_score": arr["model"], "design_score": arr["design"], "theta": arr["theta"],
            "full_score": np.nanmean(y, axis=1)})

    def session(self, *, budget=None, rng=None):
        """A live test for one target: :class:`atlascat.predict.session.PredictSession`."""
        from .session import PredictSession

        self._require_fitted()
        return PredictSession(self, budget=self.budget if budget is None else budget, rng=rng)

    # ------------------------------------------------------------------ serialisation
    def _require_fitted(self):
        if not hasattr(self, "alpha_"):
            raise ConfigError("the predictor is not fitted; call fit(bank, source) or from_dict")

    def to_dict(self) -> dict:
        """JSON-serialisable description (saved as ``predictor.json`` in a bank folder)."""
        self._require_fitted()
        return {"kind": _KIND, "version": 1,
                "settings": {"budget": int(self.budget), "n_folds": int(self.n_folds),
                             "z_cut": float(self.z_cut), "n_replays": int(self.n_replays),
                             "min_tau": float(self.min_tau), "quadpts": int(self.quadpts),
                             "theta_range": [float(v) for v in self.theta_range]},
                "items": {"item_id": [str(i) for i in self.item_ids_],
                          "a": self.a_.tolist(), "b": self.b_.tolist(),
                          "c": self.c_.tolist(), "u": self.u_.tolist()},
                "calibration": {"alpha": self.alpha_, "beta": self.beta_, "tau2": self.tau2_,
                                "n_source": self.n_source_,
                                "source_range": list(self.source_range_)}}

    @classmethod
    def from_dict(cls, d: dict) -> "BenchmarkPredictor":
        if not isinstance(d, dict) or d.get("kind") != _KIND:
            raise ConfigError("not a predictor description (predictor.json); write it with "
                              "BenchmarkPredictor.to_dict")
        s = d["settings"]
        self = cls(s["budget"], n_folds=s["n_folds"], z_cut=s["z_cut"],
                   n_replays=s["n_replays"], min_tau=s["min_tau"], quadpts=s["quadpts"],
                   theta_range=s["theta_range"])
        it = d["items"]
        self.item_ids_ = np.asarray(it["item_id"], dtype=object)
        self.a_, self.b_, self.c_, self.u_ = (np.asarray(it[k], float) for k in "abcu")
        cal = d["calibration"]
        self.alpha_, self.beta_, self.tau2_ = cal["alpha"], cal["beta"], cal["tau2"]
        self.n_source_ = cal["n_source"]
        self.source_range_ = tuple(cal["source_range"])
        return self


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
