"""Ability (theta) estimation, batched over all subjects at once.

EAP (Bock and Mislevy, 1982): posterior mean and SD of theta on a fixed quadrature grid,

    post_i(q) ∝ prior(q) prod_j P_j(theta_q)^y_ij Q_j(theta_q)^(1 - y_ij)   (observed j only)
    theta_i = sum_q post_i(q) theta_q,   SE_i = sqrt(sum_q post_i(q) (theta_q - theta_i)^2).

The log-likelihood on the grid is two matrix products (``models.loglik_matrix``).
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from . import models
from .bank import ItemBank
from .quadrature import normal_quadrature

__all__ = ["response_array", "eap", "grid_posterior"]


def response_array(responses, bank: ItemBank) -> np.ndarray:
    """Scores as a float array in the bank's item order.

    ``responses`` is a ResponseMatrix (aligned by item id: bank items absent from the matrix are
    all-missing columns, matrix items absent from the bank are an error) or an array already in
    bank order with shape (n_subjects, n_items).
    """
    from ..responses import ResponseMatrix

    if isinstance(responses, ResponseMatrix):
        return responses.aligned_values(bank.item_ids)
    y = np.asarray(responses, dtype=float)
    if y.ndim == 1:
        y = y[None, :]
    if y.shape[1] != len(bank):
        from ..errors import ResponseDataError

        raise ResponseDataError(f"responses have {y.shape[1]} columns but the bank has {len(bank)} items")
    return y


def grid_posterior(y: np.ndarray, bank: ItemBank, quad) -> np.ndarray:
    """Normalized posterior over the quadrature nodes, shape (n_subjects, n_nodes)."""
    log_p, log_q = bank.log_probability(quad.nodes)
    log_post = models.loglik_matrix(y, log_p, log_q) + quad.log_weights
    return np.exp(log_post - logsumexp(log_post, axis=1, keepdims=True))


def eap(responses, bank: ItemBank, *, quadpts: int = 61, theta_range=(-6.0, 6.0),
        prior_mean: float = 0.0, prior_sd: float = 1.0):
    """EAP theta and posterior SD for every subject; defaults are mirt's (61 nodes, [-6, 6], N(0,1)).

    Returns ``(theta, se)``, each of shape (n_subjects,).
    """
    quad = normal_quadrature(quadpts, theta_range, prior_mean, prior_sd)
    post = grid_posterior(response_array(responses, bank), bank, quad)
    theta = post @ quad.nodes
    var = post @ quad.nodes**2 - theta**2
    return theta, np.sqrt(np.maximum(var, 0.0))
