"""In-process prompt subjects: a Python function (:class:`CallableSubject`) and a model that
answers item i correctly iff ``u(seed, i) < P_i(theta)`` (:class:`SimulatedSubject`, with the
per-item uniform ``u`` of :func:`item_uniform`; on a bank without item content the same model
asked by item id, :class:`SimulatedScores`, which on a bank of continuous scores, one with a
``dispersion`` column, scores each item with the Beta draw of mean P_i(theta) and variance
phi_i P Q at that uniform: :func:`atlascat.irt.dispersion.draw_scores`; on a graded / gpcm
bank the rating drawn from the item's categories at that uniform, :class:`SimulatedRatings`)."""
from __future__ import annotations

import json
import math
import time
from typing import Callable, Mapping

import numpy as np

from ...cat.answers import item_uniform
from ...errors import ConfigError
from ...content.items import Prompt, correct_answer_text, wrong_answer_text
from .base import Answer

__all__ = ["CallableSubject", "SimulatedSubject", "SimulatedScores", "SimulatedRatings",
           "item_uniform"]


class CallableSubject:
    """A subject backed by a Python function ``fn(item, prompt) -> str`` (prompt protocol).

    ``item`` is the item's content dict, ``prompt`` the :class:`Prompt` that would be sent.
    """

    def __init__(self, fn: Callable, name: str = "callable", *, kind: str = "chat"):
        if not callable(fn):
            raise ConfigError("CallableSubject needs a callable fn(item, prompt) -> str")
        if kind not in ("chat", "completion"):
            raise ConfigError(f"kind must be 'chat' or 'completion', not {kind!r}")
        self.fn, self.name, self.kind = fn, str(name), kind
        self.protocol = "approximate"

    @property
    def cache_key(self) -> str:
        return f"{self.name}@callable#{self.kind}"

    def describe(self) -> dict:
        return {"type": "callable", "model": self.name, "kind": self.kind,
                "function": getattr(self.fn, "__qualname__", type(self.fn).__name__)}

    def ask(self, prompt: Prompt, item: Mapping) -> Answer:
        t0 = time.perf_counter()
        out = self.fn(item, prompt)
        if isinstance(out, Answer):
            return out
        return Answer(text="" if out is None else str(out), latency_s=time.perf_counter() - t0)


def stored_item_id(reply: str) -> str:
    """The ``item_id`` of a stored reply line ``{"item_id", "score"}`` of a subject asked by
    item id; a line without one stops the run in one line (LiveRunError)."""
    try:
        return json.loads(reply)["item_id"]
    except (ValueError, KeyError, TypeError):
        from ...errors import LiveRunError

        raise LiveRunError(f"a stored reply {reply[:80]!r} holds no item_id") from None


class _Simulated:
    """What every ``simulate:THETA[:SEED]`` subject is: a finite theta, a seed and a name, and
    how it describes itself in the run store."""

    #: whether the answer seed is the run's model's (``simulate:THETA`` without SEED: set by
    #: :meth:`SubjectSpec.build <atlascat.live.subjects.SubjectSpec.build>`): a run started
    #: with seed S answers with ``answer_seed(S, name)`` (:meth:`for_run`)
    seed_from_run = False

    def for_run(self, seed: int):
        """This subject in a run seeded ``seed``: with :attr:`seed_from_run`, it answers as
        model ``name`` of ``atlas simulate --thetas --seed seed`` does
        (:func:`~atlascat.cat.answers.answer_seed`); the run stores the seed it answers with
        (a resumed run answers the same). A typed SEED is kept."""
        if self.seed_from_run:
            from ...cat.answers import answer_seed

            self.seed = answer_seed(int(seed), self.name)
        return self

    def _identity(self, theta: float, seed: int, name: str | None) -> None:
        self.theta = float(theta)
        if not math.isfinite(self.theta):
            raise ConfigError(f"the simulated subject's theta must be finite, got {theta!r}")
        self.seed = int(seed)
        self.name = name or f"simulated(theta={self.theta:g},seed={self.seed})"

    def describe(self) -> dict:
        return {"type": "simulate", "model": self.name, "kind": self.kind, "theta": self.theta,
                "seed": self.seed}


class SimulatedSubject(_Simulated):
    """Answers item i correctly iff ``item_uniform(seed, i) < P_i(theta)`` under ``bank``.

    The replies are texts the item's scorer reads (the key letter / ``#### n`` or a wrong one),
    so the full live path (prompt, reply, scorer) is exercised.
    """

    def __init__(self, bank, theta: float, *, seed: int = 0, name: str | None = None,
                 kind: str = "chat"):
        self._identity(theta, seed, name)
        self.kind = kind
        self.protocol = "simulated"
        from ...irt.dispersion import bank_dispersion

        ids = bank.item_ids.tolist()
        self._p = dict(zip(ids, np.asarray(bank.probability(self.theta)).reshape(-1).tolist()))
        phi = bank_dispersion(bank)   # None: 0/1 answers (the Bernoulli likelihood)
        self._phi = None if phi is None else dict(zip(ids, phi.tolist()))

    @property
    def cache_key(self) -> str:
        return f"{self.name}@simulated(theta={self.theta!r},seed={self.seed})#{self.kind}"

    def correct(self, item_id: str) -> bool:
        return item_uniform(self.seed, item_id) < self._p[str(item_id)]

    def score(self, item_id: str):
        """Item ``item_id``'s score: 0/1 (:meth:`correct`), or on a bank with a ``dispersion``
        column the score in [0, 1] with mean P_i(theta) and variance phi_i P Q drawn at the
        item's uniform (:func:`atlascat.irt.dispersion.draw_scores`); fixed by (seed, item)."""
        if self._phi is None:
            return int(self.correct(item_id))
        from ...irt.dispersion import draw_scores

        item = str(item_id)
        y = draw_scores(self._p[item], self._phi[item], item_uniform(self.seed, item))
        return float(f"{float(y):.12g}")

    def ask(self, prompt: Prompt, item: Mapping) -> Answer:
        ok = self.correct(item["item_id"])
        return Answer(text=correct_answer_text(item) if ok else wrong_answer_text(item),
                      latency_s=0.0)


class SimulatedScores(SimulatedSubject):
    """``simulate:THETA[:SEED]`` on a bank without item content (a bank file, a folder built
    from a response matrix): the same model, asked by item id (an item-scored subject, as
    ``replay:`` is there): item i scores 1 iff ``item_uniform(seed, i) < P_i(theta)``, the
    draws :class:`SimulatedSubject` answers a content bank's prompts by; on a bank of
    continuous scores (a ``dispersion`` column) the Beta score of :meth:`score`.
    ``score_range`` (low, high): a bank folder's metric scale (built with ``--score-range``):
    each reply shows the score on that scale, low + (high - low) y, as a command prints it."""

    def __init__(self, bank, theta: float, *, seed: int = 0, name: str | None = None,
                 score_range=None):
        super().__init__(bank, theta, seed=seed, name=name, kind="item")
        self.score_range = None if score_range is None else [float(v) for v in score_range]

    @property
    def cache_key(self) -> str:
        kind = "" if self._phi is None else ",scores"   # continuous draws: not the 0/1 ones
        scale = "" if self.score_range is None else "#scale:{:g}-{:g}".format(*self.score_range)
        return (f"{self.name}@simulated(theta={self.theta!r},seed={self.seed}{kind})#{self.kind}"
                + scale)

    def describe(self) -> dict:
        out = super().describe()
        if self.score_range is not None:
            out["score_range"] = self.score_range
        return out

    def score_of(self, reply: str):
        """The score in [0, 1] of a stored reply line: its item's draw (the one it shows)."""
        return self.score(stored_item_id(reply))

    def score_items(self, item_ids) -> list[tuple[float, str]]:
        """(the score in [0, 1], the reply line ``{"item_id", "score"}``) per item, as a
        command prints it (on the metric's scale under ``score_range``)."""
        out = []
        for item in map(str, item_ids):
            y = self.score(item)
            shown = y
            if self.score_range is not None:
                lo, hi = self.score_range
                shown = float(f"{lo + (hi - lo) * y:.12g}")
            out.append((y, json.dumps({"item_id": item, "score": shown})))
        return out


class SimulatedRatings(_Simulated):
    """``simulate:THETA[:SEED]`` on a graded / gpcm bank (a
    :class:`~atlascat.irt.polybank.PolyBank`), asked by item id: item i is rated the level of
    the category drawn from its model at theta by inversion at ``item_uniform(seed, i)``
    (:func:`atlascat.irt.polytomous.category_at`, the draw ``atlas simulate --thetas`` answers
    an ordinal bank with), so the same item always gets the same rating."""

    kind = "item"
    protocol = "simulated"
    ratings = True

    def __init__(self, bank, theta: float, *, seed: int = 0, name: str | None = None):
        self._identity(theta, seed, name)
        self._bank = bank
        self._p = np.asarray(bank.probability(self.theta))[:, 0, :]   # (items, categories)

    @property
    def cache_key(self) -> str:
        return f"{self.name}@simulated(theta={self.theta!r},seed={self.seed},ratings)#item"

    def rating(self, item_id: str) -> float:
        """Item ``item_id``'s rating, one of its levels."""
        from ...irt.polytomous import category_at

        j = self._bank.index_of(str(item_id))
        k = int(category_at(self._p[j], item_uniform(self.seed, str(item_id)),
                            self._bank.n_cat[j]))
        level = float(self._bank.levels[j][k])
        return int(level) if level.is_integer() else level

    def score_of(self, reply: str):
        """The rating of a stored reply line: its item's draw (the one it shows)."""
        return self.rating(stored_item_id(reply))

    def score_items(self, item_ids) -> list[tuple[float, str]]:
        """(the rating, the reply line ``{"item_id", "score"}``) per item, as a command prints
        it."""
        out = []
        for item in map(str, item_ids):
            r = self.rating(item)
            out.append((r, json.dumps({"item_id": item, "score": r})))
        return out
