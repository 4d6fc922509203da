"""Optimal fixed forms: choose ``k`` items of a bank maximizing D-, A- or E-optimality.

A fixed form is an experimental design on the item bank: which items to administer to every
examinee. Its value is judged by the information it carries about theta over a *distribution*
of examinees g(theta) (a population, or a sample of thetas), not at one point.

Design over a theta distribution
--------------------------------
Let ``theta_q`` (q = 1..Q) be the nodes of a discretized g with weights ``w_q`` (sum 1). Every
item j contributes, at every node, a rank-one information matrix

    I_j(theta_q) = W_qj v_j v_j^T,

unidimensional 1PL-4PL: ``v_j = 1`` and ``W_qj`` is the item Fisher information
``P'^2 / (P Q)`` (``atlascat.irt.models.item_information``), divided by the item's dispersion
``phi_j`` where the bank has a ``dispersion`` column (continuous scores: the quasi-likelihood's
information, McCullagh and Nelder 1989, sec. 9.2; ``atlascat.irt.dispersion``, as the adaptive
test and ``estimate_ability`` read it); multidimensional 2PL
(``atlascat.irt.multidim.MultidimBank``): ``v_j = a_j`` (the loading vector) and
``W_qj = P_qj (1 - P_qj)``. The form S has, at every node, the prior-regularized information
matrix

    M_S(theta_q) = Lambda_0 + sum_{j in S} W_qj v_j v_j^T,

where ``Lambda_0`` is a prior precision (default: the inverse covariance of g, so that M is the
approximate posterior precision of an examinee drawn from g; Chaloner and Verdinelli 1995; set
``prior_precision=0`` for pure Fisher information). The three criteria are

    D:  Phi_D(S) = sum_q w_q log det M_S(theta_q)              (maximize)
    A:  Phi_A(S) = sum_q w_q trace M_S(theta_q)^{-1}           (minimize)
    E:  Phi_E(S) = min_{q in E-support} lambda_min M_S(theta_q) (maximize)

For one dimension these are the integrated log test information, the integrated asymptotic
variance 1 / (Lambda_0 + I_S), and the maximin test information (van der Linden 2005, ch. 5's
maximin target). The E-support is the part of the distribution where the minimum is taken: nodes
whose Mahalanobis distance to the mean of g is within the central ``coverage`` (default 0.95)
region, ``(theta - mu)^T C^{-1} (theta - mu) <= chi2_K^{-1}(coverage)`` (for N(0, 1):
|theta| <= 1.96). These are Bayesian (integrated over a prior) versions of the classical
criteria (Berger and Wong 2009, ch. 7 on IRT designs; the efficient-measurement chapter's section
4.2.5).

Algorithm
---------
Greedy forward selection followed by an exchange pass (Fedorov 1972; Mitchell 1974): every step
scores *all* candidate items at once with rank-one updates,

    log det(M + W v v^T)   = log det M + log(1 + W v^T M^{-1} v)
    tr (M + W v v^T)^{-1}  = tr M^{-1} - W v^T M^{-2} v / (1 + W v^T M^{-1} v)
    lambda_min(M + W v v^T) by batched eigenvalues (K > 1) or M + W (K = 1),

vectorized over (nodes x items); then each form slot in turn is removed and refilled with the
best candidate (possibly itself) until no swap improves the criterion.

References
----------
Berger, M. P. F. and Wong, W. K. (2009). An Introduction to Optimal Designs for Social and
    Biomedical Research. Wiley. (D-, A-, E-optimality; designs for IRT models; Bayesian designs.)
van der Linden, W. J. (2005). Linear Models for Optimal Test Design. Springer. (Test information
    targets; maximin assembly.)
Chaloner, K. and Verdinelli, I. (1995). Bayesian experimental design: a review. Statistical
    Science 10(3), 273-304.
Fedorov, V. V. (1972). Theory of Optimal Experiments. Academic Press. (Exchange algorithm.)
Segall, D. O. (1996). Multidimensional adaptive testing. Psychometrika 61, 331-354.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit, logsumexp
from scipy.stats import chi2

from ..errors import ConfigError
from ..irt.dispersion import bank_dispersion
from ..validation import as_generator

__all__ = [
    "CRITERIA",
    "ThetaDesign",
    "OptimalForm",
    "theta_design",
    "optimal_form",
    "form_criterion",
    "integrated_information",
    "random_forms",
    "random_form_baseline",
]

CRITERIA = ("D", "A", "E")
_JITTER = 1e-9
# Soft-minimum sharpness of the E-criterion's greedy phase and exchange stages.
_E_BETAS = (4.0, 16.0, 64.0)


# ---------------------------------------------------------------------------- theta design
@dataclass(frozen=True)
class ThetaDesign:
    """A discretized theta distribution: nodes (Q, K), weights (Q,) summing to 1, the E-support
    mask (Q,) and the prior precision Lambda_0 (K, K)."""

    nodes: np.ndarray
    weights: np.ndarray
    support: np.ndarray
    prior_precision: np.ndarray

    @property
    def n_dims(self) -> int:
        return self.nodes.shape[1]

    def __len__(self) -> int:
        return self.nodes.shape[0]


def _default_nodes(n_dims: int, quadpts: int | None):
    if n_dims == 1:
        q = 41 if quadpts is None else int(quadpts)
        nodes = np.linspace(-4.0, 4.0, q)[:, None]
        w = np.exp(-0.5 * nodes[:, 0] ** 2)
        return nodes, w / w.sum()
    per_dim = quadpts or {2: 15, 3: 7, 4: 5, 5: 4}.get(n_dims, 3)
    x, w1 = np.polynomial.hermite_e.hermegauss(int(per_dim))  # weight exp(-x^2/2)
    grids = np.meshgrid(*([x] * n_dims), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids], axis=1)
    wgrids = np.meshgrid(*([w1] * n_dims), indexing="ij")
    w = np.prod(np.stack([g.ravel() for g in wgrids], axis=1), axis=1)
    keep = w > 1e-12 * w.max()
    return nodes[keep], w[keep] / w[keep].sum()


def theta_design(thetas=None, n_dims: int = 1, *, quadpts: int | None = None,
                 coverage: float = 0.95, prior_precision=None) -> ThetaDesign:
    """Discretize the theta distribution the form is designed for.

    Parameters
    ----------
    thetas : None, Quadrature, (nodes, weights) tuple, or array (n,) / (n, K)
        None: N(0, I_K); for K = 1, 41 equally spaced nodes on [-4, 4] with normal weights (the
        mirt/catR convention), for K >= 2 a Gauss-Hermite product rule (15, 7, 5, 4 points per
        dimension for K = 2..5). A ``atlascat.irt.quadrature.Quadrature`` or a ``(nodes, weights)``
        tuple is used as given. A plain array is a *sample* of thetas (e.g. the calibration
        sample's EAPs), each with weight 1/n.
    n_dims : int, dimension K (used when ``thetas`` is None).
    coverage : float in (0, 1], central probability mass of g over which the E-criterion takes
        its minimum (Mahalanobis ball); 1 means every node.
    prior_precision : None, float or (K, K) array
        Lambda_0. None: the inverse covariance of the discretized g (about 1 for N(0, 1)).
    """
    if thetas is None:
        nodes, w = _default_nodes(int(n_dims), quadpts)
    elif hasattr(thetas, "nodes") and hasattr(thetas, "log_weights"):
        nodes = np.asarray(thetas.nodes, dtype=float).reshape(len(thetas.nodes), -1)
        w = np.exp(np.asarray(thetas.log_weights, dtype=float))
    elif isinstance(thetas, tuple) and len(thetas) == 2:
        nodes = np.asarray(thetas[0], dtype=float)
        nodes = nodes.reshape(nodes.shape[0], -1)
        w = np.asarray(thetas[1], dtype=float).reshape(-1)
    else:
        nodes = np.asarray(thetas, dtype=float)
        if nodes.ndim == 1:
            nodes = nodes[:, None]
        if nodes.ndim != 2 or nodes.shape[0] == 0:
            raise ConfigError(f"thetas must be a 1-D or (n, K) array of abilities; got shape {nodes.shape}")
        w = np.ones(nodes.shape[0])
    if w.shape != (nodes.shape[0],) or np.any(w < 0) or not np.isfinite(nodes).all() or w.sum() <= 0:
        raise ConfigError("theta design needs finite nodes and one non-negative weight per node")
    w = w / w.sum()
    k = nodes.shape[1]
    mean = w @ nodes
    cov = np.atleast_2d(((nodes - mean) * w[:, None]).T @ (nodes - mean))
    if not 0 < coverage <= 1:
        raise ConfigError(f"coverage must be in (0, 1], got {coverage}")
    if coverage >= 1 or nodes.shape[0] == 1 or np.linalg.matrix_rank(cov) < k:
        support = w > 0
    else:
        dist2 = np.einsum("qk,kl,ql->q", nodes - mean, np.linalg.inv(cov), nodes - mean)
        support = (dist2 <= chi2.ppf(coverage, k) + 1e-12) & (w > 0)
        if not support.any():
            support = w > 0
    if prior_precision is None:
        if np.linalg.matrix_rank(cov) < k:
            raise ConfigError("the theta sample has a singular covariance; pass prior_precision")
        lam0 = np.linalg.inv(cov)
    else:
        lam0 = np.asarray(prior_precision, dtype=float)
        if lam0.ndim == 0 and not lam0 >= 0:   # NaN too
            raise ConfigError(f"prior_precision must be a number >= 0, got {float(lam0)}")
        lam0 = np.eye(k) * float(lam0) if lam0.ndim == 0 else lam0
        if lam0.shape != (k, k) or not np.allclose(lam0, lam0.T) or np.linalg.eigvalsh(lam0).min() < 0:
            raise ConfigError(f"prior_precision must be a symmetric positive semi-definite {k}x{k} matrix")
    return ThetaDesign(nodes, w, support, lam0)


# ---------------------------------------------------------------------------- item terms
def _is_multidim(bank) -> bool:
    return hasattr(bank, "loadings") and hasattr(bank, "intercepts")


def _bank_dims(bank) -> int:
    return int(np.asarray(bank.loadings).shape[1]) if _is_multidim(bank) else 1


def _item_terms(bank, design: ThetaDesign):
    """(W, V): per-node information weights (Q, J) and item vectors (J, K)."""
    if _is_multidim(bank):
        a = np.asarray(bank.loadings, dtype=float)
        if a.shape[1] != design.n_dims:
            raise ConfigError(f"the bank has {a.shape[1]} dimensions but the theta design has "
                              f"{design.n_dims}; pass thetas with {a.shape[1]} columns")
        p = expit(design.nodes @ a.T + np.asarray(bank.intercepts, dtype=float))
        return p * (1.0 - p), a
    if design.n_dims != 1:
        raise ConfigError("a unidimensional bank needs a 1-D theta design")
    info = np.asarray(bank.information(design.nodes[:, 0]), dtype=float)
    phi = bank_dispersion(bank)   # continuous scores: the quasi-likelihood's information
    return (info if phi is None else info / phi), np.ones((len(bank), 1))


def _regularized(lam0: np.ndarray) -> np.ndarray:
    if np.linalg.eigvalsh(lam0).min() <= 0:
        return lam0 + _JITTER * np.eye(lam0.shape[0])
    return lam0


def _form_matrices(W, V, lam0, idx) -> np.ndarray:
    """M_S(theta_q) for one form (positions ``idx``): shape (Q, K, K)."""
    idx = np.asarray(idx, dtype=np.intp)
    return lam0 + np.einsum("qj,jk,jl->qkl", W[:, idx], V[idx], V[idx])


def _value(M, design: ThetaDesign, criterion: str) -> np.ndarray:
    """Criterion value(s) of matrices M (..., Q, K, K) in the criterion's natural direction."""
    if criterion == "D":
        sign, logdet = np.linalg.slogdet(M)
        logdet = np.where(sign > 0, logdet, -np.inf)
        return logdet @ design.weights
    if criterion == "A":
        return np.trace(np.linalg.inv(M), axis1=-2, axis2=-1) @ design.weights
    lam = np.linalg.eigvalsh(M[..., design.support, :, :])[..., 0]
    return lam.min(axis=-1)


def _to_score(value, criterion):
    """Internal score: larger is better for every criterion."""
    return -value if criterion == "A" else value


def _softmin_scale(M, design: ThetaDesign) -> float:
    """Mean smallest eigenvalue over the E-support: the unit of the soft minimum."""
    return float(np.linalg.eigvalsh(M[design.support])[:, 0].mean())


def _reduce_min(L, smooth):
    """Minimum of L over axis 0 (``smooth`` None), or its smooth surrogate for ``smooth`` =
    (beta, s): the soft minimum ``-(s / beta) log mean_q exp(-beta L_q / s)``, which tends to the
    minimum as beta grows and, unlike it, rewards raising every low node, not only the lowest."""
    if smooth is None:
        return L.min(axis=0)
    beta, scale = smooth
    return -(scale / beta) * (logsumexp(-beta * L / scale, axis=0) - np.log(L.shape[0]))


def _score(M, design: ThetaDesign, criterion: str, smooth=None) -> float:
    """Score (larger is better) of one form's matrices M (Q, K, K)."""
    if criterion == "E" and smooth is not None:
        lam = np.linalg.eigvalsh(M[design.support])[:, 0]
        return float(_reduce_min(lam[:, None], smooth)[0])
    return float(_to_score(_value(M, design, criterion), criterion))


def _candidate_scores(M, W, V, design: ThetaDesign, criterion: str, smooth=None) -> np.ndarray:
    """Score (larger is better) of M + W_qj v_j v_j^T for every item j, shape (J,).

    Rank-one identities (module docstring); vectorized over nodes and items (D and A: one matrix
    product; E: closed-form 2 x 2 eigenvalues, or batched eigenvalues chunked over items for
    K >= 3). ``smooth`` = (beta, scale) scores the E-criterion by its soft minimum.
    """
    Q, J = W.shape
    K = V.shape[1]
    w = design.weights
    if K == 1:
        m = M[:, 0, 0][:, None]
        if criterion == "D":
            return w @ np.log1p(W / m) + w @ np.log(M[:, 0, 0])
        if criterion == "A":
            return -(w @ (1.0 / (m + W)))
        return _reduce_min((m + W)[design.support], smooth)
    if criterion == "E" and K == 2:
        sup = design.support
        a = M[sup, 0, 0][:, None] + W[sup] * V[:, 0] ** 2
        c = M[sup, 1, 1][:, None] + W[sup] * V[:, 1] ** 2
        b = M[sup, 0, 1][:, None] + W[sup] * V[:, 0] * V[:, 1]
        lam = 0.5 * (a + c) - np.sqrt(0.25 * (a - c) ** 2 + b * b)
        return _reduce_min(lam, smooth)
    if criterion == "E":  # K >= 3: batched eigenvalues, in blocks of items
        sup = design.support
        Ms = M[sup]
        out = np.empty(J)
        step = max(1, 4_000_000 // (int(sup.sum()) * K * K))
        for s in range(0, J, step):
            sl = slice(s, s + step)
            mats = Ms[:, None] + W[sup, sl][:, :, None, None] * (V[sl, :, None] * V[sl, None, :])[None]
            out[sl] = _reduce_min(np.linalg.eigvalsh(mats)[..., 0], smooth)
        return out
    # v^T B v = vec(B) . vec(v v^T): one matrix product (Q x K^2) @ (K^2 x J) for all nodes and items
    Minv = np.linalg.inv(M)
    outer = (V[:, :, None] * V[:, None, :]).reshape(J, K * K)
    h = Minv.reshape(Q, K * K) @ outer.T
    if criterion == "D":
        return np.linalg.slogdet(M)[1] @ w + w @ np.log1p(W * h)
    h2 = (Minv @ Minv).reshape(Q, K * K) @ outer.T
    return -(np.trace(Minv, axis1=1, axis2=2) @ w - w @ (W * h2 / (1.0 + W * h)))


# ---------------------------------------------------------------------------- result
@dataclass
class OptimalForm:
    """Result of :func:`optimal_form`.

    Attributes
    ----------
    item_ids : ndarray of str, the chosen items in selection order (exchanges replace in place)
    indices : ndarray of int, their positions in the bank
    criterion : "D" | "A" | "E"
    value : float, criterion value of the final form (natural direction: A is minimized)
    greedy_value : float, the value after the greedy phase, before exchanges
    n_exchanges : int
    history : DataFrame with columns step, phase ("greedy" | "exchange"), added, removed, value
    design : ThetaDesign used
    """

    item_ids: np.ndarray
    indices: np.ndarray
    criterion: str
    value: float
    greedy_value: float
    n_exchanges: int
    history: pd.DataFrame
    design: ThetaDesign = field(repr=False)

    @property
    def k(self) -> int:
        return len(self.indices)

    def to_frame(self, bank) -> pd.DataFrame:
        """The chosen items with their parameters, in form order (``position`` 1..k; a bank
        that is itself a form has its own ``position`` replaced)."""
        df = bank.to_frame().iloc[self.indices].reset_index(drop=True)
        df = df.rename(columns={"X": "item_id"})   # a graded bank's mirt frame: a form file's ids
        df = df.drop(columns="position", errors="ignore")
        df.insert(0, "position", np.arange(1, self.k + 1))
        return df


# ---------------------------------------------------------------------------- main entry
def _check_criterion(criterion: str) -> str:
    crit = str(criterion).upper()
    if crit not in CRITERIA:
        raise ConfigError(f"unknown criterion {criterion!r}; choose one of D, A, E")
    return crit


def _candidate_mask(bank, candidates) -> np.ndarray:
    n = len(bank)
    if candidates is None:
        return np.ones(n, dtype=bool)
    sel = np.asarray(candidates)
    if sel.dtype == bool:
        if sel.shape != (n,):
            raise ConfigError(f"candidate mask has shape {sel.shape}; expected ({n},)")
        return sel.copy()
    mask = np.zeros(n, dtype=bool)
    mask[_positions(bank, sel)] = True
    return mask


def _positions(bank, items) -> np.ndarray:
    sel = np.asarray(items)
    if sel.dtype.kind in "iu":
        idx = sel.astype(np.intp)
        if idx.size and (idx.min() < 0 or idx.max() >= len(bank)):
            raise ConfigError(f"item positions must be in [0, {len(bank)}); got {idx.min()}..{idx.max()}")
        return idx
    flat = [str(i) for i in sel.reshape(-1)]
    return bank.index_of(flat).reshape(sel.shape)


def _bank_design(bank, thetas, **kwargs) -> ThetaDesign:
    """:func:`theta_design` of ``thetas`` for ``bank``: abilities of as many dimensions as it
    has (a 2-column sample for a unidimensional bank is refused, not a singular covariance)."""
    if not _is_multidim(bank):
        from ..irt.bank import check_bank
        from ..irt.polybank import PolyBank

        check_bank(bank, also=(PolyBank,), what="an ItemBank, a PolyBank or a MultidimBank")
    dims = _bank_dims(bank)
    design = theta_design(thetas, dims, **kwargs)
    if design.n_dims != dims:
        raise ConfigError(f"thetas have {design.n_dims} dimension(s) and the bank {dims}: give "
                          f"one ability per dimension of the bank")
    return design


def optimal_form(bank, k: int, criterion: str = "D", thetas=None, *, exchange: bool = True,
                 candidates=None, prior_precision=None, coverage: float = 0.95,
                 max_passes: int = 10, rng: np.random.Generator | None = None) -> OptimalForm:
    """Choose ``k`` items maximizing D-, A- or E-optimality over a theta distribution.

    Parameters
    ----------
    bank : ItemBank (unidimensional 1PL-4PL) or MultidimBank (K-dimensional 2PL)
    k : int, form length
    criterion : "D" (integrated log det of information), "A" (integrated trace of the inverse,
        minimized) or "E" (minimum eigenvalue over the central region of g); see module docstring
    thetas : see :func:`theta_design` (None: N(0, I_K) quadrature; or a sample of thetas)
    exchange : run the exchange pass after the greedy phase
    candidates : optional ids, positions or boolean mask of items allowed in the form
    prior_precision : Lambda_0 (None: inverse covariance of the theta distribution; 0: pure
        Fisher information)
    coverage : E-criterion support (central mass of g)
    max_passes : maximum number of exchange passes over the form
    rng : optional Generator or seed; used only to break exact ties between candidates at random
        (without it, the first item in bank order wins), so results are reproducible.

    Returns
    -------
    OptimalForm
    """
    crit = _check_criterion(criterion)
    design = _bank_design(bank, thetas, coverage=coverage, prior_precision=prior_precision)
    W, V = _item_terms(bank, design)
    lam0 = _regularized(design.prior_precision)
    allowed = _candidate_mask(bank, candidates)
    n_allowed = int(allowed.sum())
    if isinstance(k, (bool, np.bool_)) or not float(k).is_integer():
        raise ConfigError(f"form length k ({k!r}) must be a whole number of items")
    k = int(k)
    if not 1 <= k <= n_allowed:
        pool = "the bank's" if candidates is None else "the"
        raise ConfigError(f"form length k ({k}) must be between 1 and {pool} {n_allowed} "
                          f"{'items' if candidates is None else 'candidate items'}")
    jitter = None if rng is None else as_generator(rng).random(len(bank)) * 1e-12

    def pick(scores, mask):
        """Best allowed candidate; candidates within 1e-12 (relative) of the best are ties,
        broken by bank order, or at random when an rng is given."""
        s = np.where(mask, scores, -np.inf)
        top = s.max()
        ties = np.flatnonzero(s >= top - 1e-12 * max(1.0, abs(top)))
        if jitter is not None and ties.size > 1:
            return int(ties[np.argmax(jitter[ties])])
        return int(ties[0])

    ids = np.asarray(bank.item_ids)
    Q = len(design)
    rows: list[tuple] = []

    def natural(M):
        return float(_value(M, design, crit))

    # Greedy phase. E uses its soft minimum (beta = 4, unit = current mean eigenvalue): the exact
    # minimum is flat in every item that does not touch the single worst node, which makes a
    # greedy maximin build forms of flat, low-slope items.
    form: list[int] = []
    in_form = np.zeros(len(bank), dtype=bool)
    M = np.broadcast_to(lam0, (Q,) + lam0.shape).copy()
    for step in range(k):
        smooth = (_E_BETAS[0], _softmin_scale(M, design)) if crit == "E" else None
        j = pick(_candidate_scores(M, W, V, design, crit, smooth), allowed & ~in_form)
        form.append(j)
        in_form[j] = True
        M = M + W[:, j][:, None, None] * np.outer(V[j], V[j])
        rows.append((step + 1, "greedy", ids[j], None, natural(M)))
    greedy_value = rows[-1][-1]

    # Exchange phase: each slot in turn is refilled with the best candidate (possibly itself).
    # E runs stages of increasing beta, then the exact minimum; the best exact form is kept.
    best_form, best_score = list(form), _to_score(greedy_value, crit)
    n_exchanges = 0
    stages = (_E_BETAS + (None,)) if crit == "E" else (None,)
    for beta in stages if exchange else ():
        smooth = None if beta is None else (beta, _softmin_scale(M, design))
        current = _score(M, design, crit, smooth)
        for _ in range(int(max_passes)):
            improved = False
            for pos in range(k):
                r = form[pos]
                M_minus = M - W[:, r][:, None, None] * np.outer(V[r], V[r])
                scores = _candidate_scores(M_minus, W, V, design, crit, smooth)
                mask = allowed & ~in_form
                mask[r] = True
                j = pick(scores, mask)
                if j == r or scores[j] - current <= 1e-10 * max(1.0, abs(current)):
                    continue
                in_form[r], in_form[j] = False, True
                form[pos] = j
                M = _form_matrices(W, V, lam0, form)  # fresh sum: no drift from updates
                current = _score(M, design, crit, smooth)
                n_exchanges += 1
                improved = True
                rows.append((len(rows) + 1, "exchange", ids[j], ids[r], natural(M)))
            if not improved:
                break
        exact = _to_score(natural(M), crit)
        if exact > best_score:
            best_form, best_score = list(form), exact
    idx = np.asarray(best_form, dtype=np.intp)
    value = natural(_form_matrices(W, V, lam0, idx))
    history = pd.DataFrame(rows, columns=["step", "phase", "added", "removed", "value"])
    return OptimalForm(ids[idx].astype(str), idx, crit, value, float(greedy_value), n_exchanges,
                       history, design)


# ---------------------------------------------------------------------------- evaluation
def _forms_matrix(bank, forms) -> np.ndarray:
    """Positions (n_forms, k) of one or many forms; an item twice in one form is refused (its
    information would count once in the criterion and twice in the integrated information), and
    an empty form (k = 0, refused by :func:`optimal_form` and :func:`random_forms` too)."""
    idx = _positions(bank, forms)
    idx = idx[None, :] if idx.ndim == 1 else idx
    if idx.shape[1] == 0:   # as optimal_form's and random_forms' k: an empty form says nothing
        raise ConfigError(f"form length k (0) must be between 1 and the bank's {len(bank)} "
                          "items; the form is empty")
    srt = np.sort(idx, axis=1)
    dup = np.argwhere(srt[:, 1:] == srt[:, :-1])
    if dup.size:
        f, j = dup[0]
        raise ConfigError(f"item {str(bank.item_ids[srt[f, j]])!r} appears more than once in "
                          f"{'the form' if idx.shape[0] == 1 else f'form {f}'}; a form holds "
                          "distinct items")
    return idx


def form_criterion(bank, forms, criterion: str = "D", thetas=None, *, prior_precision=None,
                   coverage: float = 0.95):
    """Criterion value of one form (ids or positions, shape (k,)) or many (shape (n_forms, k)).

    Same definitions as :func:`optimal_form`; vectorized over forms (an indicator matrix times the
    per-item information terms). Returns a float for one form, an array for many.
    """
    crit = _check_criterion(criterion)
    design = _bank_design(bank, thetas, coverage=coverage, prior_precision=prior_precision)
    W, V = _item_terms(bank, design)
    lam0 = _regularized(design.prior_precision)
    idx = _forms_matrix(bank, forms)
    X = np.zeros((idx.shape[0], len(bank)))
    np.put_along_axis(X, idx, 1.0, axis=1)
    K = V.shape[1]
    outer = (V[:, :, None] * V[:, None, :]).reshape(len(bank), K * K)
    M = np.einsum("fj,qj,jm->fqm", X, W, outer).reshape(idx.shape[0], len(design), K, K) + lam0
    vals = _value(M, design, crit)
    return float(vals[0]) if np.asarray(forms).ndim == 1 else vals


def integrated_information(bank, forms, thetas=None) -> np.ndarray | float:
    """Integrated (expected) test information sum_q w_q I_S(theta_q) of one or many forms.

    Unidimensional: the test information averaged over g. Multidimensional: the trace of the
    Fisher information matrix averaged over g. No prior term.
    """
    design = _bank_design(bank, thetas, prior_precision=0.0)
    W, V = _item_terms(bank, design)
    per_item = (design.weights @ W) * (V**2).sum(axis=1)  # (J,)
    idx = _forms_matrix(bank, forms)
    vals = per_item[idx].sum(axis=1)
    return float(vals[0]) if np.asarray(forms).ndim == 1 else vals


#: the most random forms :func:`random_forms` draws (past it, their n_forms x n_items array
#: outgrows memory, and the median they give no longer moves)
MAX_RANDOM_FORMS = 10_000


def random_forms(n_items: int, k: int, n_forms: int, rng: np.random.Generator) -> np.ndarray:
    """``n_forms`` random forms of ``k`` distinct positions out of ``n_items``: (n_forms, k)."""
    if not 1 <= k <= n_items:
        raise ConfigError(f"form length k ({k}) must be between 1 and {n_items}")
    if not 1 <= n_forms <= MAX_RANDOM_FORMS:   # an n_forms x n_items array: memory runs out
        raise ConfigError(f"n_forms (CLI --random-forms) must be between 1 and "
                          f"{MAX_RANDOM_FORMS} (the median of 50 forms is the default), got "
                          f"{n_forms}")
    return np.argsort(as_generator(rng).random((int(n_forms), int(n_items))), axis=1)[:, :k]


def random_form_baseline(bank, form, criterion: str = "D", thetas=None, *, n_forms: int = 50,
                         rng: np.random.Generator, prior_precision=None) -> dict:
    """Compare a form with ``n_forms`` random forms of the same length (what the design buys).

    Returns a dict: ``value`` and ``random_median`` of the criterion, ``info`` and
    ``random_info_median`` of integrated information, ``info_ratio`` = info / random median, and
    ``fraction_beaten`` = share of random forms the form beats on the criterion.
    """
    crit = _check_criterion(criterion)
    idx = _forms_matrix(bank, form)[0]
    rand = random_forms(len(bank), idx.size, n_forms, rng)
    v = form_criterion(bank, idx, crit, thetas, prior_precision=prior_precision)
    rv = form_criterion(bank, rand, crit, thetas, prior_precision=prior_precision)
    info = integrated_information(bank, idx, thetas)
    rinfo = integrated_information(bank, rand, thetas)
    better = rv < v if crit != "A" else rv > v
    return {
        "criterion": crit,
        "k": int(idx.size),
        "value": float(v),
        "random_median": float(np.median(rv)),
        "info": float(info),
        "random_info_median": float(np.median(rinfo)),
        # no information in the random forms (every a = 0): the ratio is undefined (NaN)
        "info_ratio": float(info / np.median(rinfo)) if np.median(rinfo) > 0 else float("nan"),
        "fraction_beaten": float(np.mean(better)),
    }
