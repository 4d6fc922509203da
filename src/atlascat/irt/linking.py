"""Scale linking: put a new calibration on the scale of a reference one.

A linear change of the latent scale theta_ref = A theta_new + B leaves the model's probabilities
unchanged when the items move with it::

    a* = a / A,   b* = A b + B,   c* = c,   u* = u.

The constants (A, B) come from either

- **common persons** (the same subjects scored on both scales, as in partitioned calibration):
  mean-sigma on the thetas, A = sd(theta_ref) / sd(theta_new), B = mean(theta_ref) - A mean(theta_new);
- **common (anchor) items** calibrated in both banks:

  * mean-sigma (Marco, 1977): the same formula on the anchors' b;
  * mean-mean (Loyd and Hoover, 1980): A = mean(a_new) / mean(a_ref),
    B = mean(b_ref) - A mean(b_new);
  * Haebara (1980): minimize sum_q w_q sum_j [P_ref_j(x_q) - P*_new_j(x_q)]^2;
  * Stocking and Lord (1983): minimize sum_q w_q [sum_j P_ref_j(x_q) - sum_j P*_new_j(x_q)]^2,

  where P*_new uses the transformed parameters and x_q, w_q is a normal grid on the reference
  scale (default 61 nodes on [-4, 4], N(0, 1) weights). The characteristic-curve criteria are
  minimized over (log A, B) by BFGS with analytic gradients, started from mean-sigma.

:func:`icc_rmsd` measures how far two banks' item characteristic curves are apart
(sqrt of the N(0, 1)-weighted mean squared difference of P over theta), per item.

References
----------
Kolen, M. J. and Brennan, R. L. (2014). Test Equating, Scaling, and Linking, 3rd ed., ch. 6.
Haebara, T. (1980). Equating logistic ability scales by a weighted least squares method.
Japanese Psychological Research 22, 144-149.
Stocking, M. L. and Lord, F. M. (1983). Developing a common metric in item response theory.
Applied Psychological Measurement 7, 201-210.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import expit

from .defaults import QUADPTS, THETA_RANGE
from ..errors import ConfigError
from .bank import ItemBank
from .quadrature import normal_quadrature

__all__ = ["LINK_METHODS", "Linking", "transform_bank", "mean_sigma", "mean_mean", "haebara",
           "stocking_lord", "link_banks", "icc_rmsd"]

LINK_METHODS = ("stocking-lord", "haebara", "mean-sigma", "mean-mean")


@dataclass(frozen=True)
class Linking:
    """Linking constants theta_ref = A theta_new + B and how they were found."""

    A: float
    B: float
    method: str
    anchors: tuple = ()
    criterion: float | None = None

    def transform(self, bank: ItemBank) -> ItemBank:
        """The bank moved onto the reference scale."""
        return transform_bank(bank, self.A, self.B)

    def theta(self, theta):
        """Thetas moved onto the reference scale."""
        return self.A * np.asarray(theta, float) + self.B

    def to_dict(self) -> dict:
        return {"method": self.method, "A": self.A, "B": self.B, "n_anchors": len(self.anchors),
                "criterion": self.criterion}


def transform_bank(bank: ItemBank, A: float, B: float) -> ItemBank:
    """a* = a / A, b* = A b + B (c, u, ids, metadata unchanged)."""
    if not (np.isfinite(A) and A > 0 and np.isfinite(B)):
        raise ConfigError(f"linking constants must be finite with A > 0, got A={A}, B={B}")
    return ItemBank(bank.item_ids, bank.a / A, A * bank.b + B, bank.c, bank.u,
                    metadata=bank.metadata, model=bank.model)


def _wstats(x, weights):
    x = np.asarray(x, float)
    w = np.ones_like(x) if weights is None else np.asarray(weights, float)
    mean = np.average(x, weights=w)
    return mean, np.sqrt(np.average((x - mean) ** 2, weights=w))


def mean_sigma(x_ref, x_new, weights=None) -> tuple[float, float]:
    """A = sd(x_ref) / sd(x_new), B = mean(x_ref) - A mean(x_new).

    ``x`` are common persons' thetas or common items' difficulties b on the two scales
    (optionally weighted, e.g. by pattern frequencies).
    """
    m_ref, s_ref = _wstats(x_ref, weights)
    m_new, s_new = _wstats(x_new, weights)
    if not (s_new > 0 and s_ref > 0):
        raise ConfigError("mean-sigma linking needs values that vary on both scales")
    A = s_ref / s_new
    return float(A), float(m_ref - A * m_new)


def mean_mean(a_ref, b_ref, a_new, b_new) -> tuple[float, float]:
    """A = mean(a_new) / mean(a_ref), B = mean(b_ref) - A mean(b_new) (anchor items)."""
    A = float(np.mean(a_new) / np.mean(a_ref))
    if not A > 0:
        raise ConfigError("mean-mean linking needs positive mean slopes in both banks")
    return A, float(np.mean(b_ref) - A * np.mean(b_new))


def _curves(params_new, log_a_scale, B, x):
    """P* of the transformed new items on the grid and dP*/d(log A), dP*/dB; (q, m) each."""
    a, b, c, u = params_new
    A = np.exp(log_a_scale)
    z = a * ((x[:, None] - B) / A - b)
    s = expit(z)
    ds = (u - c) * s * (1.0 - s)
    p = c + (u - c) * s
    dp_dloga = ds * (-a * (x[:, None] - B) / A)
    dp_db = ds * (-a / A)
    return p, dp_dloga, dp_db


def _cc_link(ref: ItemBank, new: ItemBank, kind: str, quadpts: int, theta_range) -> tuple:
    from scipy.optimize import minimize  # lazy: 0.25 s at import, only linking needs it

    quad = normal_quadrature(quadpts, theta_range)
    x, w = quad.nodes, quad.weights
    p_ref = ref.probability(x)                  # (q, m)
    params = new.params
    try:
        A0, B0 = mean_sigma(ref.b, new.b) if len(ref) > 1 else (1.0, 0.0)
    except ConfigError:
        A0, B0 = 1.0, 0.0
    if not (np.isfinite(A0) and 0.05 < A0 < 20 and np.isfinite(B0) and abs(B0) < 20):
        A0, B0 = 1.0, 0.0

    def fun(v):
        p, dla, db = _curves(params, v[0], v[1], x)
        diff = p_ref - p
        if kind == "haebara":
            f = float(w @ (diff**2).sum(axis=1))
            g = np.array([-2 * w @ (diff * dla).sum(axis=1), -2 * w @ (diff * db).sum(axis=1)])
        else:
            tdiff = diff.sum(axis=1)
            f = float(w @ tdiff**2)
            g = np.array([-2 * w @ (tdiff * dla.sum(axis=1)), -2 * w @ (tdiff * db.sum(axis=1))])
        return f, g

    res = minimize(fun, np.array([np.log(A0), B0]), jac=True, method="BFGS",
                   options={"gtol": 1e-10, "maxiter": 500})
    return float(np.exp(res.x[0])), float(res.x[1]), float(res.fun)


def haebara(ref: ItemBank, new: ItemBank, *, quadpts: int = QUADPTS, theta_range=(-4.0, 4.0)):
    """Haebara constants (A, B, criterion) from two banks holding the same anchor items in order."""
    return _cc_link(ref, new, "haebara", quadpts, theta_range)


def stocking_lord(ref: ItemBank, new: ItemBank, *, quadpts: int = QUADPTS, theta_range=(-4.0, 4.0)):
    """Stocking-Lord constants (A, B, criterion) from two banks holding the same anchors in order."""
    return _cc_link(ref, new, "stocking-lord", quadpts, theta_range)


def link_banks(ref: ItemBank, new: ItemBank, method: str = "stocking-lord", *, anchors=None,
               quadpts: int = QUADPTS, theta_range=(-4.0, 4.0)) -> Linking:
    """Linking constants that put ``new`` on the scale of ``ref`` through their common items.

    ``anchors``: the item ids to use (default: every id present in both banks; at least 2).
    """
    from .bank import check_bank

    check_bank(ref)
    check_bank(new)
    method = str(method).lower().replace("_", "-")
    if method not in LINK_METHODS:
        raise ConfigError(f"unknown linking method {method!r}; choose one of {', '.join(LINK_METHODS)}")
    if anchors is None:
        anchors = [i for i in ref.item_ids if i in new]
    anchors = [str(i) for i in anchors]
    missing = [i for i in anchors if i not in ref or i not in new]
    if missing:
        raise ConfigError(f"anchor item(s) {missing[:5]} are not in both banks")
    if len(anchors) < 2:
        from ..validation import normalize_item_id

        strip = {normalize_item_id(i) for i in ref.item_ids}
        shared = sum(normalize_item_id(i) in strip for i in new.item_ids)
        hint = (f"; they share {shared} once R's 'X' is stripped from ids (X514 = 514): pass "
                "--normalize-ids (Python: ItemBank.read(..., normalize_ids=True))"
                if shared > len(anchors) else "")
        raise ConfigError(
            f"the banks share {len(anchors)} item(s); linking needs at least 2 common anchor "
            f"items (ref: {list(ref.item_ids[:3])}, new: {list(new.item_ids[:3])}){hint}")
    from ..validation import check_link_anchors, check_linking_result

    r, n = ref.subset(anchors), new.subset(anchors)
    check_link_anchors(r, n, method)
    crit = None
    if method == "mean-sigma":
        A, B = mean_sigma(r.b, n.b)
    elif method == "mean-mean":
        A, B = mean_mean(r.a, r.b, n.a, n.b)
    else:
        A, B, crit = _cc_link(r, n, method, quadpts, theta_range)
    check_linking_result(A, B, method)
    return Linking(A, B, method, tuple(anchors), crit)


def icc_rmsd(bank1: ItemBank, bank2: ItemBank, *, quadpts: int = QUADPTS,
             theta_range=THETA_RANGE) -> pd.Series:
    """Per-item RMSD between two banks' characteristic curves, weighted by N(0, 1).

    RMSD_j = sqrt(sum_q pi_q (P1_j(x_q) - P2_j(x_q))^2) over the items of ``bank1`` that are in
    ``bank2`` (indexed by item id, in ``bank1`` order).
    """
    common = [i for i in bank1.item_ids if i in bank2]
    if not common:
        raise ConfigError("the two banks have no item in common")
    quad = normal_quadrature(quadpts, theta_range)
    p1 = bank1.subset(common).probability(quad.nodes)
    p2 = bank2.subset(common).probability(quad.nodes)
    rmsd = np.sqrt(quad.weights @ (p1 - p2) ** 2)
    return pd.Series(rmsd, index=pd.Index(common, name="item_id"), name="icc_rmsd")
