"""Random generators of a CAT: one child generator per examinee.

Every examinee draws its uniforms from its own generator (``rng.spawn(n)``), a fixed number
per selection (``config.uniforms_per_step``), so a batched simulation and sessions run one by
one give the same item sequences. :func:`generator_state` / :func:`generator_from_state` save and
restore a generator exactly (a resumed session draws what the uninterrupted one would have).
"""
from __future__ import annotations

import zlib

import numpy as np

from ..errors import ConfigError

__all__ = ["examinee_generators", "subject_generator", "generator_state", "generator_from_state"]


def examinee_generators(rng, n: int) -> list:
    """One child Generator per examinee: ``rng.spawn(n)`` (what
    :func:`~atlascat.cat.simulate.simulate_cat` uses)."""
    return _as_generator(rng).spawn(n)


def subject_generator(seed: int, subject_id) -> np.random.Generator:
    """The Generator of one model's draws: seeded by ``seed`` and the model's id (its CRC-32),
    so a model replayed among others (:meth:`BenchmarkPredictor.replay` with ``seed``, ``atlas
    simulate``) and the same model tested live with the same seed (its name: ``--llm``, a
    ``replay:`` model's id, ``simulate:THETA``'s) are asked the same items, and two models draw
    independently."""
    from ..validation import check_seed

    key = zlib.crc32(str(subject_id).encode("utf-8"))
    return np.random.default_rng(np.random.SeedSequence([check_seed(seed) % 2 ** 64, key]))


def _as_generator(rng) -> np.random.Generator:
    """A numpy Generator from a Generator (as is), an int seed or None (fresh entropy)."""
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)):
        return np.random.default_rng(int(rng))
    raise ConfigError(f"rng must be a numpy Generator, an int seed or None, got {type(rng).__name__}")


def generator_state(rng: np.random.Generator) -> dict:
    """The generator's bit-generator state as plain JSON values (numpy arrays as lists)."""
    return _plain(rng.bit_generator.state)


def generator_from_state(state: dict) -> np.random.Generator:
    """A Generator in the state :func:`generator_state` saved."""
    bitgen = getattr(np.random, state["bit_generator"])()
    bitgen.state = state
    return np.random.Generator(bitgen)


def _plain(state):
    if isinstance(state, dict):
        return {k: _plain(v) for k, v in state.items()}
    if isinstance(state, np.ndarray):
        return state.tolist()
    if isinstance(state, np.integer):
        return int(state)
    return state
