"""Item-parameter priors for MAP-EM calibration (Mislevy, 1986).

Calibration maximizes ``log L(data | items) + sum_j log p(item_j)``. Each prior below is a
density of a *natural* parameter (a or c); the calibration engine optimizes internal,
well-conditioned parameters (log a, logit c), and every prior supplies the log density and its
first two derivatives with respect to that internal parameter. Because the objective is the
density of the natural parameter (no Jacobian term), the MAP estimate does not depend on the
internal parameterization, with one deliberate exception: :class:`LogitNormalPrior` is a normal
density *on the logit scale*, which is what mirt's ``norm`` prior on its internal ``logit(g)``
does.

Priors on the guessing parameter c (internal gamma = logit c, c = sigma(gamma)):

- :class:`BetaPrior` ``beta(alpha, beta)``:  log p(c) = (alpha - 1) log c + (beta - 1) log(1 - c)
  d/dgamma = (alpha - 1)(1 - c) - (beta - 1) c;  d2/dgamma2 = -(alpha + beta - 2) c (1 - c).
  ``beta(5, 17)`` (mode 0.2) is the classic BILOG-style choice for 4-option items.
- :class:`LogitNormalPrior` ``logitnorm(mu, sigma)``: log p = -(gamma - mu)^2 / (2 sigma^2).

Priors on the slope a:

- :class:`LogNormalPrior` ``lognorm(mu, sigma)`` (requires a > 0; the engine then optimizes
  alpha = log a): log p(a) = -log a - (log a - mu)^2 / (2 sigma^2);
  d/dalpha = -1 - (alpha - mu) / sigma^2;  d2/dalpha2 = -1 / sigma^2.
- :class:`NormalPrior` ``norm(mu, sigma)`` (a may be negative, raw a is optimized):
  log p(a) = -(a - mu)^2 / (2 sigma^2).

Specs are parsed from strings by :func:`parse_prior` (``"beta(5,17)"``, ``"beta:5,17"``,
``"lognorm(0,0.5)"``, ``"logitnorm(-1.4,1)"``, ``"norm(1,1)"``).

References
----------
Mislevy, R. J. (1986). Bayes modal estimation in item response models. Psychometrika 51, 177-195.
Chalmers, R. P. (2012). mirt: A multidimensional item response theory package for the R
environment. Journal of Statistical Software 48(6).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .special import expit

__all__ = ["BetaPrior", "LogitNormalPrior", "LogNormalPrior", "NormalPrior", "parse_prior"]


@dataclass(frozen=True)
class BetaPrior:
    """Beta(alpha, beta) density on c (or u), evaluated at c = sigma(gamma)."""

    alpha: float
    beta: float
    target = "c"
    internal = "logit"

    def __post_init__(self):
        if not (self.alpha >= 1 and self.beta >= 1):
            raise ConfigError(
                f"beta prior needs alpha >= 1 and beta >= 1 (a proper mode), got "
                f"beta({self.alpha}, {self.beta}); e.g. beta(5,17) has its mode at 0.2"
            )

    def terms(self, gamma):
        """(log p, d log p / d gamma, d2 log p / d gamma2) at internal gamma = logit c."""
        from scipy.special import betaln  # lazy: only a calibration with a beta prior needs it

        c = expit(gamma)
        logp = ((self.alpha - 1) * np.log(np.maximum(c, 1e-300))
                + (self.beta - 1) * np.log(np.maximum(1 - c, 1e-300)) - betaln(self.alpha, self.beta))
        grad = (self.alpha - 1) * (1 - c) - (self.beta - 1) * c
        hess = -(self.alpha + self.beta - 2) * c * (1 - c)
        return logp, grad, hess

    @property
    def mode(self) -> float:
        s = self.alpha + self.beta - 2
        return 0.5 if s == 0 else (self.alpha - 1) / s

    def __str__(self) -> str:
        return f"beta({self.alpha:g},{self.beta:g})"


@dataclass(frozen=True)
class LogitNormalPrior:
    """Normal(mu, sigma) density on gamma = logit c (mirt's ``norm`` prior on logit g)."""

    mu: float
    sigma: float
    target = "c"
    internal = "logit"

    def __post_init__(self):
        if not self.sigma > 0:
            raise ConfigError(f"logitnorm prior needs sigma > 0, got {self.sigma}")

    def terms(self, gamma):
        z = (gamma - self.mu) / self.sigma
        logp = -0.5 * z * z - np.log(self.sigma) - 0.5 * np.log(2 * np.pi)
        return logp, -z / self.sigma, np.full_like(np.asarray(gamma, float), -1.0 / self.sigma**2)

    @property
    def mode(self) -> float:
        return float(expit(self.mu))

    def __str__(self) -> str:
        return f"logitnorm({self.mu:g},{self.sigma:g})"


@dataclass(frozen=True)
class LogNormalPrior:
    """Log-normal(mu, sigma) density on a > 0; the engine optimizes alpha = log a."""

    mu: float
    sigma: float
    target = "a"
    internal = "log"

    def __post_init__(self):
        if not self.sigma > 0:
            raise ConfigError(f"lognorm prior needs sigma > 0, got {self.sigma}")

    def terms(self, alpha):
        z = (alpha - self.mu) / self.sigma
        logp = -alpha - 0.5 * z * z - np.log(self.sigma) - 0.5 * np.log(2 * np.pi)
        return logp, -1.0 - z / self.sigma, np.full_like(np.asarray(alpha, float), -1.0 / self.sigma**2)

    @property
    def mode(self) -> float:
        return float(np.exp(self.mu - self.sigma**2))

    def __str__(self) -> str:
        return f"lognorm({self.mu:g},{self.sigma:g})"


@dataclass(frozen=True)
class NormalPrior:
    """Normal(mu, sigma) density on the raw slope a."""

    mu: float
    sigma: float
    target = "a"
    internal = "raw"

    def __post_init__(self):
        if not self.sigma > 0:
            raise ConfigError(f"norm prior needs sigma > 0, got {self.sigma}")

    def terms(self, a):
        z = (a - self.mu) / self.sigma
        logp = -0.5 * z * z - np.log(self.sigma) - 0.5 * np.log(2 * np.pi)
        return logp, -z / self.sigma, np.full_like(np.asarray(a, float), -1.0 / self.sigma**2)

    @property
    def mode(self) -> float:
        return float(self.mu)

    def __str__(self) -> str:
        return f"norm({self.mu:g},{self.sigma:g})"


_KINDS = {"beta": BetaPrior, "logitnorm": LogitNormalPrior, "lognorm": LogNormalPrior,
          "norm": NormalPrior}
#: mirt's names for the same densities (mirt.model's PRIOR = (1-5, a1, lnorm, 0, 1))
_MIRT_NAMES = {"lnorm": "lognorm"}
_SPEC = re.compile(r"^\s*([a-z]+)\s*[(:]\s*([^,()]+)\s*,\s*([^,()]+?)\s*\)?\s*$")


def parse_prior(spec, target: str):
    """A prior object from a spec string (``"beta(5,17)"`` or ``"beta:5,17"``), an existing
    prior object, or None. ``target`` is "a" or "c": the parameter the prior is meant for."""
    if spec is None or spec is False:
        return None
    if isinstance(spec, tuple(_KINDS.values())):
        prior = spec
    else:
        text = str(spec).strip().lower()
        if text in ("", "none", "off"):
            return None
        match = _SPEC.match(text)
        kind = _MIRT_NAMES.get(match.group(1), match.group(1)) if match else None
        if kind not in _KINDS:
            raise ConfigError(
                f"cannot parse prior {spec!r}; write e.g. 'beta(5,17)' or 'logitnorm(-1.4,1)' "
                "for c, 'lognorm(0,0.5)' (mirt's lnorm) or 'norm(1,1)' for a"
            )
        try:
            p1, p2 = float(match.group(2)), float(match.group(3))
        except ValueError:
            raise ConfigError(f"prior {spec!r} has non-numeric parameters") from None
        prior = _KINDS[kind](p1, p2)
    if prior.target != target:
        allowed = [k for k, v in _KINDS.items() if v.target == target]
        raise ConfigError(f"prior {prior} is not a prior for {target!r}; use one of {allowed}")
    return prior
