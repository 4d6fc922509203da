"""E-step of the exploratory multidimensional 2PL's Bock-Aitkin EM on a product grid, in blocks.

With 0/1 answers y (observed cells o) and z_qj = a_j . theta_q + d_j at node q, a subject's
log-likelihood at node q is sum_j y_j log s(z_qj) + (o_j - y_j) log s(-z_qj)
= y . z_q + o . log s(-z_q), since log s(z) - log s(-z) = z. So one matrix product
[y | o | 1] @ [z^T; log s(-z)^T; log w] gives log-likelihood plus log prior weight at every node
(without missing cells o . log s(-z_q) is the same for everyone and joins the constant row), and
one more, post^T @ [y | o], the expected counts r_qj (correct) and n_qj (observed).

The subjects x nodes matrix (5000 x 3375 for K = 3, mirt's 15^3 grid) is never formed: subjects
go through in blocks (a few MB), in one buffer allocated once per fit, and
identical answer patterns are merged first (their weights summed). Each pattern's exponentials
are shifted by its log-likelihood at the previous call (one more column of the product; the row
maximum where that shift is off by hundreds of units), so no pass subtracts row maxima.

The once-per-fit passes (standard errors, EAP scores, predictive probabilities) need each
subject's normalized posterior: :func:`posterior_blocks` yields it by blocks of subjects of the
same size, in one reused buffer.
"""
from __future__ import annotations

import numpy as np
from scipy.special import log_expit

__all__ = ["GridEStep", "BLOCK_BYTES", "posterior_blocks"]

#: bytes of one block of the (subjects x nodes) log-likelihoods (a few hundred subjects on
#: mirt's K = 3 grid: big enough for efficient matrix products, far below the full matrix)
BLOCK_BYTES = 2**23


class GridEStep:
    """Marginal log-likelihood and expected counts of 0/1 answers on a fixed grid.

    y : (N, J) answers (any value where ``obs`` is False), obs : (N, J) bool, weights : (N,) or
    None, logw : (Q,) normalized log prior weights of the nodes. Calling it with z (Q, J) returns
    (loglik, r (Q, J) expected correct, n (Q, J) or (Q, 1) expected observed, the latter when no
    cell is missing).
    """

    def __init__(self, y, obs, weights, logw, block_bytes: int = BLOCK_BYTES):
        obs = np.asarray(obs, dtype=bool)
        code = np.where(obs, np.asarray(y) == 1, 2).astype(np.int8)
        patterns, inverse = np.unique(code, axis=0, return_inverse=True)
        w = np.ones(code.shape[0]) if weights is None else np.asarray(weights, dtype=float)
        self.weights = np.bincount(inverse.ravel(), weights=w, minlength=patterns.shape[0])
        self.complete = bool(obs.all())
        self.n_items = code.shape[1]
        cols = [patterns == 1] if self.complete else [patterns == 1, patterns != 2]
        ones = np.ones((patterns.shape[0], 1), dtype=bool)
        # last column: minus each pattern's shift, its log-likelihood at the previous call
        self.data = np.hstack(cols + [ones, ~ones]).astype(float)
        self.logw = np.asarray(logw, dtype=float)
        q = self.logw.shape[0]
        self.block = int(max(1, min(patterns.shape[0], block_bytes // (8 * q))))
        self._ll = np.empty((self.block, q))
        self._counts = np.empty((self.data.shape[1], q))

    def __call__(self, z):
        """(loglik, r, n) at item logits z (Q, J) on the grid."""
        lq = log_expit(-z)
        const = (lq.sum(axis=1) + self.logw)[None, :] if self.complete else self.logw[None, :]
        coef = np.vstack([z.T] + ([] if self.complete else [lq.T]) + [const, np.ones((1, z.shape[0]))])
        counts = np.zeros(self._counts.shape)
        loglik = 0.0
        for s in range(0, self.data.shape[0], self.block):
            rows = self.data[s:s + self.block]
            w = self.weights[s:s + self.block]
            ll = self._ll[:rows.shape[0]]
            np.matmul(rows, coef, out=ll)   # log-likelihood + log prior weight - shift
            with np.errstate(over="ignore"):
                np.exp(ll, out=ll)
                total = ll.sum(axis=1)
            if not (np.isfinite(total).all() and total.min() > 1e-250):  # the shift is off (first call)
                np.matmul(rows[:, :-1], coef[:-1], out=ll)
                rows[:, -1] = -ll.max(axis=1)
                np.add(ll, rows[:, -1:], out=ll)
                np.exp(ll, out=ll)
                total = ll.sum(axis=1)
            rows[:, -1] -= np.log(total)   # the shift of the next call
            loglik -= float(w @ rows[:, -1])
            np.matmul((rows * (w / total)[:, None]).T, ll, out=self._counts)
            counts += self._counts
        j = self.n_items
        n = counts[j:j + 1] if self.complete else counts[j:2 * j]
        return loglik, counts[:j].T, n.T


def posterior_blocks(y, obs, z, logw, block_bytes: int = BLOCK_BYTES):
    """Each subject's posterior on the grid, by blocks of subjects: yields (rows, post, lognorm),
    ``rows`` a slice of the subjects, ``post`` (rows, Q) the normalized posterior, ``lognorm``
    (rows,) the log marginal likelihoods (with the log prior weights ``logw`` (Q,)), at item
    logits z (Q, J); ``y`` (N, J) 0/1 (any value where ``obs`` is False). ``post`` lives in
    one buffer reused by the next block: use it (or copy it) before asking for the next."""
    obs = np.asarray(obs, dtype=bool)
    y1 = np.where(obs, y, 0.0)
    data = np.hstack([y1, obs - y1])                                  # [y | o - y]
    coef = np.vstack([log_expit(z).T, log_expit(-z).T])               # (2J, Q)
    logw = np.asarray(logw, dtype=float)
    n, q = data.shape[0], coef.shape[1]
    block = int(max(1, min(n, block_bytes // (8 * q))))
    buf = np.empty((block, q))
    for s in range(0, n, block):
        rows = slice(s, min(n, s + block))
        ll = buf[:rows.stop - s]
        np.matmul(data[rows], coef, out=ll)
        ll += logw
        top = ll.max(axis=1, keepdims=True)
        ll -= top
        np.exp(ll, out=ll)
        total = ll.sum(axis=1, keepdims=True)
        ll /= total
        yield rows, ll, top[:, 0] + np.log(total[:, 0])
