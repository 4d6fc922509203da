"""The joint link's neighbour correction: what models that answer alike got wrong.

Many leaderboard models are merges, fine-tunes and checkpoints of a few bases; the joint link's
errors (published score minus prediction) run in such families. After a test, the K
calibration models whose answers agree most with the subject's on the items it was asked,

    s_m = #{j asked, observed for m: y_mj = y_j} / #{j asked, observed for m}

(models with fewer than ``min_share`` of the asked items observed are left out), are scored by
the same joint link *on the same items* (their own answers to the subject's items), and their
errors r_m = score_m - pred_m(items of the subject) say what the link gets wrong for models
that answer like this one. The correction is their kernel-weighted mean, shrunk per member,

    shift_b = lambda_b * sum_m k_m r_mb / sum_m k_m,   k_m = exp(tau (s_m - s_max)),

(Nadaraya-Watson regression of the residual on the answers; Nadaraya, 1964; Watson, 1964).
K, tau and lambda_b are chosen by cross-validation on calibration replays
(:func:`fit_neighbours`): a subsample of calibration models, each with its out-of-fold joint-link
residual and its neighbours among the other calibration models, exactly as a new model would be
corrected. The corrected residuals' variance model (the link's D and K) is refitted on the same
subsample.

The calibration models' answers (pool order) travel with the link, packed two bits an answer.
"""
from __future__ import annotations

import base64
import dataclasses
import zlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import ConfigError

__all__ = ["NeighbourCorrection", "agreement", "fit_neighbours", "NEIGHBOURS", "SHARPNESS"]

#: neighbour counts tried by :func:`fit_neighbours` (each neighbour is one more posterior to
#: compute per prediction: 40 doubled a bulk replay's time for the same held-out error)
NEIGHBOURS = (10, 20)
#: kernel sharpnesses tau tried by :func:`fit_neighbours` (agreement is a share, 0-1)
SHARPNESS = (10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0)
#: calibration models scored by the cross-validation (each with up to max(NEIGHBOURS)
#: neighbour predictions; 600 chose noisier settings: held-out MAE of the average 0.616 /
#: 0.557 / 0.599 on three splits against 0.601 / 0.544 / 0.596 with 1200)
CV_MODELS = 1200


def agreement(asked, y, answers, min_share: float = 0.6, exclude=None) -> np.ndarray:
    """(N, M) share of the asked items on which calibration model m gave subject n's answer;
    -1 where m has fewer than ``min_share`` of n's asked items. ``asked`` (N, G) bool, ``y``
    (N, G) 0/1 (NaN where not asked), ``answers`` (M, G) 0/1/NaN; ``exclude`` (N,) an index
    of M per subject to leave out (itself; -1: none) or None."""
    return _agreement(asked, y, *_planes(answers), min_share, exclude)


def _planes(answers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(correct, wrong, observed) indicator matrices (M, G) of 0/1/NaN ``answers``, float32 for
    the matrix products of :func:`agreement`."""
    answers = np.asarray(answers, float)
    one, zero = (answers == 1).astype(np.float32), (answers == 0).astype(np.float32)
    return one, zero, one + zero


def _agreement(asked, y, one, zero, seen, min_share, exclude) -> np.ndarray:
    asked = np.asarray(asked, bool)
    y = np.nan_to_num(np.asarray(y, float))
    y1 = (asked & (y == 1)).astype(np.float32)
    a = asked.astype(np.float32)
    same = (y1 @ one.T + (a - y1) @ zero.T).astype(float)     # exact counts
    both = (a @ seen.T).astype(float)
    out = np.where(both > 0, same / np.maximum(both, 1.0), -1.0)
    out[both < min_share * asked.sum(1, keepdims=True)] = -1.0
    if exclude is not None:
        exclude = np.asarray(exclude, int)
        has = exclude >= 0
        out[np.nonzero(has)[0], exclude[has]] = -1.0
    return out


def _kernel_mean(sim, resid, k: int, tau: float) -> np.ndarray:
    """Per subject, the kernel-weighted mean (N, B) of its first ``k`` neighbours' residuals
    ``resid`` (N, K, B), similarities ``sim`` (N, K) sorted descending (-1: none)."""
    s = sim[:, :k]
    wt = np.where(s >= 0, np.exp(tau * (s - s[:, :1])), 0.0)
    tot = wt.sum(1)
    out = np.einsum("nk,nkb->nb", wt, np.nan_to_num(resid[:, :k]))
    out /= np.maximum(tot, 1e-300)[:, None]
    return np.where((tot > 0)[:, None], out, 0.0)


def _pack(answers) -> str:
    """Two bit planes (observed, correct) of an (M, G) 0/1/NaN matrix, zlib + base64."""
    seen = np.isfinite(answers)
    bits = np.concatenate([np.packbits(seen), np.packbits(seen & (np.nan_to_num(answers) == 1))])
    return base64.b64encode(zlib.compress(bits.tobytes(), 9)).decode("ascii")


def _unpack(text: str, shape) -> np.ndarray:
    n = int(np.prod(shape))
    bits = np.frombuffer(zlib.decompress(base64.b64decode(text)), np.uint8)
    half = len(bits) // 2
    seen = np.unpackbits(bits[:half])[:n].reshape(shape).astype(bool)
    one = np.unpackbits(bits[half:])[:n].reshape(shape).astype(bool)
    return np.where(seen, one.astype(float), np.nan)


@dataclass
class NeighbourCorrection:
    """Calibration models' ``answers`` (M, G; pool order; NaN: none) and published ``scores``
    (M, B, 0-1), ``ids`` (M,); ``k`` neighbours, kernel sharpness ``tau``, per-member
    shrinkage ``shrink`` (B,); ``plain_resid_cov`` / ``plain_post_scale``: the joint link's
    residual model without the correction (:meth:`SuiteLink.without_neighbours`)."""

    answers: np.ndarray
    scores: np.ndarray
    ids: tuple
    k: int
    tau: float
    shrink: np.ndarray
    plain_resid_cov: np.ndarray
    plain_post_scale: np.ndarray | None = None
    min_share: float = 0.6

    def __post_init__(self):
        self.answers = np.asarray(self.answers, float)
        self.scores = np.asarray(self.scores, float)
        self.shrink = np.asarray(self.shrink, float).reshape(-1)
        self.ids = tuple(str(i) for i in self.ids)
        m, b = self.scores.shape if self.scores.ndim == 2 else (-1, -1)
        if self.answers.ndim != 2 or self.answers.shape[0] != m or len(self.ids) != m:
            raise ConfigError("a neighbour correction needs answers (M, items), scores (M, B) "
                              "and M ids")
        if self.shrink.shape != (b,) or not np.isfinite(self.scores).all():
            raise ConfigError("a neighbour correction needs B shrinkages and finite scores")
        if self.k < 1 or not self.tau >= 0:
            raise ConfigError("a neighbour correction needs k >= 1 and tau >= 0")

    def nearest(self, asked, y, exclude=None, k: int | None = None):
        """(index (N, k) into the calibration models, agreement (N, k)), most alike first;
        index -1 / agreement -1 where fewer models qualify."""
        k = int(k or self.k)
        sim = _agreement(asked, y, *self._planes, self.min_share, exclude)
        k = min(k, sim.shape[1])
        idx = np.argpartition(-sim, k - 1, axis=1)[:, :k]
        part = np.take_along_axis(sim, idx, 1)
        order = np.argsort(-part, 1, kind="stable")
        idx, part = np.take_along_axis(idx, order, 1), np.take_along_axis(part, order, 1)
        return np.where(part >= 0, idx, -1), part

    def neighbour_residuals(self, score_fn, asked, idx) -> np.ndarray:
        """(N, k, B) errors score_m - pred_m of neighbours ``idx`` (N, k) answering subject n's
        asked items; ``score_fn(asked (R, G), y (R, G)) -> (R, B)`` the joint link's point
        prediction without the correction. NaN where a neighbour is missing."""
        n, k = idx.shape
        rows = np.repeat(np.arange(n), k)
        m = idx.ravel()
        ok = m >= 0
        out = np.full((n * k, self.scores.shape[1]), np.nan)
        if ok.any():
            a = np.asarray(asked, bool)[rows[ok]]
            out[ok] = self.scores[m[ok]] - score_fn(a, np.where(a, self.answers[m[ok]], np.nan))
        return out.reshape(n, k, -1)

    @cached_property
    def _planes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return _planes(self.answers)

    @cached_property
    def _rows(self) -> dict:
        return {m: i for i, m in enumerate(self.ids)}

    def index_of(self, subject_ids) -> np.ndarray:
        """(N,) each subject's row among the calibration models (-1: not one of them)."""
        return np.array([self._rows.get(str(s), -1) for s in subject_ids], int)

    def shift(self, score_fn, asked, y, subject_ids=None) -> np.ndarray:
        """The correction (N, B) to add to the joint link's prediction of subjects who answered
        ``y`` to the items ``asked``. A subject whose id is a calibration model's is not its own
        neighbour (a replay of a calibration model is then predicted as a new model would
        be)."""
        exclude = None if subject_ids is None else self.index_of(subject_ids)
        idx, sim = self.nearest(asked, y, exclude=exclude)
        resid = self.neighbour_residuals(score_fn, asked, idx)
        return self.shrink * _kernel_mean(sim, resid, self.k, self.tau)

    def to_dict(self) -> dict:
        d = {"k": int(self.k), "tau": float(self.tau), "min_share": float(self.min_share),
             "shrink": np.round(self.shrink, 6).tolist(),
             "plain_resid_cov": np.round(self.plain_resid_cov, 9).tolist(),
             "shape": list(self.answers.shape), "ids": list(self.ids),
             "scores": np.round(self.scores, 6).tolist(), "answers": _pack(self.answers)}
        if self.plain_post_scale is not None:
            d["plain_post_scale"] = np.round(self.plain_post_scale, 6).tolist()
        return d

    @classmethod
    def from_dict(cls, d) -> "NeighbourCorrection":
        try:
            answers = _unpack(d["answers"], tuple(d["shape"]))
        except (KeyError, ValueError, zlib.error) as exc:
            raise ConfigError(f"a neighbour correction's packed answers are unreadable "
                              f"({exc})") from None
        return cls(answers, d["scores"], d["ids"], int(d["k"]), float(d["tau"]), d["shrink"],
                   np.asarray(d["plain_resid_cov"], float), d.get("plain_post_scale"),
                   float(d.get("min_share", 0.6)))


def fit_neighbours(score_fn, answers, scores, ids, asked, y, resid, *, weights,
                   plain_resid_cov, plain_post_scale=None, cv_models: int = CV_MODELS,
                   neighbours=NEIGHBOURS, sharpness=SHARPNESS, min_share: float = 0.6,
                   seed: int = 0):
    """Choose K, tau and the shrinkages by cross-validation on calibration replays.

    ``answers`` (M, G) and ``scores`` (M, B): the calibration models (the neighbours);
    ``asked``, ``y`` (M, G): their replayed tests; ``resid`` (M, B) their out-of-fold joint-link
    residuals; ``weights`` (B,) the aggregate's; ``plain_resid_cov`` / ``plain_post_scale`` the
    joint link's residual model without the correction. A seeded subsample of ``cv_models``
    models is corrected from the other calibration models; K and tau minimize the aggregate's
    squared error after per-member least-squares shrinkages lambda_b in [0, 1]. Returns (the
    correction, the subsample's rows, its corrected residuals (n, B))."""
    answers, scores, resid = (np.asarray(v, float) for v in (answers, scores, resid))
    rng = np.random.default_rng([seed, 18, 7])
    sub = np.sort(rng.choice(len(scores), min(cv_models, len(scores)), replace=False))
    nc = NeighbourCorrection(answers, scores, ids, max(neighbours), 0.0,
                             np.ones(scores.shape[1]), plain_resid_cov, plain_post_scale,
                             min_share)
    idx, sim = nc.nearest(asked[sub], y[sub], exclude=sub)
    R = nc.neighbour_residuals(score_fn, asked[sub], idx)
    target = resid[sub]
    best = None
    for k in neighbours:
        for tau in sharpness:
            c = _kernel_mean(sim, R, k, tau)
            lam = np.clip((c * target).sum(0) / np.maximum((c * c).sum(0), 1e-300), 0.0, 1.0)
            err = float(np.mean(((target - lam * c) @ weights) ** 2))
            if best is None or err < best[0]:
                best = (err, k, tau, lam, target - lam * c)
    _, k, tau, lam, corrected = best
    return dataclasses.replace(nc, k=int(k), tau=float(tau), shrink=lam), sub, corrected
