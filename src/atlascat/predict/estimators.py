"""The estimators behind a predicted benchmark score, vectorized over targets (rows).

The benchmark score of a target is the mean over ALL N items, ``mu = (1/N) sum_i y_i``. The
items asked are a simple random sample S (without replacement, n of N) drawn before any answer
is seen, so every item is asked with the same probability n / N whatever the target.

Model-based prediction (IRT). With the source calibration's P_i(theta) on a quadrature grid,
the posterior of theta given the answers on S (N(0, 1) prior, Bock and Mislevy 1982) gives each
unasked item its posterior-mean probability f_i = sum_q post(q) P_i(theta_q), and

    M = (1/N) [ sum_{i in S} y_i + sum_{i not in S} f_i ]

(the p-IRT estimator of Polo et al. 2024, tinyBenchmarks). M is sharp where the target resembles
the source models and biased where it does not (hard items fitted on models that never solved
them, another ability profile).

Design-based correction (difference / prediction-powered estimator). The mean residual of the
sampled items estimates the model's error on the unasked ones:

    D = (1/N) [ sum_{i in S} y_i + sum_{i not in S} fbar_i + (N - n) rbar ],
    rbar = (1/n) sum_{i in S} (y_i - f_i^(-k(i))),   fbar = (1/K) sum_k f^(-k)

where f^(-k) is computed from the answers outside fold k of S (K-fold cross-fitting, so an
item's own answer never enters its prediction, and the unasked items get the same fold
predictors as the residuals: with a misspecified model the full-data posterior differs
systematically from the fold posteriors, and mixing the two would bias D; Chernozhukov et al. 2018, Zrnic and Candes 2024
"Cross-prediction-powered inference"). For any fixed predictor f, D is unbiased for mu under
simple random sampling of items, whatever the target and however wrong the model is
(Angelopoulos et al. 2023, prediction-powered inference; Sarndal, Swensson and Wretman 1992,
the difference estimator), and

    Var(D) = (s_r^2 / n) (1 - n / N)                 (finite-population correction)

with s_r^2 the sample variance of the cross-fitted residuals. Its 95% interval D +- 1.96 SE is
valid by design: it needs no assumption on the item parameters, so their uncertainty (a small
source population) cannot make it undercover.

Combination. G = alpha + beta * M is the model-based prediction calibrated on the source
models (the same design replayed on them); tau^2 its mean squared error there. A target is
outside the source population when |D - G| > z_cut * sqrt(SE_D^2 + tau^2) (the random items'
residuals contradict the model), or when G, M or D lies beyond the source models' score range
(a calibration fitted there cannot be extrapolated); then the
prediction is D. Otherwise the precision-weighted
mean C = (G / tau^2 + D / SE_D^2) / (1 / tau^2 + 1 / SE_D^2). The reported 95% interval is the
design interval D +- 1.96 SE_D, widened (never narrowed) to contain the point prediction, so
its coverage is at least the design interval's.

References
----------
Angelopoulos, Bates, Fannjiang, Jordan, Zrnic (2023). Prediction-powered inference. Science 382.
Zrnic and Candes (2024). Active statistical inference. ICML; Cross-prediction-powered inference. PNAS.
Polo, Weber, Choshen, Sun, Xu, Yurochkin (2024). tinyBenchmarks: evaluating LLMs with fewer
examples. ICML.
Zhang, Dorner, Hardt (2025). How benchmark prediction from fewer data misses the mark. NeurIPS.
Bock and Mislevy (1982). Adaptive EAP estimation of ability. Applied Psych. Measurement 6.
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

__all__ = ["Z95", "grid_tables", "posterior_probabilities", "model_and_design", "combine"]

Z95 = 1.959963984540054


def grid_tables(a, b, c, u, nodes):
    """P (n_nodes, N) on the grid and its logs, clipped away from 0 and 1 (log-safe)."""
    z = np.asarray(a)[None, :] * (np.asarray(nodes)[:, None] - np.asarray(b)[None, :])
    p = np.asarray(c) + (np.asarray(u) - np.asarray(c)) / (1.0 + np.exp(-z))
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return p, np.log(p), np.log1p(-p)


def posterior_probabilities(y, asked, p, log_p, log_q, nodes, log_prior):
    """Posterior-mean P_i for every target (rows) and item given the answers where ``asked``.

    log post(q) = log prior(q) + sum_{asked j} [y_j log P_j(q) + (1 - y_j) log Q_j(q)];
    returns (f, theta): f = post @ P, shape (T, N), and the posterior mean of theta, (T,).
    """
    y1 = np.where(asked, y, 0.0)
    y0 = np.where(asked, 1.0 - np.nan_to_num(y), 0.0)
    lp = y1 @ log_p.T + y0 @ log_q.T + log_prior
    post = np.exp(lp - logsumexp(lp, axis=1, keepdims=True))
    return post @ p, post @ nodes


def model_and_design(y, asked, folds, tables, nodes, log_prior, n_folds):
    """M, D and SE_D for every target (rows), from answers ``y`` where ``asked`` (T, N).

    ``folds`` (T, N) gives each asked item its cross-fitting fold (0..n_folds-1; ignored
    elsewhere); ``asked`` must be a simple random sample of each row's items. Rows with fewer
    than two answers get D = M and an SE of 0.5 (no design information yet).
    Returns (M, D, se, theta, n).
    """
    p, log_p, log_q = tables
    y = np.where(asked, np.nan_to_num(y), 0.0)
    n_items = y.shape[1]
    n = asked.sum(1)
    f, theta = posterior_probabilities(y, asked, p, log_p, log_q, nodes, log_prior)
    model = (np.where(asked, y, f)).sum(1) / n_items
    resid = np.zeros_like(y)
    f_bar = np.zeros_like(y)
    for k in range(n_folds):                 # K posteriors, each vectorized over targets
        out = asked & (folds == k)
        fk, _ = posterior_probabilities(y, asked & ~out, p, log_p, log_q, nodes, log_prior)
        resid = np.where(out, y - fk, resid)
        f_bar += fk / n_folds
    n_safe = np.maximum(n, 1)
    rbar = resid.sum(1) / n_safe
    s2 = ((resid - rbar[:, None]) ** 2 * asked).sum(1) / np.maximum(n - 1, 1)
    known = np.where(asked, y, 0.0).sum(1)
    design = (known + np.where(asked, 0.0, f_bar).sum(1) + (n_items - n) * rbar) / n_items
    se = np.sqrt(s2 / n_safe * (1.0 - n / n_items))
    few = n < 2
    design = np.where(few, model, design)
    se = np.where(few, 0.5, se)
    return model, design, se, theta, n


def combine(model, design, se, alpha, beta, tau2, z_cut, source_range=(0.0, 1.0)):
    """Point prediction, 95% interval (0-1) and the out-of-population flag (module docstring)."""
    g = alpha + beta * model
    se2 = np.maximum(se ** 2, 1e-12)
    z = np.abs(design - g) / np.sqrt(se2 + tau2)
    lo_src, hi_src = source_range
    beyond = (np.minimum(g, model) < lo_src) | (np.maximum(g, model) > hi_src) | (design > hi_src) | (design < lo_src)
    outside = (z > z_cut) | beyond
    pooled = (g / tau2 + design / se2) / (1.0 / tau2 + 1.0 / se2)
    score = np.clip(np.where(outside, design, pooled), 0.0, 1.0)
    lo = np.clip(np.minimum(design - Z95 * se, score), 0.0, 1.0)
    hi = np.clip(np.maximum(design + Z95 * se, score), 0.0, 1.0)
    sd = np.where(outside, se, np.sqrt(1.0 / (1.0 / tau2 + 1.0 / se2)))
    return score, lo, hi, sd, outside, z
