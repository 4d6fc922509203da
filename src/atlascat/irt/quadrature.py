"""Fixed quadrature grids for a normal latent trait.

mirt's default for one factor: 61 equally spaced nodes on [-6, 6] with weights proportional to
the N(mean, sd^2) density at the nodes (normalized to sum to 1). catR's ``eapEst`` integrates on
``nqp`` equally spaced nodes over ``[lower, upper]`` (33 on [-4, 4] in the reference CAT) the same
way.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from .special import logsumexp

from .defaults import QUADPTS, THETA_RANGE
from ..errors import ConfigError

__all__ = ["Quadrature", "normal_quadrature"]


@dataclass(frozen=True)
class Quadrature:
    """Nodes and normalized prior log-weights (``log_weights`` logsumexp to 0)."""

    nodes: np.ndarray
    log_weights: np.ndarray

    @property
    def weights(self) -> np.ndarray:
        return np.exp(self.log_weights)

    def __len__(self) -> int:
        return self.nodes.size


MAX_QUADPTS = 10001  # the most quadrature nodes any estimate takes (as the scoring check)


def normal_quadrature(quadpts: int = QUADPTS, theta_range=THETA_RANGE, mean: float = 0.0,
                      sd: float = 1.0) -> Quadrature:
    """Equally spaced nodes on ``theta_range``, weights proportional to the N(mean, sd) density."""
    lo, hi = float(theta_range[0]), float(theta_range[1])
    if quadpts < 2:
        raise ConfigError(f"quadpts must be at least 2, got {quadpts}")
    if not hi > lo:
        raise ConfigError(f"theta_range needs low < high, got {theta_range}")
    if quadpts > MAX_QUADPTS:   # beyond any use, and past memory long before numpy's limit
        raise ConfigError(f"quadpts (CLI --quadpts) must be at most {MAX_QUADPTS}, got {quadpts}")
    if not sd > 0:
        raise ConfigError(f"prior sd must be positive, got {sd}")
    nodes = np.linspace(lo, hi, int(quadpts))
    z = (nodes - mean) / sd
    # scipy.stats.norm.logpdf's own formula, bit for bit, without importing scipy.stats
    # (about 1 s of every command's start on a busy machine)
    log_w = -z**2 / 2.0 - np.log(np.sqrt(2 * np.pi)) - np.log(sd)
    return Quadrature(nodes, log_w - logsumexp(log_w))
