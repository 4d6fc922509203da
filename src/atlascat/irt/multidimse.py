"""Standard errors of the exploratory multidimensional 2PL fitted by EM (K = 2, 3), as mirt's
``mirt(data, K, SE = TRUE)`` and ``coef(mod, printSE = TRUE)``.

The information is the observed one of the marginal log-likelihood on the EM's product grid
(nodes x_q = (theta_q, 1), normalized N(0, I) weights), by Louis' (1982) identity::

    I = sum_j sum_q n_qj P_qj (1 - P_qj) x_q x_q^T  -  sum_i w_i Cov_post(s_i | y_i),

the first term the expected complete-data information (block-diagonal: item j's K + 1
parameters (a_j1..a_jK, d_j); n_qj the posterior-expected number of answers to item j at node q,
P_qj = sigma(a_j . theta_q + d_j)), the second the subjects' posterior covariance of the
complete-data score s_iq, item j's block (y_ij - P_qj) x_q (0 where y_ij is missing). That
covariance is E[s s^T] - S S^T summed over subjects: for items j, l::

    sum_i w_i E[s_ij s_il^T] = sum_q x_q x_q^T M_qjl,
    M_qjl = sum_i w_i post_iq (y_ij - P_qj)(y_il - P_ql)     (observed cells),

M from three products of the posteriors with the answers' pair products (one, without
missing answers), taken by blocks of items and subjects, and sum_i w_i S_i S_i^T one product of
the posterior-mean scores S (n, J (K + 1)); no loop over items or nodes. This is the matrix of
mirt's default ``SE.type = "Oakes"`` for EM fits (Oakes 1999; Chalmers 2018): both are the exact
Hessian of the same grid log-likelihood. With the fit's N(0, sd^2) priors the information of
the log-posterior (plus 1 / sd^2 on the diagonal): posterior-mode standard errors.

Identification. With theta ~ N(0, I) the likelihood is invariant under rotations of the
loadings (exactly in theory, nearly on the grid), so the full information is singular. mirt
fixes the rotation by setting loadings of the last items to 0 (the last item loads on factor 1
only, the one before on factors 1-2, ...: K (K - 1) / 2 of them) and reports those as fixed (no
SE). :func:`multidim_standard_errors` rotates the fit to that orientation (an LQ decomposition of
those rows, diagonal positive), takes the information of the free parameters, and inverts it.
The fitted bank's loadings (varimax, :class:`~atlascat.irt.multidim.MultidimIRT`) are a smooth
function of those parameters, identified without constraints: their standard errors are the
delta method's, through a varimax rotation refined from the bank's (``frame("bank")``).

References
----------
Louis, T. A. (1982). Finding the observed information matrix when using the EM algorithm.
    JRSS B 44, 226-233.
Oakes, D. (1999). Direct calculation of the information matrix via the EM algorithm. JRSS B 61,
    479-482.
Chalmers, R. P. (2018). Numerical approximation of the observed information matrix with Oakes'
    identity. BJMSP 71, 415-436.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import expit, log_expit

from ..errors import ConfigError, warn_user
from .information import ObservedInformation
from .multidimem import BLOCK_BYTES, posterior_blocks

__all__ = ["MultidimStandardErrors", "multidim_standard_errors", "multidim_information",
           "mirt_orientation", "mirt_free", "write_bank_with_se"]


def multidim_information(loadings, intercepts, y, weights, nodes, log_weights, *,
                         prior_a_sd=None, prior_d_sd=None, block_bytes: int = BLOCK_BYTES):
    """Observed information (J (K + 1), J (K + 1)) of every item's (a_1..a_K, d), item by item,
    the marginal log-likelihood's gradient (J, K + 1) and the log-likelihood, on the grid
    ``nodes`` (Q, K) with normalized log prior weights ``log_weights`` (Q,); ``y`` 0/1 with NaN
    missing, ``weights`` pattern frequencies or None; priors: N(0, sd^2) or None. Subjects go
    through by blocks of ``block_bytes`` of posteriors (every sum below is over subjects)."""
    A = np.asarray(loadings, float)
    d = np.asarray(intercepts, float)
    y = np.asarray(y, float)
    n, J = y.shape
    K = A.shape[1]
    nodes = np.asarray(nodes, float).reshape(-1, K)
    X = np.hstack([nodes, np.ones((len(nodes), 1))])                   # (Q, K + 1)
    Q, P1 = X.shape
    obs = ~np.isnan(y)
    y1 = np.where(obs, y, 0.0)
    o = obs.astype(float)
    w = np.ones(n) if weights is None else np.asarray(weights, float)
    z = X @ np.column_stack([A, d]).T                                  # (Q, J)
    p = expit(z)
    XX = (X[:, :, None] * X[:, None, :]).reshape(Q, P1 * P1)
    PX = (p[:, :, None] * X[:, None, :]).reshape(Q, J * P1)
    r, nq = np.zeros((Q, J)), np.zeros((Q, J))
    loglik = 0.0
    # sum_i w_i E[s_i s_i^T | y_i] (by blocks of items: M_qjl, then sum_q x x^T M_qjl) minus
    # sum_i w_i S_i S_i^T, S_ij = y_ij (post X)_i - o_ij (post (P_j x))_i
    cov = np.zeros((J, P1, J, P1))
    b = int(max(1, min(J, np.sqrt(block_bytes / (32 * Q)))))   # M and its temporaries: 1/4 block
    missing = not obs.all()
    for rows, post, lognorm in posterior_blocks(y1, obs, z, log_weights, block_bytes):
        wb, yb, ob = w[rows], y1[rows], o[rows]
        loglik += float(wb @ lognorm)
        S = (yb[:, :, None] * (post @ X)[:, None, :]
             - ob[:, :, None] * (post @ PX).reshape(len(yb), J, P1)).reshape(len(yb), J * P1)
        cov.reshape(J * P1, J * P1)[...] -= (S * wb[:, None]).T @ S
        post *= wb[:, None]                                            # w_i post_iq
        rb, nb = post.T @ yb, post.T @ ob
        r += rb
        nq += nb
        for j0 in range(0, J, b):
            js = slice(j0, min(J, j0 + b))
            for l0 in range(j0, J, b):
                ls = slice(l0, min(J, l0 + b))
                M = _pair_moments(post, yb, ob, p, rb, nb, js, ls, missing)   # (Q, bj, bl)
                blk = (XX.T @ M.reshape(Q, -1)).reshape(P1, P1, M.shape[1], M.shape[2])
                cov[js, :, ls, :] += blk.transpose(2, 0, 3, 1)
                if l0 != j0:
                    cov[ls, :, js, :] += blk.transpose(3, 1, 2, 0)
    grad = (r - nq * p).T @ X                                          # (J, K + 1)
    complete = ((nq * p * (1 - p)).T @ XX).reshape(J, P1, P1)          # -E[complete Hessian]
    info = -cov.reshape(J * P1, J * P1)
    idx = np.arange(J)
    info.reshape(J, P1, J, P1)[idx, :, idx, :] += complete
    prec = np.r_[np.full(K, 0.0 if prior_a_sd is None else float(prior_a_sd) ** -2),
                 0.0 if prior_d_sd is None else float(prior_d_sd) ** -2]
    info[np.diag_indices_from(info)] += np.tile(prec, J)
    grad = grad - np.column_stack([A, d]) * prec
    return 0.5 * (info + info.T), grad, loglik


def _pair_moments(wpost, y1, o, p, r, nq, js, ls, missing):
    """M_qjl = sum_i w_i post_iq (y_ij - o_ij P_qj)(y_il - o_il P_ql) for items js x ls over
    one block of subjects (``r``, ``nq`` that block's expected counts)."""
    Q = wpost.shape[1]
    wp = wpost.T                                                       # (Q, rows)
    yj, yl = y1[:, js], y1[:, ls]
    bj, bl = yj.shape[1], yl.shape[1]

    def pair(u, v):
        return (wp @ (u[:, :, None] * v[:, None, :]).reshape(len(u), -1)).reshape(Q, bj, bl)

    pj, pl = p[:, js][:, :, None], p[:, ls][:, None, :]
    M = pair(yj, yl)                        # in place: M and one temporary of its size at most
    if not missing:   # every answer observed: the pair sums are the item counts and node masses
        M -= pj * r[:, None, ls]
        M -= pl * r[:, js, None]
        M += (pj * nq[:, :1, None]) * pl
        return M
    oj, ol = o[:, js], o[:, ls]
    for t, f in ((pair(oj, yl), -pj), (pair(yj, ol), -pl), (pair(oj, ol), pj * pl)):
        t *= f
        M += t
    return M


def mirt_orientation(loadings):
    """The orthogonal R with mirt's fixed loadings of A R at 0 and a positive diagonal:
    mirt's identification of the exploratory model, the last item loads on factor 1 only, the
    one before it on factors 1-2, ... (:func:`mirt_free`); an LQ decomposition of those rows."""
    A = np.asarray(loadings, float)
    K = A.shape[1]
    rows = _anchors(len(A), K)
    q, u = np.linalg.qr(A[rows].T)      # A[rows]^T = q u: A[rows] q = u^T, lower triangular
    return q * np.where(np.diag(u) < 0, -1.0, 1.0)[None, :]


def mirt_free(n_items: int, n_dims: int) -> np.ndarray:
    """(J, K + 1) bool: the estimated parameters of mirt's exploratory model (False: the
    loadings mirt fixes at 0, a_{J,2..K} of the last item, a_{J-1,3..K} of the one before, ...)."""
    free = np.ones((n_items, n_dims + 1), dtype=bool)
    for t, j in enumerate(_anchors(n_items, n_dims)):
        free[j, t + 1:n_dims] = False
    return free


def _anchors(n_items: int, n_dims: int) -> np.ndarray:
    """The items whose loadings identify the rotation: the last K, the last item first."""
    return np.arange(n_items - 1, n_items - 1 - n_dims, -1)


@dataclass
class MultidimStandardErrors:
    """Parameters of an exploratory multidimensional 2PL in mirt's orientation (``loadings``,
    ``intercepts``; ``free`` (J, K + 1) the estimated ones) with the observed information of the
    free parameters (``info``; ``index`` rows (item, column), column K the intercept),
    ``bank_rotation`` R with the fitted bank's loadings = loadings @ R, and whether priors made
    it the posterior-mode information."""

    item_ids: np.ndarray
    loadings: np.ndarray
    intercepts: np.ndarray
    free: np.ndarray
    info: ObservedInformation
    bank_rotation: np.ndarray
    posterior_mode: bool = False

    def __post_init__(self):
        self.covariance = self.info.covariance()
        if not np.all(np.isfinite(self.covariance)):
            warn_user("the observed information of the multidimensional 2PL is not positive "
                      "definite (a loading the data does not determine): standard errors are "
                      "NaN; refit with the priors or fewer dimensions")

    @property
    def n_dims(self) -> int:
        return self.loadings.shape[1]

    def __repr__(self) -> str:
        kind = "posterior-mode" if self.posterior_mode else "observed"
        return (f"MultidimStandardErrors(n_items={len(self.item_ids)}, n_dims={self.n_dims}, "
                f"n_free={int(self.free.sum())}, {kind} information (Louis); .frame() for "
                "the table)")

    def frame(self, rotate: str = "none") -> pd.DataFrame:
        """``item_id, a1, a1_se, ..., aK, aK_se, d, d_se``. ``rotate``: "none" (mirt's
        ``coef(mod, printSE = TRUE)``: the constrained orientation, the fixed loadings 0 with
        NaN SE) or "bank" (the fitted bank's varimax loadings, SEs by the delta method)."""
        K = self.n_dims
        if rotate == "none":
            values = np.column_stack([self.loadings, self.intercepts])
            se = np.full(values.shape, np.nan)
            se[self.free] = np.sqrt(np.maximum(np.diag(self.covariance), 0.0))
        elif rotate == "bank":
            values, se = self._bank()
        else:
            raise ConfigError(f"rotate must be 'none' (mirt's orientation) or 'bank', not "
                              f"{rotate!r}")
        out = {"item_id": np.asarray(self.item_ids).astype(str)}
        for k, name in enumerate([f"a{k + 1}" for k in range(K)] + ["d"]):
            out[name], out[f"{name}_se"] = values[:, k], se[:, k]
        return pd.DataFrame(out)

    def _bank(self):
        """The bank's loadings and intercepts with their delta-method SEs: the varimax loadings
        as a function of the free parameters, differentiated by central differences of a
        varimax iterated (to rounding) from the bank's rotation, every perturbation at once."""
        K = self.n_dims
        theta0 = np.column_stack([self.loadings, self.intercepts])
        idx = self.info.index
        P = len(idx)
        h = 1e-4 * (1.0 + np.abs(theta0[idx[:, 0], idx[:, 1]]))
        step = np.zeros((2 * P,) + theta0.shape)
        step[np.arange(P), idx[:, 0], idx[:, 1]] = h
        step[P + np.arange(P), idx[:, 0], idx[:, 1]] = -h
        moved = theta0 + step                                        # (2P, J, K + 1)
        rotated = _varimax_stack(moved[:, :, :K] @ self.bank_rotation)
        out = np.concatenate([rotated, moved[:, :, K:]], axis=2)
        G = ((out[:P] - out[P:]) / (2 * h)[:, None, None]).reshape(P, -1)
        var = np.einsum("pm,pq,qm->m", G, self.covariance, G).reshape(theta0.shape)
        return np.column_stack([self.loadings @ self.bank_rotation, self.intercepts]), \
            np.sqrt(np.maximum(var, 0.0))


def _varimax_stack(L, max_iter: int = 5000, tol: float = 1e-13):
    """Kaiser-normalized varimax (:func:`atlascat.irt.rotation.varimax`'s iteration) of a stack
    of loading matrices (B, J, K), each from the identity, iterated until the rotations move by
    less than ``tol``: the rotated stack."""
    n = L.shape[1]
    Ln = L / np.maximum(np.sqrt((L ** 2).sum(axis=2, keepdims=True)), 1e-300)
    R = np.broadcast_to(np.eye(L.shape[2]), (L.shape[0],) + (L.shape[2],) * 2)
    for _ in range(max_iter):
        LR = Ln @ R
        grad = np.swapaxes(Ln, 1, 2) @ (LR ** 3 - LR * (LR ** 2).sum(axis=1, keepdims=True) / n)
        u, _, vt = np.linalg.svd(grad)
        new = u @ vt
        done = np.abs(new - R).max() < tol
        R = new
        if done:
            break
    return L @ R


def multidim_standard_errors(bank, y, weights, nodes, log_weights, *, prior_a_sd=None,
                             prior_d_sd=None) -> MultidimStandardErrors:
    """Standard errors of a fitted :class:`~atlascat.irt.multidim.MultidimBank` (its item order
    = the columns of ``y``) on the EM grid it was fitted on: rotated to mirt's orientation,
    the information of the free parameters (:func:`multidim_information`) inverted."""
    A, d = np.asarray(bank.loadings, float), np.asarray(bank.intercepts, float)
    J, K = A.shape
    if K < 2:
        raise ConfigError("multidim_standard_errors is for K >= 2 dimensions; the "
                          "unidimensional fit's are atlascat.calibrate(..., se=True)'s")
    R = mirt_orientation(A)
    Am = A @ R
    Am[mirt_free(J, K)[:, :K] == False] = 0.0     # noqa: E712  (rounding of the rotation)
    info, grad, _ = multidim_information(Am, d, y, weights, nodes, log_weights,
                                         prior_a_sd=prior_a_sd, prior_d_sd=prior_d_sd)
    free = mirt_free(J, K)
    flat = free.ravel()
    oi = ObservedInformation(info[np.ix_(flat, flat)], np.argwhere(free), grad[free])
    return MultidimStandardErrors(bank.item_ids, Am, d, free, oi, R.T,
                                  prior_a_sd is not None or prior_d_sd is not None)


def write_bank_with_se(bank, se: MultidimStandardErrors, path, frame=None):
    """Write ``bank`` (CSV or Parquet, as :meth:`MultidimBank.write`; ``frame``: the bank's table
    to write, e.g. mirt's, instead of its own) with ``<p>_se`` beside each of its parameters
    (``se.frame("bank")``); :meth:`MultidimBank.read` keeps them as metadata."""
    from pathlib import Path

    path = Path(path)
    df = bank.to_frame() if frame is None else frame.copy()
    errors = se.frame("bank")
    cols = []
    for c in df.columns:
        cols.append(c)
        if f"{c}_se" in errors.columns and f"{c}_se" not in df.columns:
            df[f"{c}_se"] = errors[f"{c}_se"].to_numpy()
            cols.append(f"{c}_se")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        df[cols].to_parquet(path, index=False)
    else:
        df[cols].to_csv(path, index=False, float_format="%.17g")
    return path
