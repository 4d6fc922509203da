"""Random generators of a CAT: one child generator per examinee.

Every examinee draws its uniforms from its own generator (``rng.spawn(n)``), a fixed number
per selection (``config.uniforms_per_step``), so a batched simulation and sessions run one by
one give the same item sequences.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError

__all__ = ["examinee_generators"]


def examinee_generators(rng, n: int) -> list:
    """One child Generator per examinee: ``rng.spawn(n)`` (what
    :func:`~atlascat.cat.simulate.simulate_cat` uses)."""
    return _as_generator(rng).spawn(n)


def _as_generator(rng) -> np.random.Generator:
    """A numpy Generator from a Generator (as is), an int seed or None (fresh entropy)."""
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)):
        return np.random.default_rng(int(rng))
    raise ConfigError(f"rng must be a numpy Generator, an int seed or None, got {type(rng).__name__}")
