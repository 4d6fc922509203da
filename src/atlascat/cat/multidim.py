"""Multidimensional CAT on a K-dimensional 2PL bank (``atlascat.irt.multidim.MultidimBank``).

Selection (Segall 1996, the D-rule): give the item that maximizes the determinant of the
posterior information at the current estimate theta_hat,

    det( Sigma_0^{-1} + sum_{j administered} I_j(theta_hat) + I_c(theta_hat) ),
    I_j(theta) = P_j (1 - P_j) a_j a_j^T,

which by the matrix determinant lemma is the candidate maximizing
``W_c a_c^T M^{-1} a_c`` with M the bracket without the candidate and W_c = P_c (1 - P_c); all
candidates of all examinees are scored at once. ``selection="A"`` minimizes the trace of the
inverse instead (van der Linden 1999), ``"random"`` is the baseline.

Estimation: the posterior of theta on a product grid (K <= 2; 41 nodes per dimension on [-5, 5]
by default), updated by adding the log-likelihood of each answer at every node, with EAP
estimates and posterior covariances; for K >= 3 a Laplace approximation (batched Newton steps to
the MAP, covariance = inverse negative Hessian).

Stopping: ``max_items``, and optionally ``se_target``: stop once every coordinate's posterior SD
is at most the target (after ``min_items``).

References
----------
Segall, D. O. (1996). Multidimensional adaptive testing. Psychometrika 61, 331-354.
van der Linden, W. J. (1999). Multidimensional adaptive testing with a minimum error-variance
    criterion. Journal of Educational and Behavioral Statistics 24, 398-412.
Reckase, M. D. (2009). Multidimensional Item Response Theory, ch. 10. Springer.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit

from ..errors import ConfigError, ResponseDataError

__all__ = ["MCATResult", "simulate_mcat", "MultidimCATSession", "SELECTION_RULES"]

SELECTION_RULES = ("D", "A", "random")


@dataclass
class MCATResult:
    """Outcome of :func:`simulate_mcat` for every examinee.

    theta : (S, K) final estimates; cov : (S, K, K) posterior covariances; items : (S, L) item
    positions in administration order (-1 after the test stopped); scores : (S, L) answers (NaN
    after stop); n_items : (S,); trace : (S, L, K) the estimate after each item (NaN after stop).
    """

    theta: np.ndarray
    cov: np.ndarray
    items: np.ndarray
    scores: np.ndarray
    n_items: np.ndarray
    trace: np.ndarray

    @property
    def se(self) -> np.ndarray:
        """Posterior SD of every coordinate, (S, K)."""
        return np.sqrt(np.maximum(np.diagonal(self.cov, axis1=1, axis2=2), 0.0))


class _Posterior:
    """Batched posterior state for S examinees: grid (K <= 2) or Laplace (K >= 3)."""

    def __init__(self, bank, n_subjects, prior_cov, quadpts, method):
        self.A = np.asarray(bank.loadings, dtype=float)
        self.d = np.asarray(bank.intercepts, dtype=float)
        self.K = self.A.shape[1]
        self.S = int(n_subjects)
        self.prior_prec = np.linalg.inv(prior_cov)
        self.method = method
        if method == "grid":
            q = quadpts or {1: 81, 2: 41}.get(self.K, 15)
            x = np.linspace(-5.0, 5.0, int(q))
            grids = np.meshgrid(*([x] * self.K), indexing="ij")
            self.nodes = np.stack([g.ravel() for g in grids], axis=1)
            logprior = -0.5 * np.einsum("qk,kl,ql->q", self.nodes, self.prior_prec, self.nodes)
            self.logpost = np.broadcast_to(logprior, (self.S, self.nodes.shape[0])).copy()
            z = self.nodes @ self.A.T + self.d  # (Q, J)
            self.log_p, self.log_q = log_expit(z), log_expit(-z)
        else:
            self.items: list[np.ndarray] = []
            self.scores: list[np.ndarray] = []
        self.theta = np.zeros((self.S, self.K))
        self.cov = np.broadcast_to(np.linalg.inv(self.prior_prec), (self.S, self.K, self.K)).copy()

    def update(self, rows, items, scores):
        """Add answers ``scores`` to items ``items`` of examinees ``rows``; refresh estimates."""
        if self.method == "grid":
            ll = np.where(scores[:, None] == 1, self.log_p[:, items].T, self.log_q[:, items].T)
            self.logpost[rows] += ll
            lp = self.logpost[rows]
            w = np.exp(lp - lp.max(axis=1, keepdims=True))
            w /= w.sum(axis=1, keepdims=True)
            mean = w @ self.nodes
            second = np.einsum("sq,qk,ql->skl", w, self.nodes, self.nodes)
            self.theta[rows] = mean
            self.cov[rows] = second - mean[:, :, None] * mean[:, None, :]
            return
        full_items = np.full(self.S, -1)
        full_scores = np.full(self.S, np.nan)
        full_items[rows], full_scores[rows] = items, scores
        self.items.append(full_items)
        self.scores.append(full_scores)
        self._laplace(rows)

    def _laplace(self, rows, n_newton: int = 25):
        items = np.stack(self.items, axis=1)[rows]  # (R, L)
        y = np.stack(self.scores, axis=1)[rows]
        mask = items >= 0
        A = self.A[np.where(mask, items, 0)] * mask[..., None]  # (R, L, K)
        d = self.d[np.where(mask, items, 0)]
        theta = self.theta[rows].copy()
        for _ in range(n_newton):
            p = expit(np.einsum("rlk,rk->rl", A, theta) + d)
            grad = np.einsum("rlk,rl->rk", A, np.where(mask, y - p, 0.0)) - theta @ self.prior_prec
            hess = np.einsum("rl,rlk,rlm->rkm", p * (1 - p), A, A) + self.prior_prec
            step = np.linalg.solve(hess, grad[..., None])[..., 0]
            norm = np.sqrt((step**2).sum(axis=1, keepdims=True))
            theta = theta + step * np.minimum(1.0, 2.0 / np.maximum(norm, 1e-300))
            if np.abs(step).max() < 1e-8:
                break
        p = expit(np.einsum("rlk,rk->rl", A, theta) + d)
        hess = np.einsum("rl,rlk,rlm->rkm", p * (1 - p), A, A) + self.prior_prec
        self.theta[rows] = theta
        self.cov[rows] = np.linalg.inv(hess)


def _select(post: _Posterior, given: np.ndarray, available: np.ndarray, rows, rule, rng):
    """Best item for each examinee in ``rows`` (vectorized over examinees and items)."""
    avail = available[rows] & ~given[rows]
    if rule == "random":
        scores = rng.random(avail.shape)
    else:
        A = post.A
        p = expit(post.theta[rows] @ A.T + post.d)  # (R, J)
        W = p * (1 - p)
        M = post.prior_prec + np.einsum("rj,jk,jl->rkl", W * given[rows], A, A)
        Minv = np.linalg.inv(M)
        MA = np.einsum("rkl,jl->rjk", Minv, A)  # (R, J, K)
        h = np.einsum("rjk,jk->rj", MA, A)
        if rule == "D":
            scores = np.log1p(W * h)
        else:  # A: reduction of trace(M^-1) = W a^T M^-2 a / (1 + W a^T M^-1 a)
            h2 = (MA**2).sum(axis=2)
            scores = W * h2 / (1.0 + W * h)
    scores = np.where(avail, scores, -np.inf)
    best = np.argmax(scores, axis=1)
    return best, avail.any(axis=1)


def _check(bank, selection, prior_cov):
    if not (hasattr(bank, "loadings") and hasattr(bank, "intercepts")):
        raise ConfigError("multidimensional CAT needs a MultidimBank (loadings and intercepts)")
    if selection not in SELECTION_RULES:
        raise ConfigError(f"unknown selection {selection!r}; use one of {', '.join(SELECTION_RULES)}")
    K = np.asarray(bank.loadings).shape[1]
    cov = np.eye(K) if prior_cov is None else np.asarray(prior_cov, dtype=float)
    if cov.shape != (K, K) or not np.allclose(cov, cov.T) or np.linalg.eigvalsh(cov).min() <= 0:
        raise ConfigError(f"prior_cov must be a symmetric positive definite {K}x{K} matrix")
    return K, cov


def simulate_mcat(bank, responses=None, true_theta=None, *, max_items: int = 30,
                  min_items: int = 1, se_target: float | None = None, selection: str = "D",
                  prior_cov=None, estimator: str = "auto", quadpts: int | None = None,
                  rng: np.random.Generator | None = None) -> MCATResult:
    """Run a multidimensional CAT for many examinees at once.

    Answers come from ``responses`` (replay; NaN items are never given): an (S, J) array in bank
    order, or a labelled DataFrame / ResponseMatrix aligned to the bank by item id; or they are
    drawn from the model at ``true_theta`` (S, K) with ``rng`` (a Generator or a seed). ``estimator``: "grid" (K <= 2),
    "laplace", or "auto" (grid for K <= 2). Loops over test positions only; every step is
    vectorized over examinees and items.
    """
    K, cov0 = _check(bank, selection, prior_cov)
    if estimator == "auto":
        estimator = "grid" if K <= 2 else "laplace"
    if estimator not in ("grid", "laplace"):
        raise ConfigError(f"unknown estimator {estimator!r}; use 'auto', 'grid' or 'laplace'")
    J = len(bank)
    from ..responses import ResponseMatrix, as_labelled_responses
    from ..validation import as_generator

    rng = None if rng is None else as_generator(rng)
    if responses is not None:
        responses = as_labelled_responses(responses)   # a DataFrame keeps its item ids
        y = (responses.aligned_values(bank.item_ids) if isinstance(responses, ResponseMatrix)
             else np.asarray(responses, dtype=float))
        if y.ndim != 2 or y.shape[1] != J:
            raise ResponseDataError(f"responses must be (examinees, {J}) in bank order; got {y.shape}")
        available = ~np.isnan(y)
    elif true_theta is not None:
        if rng is None:
            raise ConfigError("drawing answers from true_theta needs an rng")
        th = np.asarray(true_theta, dtype=float).reshape(-1, K)
        y = (rng.random((th.shape[0], J)) < expit(th @ np.asarray(bank.loadings).T + bank.intercepts)).astype(float)
        available = np.ones(y.shape, dtype=bool)
    else:
        raise ConfigError("pass responses (replay) or true_theta (simulate)")
    if selection == "random" and rng is None:
        raise ConfigError("random selection needs an rng")
    S = y.shape[0]
    L = int(min(max_items, J))
    post = _Posterior(bank, S, cov0, quadpts, estimator)
    given = np.zeros((S, J), dtype=bool)
    items = np.full((S, L), -1)
    scores = np.full((S, L), np.nan)
    trace = np.full((S, L, K), np.nan)
    active = np.ones(S, dtype=bool)
    n_items = np.zeros(S, dtype=int)
    for step in range(L):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        best, has = _select(post, given, available, rows, selection, rng)
        done = rows[~has]
        active[done] = False
        rows, best = rows[has], best[has]
        if rows.size == 0:
            break
        ans = y[rows, best]
        given[rows, best] = True
        items[rows, step] = best
        scores[rows, step] = ans
        n_items[rows] += 1
        post.update(rows, best, ans)
        trace[rows, step] = post.theta[rows]
        if se_target is not None:
            sd = np.sqrt(np.diagonal(post.cov[rows], axis1=1, axis2=2)).max(axis=1)
            active[rows[(sd <= se_target) & (n_items[rows] >= min_items)]] = False
    return MCATResult(post.theta.copy(), post.cov.copy(), items, scores, n_items, trace)


class MultidimCATSession:
    """Step-wise multidimensional CAT for one examinee (same core as :func:`simulate_mcat`).

    >>> s = MultidimCATSession(bank, max_items=20)          # doctest: +SKIP
    >>> item = s.next_item(); s.record(item, 1.0)           # doctest: +SKIP
    """

    def __init__(self, bank, *, max_items: int = 30, min_items: int = 1,
                 se_target: float | None = None, selection: str = "D", prior_cov=None,
                 estimator: str = "auto", rng: np.random.Generator | None = None):
        K, cov0 = _check(bank, selection, prior_cov)
        if selection == "random" and rng is None:
            raise ConfigError("random selection needs an rng")
        self.bank = bank
        self.max_items, self.min_items, self.se_target = int(max_items), int(min_items), se_target
        from ..validation import as_generator

        self.selection, self.rng = selection, (None if rng is None else as_generator(rng))
        est = ("grid" if K <= 2 else "laplace") if estimator == "auto" else estimator
        self._post = _Posterior(bank, 1, cov0, None, est)
        self._given = np.zeros((1, len(bank)), dtype=bool)
        self.administered: list[str] = []
        self.scores: list[float] = []

    def __repr__(self) -> str:
        state = "done" if self.done else "running"
        return (f"MultidimCATSession(n_items={len(self.administered)}, "
                f"theta={np.round(self.theta, 4).tolist()}, {state})")

    @property
    def theta(self) -> np.ndarray:
        """The current estimate of the examinee's K abilities."""
        return self._post.theta[0].copy()

    @property
    def cov(self) -> np.ndarray:
        return self._post.cov[0].copy()

    @property
    def done(self) -> bool:
        n = len(self.administered)
        if n >= min(self.max_items, len(self.bank)):
            return True
        if self.se_target is not None and n >= self.min_items:
            return bool(np.sqrt(np.diag(self.cov)).max() <= self.se_target)
        return False

    def next_item(self) -> str:
        """Id of the next item to give (an error once the test is done)."""
        if self.done:
            raise ConfigError("the test has stopped; read theta and cov")
        best, _ = _select(self._post, self._given, np.ones_like(self._given), np.array([0]),
                          self.selection, self.rng)
        return str(self.bank.item_ids[best[0]])

    def record(self, item_id: str, score: float) -> None:
        """Record a 0/1 answer to ``item_id``."""
        if score not in (0, 1):
            raise ResponseDataError(f"score must be 0 or 1, got {score!r}")
        j = int(self.bank.index_of([item_id])[0])
        if self._given[0, j]:
            raise ResponseDataError(f"item {item_id!r} was already administered")
        self._given[0, j] = True
        self._post.update(np.array([0]), np.array([j]), np.array([float(score)]))
        self.administered.append(str(item_id))
        self.scores.append(float(score))
