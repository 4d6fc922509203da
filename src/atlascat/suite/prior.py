"""The joint prior of a suite: a multivariate normal over the members' abilities.

Each member's items are unidimensional on its own theta_b (the member bank's IRT model); the
benchmarks move together, so the suite's prior is

    theta = (theta_1, ..., theta_B) ~ N(mu, Sigma),

estimated on calibration models from their whole-bank EAP thetas: mu the mean; on the
diagonal of Sigma the variance of the EAPs plus their mean posterior variance (the law of total
variance, Var theta = Var E[theta | y] + E Var[theta | y]); off it the EAPs' covariance divided
by the reliabilities r_b r_c, r_b = Var EAP_b / Var theta_b (in the normal model
EAP_b = mu_b + r_b (x_b - mu_b), so Cov(EAP_b, EAP_c) = r_b r_c Cov(theta_b, theta_c)).
Pairwise-complete estimates use every model on every pair of members it answered; the matrix
is then made positive definite (eigenvalues floored). ``resid_corr`` is the correlation of the
members' standardized score residuals, (score_b - g_b(theta_b)) / sd_b(theta_b), with g_b and
sd_b the member's score link curve and residual SD: what the published scores share beyond the
abilities (used to draw the residuals jointly when predicting the aggregate).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from ..errors import ConfigError
from .predict import residual_sd

__all__ = ["SuitePrior", "fit_prior", "fit_mixture", "member_thetas", "nearest_pd",
           "COMPONENTS"]

#: a model enters the prior fit of a member when it answered at least this share of its items
MIN_SHARE = 0.5
#: components of the prior's normal mixture (1: one multivariate normal)
COMPONENTS = 5


@dataclass
class SuitePrior:
    """N(mean, cov) over the members' thetas and the residual correlation of their scores.

    ``mixture``: optional ``{"weights": (C,), "means": (C, B), "covs": (C, B, B)}``, a normal
    mixture that replaces N(mean, cov) as the prior density (mean / cov stay its overall
    moments): the benchmarks' abilities are not jointly normal over the whole leaderboard
    (at a benchmark's floor the others still spread), and a mixture follows that."""

    names: tuple
    mean: np.ndarray
    cov: np.ndarray
    resid_corr: np.ndarray
    n_models: int = 0
    mixture: dict | None = None

    def __post_init__(self):
        self.names = tuple(str(n) for n in self.names)
        b = len(self.names)
        self.mean = np.asarray(self.mean, float).reshape(b)
        self.cov = np.asarray(self.cov, float).reshape(b, b)
        self.resid_corr = np.asarray(self.resid_corr, float).reshape(b, b)
        if not np.all(np.isfinite(self.cov)) or np.any(np.linalg.eigvalsh(self.cov) <= 0):
            raise ConfigError("the suite prior's covariance must be finite and positive definite")
        if self.mixture is not None:
            w = np.asarray(self.mixture["weights"], float)
            c = w.size
            self.mixture = {"weights": w / w.sum(),
                            "means": np.asarray(self.mixture["means"], float).reshape(c, b),
                            "covs": np.asarray(self.mixture["covs"], float).reshape(c, b, b)}

    @property
    def components(self):
        """(weights (C,), means (C, B), covs (C, B, B)) of the prior density."""
        if self.mixture is None:
            return np.ones(1), self.mean[None], self.cov[None]
        m = self.mixture
        return m["weights"], m["means"], m["covs"]

    def log_density(self, theta) -> np.ndarray:
        """log prior density at ``theta`` (..., B), up to one constant."""
        w, mu, cov = self.components
        prec = np.linalg.inv(cov)
        logdet = np.linalg.slogdet(cov)[1]
        q = np.stack([np.einsum("...i,ij,...j->...", theta - mu[c], prec[c], theta - mu[c])
                      for c in range(w.size)], -1)                     # (..., C)
        return logsumexp(np.log(w) - 0.5 * logdet - 0.5 * q, axis=-1)

    def to_dict(self) -> dict:
        r = lambda a: np.round(np.asarray(a, float), 6).tolist()  # noqa: E731
        d = {"names": list(self.names), "mean": r(self.mean), "cov": r(self.cov),
             "resid_corr": r(self.resid_corr), "n_models": int(self.n_models)}
        if self.mixture is not None:
            d["mixture"] = {k: r(v) for k, v in self.mixture.items()}
        return d

    @classmethod
    def from_dict(cls, d) -> "SuitePrior":
        return cls(tuple(d["names"]), d["mean"], d["cov"], d["resid_corr"],
                   int(d.get("n_models", 0)), d.get("mixture"))


def fit_mixture(x, n_components: int, *, iters: int = 200, ridge: float = 1e-3, seed: int = 0):
    """Normal mixture by EM (Dempster, Laird and Rubin, 1977) on complete rows ``x`` (N, B);
    started from the thirds (quantiles) of the rows' mean. Returns weights, means, covs."""
    n, b = x.shape
    order = np.argsort(x.mean(1))
    resp = np.zeros((n, n_components))
    for c, chunk in enumerate(np.array_split(order, n_components)):
        resp[chunk, c] = 1.0
    for _ in range(iters):
        nk = resp.sum(0) + 1e-12
        w = nk / n
        mu = (resp.T @ x) / nk[:, None]
        d = x[:, None, :] - mu[None]
        cov = np.einsum("nc,nci,ncj->cij", resp, d, d) / nk[:, None, None] + ridge * np.eye(b)
        prec = np.linalg.inv(cov)
        logdet = np.linalg.slogdet(cov)[1]
        q = np.einsum("nci,cij,ncj->nc", d, prec, d)
        logp = np.log(w) - 0.5 * logdet - 0.5 * q
        new = np.exp(logp - logsumexp(logp, axis=1, keepdims=True))
        if np.max(np.abs(new - resp)) < 1e-6:
            resp = new
            break
        resp = new
    return w, mu, cov


def nearest_pd(m, floor: float = 1e-4) -> np.ndarray:
    """Symmetric matrix with eigenvalues floored at ``floor`` (same eigenvectors)."""
    m = 0.5 * (np.asarray(m, float) + np.asarray(m, float).T)
    w, v = np.linalg.eigh(m)
    return (v * np.maximum(w, floor)) @ v.T


def member_thetas(member, responses) -> pd.DataFrame:
    """Whole-bank EAP theta, SE of the models in ``responses`` that answered at least
    :data:`MIN_SHARE` of the member's items: frame indexed by subject id."""
    from ..irt.ability import eap

    y = responses.aligned_values(member.bank.item_ids, extra="ignore")
    keep = np.isfinite(y).mean(1) >= MIN_SHARE
    theta, se = eap(y[keep], member.bank)
    return pd.DataFrame({"theta": theta, "se": se},
                        index=pd.Index(responses.subject_ids[keep].astype(str)))


def fit_prior(suite, responses: dict, scores: dict | None = None, *,
              components: int = COMPONENTS) -> SuitePrior:
    """Fit the suite prior on calibration models.

    ``suite``: a resolved :class:`~atlascat.suite.definition.Suite`; ``responses``: member name
    -> ResponseMatrix of the calibration models; ``scores``: member name -> published scores
    (0-1, a Series indexed by model name) for the residual correlation (identity without);
    ``components`` > 1: a normal mixture (:func:`fit_mixture`) on the models with every
    member's theta (at least 100 per component, else one normal), each component's diagonal
    plus the members' mean posterior variance.
    """
    names = suite.names
    missing = [n for n in names if n not in responses]
    if missing:
        raise ConfigError(f"fit_prior needs a response matrix for every member; missing {missing}")
    thetas, var_se, resid = {}, {}, {}
    for m in suite.members:
        t = member_thetas(m, responses[m.name])
        thetas[m.name] = t["theta"]
        var_se[m.name] = float(np.mean(t["se"] ** 2))
        if scores is not None and m.name in scores:
            s = scores[m.name].reindex(t.index).to_numpy(float)
            th = t["theta"].to_numpy(float)
            resid[m.name] = pd.Series((s - m.link.curve(th)) / residual_sd(m.link, th),
                                      index=t.index)
    th = pd.DataFrame(thetas)[names]
    cov_eap = th.cov(min_periods=30).to_numpy(float)
    var_theta = np.diag(cov_eap) + np.array([var_se[n] for n in names])
    rel = np.diag(cov_eap) / var_theta                      # EAP = mu + rel (x - mu)
    cov = cov_eap / np.outer(rel, rel)
    cov[np.diag_indices_from(cov)] = var_theta
    if not np.all(np.isfinite(cov)):
        raise ConfigError("fit_prior: some pair of members shares fewer than 30 calibration "
                          "models")
    corr = np.eye(len(names))
    if len(resid) == len(names):
        c = pd.DataFrame(resid)[names].corr(min_periods=30).to_numpy(float)
        corr = np.where(np.isfinite(c), c, np.eye(len(names)))
        corr = nearest_pd(corr, 1e-3)
        d = np.sqrt(np.diag(corr))
        corr = corr / np.outer(d, d)
    mixture = None
    complete = th.dropna().to_numpy(float)
    if components > 1 and len(complete) >= 100 * components:
        w, mu, cv = fit_mixture(complete, components)
        cv = cv + np.diag([var_se[n] for n in names])[None]
        mixture = {"weights": w, "means": mu, "covs": cv}
    return SuitePrior(tuple(names), th.mean().to_numpy(float), nearest_pd(cov),
                      corr, int(th.notna().any(axis=1).sum()), mixture)
