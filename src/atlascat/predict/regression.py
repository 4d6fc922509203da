"""Ridge regression of the benchmark score on the answers to a target's asked items.

For a target asked the items J (|J| = n), the source models' answers to J are a design matrix
X (S x n) and their benchmark scores s (S) the response; the ridge fit with an intercept,

    beta(lambda) = argmin ||s - mean(s) - (X - mean(X)) beta||^2 + lambda ||beta||^2,

predicts the target's score as R = mean(s) + (x - mean(X)) . beta, x its answers to J. Each
target has its own items, so each gets its own fit (vectorized over targets: one batched SVD
of the centred X, X = U diag(d) V'). lambda is chosen per target from a fixed grid by exact
leave-one-out error (Allen's PRESS): with h_i = 1/S + sum_k U_ik^2 d_k^2 / (d_k^2 + lambda)
the hat matrix's diagonal, the left-out residual of source model i is r_i / (1 - h_i).

This is BenchPred's "random sampling + learn" (Zhang, Dorner and Hardt 2025) on the items the
predictor's design drew instead of one fixed random set: it learns how the asked items' answers
relate to the score among the source models, without an IRT model, so it can capture what one
dimension of theta cannot (MuSR's three parts). Like the IRT prediction it is a model-based
estimate, right for targets like the source models only: the predictor stacks the two,
calibrated on the source models' replays where R is each model's own leave-one-out prediction
(:class:`~atlascat.predict.BenchmarkPredictor`), and the design-based estimate still carries a
target outside the source population.

Reference: Allen (1974). The relationship between variable selection and data augmentation and
a method for prediction. Technometrics 16, 125-127 (PRESS). Hoerl and Kennard (1970). Ridge
regression. Technometrics 12, 55-67.
"""
from __future__ import annotations

import base64
import zlib
from typing import NamedTuple

import numpy as np

__all__ = ["PENALTIES", "RidgeFit", "ridge_press", "ridge_scores", "pack_answers",
           "unpack_answers"]

PENALTIES = np.logspace(-2, 4, 25)
_CHUNK = 64               # targets per batched SVD (memory: chunk x S x n doubles)
_LEVELS = 250             # answers stored as round(250 y): exact for 0/1, 0.004 for partial credit
_MISSING = 255


def ridge_scores(answers, scores, item, valid, target_answers=None, loo_rows=None):
    """R for every row: the ridge prediction from the source models' ``answers`` (S x N, no
    NaN: impute first) and ``scores`` (S) on the row's drawn items ``item`` (T x n indices;
    ``valid`` marks the draws made, the others are left out of the fit).

    ``target_answers`` (T x n, the row's answers to its drawn items) gives the rows' own
    predictions; ``loo_rows`` (T indices into the source models) instead gives source model
    ``loo_rows[t]``'s leave-one-out prediction (for replays of the source models)."""
    answers = np.asarray(answers, float)
    scores = np.asarray(scores, float)
    item = np.asarray(item, int)
    valid = np.asarray(valid, bool)
    out = np.empty(item.shape[0])
    for lo in range(0, item.shape[0], _CHUNK):
        sl = slice(lo, lo + _CHUNK)
        x_new = None if target_answers is None else np.asarray(target_answers, float)[sl]
        rows = None if loo_rows is None else np.asarray(loo_rows, int)[sl]
        out[sl] = _chunk(answers, scores, item[sl], valid[sl], x_new, rows)
    return out


class RidgeFit(NamedTuple):
    """Batched ridge fits with an intercept at each batch's penalty (:func:`ridge_press`)."""

    x_mean: np.ndarray     # (B, n) the design's column means
    y_mean: np.ndarray     # (m,) the responses' means
    coef: np.ndarray       # (B, n, m)
    penalty: np.ndarray    # (B,) the grid value with the least PRESS
    loo: np.ndarray        # (B, S) the first response's leave-one-out residuals at it

    def predict(self, x) -> np.ndarray:
        """y_mean + (x - x_mean) . coef for rows ``x`` (B, n) -> (B, m), or (B, T, n) ->
        (B, T, m): T rows per batch."""
        x = np.asarray(x, float)
        xm = self.x_mean.reshape(self.x_mean.shape[:1] + (1,) * (x.ndim - 2)
                                 + self.x_mean.shape[1:])
        return self.y_mean + np.einsum("b...n,bnm->b...m", x - xm, self.coef)


def ridge_press(X, y, penalties=None) -> RidgeFit:
    """The ridge regressions with an intercept of the responses ``y`` (S, or S x m) on each
    design ``X`` (B x S x n), by one batched SVD of the centred designs, Xc = U diag(d) V':
    the penalty is chosen per batch from the grid (default :data:`PENALTIES`) by the exact
    leave-one-out error of ``y``'s FIRST column (Allen's PRESS: residual r_i / (1 - h_i),
    h_i = 1/S + sum_k U_ik^2 d_k^2 / (d_k^2 + lambda)); every column is fitted at that
    penalty (coef = V diag(d / (d^2 + lambda)) U' (y - mean y)). The one ridge of
    :func:`ridge_scores` (the predictor's: one response, a batch per target) and of
    :func:`atlascat.studies.baselines.aipw_accuracy` (one design, the mean score and each form
    item as responses)."""
    X = np.asarray(X, float)
    y = np.asarray(y, float)
    y2 = y.reshape(y.shape[0], -1)
    grid = np.asarray(PENALTIES if penalties is None else penalties, dtype=float)
    n_src = X.shape[1]
    mx = X.mean(1, keepdims=True)
    U, d, Vt = np.linalg.svd(X - mx, full_matrices=False)            # (B,S,r) (B,r) (B,r,n)
    y_mean = y2.mean(0)
    yc = y2 - y_mean
    Uy = np.einsum("bsk,sm->bkm", U, yc)                              # (B, r, m)
    d2 = d ** 2
    shrink = d2[:, None, :] / (d2[:, None, :] + grid[None, :, None])  # (B, L, r)
    fit = np.einsum("bsk,blk->bls", U, shrink * Uy[:, None, :, 0])    # (B, L, S)
    hat = np.einsum("bsk,blk->bls", U ** 2, shrink) + 1.0 / n_src
    resid = (yc[None, None, :, 0] - fit) / np.maximum(1.0 - hat, 1e-9)
    best = np.argmin(np.mean(resid ** 2, axis=2), axis=1)             # (B,)
    lam = grid[best]
    w = np.where(d2 > 0, d / (d2 + lam[:, None]), 0.0)
    coef = np.einsum("bkn,bkm->bnm", Vt, w[:, :, None] * Uy)
    rows = np.arange(X.shape[0])
    return RidgeFit(mx[:, 0, :], y_mean, coef, lam, resid[rows, best])


def _chunk(answers, scores, item, valid, x_new, loo_rows):
    X = answers[:, item].transpose(1, 0, 2) * valid[:, None, :]      # (B, S, n)
    fit = ridge_press(X, scores)
    if loo_rows is not None:
        return scores[loo_rows] - fit.loo[np.arange(item.shape[0]), loo_rows]
    return fit.predict(np.where(valid, x_new, 0.0))[:, 0]


def pack_answers(answers) -> str:
    """The answers (S x N, 0-1 or NaN) as text for a JSON file: round(250 y) as bytes (255 for
    NaN), zlib-compressed, base64."""
    a = np.asarray(answers, float)
    codes = np.where(np.isnan(a), _MISSING, np.rint(np.nan_to_num(a) * _LEVELS)).astype(np.uint8)
    return base64.b64encode(zlib.compress(codes.tobytes(), 9)).decode("ascii")


def unpack_answers(text: str, shape) -> np.ndarray:
    """Inverse of :func:`pack_answers`."""
    codes = np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=np.uint8)
    codes = codes.reshape(tuple(int(v) for v in shape))
    return np.where(codes == _MISSING, np.nan, codes / _LEVELS)
