"""Multidimensional 2PL (compensatory M2PL): bank, calibration, rotation, dimension selection.

Model (Reckase 2009, ch. 4; slope-intercept form, as mirt)::

    P(y_ij = 1 | theta_i) = sigma(a_j . theta_i + d_j),   theta_i ~ N(0, I_K),

``a_j`` the K loadings (slopes) of item j, ``d_j`` its intercept. With an identity latent
covariance the likelihood is invariant under orthogonal rotations A -> A R, theta -> R^T theta,
so loadings are identified up to rotation: :func:`varimax` (Kaiser 1958) gives an interpretable
solution, :meth:`MultidimBank.factor_loadings` mirt's rotated summary (oblimin, geomin, varimax;
:mod:`.rotation`), :func:`procrustes` (Schoenemann 1966) aligns a solution with a target, and
:func:`tucker_congruence` measures agreement per factor (Lorenzo-Seva and ten Berge 2006: >= 0.95
means "equal").

Calibration (:class:`MultidimIRT`), marginal maximum a posteriori with weak N(0, sd^2) priors on
a and d (isotropic, hence rotation invariant), all items updated together:

- K <= 2 (``method="em"``): Bock-Aitkin EM on a product grid (61 nodes for K = 1, 31 x 31 for
  K = 2 on [-6, 6], mirt's defaults). E-step: the log-likelihood of every answer pattern at every
  node is one matrix product, in blocks of patterns (:mod:`atlascat.irt.multidimem`); M-step: one batched Newton step per item on the expected counts
  (r_qj correct, n_qj observed at node q), a weighted logistic regression of each item on
  x_q = (theta_q, 1) - a generalized EM (Dempster, Laird and Rubin 1977).
- K >= 3 (``method="mhrm"``): Metropolis-Hastings Robbins-Monro (Cai 2010): every iteration draws
  theta for all subjects by random-walk Metropolis (vectorized, step size adapted to an acceptance
  rate of about 0.3), then moves the item parameters along the complete-data gradient,
  ``beta <- beta + gamma_t Gamma_t^{-1} g_t`` with ``Gamma_t`` a Robbins-Monro average of the
  complete-data information; gain 1 for a burn-in stage (a stochastic EM), then
  gamma_t = 1 / (t - burn + 1)^0.75.

Dimension choice (:func:`select_dimension`) follows tinyBenchmarks' IRT training notebook (Polo et
al. 2024): fit on training data, predict held-out responses, keep the dimension with the best
held-out log-loss; here with the one-standard-error rule (Hastie, Tibshirani and Friedman 2009,
sec. 7.10) so that a larger K must be better by more than the noise of the comparison.

References
----------
Reckase, M. D. (2009). Multidimensional Item Response Theory. Springer.
Bock, R. D. and Aitkin, M. (1981). Marginal maximum likelihood estimation of item parameters:
    application of an EM algorithm. Psychometrika 46, 443-459.
Cai, L. (2010). High-dimensional exploratory item factor analysis by a Metropolis-Hastings
    Robbins-Monro algorithm. Psychometrika 75, 33-57.
Kaiser, H. F. (1958). The varimax criterion for analytic rotation in factor analysis.
    Psychometrika 23, 187-200.
Schoenemann, P. H. (1966). A generalized solution of the orthogonal Procrustes problem.
    Psychometrika 31, 1-10.
Lorenzo-Seva, U. and ten Berge, J. M. F. (2006). Tucker's congruence coefficient as a meaningful
    index of factor similarity. Methodology 2, 57-64.
Polo, F. M. et al. (2024). tinyBenchmarks: evaluating LLMs with fewer examples. ICML.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit, log_expit, logsumexp
from scipy.stats import norm

from .defaults import THETA_RANGE, TOL
from .quadrature import MAX_QUADPTS
from ..errors import BankError, ConfigError, ResponseDataError
from .rotation import varimax
from .multidimem import GridEStep, posterior_blocks

__all__ = [
    "MultidimBank",
    "MultidimIRT",
    "DimensionSelection",
    "select_dimension",
    "product_grid",
    "grid_eap",
    "simulate_responses",
    "varimax",
    "procrustes",
    "tucker_congruence",
]


# ============================================================================ bank
class MultidimBank:
    """A calibrated multidimensional 2PL bank: ids, loadings (J, K), intercepts (J,).

    File format: ``item_id, a1, ..., aK, d[, metadata]`` (mirt's slope-intercept names).
    """

    def __init__(self, item_ids, loadings, intercepts, *, metadata=None):
        ids = np.asarray([str(i) for i in item_ids], dtype=object)
        a = np.array(loadings, dtype=float)
        if a.ndim == 1:
            a = a[:, None]
        d = np.array(intercepts, dtype=float).reshape(-1)
        n = len(ids)
        if n == 0:
            raise BankError("the multidimensional bank is empty")
        if a.shape[0] != n or d.shape != (n,):
            raise BankError(f"loadings {a.shape} and intercepts {d.shape} must have one row per "
                            f"item id ({n})")
        if not (np.isfinite(a).all() and np.isfinite(d).all()):
            bad = np.flatnonzero(~(np.isfinite(a).all(1) & np.isfinite(d)))
            raise BankError(f"non-finite loadings or intercepts for item(s) {ids[bad[:10]].tolist()}")
        uniq, counts = np.unique(ids.astype(str), return_counts=True)
        if (counts > 1).any():
            raise BankError(f"duplicate item id(s) {uniq[counts > 1][:5].tolist()}; ids must be unique")
        for arr in (a, d, ids):
            arr.flags.writeable = False
        self.item_ids, self.loadings, self.intercepts = ids, a, d
        if metadata is not None:
            metadata = pd.DataFrame(metadata).reset_index(drop=True)
            metadata.index = pd.Index(ids, name="item_id")
        self.metadata = metadata
        self._index = {item: i for i, item in enumerate(ids)}

    def __len__(self) -> int:
        return len(self.item_ids)

    def __contains__(self, item_id) -> bool:
        return str(item_id) in self._index

    def __repr__(self) -> str:
        return f"MultidimBank(n_items={len(self)}, n_dims={self.n_dims})"

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def n_dims(self) -> int:
        return self.loadings.shape[1]

    @property
    def mdisc(self) -> np.ndarray:
        """Multidimensional discrimination ||a_j|| (Reckase 2009, eq. 5.6)."""
        return np.sqrt((self.loadings**2).sum(axis=1))

    @property
    def mdiff(self) -> np.ndarray:
        """Multidimensional difficulty -d_j / ||a_j|| (signed distance along a_j)."""
        return -self.intercepts / np.maximum(self.mdisc, 1e-300)

    def index_of(self, item_ids) -> np.ndarray:
        ids = [str(i) for i in item_ids]
        missing = [i for i in ids if i not in self._index]
        if missing:
            raise BankError(f"{len(missing)} item id(s) not in the bank, e.g. {missing[:5]}")
        return np.fromiter((self._index[i] for i in ids), dtype=np.intp, count=len(ids))

    def subset(self, items) -> "MultidimBank":
        sel = np.asarray(items)
        idx = np.flatnonzero(sel) if sel.dtype == bool else (
            sel.astype(np.intp) if sel.dtype.kind in "iu" else self.index_of(sel.tolist()))
        meta = None if self.metadata is None else self.metadata.iloc[idx]
        return MultidimBank(self.item_ids[idx], self.loadings[idx], self.intercepts[idx], metadata=meta)

    def factor_loadings(self, rotate: str = "oblimin", **kwargs):
        """mirt's ``summary(mod, rotate=...)``: standardized loadings rotated by "oblimin" (mirt's
        default), "geomin", "varimax" or "none", communalities and factor correlations
        (:func:`atlascat.irt.rotation.factor_loadings`). The bank itself is not changed."""
        from .rotation import factor_loadings

        return factor_loadings(self.loadings, self.item_ids, rotate, **kwargs)

    def rotate(self, rotation) -> "MultidimBank":
        """Loadings A R for an orthogonal R (theta -> R^T theta leaves P unchanged)."""
        R = np.asarray(rotation, dtype=float)
        if R.shape != (self.n_dims, self.n_dims) or not np.allclose(R.T @ R, np.eye(self.n_dims), atol=1e-8):
            raise ConfigError(f"rotation must be an orthogonal {self.n_dims}x{self.n_dims} matrix")
        return MultidimBank(self.item_ids, self.loadings @ R, self.intercepts, metadata=self.metadata)

    def _theta(self, theta) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        if self.n_dims == 1 and (theta.ndim == 0 or theta.shape[-1] != 1):
            theta = theta[..., None]
        if theta.shape[-1] != self.n_dims:
            raise ConfigError(f"theta has {theta.shape[-1]} coordinates; the bank has {self.n_dims} dimensions")
        return theta

    def logit(self, theta) -> np.ndarray:
        """a_j . theta + d_j for theta of shape (..., K): shape (..., n_items)."""
        return self._theta(theta) @ self.loadings.T + self.intercepts

    def probability(self, theta) -> np.ndarray:
        return expit(self.logit(theta))

    def log_probability(self, theta):
        z = self.logit(theta)
        return log_expit(z), log_expit(-z)

    def information(self, theta) -> np.ndarray:
        """Item Fisher information matrices P Q a a^T: shape (..., n_items, K, K)."""
        p = self.probability(theta)
        return (p * (1 - p))[..., None, None] * np.einsum("jk,jl->jkl", self.loadings, self.loadings)

    # ---------------------------------------------------------------- frames and files
    def to_frame(self) -> pd.DataFrame:
        df = pd.DataFrame({"item_id": self.item_ids.astype(str)})
        for k in range(self.n_dims):
            df[f"a{k + 1}"] = self.loadings[:, k]
        df["d"] = self.intercepts
        if self.metadata is not None:
            meta = self.metadata.reset_index(drop=True)
            df = pd.concat([df, meta[[c for c in meta.columns if c not in df.columns]]], axis=1)
        return df

    @classmethod
    def from_frame(cls, df: pd.DataFrame) -> "MultidimBank":
        """ATLAS's item_id, a1..aK, d or mirt's coef table (:func:`.multidimframe.bank_columns`)."""
        from .multidimframe import bank_columns

        ids, a, d, meta = bank_columns(df)
        return cls(ids, a, d, metadata=meta)

    @staticmethod
    def is_multidim_file(path) -> bool:
        """True when a CSV/Parquet bank has loading columns a1 and a2 (two or more dimensions)."""
        path = Path(path)
        cols = set(pd.read_parquet(path).columns.astype(str) if path.suffix == ".parquet"
                   else pd.read_csv(path, nrows=0).columns.astype(str))
        return {"a1", "a2", "d"} <= cols

    @classmethod
    def read(cls, path) -> "MultidimBank":
        path = Path(path)
        if not path.exists():
            raise BankError(f"bank file {str(path)!r} does not exist")
        df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, dtype={"item_id": str, "X": str, "Unnamed: 0": str})
        if len(df) == 0:
            raise BankError(f"bank file {str(path)!r} has no item rows")
        return cls.from_frame(df)

    def write(self, path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        df = self.to_frame()
        if path.suffix == ".parquet":
            df.to_parquet(path, index=False)
        else:
            df.to_csv(path, index=False, float_format="%.17g")
        return path


# ============================================================================ helpers
def product_grid(n_dims: int, quadpts: int | None = None, theta_range=THETA_RANGE, *,
                 max_nodes: int = MAX_QUADPTS):
    """Equally spaced product grid and normalized N(0, I) log-weights: (Q, K), (Q,).

    Default points per dimension: 61 (K = 1), 31 (K = 2), 15 (K = 3) as mirt. At most
    ``max_nodes`` nodes (a ConfigError past it)."""
    q = quadpts or {1: 61, 2: 31, 3: 15}.get(n_dims, 9)
    if quadpts is not None and int(q) ** n_dims > max_nodes:   # past memory long before numpy's limit
        most = next(p for p in range(int(max_nodes ** (1 / n_dims)) + 1, 0, -1) if p ** n_dims <= max_nodes)
        raise ConfigError(f"quadpts must be at most {most} with {n_dims} dimensions (a grid of at most "
                          f"{max_nodes} nodes), got {q}")
    x = np.linspace(theta_range[0], theta_range[1], int(q))
    grids = np.meshgrid(*([x] * n_dims), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids], axis=1)
    logw = -0.5 * (nodes**2).sum(axis=1)
    return nodes, logw - logsumexp(logw)


def grid_eap(y, obs, bank, quadpts=None, theta_range=THETA_RANGE, block_cells=2_000_000,
             max_nodes=MAX_QUADPTS):
    """EAP means (n, K), covariances (n, K, K) of 0/1 ``y`` (``obs``: answered), in blocks of
    ``block_cells`` subjects x nodes (:func:`~atlascat.irt.multidimem.posterior_blocks`); a grid
    of at most ``max_nodes`` nodes."""
    nodes, logw = product_grid(bank.n_dims, quadpts, theta_range, max_nodes=max_nodes)
    z = nodes @ bank.loadings.T + bank.intercepts            # (Q, J)
    outer = (nodes[:, :, None] * nodes[:, None, :]).reshape(len(nodes), -1)
    n, k = y.shape[0], bank.n_dims
    mean, second = np.empty((n, k)), np.empty((n, k * k))
    for rows, post, _ in posterior_blocks(y, obs, z, logw, 8 * int(block_cells)):
        mean[rows], second[rows] = post @ nodes, post @ outer
    return mean, second.reshape(n, k, k) - mean[:, :, None] * mean[:, None, :]


def simulate_responses(bank: MultidimBank, theta, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli responses (n_subjects, n_items) drawn from the M2PL at ``theta`` (n, K);
    ``rng`` a Generator or a seed."""
    from ..validation import as_generator

    return (as_generator(rng).random((np.asarray(theta).shape[0], len(bank))) < bank.probability(theta)).astype(float)


def _as_arrays(responses):
    """(y float with NaN, subject_ids, item_ids, weights) from a ResponseMatrix, a labelled
    DataFrame (its index and columns kept as the ids) or an array."""
    from ..responses import ResponseMatrix, as_labelled_responses

    responses = as_labelled_responses(responses)
    if isinstance(responses, ResponseMatrix):
        w = responses.weights
        return (np.asarray(responses.values, dtype=float), np.asarray(responses.subject_ids),
                np.asarray(responses.item_ids), None if w is None else np.asarray(w, dtype=float))
    y = np.asarray(responses, dtype=float)
    if y.ndim != 2:
        raise ResponseDataError(f"responses must be a 2-D (subjects x items) array; got shape {y.shape}")
    return (y, np.array([f"s{i}" for i in range(y.shape[0])], dtype=object),
            np.array([f"item{j + 1}" for j in range(y.shape[1])], dtype=object), None)


def _check_binary(y):
    obs = ~np.isnan(y)
    vals = y[obs]
    if vals.size and not np.all((vals == 0) | (vals == 1)):
        raise ResponseDataError("the multidimensional 2PL needs 0/1 scores; binarize partial scores first "
                                "(ResponseMatrix.binarize)")
    return obs


# ============================================================================ rotations
def procrustes(loadings, target):
    """Orthogonal Procrustes rotation (Schoenemann 1966): R = argmin ||A R - T||_F over orthogonal
    R (reflections included), R = U V^T from the SVD A^T T = U S V^T. Returns ``(A R, R)``."""
    A = np.asarray(loadings, dtype=float)
    T = np.asarray(target, dtype=float)
    if A.shape != T.shape:
        raise ConfigError(f"loadings {A.shape} and target {T.shape} must have the same shape")
    u, _, vt = np.linalg.svd(A.T @ T)
    R = u @ vt
    return A @ R, R


def tucker_congruence(x, y) -> np.ndarray:
    """Tucker's congruence per column: sum_j x_jk y_jk / sqrt(sum x_jk^2 sum y_jk^2)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape:
        raise ConfigError(f"shapes {x.shape} and {y.shape} differ")
    x = x.reshape(x.shape[0], -1)
    y = y.reshape(y.shape[0], -1)
    return (x * y).sum(0) / np.sqrt((x**2).sum(0) * (y**2).sum(0))


def _orient(A):
    """Flip factors so that each column's loadings sum to a positive number."""
    s = np.where(A.sum(axis=0) < 0, -1.0, 1.0)
    return np.diag(s)


# ============================================================================ calibration
def _start_values(y, obs, k):
    """Principal-factor start: loadings from the top-k eigenvectors of the item correlation
    matrix (missing cells imputed by item means), converted to the logistic metric
    a = 1.702 lambda / sqrt(1 - h^2), d = 1.702 Phi^{-1}(p) / sqrt(1 - h^2)."""
    p = np.clip(np.nanmean(np.where(obs, y, np.nan), axis=0), 0.02, 0.98)
    filled = np.where(obs, y, p)
    sd = filled.std(axis=0)
    z = (filled - filled.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    corr = z.T @ z / z.shape[0]
    vals, vecs = np.linalg.eigh(corr)
    vals, vecs = vals[::-1][:k], vecs[:, ::-1][:, :k]
    lam = vecs * np.sqrt(np.maximum(vals, 0.0)) * 1.4  # phi correlations understate tetrachoric
    h2 = (lam**2).sum(axis=1)
    scale = np.where(h2 > 0.85, np.sqrt(0.85 / np.maximum(h2, 1e-12)), 1.0)
    lam = lam * scale[:, None]
    h2 = (lam**2).sum(axis=1)
    root = np.sqrt(1.0 - h2)
    return 1.702 * lam / root[:, None], 1.702 * norm.ppf(p) / root


def _normalize_rows(ll):
    """exp(ll) normalized per row, and the row log-normalizers (a leaner logsumexp)."""
    m = ll.max(axis=1, keepdims=True)
    e = np.exp(ll - m)
    total = e.sum(axis=1, keepdims=True)
    return e / total, (m + np.log(total))[:, 0]


def _softplus(z):
    """log(1 + e^z), stable for any z (a few times faster than np.logaddexp(0, z))."""
    return np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))


def _weighted_gram(weights, X):
    """X^T diag(weights[:, j]) X for every item j as one matrix product: (J, P, P)."""
    P = X.shape[1]
    outer = (X[:, :, None] * X[:, None, :]).reshape(X.shape[0], P * P)
    return (weights.T @ outer).reshape(weights.shape[1], P, P)


def _invariant_change(old, new, k):
    """Largest change of the rotation-invariant quantities A A^T and d between two iterates.

    A coarse grid breaks the rotation invariance only slightly, so EM can drift slowly along
    rotations; measuring change on A A^T ignores that drift (which changes no prediction)."""
    gram_old = old[:, :k] @ old[:, :k].T
    gram_new = new[:, :k] @ new[:, :k].T
    return float(max(np.abs(gram_new - gram_old).max(), np.abs(new[:, k] - old[:, k]).max()))


def _newton_step(G, H, max_step: float):
    """beta step solve(H, G) for a batch of items, each capped to norm ``max_step``."""
    step = np.linalg.solve(H, G[..., None])[..., 0]
    norms = np.sqrt((step**2).sum(axis=1, keepdims=True))
    return step * np.minimum(1.0, max_step / np.maximum(norms, 1e-300))


class MultidimIRT:
    """Exploratory multidimensional 2PL calibration (scikit-learn style estimator).

    Parameters
    ----------
    n_dims : int, K >= 1
    method : "auto" (EM for K <= 2, MH-RM beyond), "em" or "mhrm"
    quadpts : points per dimension of the EM grid (default 61 / 31 for K = 1 / 2)
    max_iter : EM iterations (default 500), or MH-RM iterations after burn-in (default 2000)
    tol : EM convergence: largest change of the rotation-invariant A A^T and d between
        iterations
    mhrm_tol : MH-RM convergence: largest (gain-scaled) change below it in 3 consecutive
        iterations after burn-in (mirt's MHRM rule)
    prior_a_sd, prior_d_sd : sd of the N(0, sd^2) priors on every loading and intercept (None: no
        prior on it, plain marginal ML)
    rotation : "varimax" (default), "none"; the fitted bank's loadings are rotated and oriented so
        that each factor's loadings sum to a positive number
    burn_in, mh_steps : MH-RM burn-in iterations (gain 1, a stochastic EM) and Metropolis sweeps
        per iteration
    rng : Generator (MH-RM only)
    callback : called after every iteration with ``{"iteration", "change"}`` (a progress bar)

    Attributes (after fit)
    ----------------------
    bank_ : MultidimBank, loglik_ : float (EM: marginal log-likelihood; MH-RM: NaN),
    n_parameters_ (exploratory: J (K + 1) - K (K - 1) / 2, as mirt), aic_, bic_ (as mirt's anova),
    n_iter_, converged_, method_, rotation_ (K x K orthogonal), history_ (list of per-iteration
    largest parameter change)
    """

    def __init__(self, n_dims: int = 2, *, method: str = "auto", quadpts: int | None = None,
                 max_iter: int | None = None, tol: float = TOL, prior_a_sd: float | None = 3.0,
                 prior_d_sd: float | None = 5.0, rotation: str = "varimax", burn_in: int = 100,
                 mh_steps: int = 3, mhrm_tol: float = 1e-3,
                 rng: np.random.Generator | None = None, callback=None):
        self.n_dims, self.callback = n_dims, callback
        self.method = method
        self.quadpts = quadpts
        self.max_iter = max_iter
        self.tol = tol
        self.prior_a_sd = prior_a_sd
        self.prior_d_sd = prior_d_sd
        self.rotation = rotation
        self.burn_in = burn_in
        self.mh_steps = mh_steps
        self.mhrm_tol = mhrm_tol
        self.rng = rng

    def __repr__(self) -> str:
        """The settings that differ from the defaults, as scikit-learn shows an estimator."""
        from .._repr import changed_settings

        return f"MultidimIRT({changed_settings(self)})"

    # ---------------------------------------------------------------- public
    def fit(self, responses) -> "MultidimIRT":
        k = self._check_settings()
        method = self.method if self.method != "auto" else ("em" if k <= 2 else "mhrm")
        if method not in ("em", "mhrm"):
            raise ConfigError(f"unknown method {self.method!r}; use 'auto', 'em' or 'mhrm'")
        if self.rotation not in ("varimax", "none"):
            raise ConfigError(f"unknown rotation {self.rotation!r}; use 'varimax' or 'none' (the bank keeps "
                              f"uncorrelated factors; bank_.factor_loadings(rotate=...) shows oblique ones)")
        y, _, item_ids, weights = _as_arrays(responses)
        obs = _check_binary(y)
        empty = np.flatnonzero(~obs.any(axis=0))
        if empty.size:
            raise ResponseDataError(f"item(s) {item_ids[empty[:5]].tolist()} have no observed response; drop them")
        if k >= y.shape[1]:
            raise ConfigError(f"n_dims={k} needs more than {k} items; the responses have {y.shape[1]}")
        A, d = _start_values(y, obs, k)
        prior = self._prior_precision(k)
        if method == "em":
            A, d = self._fit_em(y, obs, weights, A, d, prior)
        else:
            from ..validation import as_generator

            rng = as_generator(0 if self.rng is None else self.rng)
            A, d = self._fit_mhrm(y, obs, weights, A, d, prior, rng)
        R = np.eye(k)
        if self.rotation == "varimax" and k > 1:
            _, R = varimax(A)
        R = R @ _orient(A @ R)
        self.rotation_ = R
        self.method_ = method
        self.bank_ = MultidimBank(item_ids, A @ R, d)
        n = float(y.shape[0] if weights is None else np.sum(weights))
        self.n_parameters_ = y.shape[1] * (k + 1) - k * (k - 1) // 2   # rotation: K(K-1)/2 fewer
        self.aic_ = -2 * self.loglik_ + 2 * self.n_parameters_
        self.bic_ = -2 * self.loglik_ + np.log(n) * self.n_parameters_
        if not self.converged_:
            from ..errors import warn_user

            warn_user(f"the {k}-dimensional 2PL ({method}) did not converge in {self.n_iter_} iterations "
                      f"(last change {self.history_[-1]:.2g}): raise max_iter", UserWarning)
        return self

    def predict_proba(self, responses, *, rng: np.random.Generator | None = None, n_draws: int = 200):
        """Posterior predictive P(y_ij = 1 | the subject's observed responses) for every cell.

        Theta is integrated out: on the product grid for K <= 2 (exact up to quadrature), by
        Metropolis draws (``n_draws`` after a burn-in of 50) for K >= 3. Shape (n_subjects, n_items).
        """
        self._check_fitted()
        y = self._bank_values(responses)
        obs = _check_binary(y)
        if y.shape[1] != len(self.bank_):
            raise ResponseDataError(f"responses have {y.shape[1]} items; the bank has {len(self.bank_)}")
        bank = self.bank_
        if bank.n_dims <= 2:
            nodes, logw = product_grid(bank.n_dims, self.quadpts if bank.n_dims <= 2 else 15)
            z = nodes @ bank.loadings.T + bank.intercepts
            out, pz = np.empty(y.shape), expit(z)
            for rows, post, _ in posterior_blocks(y, obs, z, logw):
                out[rows] = post @ pz
            return out
        from ..validation import as_generator

        rng = as_generator(0 if rng is None else rng)
        theta = np.zeros((y.shape[0], bank.n_dims))
        sampler = _Metropolis(y, obs, bank.loadings, bank.intercepts, theta, rng)
        sampler.run(50, adapt=True)
        acc = np.zeros(y.shape)
        for _ in range(n_draws):
            sampler.run(1, adapt=False)
            acc += expit(sampler.theta @ bank.loadings.T + bank.intercepts)
        return acc / n_draws

    def score(self, responses) -> tuple[np.ndarray, np.ndarray]:
        """EAP theta (n, K) and posterior covariance (n, K, K) on the product grid (K <= 3)."""
        self._check_fitted()
        y = self._bank_values(responses)
        obs = _check_binary(y)
        if self.bank_.n_dims > 3:
            raise ConfigError("grid EAP is available for K <= 3; use predict_proba for larger K")
        return grid_eap(y, obs, self.bank_, self.quadpts if self.bank_.n_dims <= 2 else 15)

    # ---------------------------------------------------------------- internals
    def _bank_values(self, responses) -> np.ndarray:
        """The responses in the bank's item order: a labelled DataFrame or ResponseMatrix
        aligned by item id (an item the bank lacks is an error), an array as given."""
        from ..responses import ResponseMatrix, as_labelled_responses

        labelled = as_labelled_responses(responses)
        if isinstance(labelled, ResponseMatrix):
            return labelled.aligned_values(self.bank_.item_ids)
        return _as_arrays(labelled)[0]

    def _check_settings(self) -> int:
        """n_dims, after a ConfigError on any setting out of its range."""
        for name, low, optional in (("n_dims", 1, False), ("quadpts", 3, True), ("max_iter", 1, True),
                                    ("burn_in", 0, False), ("mh_steps", 1, False)):
            v = getattr(self, name)
            if not (optional and v is None) and (isinstance(v, bool) or not isinstance(v, (int, np.integer))
                                                 or v < low):
                raise ConfigError(f"{name} must be a whole number >= {low}, got {v!r}")
        for name, optional in (("prior_a_sd", True), ("prior_d_sd", True), ("tol", False), ("mhrm_tol", False)):
            v = getattr(self, name)
            if not (optional and v is None) and not (isinstance(v, (int, float, np.number))
                                                     and not isinstance(v, bool) and 0 < v < np.inf):
                raise ConfigError(f"{name} must be a positive number{' or None' if optional else ''}, got {v!r}")
        return int(self.n_dims)

    def _check_fitted(self):
        if not hasattr(self, "bank_"):
            raise ConfigError("this MultidimIRT is not fitted yet; call fit(responses) first")

    def _prior_precision(self, k):
        pa = 0.0 if self.prior_a_sd is None else 1.0 / float(self.prior_a_sd) ** 2
        pd_ = 0.0 if self.prior_d_sd is None else 1.0 / float(self.prior_d_sd) ** 2
        return np.r_[np.full(k, pa), pd_]

    def _fit_em(self, y, obs, weights, A, d, prior):
        k = A.shape[1]
        nodes, logw = product_grid(k, self.quadpts)
        X = np.hstack([nodes, np.ones((nodes.shape[0], 1))])  # (Q, K+1)
        estep = GridEStep(y, obs, weights, logw)  # blocked, on unique patterns
        beta = np.hstack([A, d[:, None]])  # (J, K+1)
        history = []
        converged = False
        loglik = -np.inf
        for it in range(1, int(self.max_iter or 500) + 1):
            z = X @ beta.T  # (Q, J)
            loglik, r, n = estep(z)  # r: (Q, J) expected correct, n: expected observed
            p = expit(z)
            G = (r - n * p).T @ X - beta * prior
            H = _weighted_gram(n * p * (1 - p), X) + np.diag(prior)
            step = _newton_step(G, H + 1e-10 * np.eye(k + 1), max_step=2.0)
            new_beta = beta + step
            change = _invariant_change(beta, new_beta, k)
            beta = new_beta
            history.append(change)
            if self.callback is not None:
                self.callback({"iteration": it, "change": change})
            if change < self.tol:
                converged = True
                break
        self.n_iter_, self.converged_, self.history_, self.loglik_ = it, converged, history, loglik
        return beta[:, :k], beta[:, k]

    def _fit_mhrm(self, y, obs, weights, A, d, prior, rng):
        k = A.shape[1]
        n_subj = y.shape[0]
        y1 = np.where(obs, y, 0.0)
        w = np.ones(n_subj) if weights is None else weights
        beta = np.hstack([A, d[:, None]])
        sampler = _Metropolis(y, obs, A, d, np.zeros((n_subj, k)), rng)
        sampler.run(20, adapt=True)
        gamma_info = None
        history = []
        converged = False
        window: list[float] = []
        total = int(self.burn_in) + int(self.max_iter or 2000)
        for it in range(1, total + 1):
            sampler.A, sampler.d = beta[:, :k], beta[:, k]
            sampler.run(int(self.mh_steps), adapt=it <= self.burn_in)
            X = np.hstack([sampler.theta, np.ones((n_subj, 1))])
            p = expit(X @ beta.T)
            G = ((y1 - obs * p) * w[:, None]).T @ X - beta * prior
            H = _weighted_gram(obs * p * (1 - p) * w[:, None], X) + np.diag(prior)
            gain = 1.0 if it <= self.burn_in else 1.0 / (it - self.burn_in + 1) ** 0.75
            gamma_info = H if gamma_info is None else gamma_info + gain * (H - gamma_info)
            step = gain * _newton_step(G, gamma_info + 1e-10 * np.eye(k + 1), max_step=2.0)
            beta = beta + step
            change = float(np.abs(step).max())
            history.append(change)
            if self.callback is not None:
                self.callback({"iteration": it, "change": change})
            if it > self.burn_in:
                window.append(change)
                if len(window) >= 3 and max(window[-3:]) < self.mhrm_tol:
                    converged = True
                    break
        self.n_iter_, self.converged_, self.history_, self.loglik_ = it, converged, history, float("nan")
        return beta[:, :k], beta[:, k]


class _Metropolis:
    """Vectorized random-walk Metropolis for theta of every subject under the M2PL and an
    N(0, I) prior; the proposal scale adapts towards an acceptance rate of 0.3 while ``adapt``."""

    def __init__(self, y, obs, A, d, theta, rng):
        self.y1 = np.where(obs, y, 0.0)
        self.obs = obs.astype(float)
        self.A, self.d, self.theta, self.rng = A, d, theta.copy(), rng
        self.scale = np.full(theta.shape[0], 2.4 / np.sqrt(theta.shape[1]) * 0.5)

    def _logpost(self, theta):
        # y log s(z) + (1 - y) log s(-z) = y z - log(1 + e^z) on observed cells
        z = theta @ self.A.T + self.d
        return ((self.y1 * z).sum(1) - (self.obs * _softplus(z)).sum(1)
                - 0.5 * (theta**2).sum(1))

    def run(self, n_steps: int, adapt: bool):
        cur = self._logpost(self.theta)
        for _ in range(n_steps):
            prop = self.theta + self.scale[:, None] * self.rng.standard_normal(self.theta.shape)
            new = self._logpost(prop)
            accept = np.log(self.rng.random(cur.shape)) < new - cur
            self.theta[accept] = prop[accept]
            cur = np.where(accept, new, cur)
            if adapt:
                self.scale *= np.exp(0.5 * (accept - 0.3))
        return self.theta


# ============================================================================ dimension choice
@dataclass
class DimensionSelection:
    """Result of :func:`select_dimension`.

    table : DataFrame, one row per K: log_loss, accuracy, brier, delta (log-loss minus the best),
        delta_se (its standard error over held-out cells), accuracy_error (subject holdout only:
        mean |predicted - observed| accuracy on the unseen items, tinyBenchmarks' metric), n_iter,
        converged, seconds
    n_dims : the chosen K (smallest K within one SE of the best log-loss, or the best with
        rule="min")
    best_n_dims : K with the lowest held-out log-loss
    models : dict K -> fitted MultidimIRT (on the training part)
    """

    table: pd.DataFrame
    n_dims: int
    best_n_dims: int
    models: dict


def _holdout(y, obs, holdout, test_size, rng):
    """Training matrix and a boolean mask of held-out cells (to predict)."""
    n, j = y.shape
    if holdout == "cells":
        cells = np.flatnonzero(obs.ravel())
        pick = rng.choice(cells, size=max(1, int(round(test_size * cells.size))), replace=False)
        mask = np.zeros(n * j, dtype=bool)
        mask[pick] = True
        mask = mask.reshape(n, j)
        train = np.where(mask, np.nan, y)
        return train, mask, None
    if holdout == "subjects":
        n_test = max(1, int(round(test_size * n)))
        test_rows = np.zeros(n, dtype=bool)
        test_rows[rng.choice(n, size=n_test, replace=False)] = True
        unseen_items = np.zeros(j, dtype=bool)
        unseen_items[rng.choice(j, size=j // 2, replace=False)] = True
        mask = test_rows[:, None] & unseen_items[None, :] & obs
        return y, mask, test_rows
    raise ConfigError(f"unknown holdout {holdout!r}; use 'cells' or 'subjects'")


def select_dimension(responses, dims=None, *, holdout: str = "cells",
                     test_size: float = 0.2, rule: str = "one_se",
                     rng: np.random.Generator | None = None, **fit_kwargs) -> DimensionSelection:
    """Choose the number of dimensions by held-out prediction error.

    ``holdout="cells"``: a random ``test_size`` share of observed cells is masked, every K is fitted
    on the rest, and each masked cell is predicted from its subject's training cells (posterior
    predictive). ``holdout="subjects"`` (tinyBenchmarks): a ``test_size`` share of subjects is
    held out of the fit; each of them is scored on a random half of the items and the other half
    is predicted. ``dims``: the K compared (default 1-5, those below the number of items;
    the table's ``converged`` column says which fits stopped at ``max_iter``). The chosen K is the smallest whose held-out log-loss is within one standard error
    of the best (paired differences over held-out cells), or the best outright with ``rule="min"``.
    """
    import time
    import warnings

    if rule not in ("one_se", "min"):
        raise ConfigError(f"unknown rule {rule!r}; use 'one_se' or 'min'")
    if not 0 < test_size < 1:
        raise ConfigError(f"test_size must be in (0, 1), got {test_size}")
    y, _, item_ids, _ = _as_arrays(responses)
    dims = sorted({int(k) for k in (range(1, min(6, y.shape[1])) if dims is None else dims)})
    if not dims or dims[0] < 1:
        raise ConfigError(f"dims must be positive integers, got {dims}")
    rng = rng if rng is not None else np.random.default_rng(0)
    obs = _check_binary(y)
    train, mask, test_rows = _holdout(y, obs, holdout, test_size, rng)
    if test_rows is None:
        fit_data = train
        pred_input = train
    else:
        fit_data = y[~test_rows]
        pred_input = np.where(mask, np.nan, y)[test_rows]
    keep = ~np.isnan(fit_data).all(axis=0)
    if not keep.all():
        raise ResponseDataError(f"{(~keep).sum()} item(s) have no training response; lower test_size")
    truth = y[mask]
    # Prediction is insensitive to the last digits of the fit, and over-factored models (K above
    # the true dimension) have nearly flat directions that EM and MH-RM crawl along: looser
    # defaults keep the comparison fast (override through fit_kwargs).
    fit_kwargs.setdefault("tol", 1e-3)
    fit_kwargs.setdefault("mhrm_tol", 2e-3)
    fit_kwargs.setdefault("max_iter", 300)
    losses, rows, models = {}, [], {}
    for k in dims:
        t0 = time.perf_counter()
        with warnings.catch_warnings():   # a fit stopped at max_iter: the table's "converged"
            warnings.filterwarnings("ignore", "the .* did not converge", UserWarning)
            model = MultidimIRT(k, rng=np.random.default_rng(rng.integers(2**32)), **fit_kwargs).fit(fit_data)
        proba = model.predict_proba(pred_input, rng=np.random.default_rng(rng.integers(2**32)))
        p = np.clip(proba[mask] if test_rows is None else proba[mask[test_rows]], 1e-12, 1 - 1e-12)
        loss = -(truth * np.log(p) + (1 - truth) * np.log1p(-p))
        losses[k] = loss
        row = {"n_dims": k, "log_loss": loss.mean(), "accuracy": np.mean((p > 0.5) == (truth == 1)),
               "brier": np.mean((p - truth) ** 2), "n_iter": model.n_iter_,
               "converged": model.converged_, "seconds": time.perf_counter() - t0}
        if test_rows is not None:
            m = mask[test_rows]
            pred_acc = np.where(m, proba, 0).sum(1) / np.maximum(m.sum(1), 1)
            true_acc = np.where(m, y[test_rows], 0).sum(1) / np.maximum(m.sum(1), 1)
            row["accuracy_error"] = float(np.mean(np.abs(pred_acc - true_acc)[m.any(1)]))
        rows.append(row)
        models[k] = model
    table = pd.DataFrame(rows)
    best = int(table.loc[table.log_loss.idxmin(), "n_dims"])
    deltas = {k: losses[k] - losses[best] for k in dims}
    table["delta"] = [deltas[k].mean() for k in dims]
    table["delta_se"] = [deltas[k].std(ddof=1) / np.sqrt(deltas[k].size) if deltas[k].size > 1 else 0.0
                         for k in dims]
    if rule == "min":
        chosen = best
    else:
        ok = table[table.delta <= table.delta_se]
        chosen = int(ok.n_dims.min())
    return DimensionSelection(table, chosen, best, models)
