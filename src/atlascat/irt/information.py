"""Observed information of an EM calibration (Oakes, 1999) and the item parameters' standard errors.

For a model whose item j gives category c at node x_q with probability P_jc(x_q; theta_j) the
marginal log-likelihood on the quadrature grid (nodes x_q, prior weights pi_q(phi), phi the
estimated latent variance of a Rasch fit) is::

    l(theta) = sum_i w_i log sum_q pi_q prod_j P_{j, y_ij}(x_q; theta_j).

Its gradient is the posterior expectation of the complete-data gradient (Fisher's identity;
Louis, 1982), computed from the E-step's expected counts r_jqc = sum_i w_i post_iq [y_ij = c]
and node masses N_q = sum_i w_i post_iq::

    dl/dtheta_jk = sum_q sum_c r_jqc d log P_jc(x_q) / dtheta_jk,
    dl/dphi      = sum_q N_q d log pi_q / dphi.

Oakes (1999) writes the observed information as minus the total derivative of that gradient,
the complete-data Hessian plus the change of the expected counts with the parameters. That
change is, exactly, each subject's posterior covariance of the complete-data score (Louis,
1982)::

    -d2l/dtheta2 = -sum_q sum_c r_jqc d2 log P_jc / dtheta2 - sum_i w_i Cov_post(s_iq | y_i),

with s_iq the subject's complete-data score at node q (item j's slots d log P_{j, y_ij}(x_q),
0 where y_ij is missing; then d log pi_q / dphi). The default (``method="louis"``) takes the
covariance as one symmetric BLAS product over (subject, node) rows, about N Q P^2 / 2
multiply-adds for P free parameters, and the block-diagonal complete-data Hessian by central
differences of ``dlog_prob``; it takes the subjects in blocks (``block_bytes``, 256 MiB), so
its memory beyond the P x P matrix does not grow with the number of subjects.
``method="oakes"`` takes the whole Jacobian of the gradient by central differences, one pair
of perturbed E-steps per free parameter: a perturbation of item j changes one column of the
subjects' node log-likelihoods, so each costs one rank-C update and the count products, run
for a batch of perturbations at once. The two agree to about
1e-8 relative (``tests/test_se_louis.py``); Louis' form is ~10-20x faster on a few hundred
items. This is mirt's default ``SE.type = "Oakes"`` for EM fits (mirt 1.45.1), the same
matrix. With priors the objective is the log-posterior and minus its Hessian (the prior's
added per item, by finite differences) is the posterior-mode information.

The model enters through a pure function ``log_prob(params, nodes) -> (n_items, n_nodes,
n_cat)`` of the parameters in mirt's order (binary items: :func:`binary_log_prob`, two
categories); graded and partial-credit models plug in the same way (with the exact
:func:`atlascat.irt.polytomous.dlog_prob`).

References
----------
Oakes, D. (1999). Direct calculation of the information matrix via the EM algorithm. Journal of
the Royal Statistical Society B 61, 479-482.
Louis, T. A. (1982). Finding the observed information matrix when using the EM algorithm.
Journal of the Royal Statistical Society B 44, 226-233.
Chalmers, R. P. (2018). Numerical approximation of the observed information matrix with Oakes'
identity. British Journal of Mathematical and Statistical Psychology 71, 415-436.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import log_expit

from ..errors import ConfigError

__all__ = ["ObservedInformation", "observed_information", "binary_log_prob",
           "binary_dlog_prob", "BINARY_NAMES", "category_indices", "MAX_PARAMETERS"]

#: mirt's names of the binary item parameters, in mirt's order (g and u on the logit scale here)
BINARY_NAMES = ("a1", "d", "g", "u")
#: the information matrix is dense (parameters x parameters); beyond this it is refused
MAX_PARAMETERS = 6000
#: Louis' form works on blocks of subjects of about this many bytes (``block_bytes``)
BLOCK_BYTES = 2.0 ** 28


# ====================================================================== binary items
def binary_log_prob(params, nodes):
    """log P(y = 0), log P(y = 1) of P = g + (u - g) sigma(a1 x + d), shape (n_items, n_nodes, 2).

    ``params`` (n_items, 4): a1, d, logit g, logit u (-inf / +inf for g = 0 / u = 1). In log
    space (logaddexp of log g and log(u - g) + log sigma(z)) so that it is finite for any z.
    """
    a, d, lg, lu = (params[:, k:k + 1] for k in range(4))
    z = a * nodes[None, :] + d
    g, u = _expit(lg), _expit(lu)
    with np.errstate(divide="ignore"):
        log_rng = np.log(u - g)
        log_p = np.logaddexp(log_expit(lg), log_rng + log_expit(z))
        log_q = np.logaddexp(log_expit(-lu), log_rng + log_expit(-z))
    return np.stack([log_q, log_p], axis=-1)


def binary_dlog_prob(params, nodes):
    """d log P_c / d(a1, d, logit g, logit u), shape (n_items, 4, n_nodes, 2), exact.

    dP/dz = (u - g) s (1 - s), dP/da1 = x dP/dz, dP/dd = dP/dz, dP/dlogit g = g (1 - g)(1 - s),
    dP/dlogit u = u (1 - u) s; d log P_1 = dP / P, d log P_0 = -dP / (1 - P), each ratio taken
    as exp(difference of logs) so that it stays finite where P or 1 - P underflows.
    """
    a, d, lg, lu = (params[:, k:k + 1] for k in range(4))
    x = nodes[None, :]
    z = a * x + d
    lp = binary_log_prob(params, nodes)
    log_q, log_p = lp[..., 0], lp[..., 1]
    ls, lns = log_expit(z), log_expit(-z)
    g, u = _expit(lg), _expit(lu)
    with np.errstate(divide="ignore"):
        log_rng = np.log(u - g)
    log_dz = log_rng + ls + lns
    log_dg = log_expit(lg) + log_expit(-lg) + lns
    log_du = log_expit(lu) + log_expit(-lu) + ls
    out = np.empty(params.shape[:1] + (4,) + z.shape[1:] + (2,))
    for k, (log_dp, scale) in enumerate(((log_dz, x), (log_dz, 1.0), (log_dg, 1.0),
                                         (log_du, 1.0))):
        out[:, k, :, 1] = scale * np.exp(log_dp - log_p)
        out[:, k, :, 0] = -scale * np.exp(log_dp - log_q)
    return out


def _expit(t):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-t))


def category_indices(values) -> np.ndarray:
    """Responses as category indices: int array, -1 where missing (binary 0/1 -> 0/1)."""
    v = np.asarray(values, dtype=float)
    out = np.full(v.shape, -1, dtype=np.int64)
    obs = ~np.isnan(v)
    if np.any(v[obs] != np.round(v[obs])):
        raise ConfigError("standard errors need integer category responses (0/1 for binary "
                          "items); fractional scores have no categorical likelihood")
    out[obs] = v[obs].astype(np.int64)
    return out


# ====================================================================== the information
@dataclass
class ObservedInformation:
    """Observed (posterior-mode, with priors) information of the free parameters.

    ``index`` lists the free parameters in order: (item, column) of ``params``, then
    (-1, 0) for the latent variance when it is estimated; ``gradient`` is the score there
    (about 0 at a converged fit), ``matrix`` minus the symmetrized Hessian.
    """

    matrix: np.ndarray
    index: np.ndarray
    gradient: np.ndarray

    def covariance(self) -> np.ndarray:
        """The inverse of the information, or a matrix of NaN where it is not positive
        definite (a parameter the data does not determine)."""
        try:
            chol = np.linalg.cholesky(self.matrix)
        except np.linalg.LinAlgError:
            return np.full_like(self.matrix, np.nan)
        inv_l = np.linalg.inv(chol)
        return inv_l.T @ inv_l

    @property
    def positive_definite(self) -> bool:
        return bool(np.all(np.isfinite(self.covariance())))


def observed_information(log_prob, params, free, responses, weights, nodes, log_weights, *,
                         dlog_prob=None, log_prior=None, latent_log_weights=None,
                         latent_variance: float | None = None, step: float = 1e-4,
                         batch_cells: float = 4e6, progress=None, groups=None,
                         latent_params=None, method: str = "louis",
                         block_bytes: float = BLOCK_BYTES) -> ObservedInformation:
    """The observed information of the free item parameters (and the latent variance).

    Parameters
    ----------
    log_prob : ``log_prob(params, nodes) -> (n_items, n_nodes, n_cat)`` log category
        probabilities (pure, vectorized over items)
    params : (n_items, n_par) parameters at the estimate, mirt's order
    free : (n_items, n_par) bool, the estimated ones
    responses : (n_subjects, n_items) int category indices, -1 = missing
        (:func:`category_indices`)
    weights : (n_subjects,) pattern frequencies or None
    nodes, log_weights : the quadrature grid and its normalized log prior weights
    dlog_prob : optional exact ``d log P / d params``, (n_items, n_par, n_nodes, n_cat);
        default central differences of ``log_prob`` (step 1e-6 (1 + |param|))
    log_prior : optional ``log_prior(params) -> (n_items,)``; then the result is minus the
        Hessian of the log-posterior (posterior-mode information)
    latent_log_weights, latent_variance : for an estimated latent variance (mirt's Rasch):
        ``latent_log_weights(var) -> (n_nodes,)`` and the estimate; it is the last parameter
    step : relative step of the Jacobian's central differences, h = step (1 + |param|)
    batch_cells : perturbed E-steps run in batches of about this many (subject, node) cells
    progress : optional ``progress(done, total)``, called at the start (done 0) and after each
        batch with the number of the information's columns computed so far and of all of them
    groups : optional (n_subjects,) group index 0..G-1 of a multiple-group fit: then
        ``log_weights`` is (G, n_nodes), each subject's posterior under its group's prior
    latent_params : several estimated latent parameters (a multiple-group fit's means and
        variances, :mod:`atlascat.irt.groupse`): the vector, with
        ``latent_log_weights(vector) -> (G, n_nodes)``; they are the last parameters,
        ``index`` rows (-1, 0), (-1, 1), ...
    method : ``"louis"`` (default): the same matrix with the change of the posteriors taken
        exactly, as minus the subjects' posterior covariance of the complete-data score
        (Louis, 1982; :func:`_louis_hessian`: products over (subject, node) rows, no perturbed
        E-steps); the complete-data Hessian is the same central differences of ``dlog_prob``
        as ``"oakes"``, which takes the whole Jacobian by perturbed E-steps (one pair per free
        parameter). Both cover every model, latent and group parameter and prior here, and
        agree to about 1e-8 relative; with negative ``weights`` ``"louis"`` falls back to
        ``"oakes"``. ``"louis"`` costs about N Q P^2 / 2 multiply-adds in one BLAS product
        (P free parameters), ``"oakes"`` about 4 P N Q m C.
    block_bytes : ``"louis"`` takes the subjects in blocks whose arrays of subjects x
        parameters (posterior means, look-ups, score rows) fill about this many bytes, so that
        its memory beyond the P x P matrix is bounded whatever the number of subjects (the
        result is the same, to rounding, for any block size)
    """
    if method not in ("louis", "oakes"):
        raise ConfigError(f"unknown observed-information method {method!r} "
                          "(louis, oakes)")
    params = np.asarray(params, dtype=float)
    free = np.asarray(free, dtype=bool)
    y = np.asarray(responses)
    n, m = y.shape
    nodes = np.asarray(nodes, dtype=float)
    log_w = np.asarray(log_weights, dtype=float)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    log_prob = _finite(log_prob)
    lp0 = log_prob(params, nodes)
    n_cat = lp0.shape[2]
    if y.max() >= n_cat:
        raise ConfigError(f"a response category {int(y.max())} exceeds the model's "
                          f"{n_cat} categories")
    dlog_prob = _numeric_dlog_prob(log_prob) if dlog_prob is None else _finite(dlog_prob, 0.0)
    idx = np.argwhere(free)
    gidx = np.zeros(n, dtype=np.intp) if groups is None else np.asarray(groups, dtype=np.intp)
    log_w = np.atleast_2d(log_w)
    if latent_params is not None:
        phi = np.asarray(latent_params, dtype=float).reshape(-1)
        lat_w = lambda v: np.atleast_2d(latent_log_weights(v))     # noqa: E731
    elif latent_log_weights is not None:
        phi = np.array([float(latent_variance)])
        lat_w = lambda v: np.atleast_2d(latent_log_weights(float(v[0])))  # noqa: E731
    else:
        phi, lat_w = np.zeros(0), None
    n_lat = len(phi)
    n_free = len(idx) + n_lat
    if n_free > MAX_PARAMETERS:
        raise ConfigError(f"standard errors of {n_free} parameters need a dense "
                          f"{n_free} x {n_free} information matrix; calibrate at most "
                          f"{MAX_PARAMETERS} free parameters with se=True (a subset of items)")
    if n_lat:
        log_w = lat_w(phi)
    n_grp = log_w.shape[0]
    if progress is not None:   # started: the perturbed models are built first
        progress(0, n_free)
    D0 = dlog_prob(params, nodes)                         # (m, K, Q, C)
    Q = len(nodes)
    # the E-step at the estimate, by blocks of subjects: node log-likelihoods, posteriors,
    # expected counts R (m C, Q) and the groups' node masses N (G, Q)
    lpm = lp0.transpose(0, 2, 1).reshape(m * n_cat, Q)
    rows = _blocks(n, 8.0 * 2 * m * n_cat, block_bytes)
    L0, E0, post = np.empty((n, Q)), np.empty((n, Q)), np.empty((n, Q))
    shift = np.empty((n, 1))     # perturbations move the log-lik by ~step: no overflow
    R0 = np.zeros((m * n_cat, Q))
    N0 = np.zeros((n_grp, Q))
    for r in rows:
        Yr = _onehot(y[r], n_cat)
        L0[r] = Yr @ lpm                                          # node log-likelihoods
        S0 = L0[r] + log_w[gidx[r]]
        shift[r] = np.max(S0, axis=1, keepdims=True)
        E0[r] = np.exp(S0 - shift[r])
        post[r] = E0[r] / np.sum(E0[r], axis=1, keepdims=True)
        Yr *= w[r, None]
        R0 += Yr.T @ post[r]
        N0 += _group_weights(gidx[r], w[r], n_grp).T @ post[r]
    del Yr, S0
    R0 = R0.reshape(m, n_cat, 1, Q)
    # D as (m, Q C, K) for the batched products of the score
    D0m = D0.transpose(0, 2, 3, 1).reshape(m, Q * n_cat, -1)

    def scores(R):
        """Counts R (m, C, B, Q) -> the item scores (B, m, K): a batched small product."""
        B = R.shape[2]
        R2 = R.transpose(0, 2, 3, 1).reshape(m, B, Q * n_cat)
        return np.matmul(R2, D0m).transpose(1, 0, 2)

    def dlogd(v):
        """d log pi_gq / d phi_l at ``v``: (n_lat, G, Q)."""
        out = np.empty((n_lat,) + log_w.shape)
        for l in range(n_lat):
            h = 1e-5 * (1.0 + abs(v[l]))
            e = np.zeros(n_lat)
            e[l] = h
            out[l] = (lat_w(v + e) - lat_w(v - e)) / (2 * h)
        return out

    lw_grad0 = dlogd(phi) if n_lat else None
    grad = scores(R0)[0][free]
    if n_lat:
        grad = np.append(grad, np.einsum("gq,lgq->l", N0, lw_grad0))
    # perturbed log-probabilities and derivatives, every item at once, per column and sign
    h_all = step * (1.0 + np.abs(np.where(np.isfinite(params), params, 0.0)))
    hv = step * (1.0 + np.abs(phi))
    shifted = {}
    for k in np.unique(idx[:, 1]):
        for sgn in (1.0, -1.0):
            p = params.copy()
            p[:, k] += sgn * h_all[:, k]
            shifted[k, sgn] = (log_prob(p, nodes) - lp0, dlog_prob(p, nodes))
    rows_all = [(int(j), int(k)) for j, k in idx] + [(-1, l) for l in range(n_lat)]
    if method == "louis" and np.all(w >= 0):
        del E0, L0
        lat_scores = lw_grad0[:, gidx, :] if n_lat else None      # (n_lat, n, Q)
        hess = _louis_hessian(post, y, w, D0, idx, lat_scores, block_bytes, progress, n_free)
        # the complete-data Hessian: block-diagonal per item (and the latent block)
        for k in np.unique(idx[:, 1]):
            dD = (shifted[k, 1.0][1] - shifted[k, -1.0][1]) / (2.0 * h_all[:, k])[
                :, None, None, None]                                  # (m, K, Q, C)
            hk = np.einsum("jcq,jkqc->jk", R0[:, :, 0, :], dD)       # d g_j. / d theta_jk
            for r in np.flatnonzero(idx[:, 1] == k):
                j = idx[r, 0]
                same = np.flatnonzero(idx[:, 0] == j)
                hess[same, r] += hk[j, idx[same, 1]]
        if n_lat:   # fourth-order differences: the nested ones' rounding stays ~1e-9
            hess[len(idx):, len(idx):] += np.einsum(
                "gq,lmgq->lm", N0, _diff4(lambda v: _diff4(lat_w, v), phi))
        return _finish(hess, log_prior, params, free, idx, rows_all, grad)
    # one-hot responses (n, m * C): the perturbed E-steps are two products with it
    onehot = _onehot(y, n_cat).reshape(n, m, n_cat)
    Yw = onehot.reshape(n, m * n_cat) * w[:, None]
    Gw = _group_weights(gidx, w, n_grp)                   # each subject's weight in its group

    def stats(buf):
        """Unnormalized posteriors (n, B, Q) -> counts R (m, C, B, Q), the groups' node masses
        (B, G, Q) and the item scores (B, m, K): two large products and a batched small one."""
        buf /= np.sum(buf, axis=2, keepdims=True)
        B = buf.shape[1]
        flat = buf.reshape(n, B * Q)
        R = (Yw.T @ flat).reshape(m, n_cat, B, Q)
        N = (Gw.T @ flat).reshape(n_grp, B, Q).transpose(1, 0, 2)
        return R, N, scores(R)

    jac = np.empty((n_free, n_free))
    batch = max(1, int(batch_cells // max(1, n * Q)))
    for start in range(0, len(rows_all), batch):
        chunk = rows_all[start:start + batch]
        out = {}
        for sgn in (1.0, -1.0):
            buf = np.empty((n, len(chunk), Q))
            lwg = []
            for b, (j, k) in enumerate(chunk):
                if j < 0:    # a latent parameter: new grid weights
                    v = phi.copy()
                    v[k] += sgn * hv[k]
                    buf[:, b, :] = np.exp(L0 + lat_w(v)[gidx] - shift)
                    lwg.append(dlogd(v))
                else:        # item j: its column of the node log-likelihood changes
                    buf[:, b, :] = E0 * np.exp(onehot[:, j, :] @ shifted[k, sgn][0][j].T)
                    lwg.append(lw_grad0)
            R, N, g = stats(buf)
            for b, (j, k) in enumerate(chunk):
                if j >= 0:   # the perturbed item's own derivatives
                    g[b, j] = np.einsum("cq,kqc->k", R[j, :, b, :], shifted[k, sgn][1][j])
            vec = g[:, free]
            if n_lat:
                vec = np.concatenate([vec, np.einsum("bgq,blgq->bl", N, np.stack(lwg))],
                                     axis=1)
            out[sgn] = vec
        hs = np.array([h_all[j, k] if j >= 0 else hv[k] for j, k in chunk])
        jac[:, start:start + len(chunk)] = ((out[1.0] - out[-1.0]) / (2.0 * hs[:, None])).T
        if progress is not None:
            progress(start + len(chunk), len(rows_all))
    return _finish(jac, log_prior, params, free, idx, rows_all, grad)


def _finish(hess, log_prior, params, free, idx, rows_all, grad) -> ObservedInformation:
    """Symmetrize the Hessian, add the prior's and negate, all in place (no P x P copies)."""
    _symmetrize(hess)
    if log_prior is not None:
        _add_prior_hessian(hess, log_prior, params, free, idx)
    np.negative(hess, out=hess)
    return ObservedInformation(hess, np.array(rows_all, dtype=np.int64), grad)


def _symmetrize(a, block: int = 512) -> None:
    """a <- (a + a^T) / 2 in place, by blocks (the same numbers as ``0.5 * (a + a.T)``)."""
    P = len(a)
    for i in range(0, P, block):
        for j in range(i, P, block):
            avg = 0.5 * (a[i:i + block, j:j + block] + a[j:j + block, i:i + block].T)
            a[i:i + block, j:j + block] = avg
            a[j:j + block, i:i + block] = avg.T


def _blocks(n: int, row_bytes: float, budget: float) -> list:
    """Slices of ``n`` rows, each about ``budget`` bytes at ``row_bytes`` a row (1 at least)."""
    size = max(1, min(n, int(budget // max(1.0, row_bytes))))
    return [slice(s, min(n, s + size)) for s in range(0, n, size)]


def _onehot(y, n_cat: int) -> np.ndarray:
    """Category indices (n, m) (-1 missing) -> one-hot rows (n, m C)."""
    n, m = y.shape
    out = np.zeros((n, m * n_cat))
    r, c = np.nonzero(y >= 0)
    out[r, c * n_cat + y[r, c]] = 1.0
    return out


def _group_weights(gidx, w, n_grp: int) -> np.ndarray:
    """(n, G): each subject's weight in its group's column."""
    out = np.zeros((len(w), n_grp))
    out[np.arange(len(w)), gidx] = w
    return out


def _louis_hessian(post, y, w, D, idx, lat_scores, block_bytes, progress, n_free):
    """sum_i w_i Cov(s_i | y_i): the subjects' posterior covariance of the complete-data score,
    the part of the marginal log-likelihood's Hessian that Oakes' perturbed E-steps measure.

    Subject i's complete-data score at node q stacks, for the free parameter (j, k),
    ``D[j, k, q, y_ij]`` (0 where y_ij is missing), then the latent parameters' ``d log pi /
    d phi`` at q of its group (``lat_scores`` (n_lat, n, Q) or None). Centred at the posterior
    means S_i, weighted by sqrt(w_i post_iq), and accumulated as one symmetric rank-k product
    (BLAS syrk) per block of nodes: rows (subject, node), columns the P free parameters. The
    subjects are taken in blocks whose arrays (means, look-ups, a block of rows) fill about
    ``block_bytes``: memory beyond the P x P result does not grow with the subjects.
    """
    from scipy.linalg.blas import dsyrk

    n, Q = post.shape
    jj, kk = idx[:, 0], idx[:, 1]
    Pi, n_cat = len(jj), D.shape[3]
    Dsel = D[jj, kk]                                                  # (Pi, Q, C)
    table = np.zeros(Pi * n_cat + 1)
    n_lat = 0 if lat_scores is None else lat_scores.shape[0]
    P = Pi + n_lat
    M = np.zeros((P, P), order="F")
    # a block's arrays of (subjects x P): S, the look-up and its build, one node's rows
    blocks = _blocks(n, 8.0 * 4 * P, block_bytes)
    rows = blocks[0].stop
    step = min(Q, max(1, int(block_bytes / 4 // (8.0 * rows * P))))
    buf = np.empty((step, rows, P))              # one block, reused (no fresh pages per block)
    done, total = 0, len(blocks) * Q
    for sub in blocks:
        nb = sub.stop - sub.start
        yj = np.ascontiguousarray(y[sub][:, jj])   # (nb, Pi); [:, jj] alone is column-major
        S = np.zeros((nb, Pi))                                        # posterior means
        for c in range(n_cat):
            S += (yj == c) * (post[sub] @ Dsel[:, :, c].T)
        # the score at node q is a look-up: entry p C + y_ip of D[., q, .] (last: 0, missing)
        look = np.where(yj >= 0, np.arange(Pi) * n_cat + yj, Pi * n_cat)  # row-major: a fast take
        del yj
        if n_lat:
            T = np.einsum("nq,lnq->nl", post[sub], lat_scores[:, sub])
        root = np.sqrt(w[sub, None] * post[sub])                      # (nb, Q)
        for start in range(0, Q, step):
            qs = range(start, min(Q, start + step))
            A = buf[:len(qs), :nb]
            for b, q in enumerate(qs):
                Aq = A[b, :, :Pi] if n_lat else A[b]
                table[:-1] = Dsel[:, q, :].reshape(-1)
                np.take(table, look, out=Aq, mode="clip")
                Aq -= S
                if n_lat:
                    A[b, :, Pi:] = lat_scores[:, sub, q].T - T
                A[b] *= root[:, q:q + 1]
            M = dsyrk(1.0, A.reshape(-1, P).T, beta=1.0, c=M, trans=0, overwrite_c=1)
            done += len(qs)
            if progress is not None:
                progress(int(n_free * done / total), n_free)
    for i in range(0, P, 512):       # the lower triangle from the upper, in place
        M[i + 512:, i:i + 512] = M[i:i + 512, i + 512:].T
        blk = M[i:i + 512, i:i + 512]
        blk[...] = np.triu(blk) + np.triu(blk, 1).T
    return M


def _diff4(fn, v, rel: float = 1e-3):
    """d fn / d v_l by the five-point stencil (truncation ~h^4), stacked on a new first axis."""
    out = []
    for l in range(len(v)):
        h = rel * (1.0 + abs(v[l]))
        e = np.zeros(len(v))
        e[l] = h
        out.append((8.0 * (fn(v + e) - fn(v - e)) - (fn(v + 2 * e) - fn(v - 2 * e)))
                   / (12.0 * h))
    return np.stack(out)


def _finite(fn, fill: float = -1e300):
    """``fn`` with its non-finite entries (categories an item does not have: -inf or NaN)
    replaced by ``fill``: they meet zero counts, and 0 x -1e300 = 0 where 0 x -inf is NaN."""
    def wrapped(params, nodes):
        out = fn(params, nodes)
        return np.where(np.isfinite(out), out, fill)
    return wrapped


def _numeric_dlog_prob(log_prob, rel: float = 1e-6):
    """Central differences of ``log_prob`` per parameter column, all items at once (0 for a
    parameter an item does not have: a non-finite entry, e.g. a padded intercept)."""
    def dlog_prob(params, nodes):
        out = []
        for k in range(params.shape[1]):
            has = np.isfinite(params[:, k])
            h = rel * (1.0 + np.abs(np.where(has, params[:, k], 0.0)))
            p_hi, p_lo = params.copy(), params.copy()
            p_hi[:, k] += h
            p_lo[:, k] -= h
            with np.errstate(invalid="ignore"):
                dk = (log_prob(p_hi, nodes) - log_prob(p_lo, nodes)) / (2 * h)[:, None, None]
            out.append(np.where(has[:, None, None] & np.isfinite(dk), dk, 0.0))
        return np.stack(out, axis=1)
    return dlog_prob


def _add_prior_hessian(hess, log_prior, params, free, idx, rel: float = 1e-4) -> None:
    """Add the block-diagonal Hessian of sum_j log p(theta_j) over the free parameters to
    ``hess`` in place, by second differences of every item at once (items' priors are
    independent)."""
    m, K = params.shape
    h = rel * (1.0 + np.abs(np.where(np.isfinite(params), params, 0.0)))
    blocks = np.zeros((m, K, K))
    cols = [k for k in range(K) if free[:, k].any()]

    def f(dk=None, sk=0.0, dl=None, sl=0.0):
        p = params.copy()
        if dk is not None:
            p[:, dk] += sk * h[:, dk]
        if dl is not None:
            p[:, dl] += sl * h[:, dl]
        return log_prior(p)

    f0 = f()
    for a_, k in enumerate(cols):
        blocks[:, k, k] = (f(k, 1) - 2 * f0 + f(k, -1)) / h[:, k] ** 2
        for l in cols[a_ + 1:]:
            v = (f(k, 1, l, 1) - f(k, 1, l, -1) - f(k, -1, l, 1) + f(k, -1, l, -1)) \
                / (4 * h[:, k] * h[:, l])
            blocks[:, k, l] = blocks[:, l, k] = v
    pos = {(int(j), int(k)): i for i, (j, k) in enumerate(idx)}
    for i, (j, k) in enumerate(idx):
        for l in cols:
            t = pos.get((int(j), l))
            if t is not None:
                hess[i, t] += blocks[j, k, l]
