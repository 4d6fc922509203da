"""Answer sources for simulated adaptive tests.

An answer source gives, for a block of examinees (row indices) and the item each was just
given (bank positions), the score in [0, 1] or NaN for "no answer" (the engine then skips the
item: it is not scored and is counted in ``n_skipped``).

- :class:`ReplayAnswers`: replay a response matrix (real data): the answer is the recorded
  score; a missing cell is NaN.
- :class:`ModelAnswers`: draw from the IRT model at given thetas: y = 1{U < P_j(theta)} with U
  the examinee's next uniform from its own generator, or with answer seeds the uniform
  :func:`item_uniform` keyed by (the examinee's answer seed, item j), the draw of the live
  ``simulate:THETA:SEED`` subject; on a bank of continuous scores (a ``dispersion`` column)
  the Beta score with mean P_j(theta) and variance phi_j P Q at U
  (:func:`atlascat.irt.dispersion.draw_scores`).
- :class:`CallableAnswers`: any Python callable ``fn(subject_ids, item_ids) -> scores``
  (vectorized over the block), or ``fn(subject_id, item_id) -> score`` with
  ``vectorized=False``; this is what a live runner builds on.

Randomness: :class:`ModelAnswers` holds one generator per examinee and consumes exactly one
uniform per answer, drawn in blocks; so examinee i's answers are the same whether the
examinees run together or one by one with ``y = float(gen_i.random() < P)``.
"""
from __future__ import annotations

import hashlib
import sys
from typing import Callable

import numpy as np
from ..irt.special import expit

from ..errors import ResponseDataError

__all__ = ["AnswerSource", "ReplayAnswers", "ModelAnswers", "CallableAnswers", "UniformStreams",
           "model_probability", "item_uniform", "answer_seed", "simulated_models", "answer_keys",
           "keyed_uniforms"]


def item_uniform(seed: int, item_id: str) -> float:
    """A uniform(0, 1) number fixed by ``(seed, item_id)``: the same item always draws the same.

    The one rule a simulated model answers by: ``simulate:THETA:SEED`` live (an interrupted and
    resumed run sees the answers an uninterrupted one would) and each model of ``atlas
    simulate --thetas`` (:class:`ModelAnswers` with ``seeds``, its answer seed
    :func:`answer_seed`) answer item j by ``item_uniform(SEED, j) < P_j(theta)`` (a score: the
    Beta draw at it; a rating: the category at it).
    """
    digest = hashlib.sha256(f"{int(seed)}:{item_id}".encode()).digest()
    return (int.from_bytes(digest[:8], "little") >> 11) / float(1 << 53)


def answer_seed(seed: int, subject_id) -> int:
    """The answer seed (``simulate:THETA:SEED``'s SEED, in [0, 2**63)) of model ``subject_id``
    of ``atlas simulate --thetas`` run with ``--seed seed`` (:func:`item_uniform`): the first 63
    bits of sha256("answers:SEED:ID"), so two models draw independently; the live
    ``--subject simulate:THETA --llm ID --seed SEED`` (no SEED typed) answers with it
    (:func:`atlascat.live.subjects.simulated_answer_seed`)."""
    digest = hashlib.sha256(f"answers:{int(seed)}:{subject_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def model_probability(theta, a, b, c, u):
    """P = c + (u - c) sigma(a (theta - b)), elementwise (all arguments broadcast)."""
    return c + (u - c) * expit(a * (theta - b))


class AnswerSource:
    """Base class. ``subject_ids`` (n,) and ``answers(rows, items) -> float array``."""

    subject_ids: np.ndarray

    @property
    def n_examinees(self) -> int:
        return len(self.subject_ids)

    def answers(self, rows: np.ndarray, items: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError


class ReplayAnswers(AnswerSource):
    """Replay a response matrix aligned to the bank (ResponseMatrix or (n, J) array in bank order).

    Bank items the matrix lacks are all-missing (skipped when selected); matrix items the bank
    lacks are ignored.
    """

    def __init__(self, responses, bank, subject_ids=None):
        from ..responses import ResponseMatrix, as_labelled_responses
        from ..validation import check_scores

        responses = as_labelled_responses(responses)   # a labelled DataFrame: aligned by id
        if isinstance(responses, ResponseMatrix):
            overlap = np.isin(responses.item_ids, bank.item_ids)
            if not overlap.any():
                raise ResponseDataError(
                    f"none of the {responses.n_items} response items is in the bank (e.g. "
                    f"{list(responses.item_ids[:3])} vs bank {list(bank.item_ids[:3])}); check the "
                    "id format (R-style 'X514' vs '514': normalize_ids=True)"
                )
            self.values = responses.aligned_values(bank.item_ids, extra="ignore")
            ids = responses.subject_ids if subject_ids is None else subject_ids
        else:
            self.values = check_scores(responses)
            if self.values.ndim != 2 or self.values.shape[1] != len(bank):
                raise ResponseDataError(
                    f"responses have shape {self.values.shape}; expected (n_subjects, {len(bank)}) "
                    "in the bank's item order"
                )
            ids = np.arange(self.values.shape[0]) if subject_ids is None else subject_ids
        self.subject_ids = np.asarray([str(s) for s in ids], dtype=object)
        if len(self.subject_ids) != self.values.shape[0]:
            raise ResponseDataError(f"{len(self.subject_ids)} subject ids for "
                                    f"{self.values.shape[0]} response rows")
        self.answerable = (~np.isnan(self.values)).sum(axis=1)  # answered bank items per row

    def answers(self, rows, items):
        return self.values[rows, items]


class ModelAnswers(AnswerSource):
    """Answers drawn from the bank's IRT model at true abilities ``thetas``: 0/1, or on a bank
    with a ``dispersion`` column scores in [0, 1] with mean P_j(theta) and variance phi_j P Q
    (:func:`atlascat.irt.dispersion.draw_scores`, the answers the bank's quasi-likelihood
    describes).

    ``rngs``: one Generator per examinee (e.g. ``rng.spawn(n)``); examinee i's k-th answer uses
    the k-th uniform of ``rngs[i]``. ``dispersion``: phi_j per bank item of the drawn scores
    (default the bank's column; given, the answers are scores while the bank, scored by the
    Bernoulli likelihood, has none: :func:`atlascat.bankdir.adaptive.answering_bank`).
    ``seeds``: one answer seed per examinee instead of ``rngs`` (None): examinee i answers
    item j at ``item_uniform(seeds[i], item_id_j)``, as ``simulate:THETA:SEED`` does live.
    """

    def __init__(self, thetas, bank, rngs, subject_ids=None, dispersion=None, seeds=None):
        from ..validation import check_thetas

        self.thetas = check_thetas(thetas, "true thetas")
        n = self.thetas.size
        pd = sys.modules.get("pandas")   # a Series exists only where pandas is loaded
        if (subject_ids is None and pd is not None and isinstance(thetas, pd.Series)
                and not isinstance(thetas.index, pd.RangeIndex)):
            subject_ids = thetas.index   # a labelled Series: its index names the examinees
        ids = np.arange(n) if subject_ids is None else subject_ids
        self.subject_ids = np.asarray([str(s) for s in ids], dtype=object)
        if len(self.subject_ids) != n:
            raise ResponseDataError(f"{len(self.subject_ids)} subject ids for {n} thetas")
        if seeds is not None:
            self._keys = answer_keys(seeds, n, bank.item_ids)
        elif len(rngs) != n:
            raise ResponseDataError(f"{len(rngs)} generators for {n} examinees")
        from ..irt.dispersion import bank_dispersion

        self.a, self.b, self.c, self.u = bank.params
        self.phi = bank_dispersion(bank) if dispersion is None else np.asarray(dispersion,
                                                                                 float)
        if self.phi is not None and self.phi.shape != (len(bank.item_ids),):
            raise ResponseDataError(f"dispersion has {self.phi.size} values for a bank of "
                                    f"{len(bank.item_ids)} items (one per item)")
        self._stream = None if seeds is not None else UniformStreams(rngs)

    def uniforms(self, rows, items) -> np.ndarray:
        """The uniform each examinee in ``rows`` answers its item in ``items`` (bank
        positions) at: its stream's next, or :func:`item_uniform` of its answer seed."""
        if self._stream is not None:
            return self._stream.next(rows, 1)[:, 0]
        return keyed_uniforms(self._keys, rows, items)

    def answers(self, rows, items):
        rows = np.asarray(rows, dtype=np.intp)
        items = np.asarray(items, dtype=np.intp)
        u = self.uniforms(rows, items)
        p = model_probability(self.thetas[rows], self.a[items], self.b[items], self.c[items],
                              self.u[items])
        if self.phi is None:
            return (u < p).astype(float)
        from ..irt.dispersion import draw_scores

        return draw_scores(p, self.phi[items], u)


def simulated_models(seed: int, subject_ids) -> tuple[list, list]:
    """(selection Generators, answer seeds) of the models ``subject_ids`` drawn at their thetas
    by ``atlas simulate --thetas`` with ``--seed seed``: model ID draws its choices from
    :func:`~atlascat.cat.generators.subject_generator` (seed, ID) and answers item j at
    ``item_uniform(answer_seed(seed, ID), j)``: exactly the live ``--subject
    simulate:THETA --llm ID --seed seed``."""
    from .generators import subject_generator

    ids = [str(s) for s in subject_ids]
    return ([subject_generator(seed, s) for s in ids], [answer_seed(seed, s) for s in ids])


def answer_keys(seeds, n: int, item_ids):
    """(per examinee b"SEED:", per bank item its id's bytes) of ``n`` examinees' answer seeds:
    :func:`item_uniform`'s key of examinee i and item j is their concatenation
    (:func:`keyed_uniforms`)."""
    from ..validation import check_seed

    seeds = list(seeds)
    if len(seeds) != n:
        raise ResponseDataError(f"{len(seeds)} answer seeds for {n} examinees")
    return ([f"{check_seed(s)}:".encode() for s in seeds],
            [str(i).encode() for i in item_ids])


def keyed_uniforms(keys, rows, items) -> np.ndarray:
    """``item_uniform(seed of examinee rows[t], id of bank item items[t])`` for every t, from
    :func:`answer_keys`' ``keys``: one hash per answer (what the live subject draws), no
    per-item work beyond it."""
    pre, ids = keys
    sha = hashlib.sha256
    bits = np.fromiter((int.from_bytes(sha(pre[r] + ids[j]).digest()[:8], "little")
                        for r, j in zip(np.asarray(rows).tolist(), np.asarray(items).tolist())),
                       dtype=np.uint64, count=len(rows))
    return (bits >> np.uint64(11)) / float(1 << 53)


class UniformStreams:
    """Per-examinee uniform streams consumed in order, drawn from each generator in blocks.

    ``next(rows, k)`` returns the next k uniforms of every examinee in ``rows`` as (len(rows), k),
    exactly the numbers ``rngs[i].random(k)`` would give at that point of the stream. Each
    generator is called once per block of ``block`` draws, so the Python loop over examinees
    runs once every ``block / k`` steps, not at every step.
    """

    def __init__(self, rngs, block: int = 256):
        self.rngs = list(rngs)
        self.block = int(block)
        n = len(self.rngs)
        self.buffer = np.empty((n, 0))
        self.base = np.zeros(n, dtype=np.intp)     # stream position of buffer[i, 0]
        self.filled = np.zeros(n, dtype=np.intp)   # stream position after the last drawn uniform
        self.count = np.zeros(n, dtype=np.intp)    # stream position of the next unused uniform

    def next(self, rows, k: int) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.intp)
        short = rows[self.count[rows] + k > self.filled[rows]]
        if short.size:
            size = max(self.block, k)
            keep = self.filled[short] - self.count[short]
            width = int(keep.max()) + size
            if width > self.buffer.shape[1]:
                self.buffer = np.concatenate(
                    [self.buffer, np.empty((self.buffer.shape[0], width - self.buffer.shape[1]))],
                    axis=1)
            for i, rem in zip(short, keep):
                lo = self.count[i] - self.base[i]
                self.buffer[i, :rem] = self.buffer[i, lo:lo + rem]
                self.buffer[i, rem:rem + size] = self.rngs[i].random(size)
                self.base[i] = self.count[i]
                self.filled[i] = self.count[i] + rem + size
        start = self.count[rows] - self.base[rows]
        out = self.buffer[rows[:, None], start[:, None] + np.arange(k)]
        self.count[rows] += k
        return out


class CallableAnswers(AnswerSource):
    """Answers from a Python callable.

    ``fn(subject_ids, item_ids) -> array`` of scores (NaN = no answer) for a block, or with
    ``vectorized=False`` ``fn(subject_id, item_id) -> score`` called once per answer.
    """

    def __init__(self, fn: Callable, bank, subject_ids, *, vectorized: bool = True):
        if not callable(fn):
            raise TypeError("answer_fn must be callable")
        self.fn = fn
        self.item_ids = bank.item_ids
        self.subject_ids = np.asarray([str(s) for s in subject_ids], dtype=object)
        self.vectorized = vectorized

    def answers(self, rows, items):
        sids = self.subject_ids[rows]
        iids = self.item_ids[items]
        if self.vectorized:
            out = np.asarray(self.fn(sids, iids), dtype=float).reshape(-1)
        else:
            out = np.array([self.fn(s, i) for s, i in zip(sids, iids)], dtype=float)
        if out.shape != (len(rows),):
            raise ResponseDataError(f"answer_fn returned {out.size} scores for {len(rows)} items")
        bad = ~np.isnan(out) & ((out < 0) | (out > 1))
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise ResponseDataError(f"answer_fn returned score {out[j]:g} for subject {sids[j]!r}, "
                                    f"item {iids[j]!r}; scores must be in [0, 1] or NaN")
        return out
