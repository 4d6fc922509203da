"""ML and WLE scores on a multidimensional 2PL bank, as mirt's ``fscores(mod, method = "ML" |
"WLE", full.scores.SE = TRUE)``, by a batched Newton method (all subjects at once).

With z_ij = a_j . theta_i + d_j, p = sigma(z), w_j = p_j q_j over the items subject i answered:

- ML maximizes log L(theta) = sum_j [y_j z_j - log(1 + e^z_j)]: gradient A^T (y - p), minus the
  Hessian the test information I(theta) = sum_j w_j a_j a_j^T (for the logistic 2PL the
  observed information is the expected one). SE: sqrt(diag(I^{-1})) at the maximum (mirt's:
  the inverse of its optimizer's Hessian of -log L).
- WLE maximizes log L + log det I(theta) / 2, mirt's generalization of Warm's (1989) estimator
  to K dimensions (its ``WLE.mirt``: the Jeffreys prior, Warm's correction for the 2PL when
  K = 1). With M = I^{-1} and h_j = a_j^T M a_j the gradient is
  A^T (y - p) + 1/2 sum_j w_j (1 - 2 p_j) h_j a_j, and minus the Hessian
  I - 1/2 [sum_j w''_j h_j a_j a_j^T - T],  w''_j = w_j ((1 - 2 p_j)^2 - 2 w_j),
  T_kl = tr(M dI/dtheta_k M dI/dtheta_l),  dI/dtheta_k = sum_j w_j (1 - 2 p_j) a_jk a_j a_j^T.
  SE: sqrt(diag) of the inverse of minus that Hessian, as mirt (the curvature of the objective
  it maximizes; not sqrt(diag(I^{-1})), the unidimensional path's catR convention).

Newton's step (minus the Hessian when positive definite, else the information: a Fisher
scoring step), at most ``MAX_STEP`` long, halved until the objective does not decrease; from
theta = 0; a subject stops when its step is below ``tol``.

Extreme patterns (``flag``, as the unidimensional ML / WLE):

- ``no_items``: no answer; theta and SE NaN (mirt: NA).
- ``perfect`` / ``zero`` (ML): every answer right / wrong: theta +inf / -inf, SE inf (mirt:
  +-Inf, SE NA). WLE is finite for them.
- ``singular``: the answered items' loadings do not span K dimensions (fewer than K answers,
  say): I(theta) is singular, ML not identified and log det I = -inf; theta and SE NaN (mirt:
  WLE stops with "Information matrix has a determinant of 0", NA).
- ``diverged`` (ML): the likelihood rises without bound along a direction (the answers are
  separated by a hyperplane through the origin of the a's, e.g. every item of factor 1 right
  and of factor 2 wrong), or its maximum lies beyond ``bounds``: the coordinates that moved in
  the last step or lie beyond ``bounds`` are +-inf with SE inf, the others kept. mirt runs its
  optimizer into max_theta = 20 there and reports theta +-Inf only where its SE exceeds 30.
- ``at_bound`` (WLE): a coordinate of the maximum beyond ``bounds``, clipped to the bound.
- ``not_converged`` (WLE): ``max_iter`` steps left a step above ``tol`` (not seen in the tests;
  the objective can be flat and not concave far out), theta the last iterate.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

__all__ = ["ml_wle", "objective", "FLAGS"]

FLAGS = ("ok", "perfect", "zero", "diverged", "at_bound", "not_converged", "singular",
         "no_items")
#: longest Newton step (Euclidean), in theta units
MAX_STEP = 2.0
#: step halvings tried before a subject's iteration is stopped
_HALVINGS = 40
#: answers (subjects x items) scored at once
_BLOCK_CELLS = 2_000_000
#: I(0) with smallest / largest eigenvalue below this is singular
_RANK_TOL = 1e-10


def _outer(A):
    """(J, K*K) rows a_j a_j^T, flattened."""
    return (A[:, :, None] * A[:, None, :]).reshape(A.shape[0], -1)


def objective(theta, y1, w, A, d, method: str, *, derivatives: bool = True):
    """(f, gradient, minus Hessian) of log L (``"ml"``) or log L + log det I / 2 (``"wle"``)
    at ``theta`` (n, K) of n subjects: answers ``y1`` (0 where missing) and weights ``w`` (1
    answered, 0 missing), both (n, J). ``derivatives=False``: f only (gradient, Hessian None)."""
    n, k = theta.shape
    z = theta @ A.T + d
    p, q = expit(z), expit(-z)                 # q accurate where p rounds to 1
    f = (y1 * z - w * np.logaddexp(0.0, z)).sum(1)
    pq = w * p * q
    info = (pq @ _outer(A)).reshape(n, k, k)
    if method == "wle":
        sign, logdet = np.linalg.slogdet(info)
        logdet = np.where(sign > 0, logdet, -np.inf)
        f = f + 0.5 * logdet
    if not derivatives:
        return f, None, None
    grad = (y1 - w * p) @ A
    if method == "ml":
        return f, grad, info
    M = np.full_like(info, np.nan)
    ok = logdet > -np.inf
    M[ok] = np.linalg.inv(info[ok])
    h = M.reshape(n, k * k) @ _outer(A).T                       # a_j^T M a_j, (n, J)
    w1 = pq * (1.0 - 2.0 * p)
    grad = grad + 0.5 * (w1 * h) @ A
    w2 = pq * ((1.0 - 2.0 * p) ** 2 - 2.0 * p * q)
    first = ((w2 * h) @ _outer(A)).reshape(n, k, k)
    A3 = (A[:, :, None, None] * A[:, None, :, None] * A[:, None, None, :]).reshape(A.shape[0], -1)
    dI = (w1 @ A3).reshape(n, k, k, k)                          # dI/dtheta_k, (n, k, a, b)
    E = np.einsum("nab,nkbc->nkac", M, dI)
    T = np.einsum("nkab,nlba->nkl", E, E)
    return f, grad, info - 0.5 * (first - T)


def ml_wle(y, obs, bank, method: str, *, bounds=(-10.0, 10.0), max_iter: int = 100,
           tol: float = 1e-10):
    """(theta (n, K), cov (n, K, K), flag (n,) object) of ML or WLE for every subject (see the
    module's docstring). ``y`` (n, J) in the bank's item order, ``obs`` its answered mask.
    Computed in blocks of subjects (about ``_BLOCK_CELLS`` answers each) to bound memory."""
    A, d = np.asarray(bank.loadings, float), np.asarray(bank.intercepts, float)
    step = max(256, _BLOCK_CELLS // max(A.shape[0], 1))
    parts = [_ml_wle_block(y[i:i + step], obs[i:i + step], A, d, method, bounds, max_iter, tol)
             for i in range(0, max(y.shape[0], 1), step)]
    return tuple(np.concatenate(x) for x in zip(*parts))


def _ml_wle_block(y, obs, A, d, method, bounds, max_iter, tol):
    lo, hi = float(bounds[0]), float(bounds[1])
    n, k = y.shape[0], A.shape[1]
    w = obs.astype(float)
    y1 = np.where(obs, y, 0.0)
    n_obs = obs.sum(1)
    flag = np.full(n, "ok", dtype=object)
    info0 = ((w * (expit(d) * (1 - expit(d)))) @ _outer(A)).reshape(n, k, k)
    ev = np.linalg.eigvalsh(info0)
    flag[ev[:, 0] <= _RANK_TOL * np.maximum(ev[:, -1], 1e-300)] = "singular"
    if method == "ml":
        right, wrong = (y1 == w).all(1), (y1 == 0).all(1)
        flag[right & (n_obs > 0)] = "perfect"
        flag[wrong & (n_obs > 0)] = "zero"
    flag[n_obs == 0] = "no_items"
    theta = np.zeros((n, k))
    run = np.flatnonzero(flag == "ok")
    theta[run], moved, converged = _newton(theta[run], y1[run], w[run], A, d, method,
                                           max_iter, tol, 4.0 * max(abs(lo), abs(hi)))
    cov = np.full((n, k, k), np.nan)
    if run.size:
        _, _, neg_h = objective(theta[run], y1[run], w[run], A, d, method)
        with np.errstate(invalid="ignore"):
            cov[run] = _safe_inv(neg_h)
    out = (theta < lo) | (theta > hi)
    sub = np.zeros((n, k), bool)
    sub[run] = out[run] | (~converged[:, None] & moved)
    if method == "ml":
        far = sub.any(1)
        flag[far] = "diverged"
        theta[sub] = np.sign(theta[sub]) * np.inf
    else:
        flag[run[~converged]] = "not_converged"   # max_iter Newton steps were not enough
        flag[run[out[run].any(1)]] = "at_bound"
        theta = np.clip(theta, lo, hi)
    theta[flag == "perfect"], theta[flag == "zero"] = np.inf, -np.inf
    theta[(flag == "no_items") | (flag == "singular")] = np.nan
    return theta, cov, flag


def _safe_inv(m):
    out = np.full_like(m, np.nan)
    ev = np.linalg.eigvalsh(m)
    ok = ev[:, 0] > 0
    out[ok] = np.linalg.inv(m[ok])
    return out


def _newton(theta, y1, w, A, d, method, max_iter, tol, far):
    """Batched damped Newton ascent; returns (theta, moved (n, K): coordinates that moved in
    the last step, relative to it, converged (n,))."""
    n, k = theta.shape
    converged = np.zeros(n, bool)
    moved = np.zeros((n, k), bool)
    act = np.arange(n)
    f, g, h = objective(theta, y1, w, A, d, method)
    for _ in range(max(int(max_iter), 1)):
        if act.size == 0:
            break
        step = _direction(g, h, theta[act], w[act], A, d)
        norm = np.sqrt((step ** 2).sum(1))
        step *= np.minimum(1.0, MAX_STEP / np.maximum(norm, 1e-300))[:, None]
        t = np.ones(act.size)
        todo = np.arange(act.size)
        new = theta[act].copy()
        for _h in range(_HALVINGS):
            trial = theta[act[todo]] + t[todo, None] * step[todo]
            ft = objective(trial, y1[act[todo]], w[act[todo]], A, d, method,
                                 derivatives=False)[0]
            good = ft >= f[todo] - 1e-12 * np.abs(f[todo])
            new[todo[good]] = trial[good]
            todo = todo[~good]
            if todo.size == 0:
                break
            t[todo] *= 0.5
        stuck = np.zeros(act.size, bool)
        stuck[todo] = True                        # no ascent: at the maximum to rounding
        taken = t[:, None] * step
        size = np.sqrt((taken ** 2).sum(1))
        mag = np.abs(taken)
        moved[act] = mag > 1e-3 * np.maximum(mag.max(1, keepdims=True), 1e-300)
        theta[act[~stuck]] = new[~stuck]
        done = stuck | (size < tol)
        converged[act[done]] = True
        gone = ~done & (np.abs(theta[act]).max(1) > far)
        keep = ~(done | gone)
        act = act[keep]
        if act.size:
            f, g, h = objective(theta[act], y1[act], w[act], A, d, method)
    return theta, moved, converged


def _direction(g, h, theta, w, A, d):
    """Newton's direction h^{-1} g where h (minus the Hessian) is positive definite, else
    I^{-1} g (I the test information at theta: a Fisher scoring step, WLE only)."""
    ev = np.linalg.eigvalsh(h)
    pd = ev[:, 0] > 1e-12 * np.maximum(np.abs(ev[:, -1]), 1e-300)
    step = np.empty_like(g)
    if pd.any():
        step[pd] = np.linalg.solve(h[pd], g[pd][..., None])[..., 0]
    if (~pd).any():
        z = theta[~pd] @ A.T + d
        info = ((w[~pd] * expit(z) * expit(-z)) @ _outer(A)).reshape(-1, A.shape[1], A.shape[1])
        info += 1e-10 * np.eye(A.shape[1])
        step[~pd] = np.linalg.solve(info, g[~pd][..., None])[..., 0]
    return step
