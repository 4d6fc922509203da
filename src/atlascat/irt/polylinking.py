"""Linking ordinal (graded, GPCM) and mixed banks: the methods of :mod:`.linking` on the
threshold form (Kim and Lee, 2006; Kolen and Brennan, 2014, sec. 6.8).

theta_ref = A theta_new + B moves each item's thresholds b_k (:func:`.polytomous.thresholds`:
graded -d_k / a, GPCM steps -(d_k - d_(k-1)) / a) as b* = A b + B and its slope as a* = a / A;
mirt's intercepts follow (:func:`.polytomous.intercepts`). The constants:

- mean-sigma: the means and SDs of every anchor threshold; mean-mean: mean(a_new) / mean(a_ref)
  and the thresholds' means;
- Haebara: sum_q w_q sum_j sum_k [P_ref_jk(x_q) - P*_new_jk(x_q)]^2, over every category;
- Stocking-Lord: sum_q w_q [sum_j E_ref_j(x_q) - sum_j E*_new_j(x_q)]^2, E the expected level,

on the reference grid of :mod:`.linking`, minimized over (log A, B) by BFGS from mean-sigma. A
binary 1PL/2PL item joins as a graded item with one threshold (``PolyBank.from_item_bank``).
An anchor must have the same categories in both banks.

References
----------
Kim, S. and Lee, W.-C. (2006). An extension of four IRT linking methods for mixed-format tests.
Journal of Educational Measurement 43, 193-212.
"""
from __future__ import annotations

import numpy as np

from ..errors import BankError, ConfigError
from . import polytomous as poly
from .linkmoments import check_constants, linked_metadata, mean_mean, mean_sigma
from .polybank import PolyBank
from .quadrature import normal_quadrature

__all__ = ["as_poly", "transform_poly", "poly_constants"]


def as_poly(bank, role: str) -> PolyBank:
    """A PolyBank as it is; a binary 1PL/2PL ItemBank as graded items with one threshold."""
    if isinstance(bank, PolyBank):
        return bank
    try:
        return PolyBank.from_item_bank(bank)
    except BankError:
        raise ConfigError(f"the {role} bank has guessing or slipping (c > 0 or u < 1), which "
                          "graded items cannot take: link an ordinal bank to 1PL/2PL or "
                          "ordinal items") from None


def _thresholds(bank: PolyBank) -> np.ndarray:
    return poly.thresholds(bank.models, bank.params)


def transform_poly(bank: PolyBank, A: float, B: float) -> PolyBank:
    """a* = a / A, b*_k = A b_k + B (models, levels, scales unchanged; standard errors moved
    with their parameters, :func:`.linkmoments.linked_metadata`)."""
    return _moved(bank, A, B, bank.metadata is not None)


def _moved(bank: PolyBank, A: float, B: float, with_metadata: bool) -> PolyBank:
    """:func:`transform_poly`, without the metadata when ``with_metadata`` is False (the
    optimizer's steps: copying SE columns made each step three times as slow)."""
    check_constants(A, B)
    a = bank.a / A
    d = poly.intercepts(bank.models, a, A * _thresholds(bank) + B)
    out = PolyBank(bank.item_ids, np.column_stack([a, d]), bank.kinds, bank.levels,
                   scales=bank.scales,
                   metadata=linked_metadata(bank.metadata, A) if with_metadata else None)
    out.levels_assumed = bank.levels_assumed
    return out


def _check_categories(ref: PolyBank, new: PolyBank) -> None:
    differ = [i for i, r, n in zip(ref.item_ids, ref.n_cat, new.n_cat) if r != n]
    differ += [i for i, r, n in zip(ref.item_ids, ref.models, new.models) if r != n and
               i not in differ]
    if differ:
        raise ConfigError(f"anchor item(s) {differ[:5]} have other categories or another model "
                          "in the two banks; an anchor must be the same item: leave them out "
                          "with --anchors")


def poly_constants(ref: PolyBank, new: PolyBank, method: str, quadpts: int,
                   theta_range) -> tuple[float, float, float | None]:
    """(A, B, criterion or None) from two ordinal banks holding the same anchors in order."""
    from scipy.optimize import minimize  # lazy, as in linking

    _check_categories(ref, new)
    br, bn = _thresholds(ref), _thresholds(new)
    ok = np.isfinite(br) & np.isfinite(bn)
    if method == "mean-sigma":
        return (*mean_sigma(br[ok], bn[ok]), None)
    if method == "mean-mean":
        return (*mean_mean(ref.a, br[ok], new.a, bn[ok]), None)
    quad = normal_quadrature(quadpts, theta_range)
    x, w = quad.nodes, quad.weights
    p_ref = np.nan_to_num(ref.probability(x))          # (m, q, K)
    e_ref = ref.expected_score(x).sum(axis=1)          # (q,)
    try:
        A0, B0 = mean_sigma(br[ok], bn[ok])
    except ConfigError:
        A0, B0 = 1.0, 0.0
    if not (np.isfinite(A0) and 0.05 < A0 < 20 and np.isfinite(B0) and abs(B0) < 20):
        A0, B0 = 1.0, 0.0

    def fun(v):
        moved = _moved(new, float(np.exp(v[0])), float(v[1]), with_metadata=False)
        if method == "haebara":
            gap = p_ref - np.nan_to_num(moved.probability(x))
            return float(np.einsum("q,jqk->", w, gap**2))
        return float(w @ (e_ref - moved.expected_score(x).sum(axis=1)) ** 2)

    res = minimize(fun, np.array([np.log(A0), B0]), method="BFGS",
                   options={"gtol": 1e-9, "maxiter": 500})
    return float(np.exp(res.x[0])), float(res.x[1]), float(res.fun)
