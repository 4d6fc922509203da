"""The estimators behind a predicted benchmark score, vectorized over targets (rows).

The benchmark score of a target is the mean over ALL N items, ``mu = (1/N) sum_i y_i``, so the
quantity to estimate is the total ``Y = sum_i y_i``; the answers are fixed numbers and the only
randomness is which items are asked.

Two models of the target's answers, both from the answers of draws 1..k-1 only:

- IRT: the posterior of theta (N(0, 1) prior on a quadrature grid, Bock and Mislevy 1982)
  gives every item its posterior-mean probability f_i^(k) = sum_q post(q) P_i(theta_q);
- level: g_i^(k) = expit(x_i + c^(k)), x_i the logit of item i's proportion correct among the
  strongest quarter of the source models (smoothed, (k_i + 1/2) / (m_i + 1)), c^(k) the MAP
  level of the target's answers so far (prior N(c_0, 2^2), c_0 matching the source models'
  mean score). It knows which items the best source models solve, which the IRT model, fitted
  on all of them, blurs for a target stronger than every one.

Scores in [0, 1]. An item's score may be 0/1 or continuous (F1, ROUGE, mc2, a rating mapped
to [0, 1]). Every model above reads it through the Bernoulli quasi-likelihood
y log P + (1 - y) log(1 - P) (Wedderburn 1974; the fractional response model of Papke and
Wooldridge 1996), as the calibration's EM does: its score equation sum (y - P) dP / (P (1 - P))
is unbiased for the mean function E[y | theta] = P(theta) whatever y's distribution (many exact
zeros, a few ones, a continuum between), so P is the item's mean score at theta, which is all
the control variates and M need; a 0/1 answer makes it the likelihood itself. A continuous
score varies less than a coin with the same mean, Var(y | theta) = phi P (1 - P) with phi < 1:
the draws use the predicted residual SD sqrt(phi_j f (1 - f)), phi_j estimated on the source
models (:func:`item_dispersion`). The plain quasi-posterior of theta is flatter than a true one
when phi < 1 (calibrated slopes come out 10-20% low on zero/one-inflated beta scores); `atlas
build-bank` calibrates continuous scores by the extended quasi-likelihood, each item's term
divided by phi_j (Nelder and Pregibon 1987; :mod:`atlascat.irt.dispersion`), which recovers
them (tests/test_continuous_scores.py). Nothing below depends on either: the design-based
estimate and its interval are exact for any bounded score.

Design: sequential sampling with probabilities proportional to the models' uncertainty
(active inference, Zrnic and Candes 2024), without replacement. Draw k takes item j from the
items not asked yet (R_k) with probability

    q_j^(k) = m [(1 - h) s_j / sum_{R_k} s + h s'_j / sum_{R_k} s'] + (1 - m) / |R_k|,
    s_j = sqrt(f_j^(k) (1 - f_j^(k))),   s'_j = sqrt(g_j^(k) (1 - g_j^(k)))

(the predicted residual SDs, h the level model's share; the uniform share 1 - m keeps every
q > 0, so the estimator is unbiased whatever the models, and bounds the weight of an item they
wrongly think certain). Items the models are unsure about, the informative ones, are asked more
often: the IRT prediction gets sharper than from a simple random sample.

Des Raj's estimator (Des Raj 1956, ordered sampling without replacement) with a model as a
control variate: every draw gives an estimate of the total,

    t_k = sum_{i asked before k} y_i + sum_{i in R_k} f_i^(k) + (y_j - f_j^(k)) / q_j^(k),

conditionally unbiased given the earlier draws, E[t_k | draws 1..k-1] = Y, whatever f and q
(they depend only on earlier answers). With both models, t_k = w_k t_k(f) + (1 - w_k) t_k(g),
w_k the weight that minimises the variance of the mixture over draws 1..k-1 (1/2 for the first
three): w_k depends on earlier draws only, so t_k stays conditionally unbiased. Their mean
D = (1/n) sum_k t_k is unbiased for Y, the t_k - Y are martingale differences (uncorrelated),
and

    Var^(D) = sum_k (t_k - D)^2 / (n (n - 1))

is Des Raj's variance estimator. The 95% interval D / N +- 1.96 SE needs no assumption on the
item parameters: it is valid by design (item parameter uncertainty of a small source
population cannot make it undercover; it only widens it).

Model-based prediction (IRT). With the posterior after all n answers,
M = (1/N) [ sum_{asked} y_i + sum_{not asked} f_i ] (the p-IRT estimator of Polo et al. 2024).
M is sharp where the target resembles the source models and biased where it does not.

Combination. G = alpha + beta * M (+ gamma * R, the ridge prediction of
:mod:`atlascat.predict.regression`) is the model prediction calibrated on the source models (the
same design replayed on them), tau^2 its mean squared error there. A target is outside the source
population when |D - G| > z_cut * sqrt(SE_D^2 + tau^2) (the design contradicts the model), when
G lies beyond the source models' score range or M beyond the range of their replayed M (a
calibration fitted there cannot be extrapolated; M is on its own scale, which G maps to the
score's), when D lies beyond that score range while G lies within ``model_gate`` tau of the same
edge (a target beyond the strongest source models looks like them to the model; a design
estimate beyond them for a target the model puts well inside, and whose D and G still agree
within z_cut, is the design's sampling noise: D's SE from 50 items, 4-5 points, can exceed the
source scores' spread), or when its theta lies beyond the central ``1 - 2 q`` of the source
models' replayed thetas; then the prediction is D. Otherwise the precision-weighted mean
C = G + w (D - G), w the least-squares weight on the source models' replays,
w = sum (t - G)(D - G) / sum (D - G)^2 clipped to 0-1 (stacking, Wolpert 1992: G and D use the
same answers and their errors correlate, so the precision-weighted mean
(G / tau^2 + D / SE_D^2) / (1 / tau^2 + 1 / SE_D^2), which treats them as independent, gives D
too much weight; without a fitted w the prediction is that mean). The
reported 95% interval is the design interval D +- 1.96 SE_D, widened (never narrowed) to
contain the point prediction.

Early steps. Des Raj's variance estimate after k draws has k - 1 degrees of freedom: after 2
or 3 answers it is often near 0 by chance (two draws whose terms t_k agree), and D +- 1.96 SE_D
then covers far less than 95% (benchmarks/results/step_coverage.md: 0.66-0.68 after 2
answers on held-out models). While fewer than n_0 = 30 draws are answered, whatever the
budget (:data:`SMALL_SAMPLE_DRAWS`; t_{0.975, 30} = 2.04 differs little from 1.96), the
interval after k >= 2 answers (:func:`small_sample_interval`) pools the terms' sample variance
s^2 = k (k - 1) SE_D^2 N^2 (on the total's scale) with a prior variance of one draw's term,

    sigma_0^2 = sum_{i in R} f_i (1 - f_i) / q_i      (:func:`draw_variance`)

(f the IRT posterior-mean predictions after the k answers, q the next draw's probabilities over
the items not asked yet, R): the conditional variance of t_{k+1} were the remaining answers
independent with variances f_i (1 - f_i), the largest a score in [0, 1] with mean f_i can have
(Bhatia and Davis 2000), so it does not rest on the dispersion phi estimated on the source
models. It counts as one prior draw: the conjugate update of a normal variance under a scaled
inverse-chi-square prior with nu_0 = 1 degree of freedom (Gelman et al. 2013, Bayesian Data
Analysis, 3rd ed., section 3.3),

    sigma_k^2 = (sigma_0^2 + (k - 1) s^2) / k,   D +- t_{0.975, k} sigma_k / (N sqrt(k)),

widened to contain the point prediction (t with nu_0 + k - 1 = k degrees of freedom, the
posterior predictive of a mean whose variance is estimated). After one answer the interval is
the whole range 0-1; from n_0 answers on it is D +- 1.96 SE_D as above. A live session shows
this interval at every step and a replay ends with it (a budget under n_0 included; a target
asked every item it has keeps its exact score), so both agree at the same step. The outside
test's z takes the same width as the design's SE before n_0 answers (``z_se`` of
:func:`combine`: t_{0.975, k} sigma_k / (N sqrt(k) 1.96), never below SE_D; after one answer
no z flags): with SE_D near 0 after two answers that agree, 20% of held-out targets were
flagged and the method flipped from step to step (benchmarks/results/method_flips.md).

References
----------
Des Raj (1956). Some estimators in sampling with varying probabilities without replacement.
JASA 51, 269-284.
Zrnic and Candes (2024). Active statistical inference. ICML.
Angelopoulos, Bates, Fannjiang, Jordan, Zrnic (2023). Prediction-powered inference. Science 382.
Polo, Weber, Choshen, Sun, Xu, Yurochkin (2024). tinyBenchmarks: evaluating LLMs with fewer
examples. ICML.
Wolpert (1992). Stacked generalization. Neural Networks 5, 241-259.
Zhang, Dorner, Hardt (2025). How benchmark prediction from fewer data misses the mark. NeurIPS.
Bock and Mislevy (1982). Adaptive EAP estimation of ability. Applied Psych. Measurement 6.
Gelman, Carlin, Stern, Dunson, Vehtari, Rubin (2013). Bayesian Data Analysis, 3rd ed. CRC.
Bhatia and Davis (2000). A better bound on the variance. Amer. Math. Monthly 107, 353-357.
Wedderburn (1974). Quasi-likelihood functions, generalized linear models, and the Gauss-Newton
method. Biometrika 61, 439-447.
Papke and Wooldridge (1996). Econometric methods for fractional response variables with an
application to 401(k) plan participation rates. J. Applied Econometrics 11, 619-632.
Nelder and Pregibon (1987). An extended quasi-likelihood function. Biometrika 74, 221-232.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit, logsumexp

__all__ = ["Z95", "grid_tables", "posterior", "log_posterior", "level_logits", "level_start",
           "level_offset", "level_prediction", "draw_probabilities", "item_dispersion",
           "draw_items",
           "sequential_design",
           "draw_terms", "predictable_weights", "des_raj", "model_prediction", "combine",
           "draw_variance", "small_sample_interval", "SMALL_SAMPLE_DRAWS"]

Z95 = 1.959963984540054
LEVEL_PRIOR_SD = 2.0      # SD of the level model's prior on the target's level c
LEVEL_BURN_IN = 3         # draws before the two control variates are weighted by their variance
SMALL_SAMPLE_DRAWS = 30   # answers before the design interval uses Des Raj's variance alone


def grid_tables(a, b, c, u, nodes):
    """P (n_nodes, N) on the grid and its logs, clipped away from 0 and 1 (log-safe)."""
    z = np.asarray(a)[None, :] * (np.asarray(nodes)[:, None] - np.asarray(b)[None, :])
    p = np.asarray(c) + (np.asarray(u) - np.asarray(c)) / (1.0 + np.exp(-z))
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return p, np.log(p), np.log1p(-p)


def posterior(log_post):
    """Normalised posterior weights (T, n_nodes) from unnormalised log posteriors."""
    return np.exp(log_post - logsumexp(log_post, axis=1, keepdims=True))


def log_posterior(y, asked, tables, log_prior):
    """log prior(q) + sum_{asked j} [y_j log P_j(q) + (1 - y_j) log Q_j(q)], shape (T, n_nodes)."""
    _, log_p, log_q = tables
    y1 = np.where(asked, np.nan_to_num(y), 0.0)
    y0 = np.where(asked, 1.0 - np.nan_to_num(y), 0.0)
    return y1 @ log_p.T + y0 @ log_q.T + log_prior


def level_logits(y, scores, fraction=0.25, min_models=3):
    """x_i = logit((k_i + 1/2) / (m_i + 1)): item i's smoothed proportion correct among the
    strongest ``fraction`` of the source models (at least ``min_models``) by ``scores``; ``y``
    (models, items) with NaN for no answer."""
    y = np.asarray(y, float)
    n = max(int(min_models), int(np.ceil(float(fraction) * y.shape[0])))
    top = y[np.argsort(np.asarray(scores, float), kind="stable")[-min(n, y.shape[0]):]]
    k, m = np.nansum(top, axis=0), np.isfinite(top).sum(0)
    p = (k + 0.5) / (m + 1.0)
    return np.log(p) - np.log1p(-p)


def level_start(x, mean_score):
    """c_0 with mean_i expit(x_i + c_0) = mean_score (bisection; 0 < mean_score < 1)."""
    target = float(np.clip(mean_score, 1e-6, 1 - 1e-6))
    lo, hi = -40.0, 40.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.mean(expit(x + mid)) < target else (lo, mid)
    return 0.5 * (lo + hi)


def level_offset(x_drawn, y_drawn, valid, c0, sd=LEVEL_PRIOR_SD):
    """Per row, the MAP level c of answers y ~ Bernoulli(expit(x + c)) with prior N(c0, sd^2)
    over the ``valid`` draws (Newton's method from c0; the log posterior is strictly concave)."""
    c = np.full(np.shape(y_drawn)[0], float(c0))
    yv = np.where(valid, y_drawn, 0.0)
    for _ in range(50):
        mu = np.where(valid, expit(x_drawn + c[:, None]), 0.0)
        grad = (yv - mu).sum(1) - (c - c0) / sd ** 2
        hess = (mu * (1.0 - mu)).sum(1) + 1.0 / sd ** 2
        step = np.clip(grad / hess, -5.0, 5.0)
        c = c + step
        if np.all(np.abs(step) < 1e-10):
            break
    return c


def level_prediction(level, item, y_item, valid):
    """g (rows, items) = expit(x_i + c_row), c_row the MAP level (:func:`level_offset`) of each
    row's answers ``y_item`` to the items ``item`` (columns marked ``valid``); ``level`` is
    (x, c_0). The replay and a live session predict with this one function."""
    x, c0 = level
    c = level_offset(x[item], y_item, valid, c0)
    return np.clip(expit(np.asarray(x)[None, :] + c[:, None]), 1e-9, 1 - 1e-9)


def _share(s, remaining, n_rem):
    s = np.where(remaining, s, 0.0)
    s_sum = s.sum(1, keepdims=True)
    return np.where(s_sum > 0, s / np.where(s_sum > 0, s_sum, 1.0), 1.0 / n_rem)


def draw_probabilities(f, remaining, mix, g=None, share=0.0, dispersion=None):
    """q over the remaining items (rows sum to 1): mix * [(1 - share) s(f) / sum s(f) +
    share s(g) / sum s(g)] + (1 - mix) / |R|, s(p) = sqrt(phi p (1 - p)), the predicted
    residual SD of a score with mean p (``dispersion`` phi per item, default 1: a 0/1 answer;
    below 1 for a continuous score, :func:`item_dispersion`)."""
    n_rem = np.maximum(remaining.sum(1, keepdims=True), 1)
    phi = 1.0 if dispersion is None else np.asarray(dispersion, float)[None, :]
    prop = _share(np.sqrt(np.clip(phi * f * (1.0 - f), 0.0, None)), remaining, n_rem)
    if g is not None and share > 0:
        prop = (1.0 - share) * prop + share * _share(
            np.sqrt(np.clip(phi * g * (1.0 - g), 0.0, None)), remaining, n_rem)
    q = np.where(remaining, mix * prop + (1.0 - mix) / n_rem, 0.0)
    return q / np.maximum(q.sum(1, keepdims=True), 1e-300)


def item_dispersion(y, tables, log_prior, lo=0.05, hi=1.0, chunk=128):
    """phi_j, the dispersion of item j's scores about the model's prediction of them from each
    source model's other answers (:func:`atlascat.irt.dispersion.item_dispersion` on the grid
    ``tables``): 1 for a 0/1 answer, below 1 for a continuous score in [0, 1] (an F1 of 0.4
    varies less than a coin with mean 0.4). Clipped to [lo, hi]."""
    from ..irt.dispersion import item_dispersion as _phi

    return _phi(y, tables[0], log_prior, lo=lo, hi=hi, chunk=chunk)


def draw_items(q, remaining, rng):
    """One item per row drawn with probabilities ``q`` (rows of :func:`draw_probabilities`)
    by inverse CDF from one uniform per row (``rng``: one Generator for every row, or a
    sequence of Generators, one a row); a draw that rounding puts on an item not
    ``remaining`` takes the row's most probable item."""
    rows = np.arange(q.shape[0])
    cq = np.cumsum(q, axis=1)
    if isinstance(rng, np.random.Generator):
        u = rng.random((q.shape[0], 1))
    else:
        u = np.array([[g.random()] for g in rng])
    j = np.minimum((cq < u * cq[:, -1:]).sum(1), q.shape[1] - 1)
    return np.where(remaining[rows, j], j, np.argmax(q, axis=1))


def sequential_design(y, tables, log_prior, budget, mix, rng, level=None, share=0.0,
                      dispersion=None):
    """Replay the sequential design on every row of ``y`` (NaN = no answer, never drawn).

    ``level``: (x, c_0) of the level model (:func:`level_logits`, :func:`level_start`), None
    for the IRT model alone (then ``g`` = ``f``); ``share``: its share of the draws'
    uncertainty part; ``rng``: one Generator, or one a row (:func:`draw_items`);
    ``dispersion``: phi of :func:`draw_probabilities`. Returns a dict of arrays, one column per
    draw k (shape (T, n) with
    n = min(budget, the most available items of a row)): ``item`` (index drawn), ``q`` (its
    draw probability), ``f`` and ``g`` (the two models' predictions f_j^(k), g_j^(k)),
    ``f_rest`` and ``g_rest`` (their sums over R_k), ``valid`` (False once a row has no item
    left: a row with fewer available items than the budget is asked all of them), and
    ``log_post`` (T, n_nodes) after the last answer. Loops over draws only; every draw is
    vectorized over rows.
    """
    p, log_p, log_q = tables
    n_rows, n_items = y.shape
    avail = np.isfinite(y)
    n = int(min(budget, avail.sum(1).max()))
    yv = np.nan_to_num(y)
    rows = np.arange(n_rows)
    lp = np.tile(log_prior, (n_rows, 1))
    remaining = avail.copy()
    out = {k: np.zeros((n_rows, n)) for k in ("q", "f", "f_rest", "g", "g_rest")}
    out["item"] = np.zeros((n_rows, n), dtype=int)
    out["valid"] = np.zeros((n_rows, n), dtype=bool)
    for k in range(n):
        live = remaining.any(1)
        f = posterior(lp) @ p
        g = f
        if level is not None:
            done = out["item"][:, :k]
            g = level_prediction(level, done, yv[rows[:, None], done], out["valid"][:, :k])
        q = draw_probabilities(f, remaining, mix, None if level is None else g, share,
                               dispersion)
        j = draw_items(q, remaining, rng)
        out["item"][:, k] = j
        out["q"][:, k] = np.where(live, q[rows, j], 1.0)
        for name, pred in (("f", f), ("g", g)):
            out[name][:, k] = np.where(live, pred[rows, j], 0.0)
            out[name + "_rest"][:, k] = np.where(remaining, pred, 0.0).sum(1)
        out["valid"][:, k] = live
        remaining[rows, j] = False
        yj = yv[rows, j][:, None]              # a score in [0, 1]: the quasi-likelihood
        step = yj * log_p[:, j].T + (1.0 - yj) * log_q[:, j].T
        lp += np.where(live[:, None], step, 0.0)
    out["log_post"] = lp
    return out


def draw_terms(y_drawn, q, f, f_rest, valid):
    """Des Raj's t_k per draw (module docstring), 0 where not ``valid``."""
    before = np.cumsum(y_drawn, axis=1) - y_drawn
    return np.where(valid, before + f_rest + (y_drawn - f) / np.where(valid, q, 1.0), 0.0)


def predictable_weights(t1, t2, valid, burn_in=LEVEL_BURN_IN):
    """w_k minimising the variance of w t1 + (1 - w) t2 over the draws before k (clipped to
    0-1; 1/2 until ``burn_in`` earlier draws): w = (v2 - c) / (v1 + v2 - 2 c)."""
    v = valid.astype(float)

    def prev(a):                                   # sum over the draws j < k (no later term)
        c = np.cumsum(a * v, axis=1)
        return np.concatenate([np.zeros_like(c[:, :1]), c[:, :-1]], axis=1)

    cnt = prev(np.ones_like(v))
    m = np.maximum(cnt, 1.0)
    m1, m2 = prev(t1) / m, prev(t2) / m
    v1 = prev(t1 * t1) / m - m1 ** 2
    v2 = prev(t2 * t2) / m - m2 ** 2
    c = prev(t1 * t2) / m - m1 * m2
    den = v1 + v2 - 2.0 * c
    w = np.clip(np.where(den > 1e-12, (v2 - c) / np.where(den > 1e-12, den, 1.0), 0.5), 0, 1)
    return np.where(cnt >= burn_in, w, 0.5)


def des_raj_terms(y_drawn, q, f, f_rest, valid=None, g=None, g_rest=None):
    """Des Raj's per-draw estimates t_k of the total (rows = targets, columns = draws in order,
    ``valid`` marks the draws made; 0 elsewhere); with the level model's ``g``, ``g_rest`` the
    two control variates mixed with :func:`predictable_weights` (module docstring)."""
    valid = np.ones(np.shape(y_drawn), dtype=bool) if valid is None else np.asarray(valid, bool)
    y_drawn = np.where(valid, y_drawn, 0.0)
    t = draw_terms(y_drawn, q, f, f_rest, valid)
    if g is not None:
        t2 = draw_terms(y_drawn, q, g, g_rest, valid)
        w = predictable_weights(t, t2, valid)
        t = np.where(valid, w * t + (1.0 - w) * t2, 0.0)
    return t


def terms_mean(t, valid=None):
    """The mean of per-draw estimates t_k (0 where not ``valid``) and its SE,
    sqrt(sum (t_k - mean)^2 / (n (n - 1))): Des Raj's estimate and variance estimator, or, on
    differences of two targets' terms over the same draws, those of the difference. A row with
    one draw gets SE = inf, a row with none a mean of NaN."""
    valid = np.ones(np.shape(t), dtype=bool) if valid is None else np.asarray(valid, bool)
    n = valid.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(valid, t, 0.0).sum(1) / n
        var = np.where(valid, (t - total[:, None]) ** 2, 0.0).sum(1) / (n * (n - 1))
    return total, np.where(n >= 2, np.sqrt(var), np.inf)


def des_raj(y_drawn, q, f, f_rest, valid=None, g=None, g_rest=None):
    """Des Raj's estimate of the total and its SE from the draws (:func:`des_raj_terms`,
    :func:`terms_mean`)."""
    return terms_mean(des_raj_terms(y_drawn, q, f, f_rest, valid, g, g_rest), valid)


def model_prediction(y, asked, avail, tables, nodes, log_post):
    """M (mean over the ``avail`` items: answers where asked, posterior-mean P elsewhere) and
    theta's EAP."""
    post = posterior(log_post)
    f = post @ tables[0]
    m = np.where(asked, np.nan_to_num(y), np.where(avail, f, 0.0)).sum(1)
    return m / np.maximum(avail.sum(1), 1), post @ nodes


def combine(model, calibrated, design, se, theta, *, tau2, z_cut, source_range=(0.0, 1.0),
            theta_range=(-np.inf, np.inf), d_margin=0.0, model_range=None,
            check_below=True, weight=None, pooled_tau2=None, model_gate=None, z_se=None):
    """Point prediction, 95% interval (0-1), its SD and the out-of-population flag (module
    docstring; ``model`` is M, ``calibrated`` G, the model prediction calibrated on the source
    models; ``d_margin``: how many SE_D the design estimate must lie beyond the source
    scores to flag, 0 = its point value; ``model_range``: (min, max) of the source models'
    replayed M, None = ``source_range``;
    ``check_below``: False where no target can lie below the source models, whose weakest
    answer at chance: only a prediction or theta beyond their top then flags; ``weight``,
    ``pooled_tau2``: D's weight in C and C's mean squared error, fitted on the source models'
    replays; None = the precision-weighted mean; ``model_gate``: a design estimate beyond the
    source scores flags the target only where G lies within model_gate * tau of that edge,
    None = wherever G lies; ``z_se``: the design's SE in the z test, None = ``se``: wider
    after few answers, the small-sample interval's, so that one or two answers do not flag).
    Returns (score, lower, upper, sd, outside, z)."""
    g = np.asarray(calibrated, float)
    se2 = np.maximum(se ** 2, 1e-12)
    zse2 = se2 if z_se is None else np.maximum(np.asarray(z_se, float) ** 2, se2)
    z = np.abs(design - g) / np.sqrt(zse2 + tau2)
    lo_src, hi_src = source_range
    lo_m, hi_m = source_range if model_range is None else model_range
    gate = np.inf if model_gate is None else float(model_gate) * np.sqrt(tau2)
    beyond = ((g > hi_src) | (model > hi_m) | (theta > theta_range[1])
              | ((design - d_margin * se > hi_src) & (g > hi_src - gate)))
    if check_below:
        beyond |= ((g < lo_src) | (model < lo_m) | (theta < theta_range[0])
                   | ((design + d_margin * se < lo_src) & (g < lo_src + gate)))
    outside = (z > z_cut) | beyond
    if weight is None:
        pooled = (g / tau2 + design / se2) / (1.0 / tau2 + 1.0 / se2)
        pooled_sd = np.sqrt(1.0 / (1.0 / tau2 + 1.0 / se2))
    else:
        pooled = g + weight * (design - g)
        pooled_sd = np.sqrt(pooled_tau2)
    score = np.clip(np.where(outside, design, pooled), 0.0, 1.0)
    lo = np.clip(np.minimum(design - Z95 * se, score), 0.0, 1.0)
    hi = np.clip(np.maximum(design + Z95 * se, score), 0.0, 1.0)
    sd = np.where(outside, se, pooled_sd)
    return score, lo, hi, sd, outside, z


def draw_variance(f, remaining, q):
    """sigma_0^2 per row: sum over the ``remaining`` items of f_i (1 - f_i) / q_i, the prior
    variance of the next draw's term t on the total's scale (module docstring, "Early steps");
    ``q`` the next draw's probabilities (:func:`draw_probabilities`)."""
    v = f * (1.0 - f) / np.where(remaining, q, 1.0)
    return np.where(remaining, v, 0.0).sum(1)


def small_sample_half(se, n_draws, draw_var, n_items, *, slope=1.0, resid=0.0):
    """The half-width t_{0.975, k} sqrt(...) of :func:`small_sample_interval` (before it is
    widened and clipped); half / Z95 is the SE an early step's outside test uses."""
    from scipy.stats import t as student_t

    k = np.asarray(n_draws, float)
    c1, r = float(slope), float(resid)
    se_m2 = np.maximum(np.asarray(se, float) ** 2 - r ** 2, 0.0) / max(c1 * c1, 1e-300)
    n = np.asarray(n_items, float)
    var_m = (np.asarray(draw_var, float) / n ** 2 + (k - 1.0) * k * se_m2) / k ** 2
    return student_t.ppf(0.975, k) * np.sqrt(c1 * c1 * var_m + r * r)


def small_sample_interval(design, se, score, n_draws, draw_var, n_items, *, slope=1.0,
                          resid=0.0):
    """(lower, upper) of the 95% interval after ``n_draws`` = k >= 2 answers (module docstring,
    "Early steps"): D +- t_{0.975, k} sqrt((sigma_0^2 / N^2 + (k - 1) k SE_D^2) / k^2),
    widened to contain ``score`` and clipped to 0-1; ``draw_var`` sigma_0^2
    (:func:`draw_variance`), N = ``n_items`` (one, or one per row). With a score map
    s = c0 + c1 m (``slope`` c1, ``resid`` r), ``design`` and ``se`` are on the score's scale,
    SE^2 = c1^2 SE_m^2 + r^2, and so is the pooled SE."""
    half = small_sample_half(se, n_draws, draw_var, n_items, slope=slope, resid=resid)
    lo = np.clip(np.minimum(design - half, score), 0.0, 1.0)
    hi = np.clip(np.maximum(design + half, score), 0.0, 1.0)
    return lo, hi
