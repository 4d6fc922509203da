"""E-step of the exploratory multidimensional 2PL's Bock-Aitkin EM on a product grid, in blocks.

With 0/1 answers y (observed cells o) and z_qj = a_j . theta_q + d_j at node q, a subject's
log-likelihood at node q is sum_j y_j log s(z_qj) + (o_j - y_j) log s(-z_qj)
= y . z_q + o . log s(-z_q), since log s(z) - log s(-z) = z. So one matrix product
[y | o | 1] @ [z^T; log s(-z)^T; log w] gives log-likelihood plus log prior weight at every node
(without missing cells o . log s(-z_q) is the same for everyone and joins the constant row), and
one more, post^T @ [y | o], the expected counts r_qj (correct) and n_qj (observed).

The subjects x nodes matrix (5000 x 3375 for K = 3, mirt's 15^3 grid) is never formed: subjects
go through in blocks whose slice fits a core's cache, in one buffer allocated once per fit, and
identical answer patterns are merged first (their weights summed).
"""
from __future__ import annotations

import numpy as np
from scipy.special import log_expit

__all__ = ["GridEStep", "BLOCK_BYTES"]

#: bytes of one block of the (subjects x nodes) log-likelihoods: about a core's L2 cache
BLOCK_BYTES = 2**21


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
        self.data = np.hstack(cols + [np.ones((patterns.shape[0], 1), dtype=bool)]).astype(float)
        self.logw = np.asarray(logw, dtype=float)
        q = self.logw.shape[0]
        self.block = int(max(1, min(patterns.shape[0], block_bytes // (8 * q))))
        self._ll = np.empty((self.block, q))
        self._counts = np.empty((q, self.data.shape[1]))

    def __call__(self, z):
        """(loglik, r, n) at item logits z (Q, J) on the grid."""
        lq = log_expit(-z)
        if self.complete:
            coef = np.vstack([z.T, (lq.sum(axis=1) + self.logw)[None, :]])
        else:
            coef = np.vstack([z.T, lq.T, self.logw[None, :]])
        counts = np.zeros(self._counts.shape)
        loglik = 0.0
        for s in range(0, self.data.shape[0], self.block):
            rows = self.data[s:s + self.block]
            w = self.weights[s:s + self.block]
            ll = self._ll[:rows.shape[0]]
            np.matmul(rows, coef, out=ll)
            top = ll.max(axis=1)
            np.subtract(ll, top[:, None], out=ll)
            np.exp(ll, out=ll)
            total = ll.sum(axis=1)
            loglik += float(w @ (top + np.log(total)))
            np.matmul(ll.T, rows * (w / total)[:, None], out=self._counts)
            counts += self._counts
        j = self.n_items
        n = counts[:, j:j + 1] if self.complete else counts[:, j:2 * j]
        return loglik, counts[:, :j], n
