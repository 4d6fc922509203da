"""The answer correction: ridge weights of the items' residuals, penalty by cross-validation."""
from __future__ import annotations

import numpy as np

from .curve import local_scale
from .settings import COVERAGE_TARGET, Z95


def with_columns(mask, cols) -> np.ndarray:
    out = np.array(mask, bool, copy=True)
    out[:, cols] = True
    return out



def ridge(E, d, lam):
    Em = E.mean(0)
    dm = d.mean()
    Ec = E - Em
    w = np.linalg.solve(Ec.T @ Ec + lam * np.eye(E.shape[1]), Ec.T @ (d - dm))
    return w, float(dm - Em @ w)



def ridge_correction(E, delta, sd, rng, lams=(3.0, 10.0, 30.0, 100.0, 300.0),
                      groups=None, theta=None, grid=None) -> dict:
    """Item weights for the residuals: ridge of delta on E, penalty by 2-fold cross-validation;
    the interval scale from the out-of-fold errors (so it is honest for new models), over
    theta (``local``, see :func:`local_scale`) when ``theta`` and ``grid`` are given."""
    n = E.shape[0]
    groups = np.arange(n) if groups is None else np.asarray(groups)
    ids = np.unique(groups)
    fold = np.isin(groups, rng.permutation(ids)[: ids.size // 2])
    best = None
    for lam in lams:
        oof = np.empty(n)
        for f in (fold, ~fold):
            w, b = ridge(E[~f], delta[~f], lam)
            oof[f] = b + E[f] @ w
        mae = float(np.mean(np.abs(delta - oof)))
        if best is None or mae < best[0]:
            best = (mae, lam, oof)
    mae, lam, oof = best
    w, b = ridge(E, delta, lam)
    z = (delta - oof) / sd
    out = {"weights": w, "intercept": b, "lambda": lam, "cv_mae": mae}
    f = np.ones_like(z)
    if theta is not None and grid is not None:
        out["local"] = local_scale(theta, z, grid)
        f = np.interp(theta, grid, out["local"])
    out["scale"] = float(np.quantile(np.abs(z) / f, COVERAGE_TARGET) / Z95)
    return out
