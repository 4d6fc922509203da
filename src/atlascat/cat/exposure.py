"""Item exposure control: Sympson-Hetter and the restricted (item-eligibility) method.

Maximum-information selection gives the few most informative items to almost everybody; an
item seen by most test takers is compromised. Two controls plug into the engine's selection:

Sympson-Hetter (1985)
    Each item has an exposure parameter K_j = P(administer j | j selected). At every step the
    engine ranks the items, picks one (randomesque among the best k still in the pool) and
    administers it with probability K_j; a rejected item leaves the examinee's pool for the rest
    of the test and the pick is repeated (at most ``sh_max_trials`` times, then the best item
    left is given). Since P(A_j) = K_j P(S_j), the K_j are set by iterative simulation
    (:func:`~atlascat.cat.exposure_calibration.calibrate_sympson_hetter`): start with K = 1;
    simulate; set K_j = r_max / P(S_j) where the selection rate P(S_j) > r_max, else 1; repeat.

Restricted / item-eligibility method (Revuelta and Ponsoda, 1998; the deterministic form of
van der Linden and Veldkamp, 2004)
    An item is ineligible while its exposure rate has reached r_max. Live sessions sharing an
    :class:`ExposureTracker` use the running rate count_j / n_examinees_started; a batched
    simulation of a cohort of N examinees caps every item at floor(r_max N) administrations,
    resolving same-step contention by examinee order, so no rate exceeds r_max. (Examinees of
    one cohort then depend on each other, so this mode is not reproduced by independent
    sessions.)

References
----------
Sympson, J. B. and Hetter, R. D. (1985). Controlling item-exposure rates in computerized adaptive
testing. Proceedings of the 27th annual meeting of the Military Testing Association, 973-977.
Revuelta, J. and Ponsoda, V. (1998). A comparison of item exposure control methods in
computerized adaptive testing. Journal of Educational Measurement, 35(4), 311-327.
van der Linden, W. J. and Veldkamp, B. P. (2004). Constraining item exposure in computerized
adaptive testing with shadow tests. Journal of Educational and Behavioral Statistics, 29(3).

This module holds the components the engine plugs into its selection and imports nothing
of :mod:`atlascat.cat`; :mod:`atlascat.cat.exposure_calibration` sets the Sympson-Hetter
parameters by running the engine (one way only: exposure_calibration -> simulate ->
exposure; the calibration cannot live here, the engine would import a module that
imports it back).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError

__all__ = ["SympsonHetter", "ExposureTracker", "ItemEligibility", "make_exposure_control"]


class SympsonHetter:
    """Probabilistic administration with per-item parameters K (Sympson and Hetter, 1985)."""

    uses_trials = True
    caps_cohort = False

    def __init__(self, k: np.ndarray, max_trials: int = 20):
        self.k = np.asarray(k, dtype=float)
        self.max_trials = int(max_trials)

    def start(self, n_examinees: int) -> None:
        pass

    def ineligible(self):
        return None

    def administered(self, items) -> None:
        pass

    def pick(self, cand, n_fin, k, u):
        """Rounds of (randomesque pick, trial) on ranked candidates; vectorized over rows.

        ``cand`` (n, C) ranked item positions (-1 = none), ``u`` (n, 2 R) uniforms: round r uses
        u[:, 2r] for the pick among the first min(k, remaining) candidates not yet rejected and
        u[:, 2r + 1] for the trial u < K_j. Returns ``(chosen (n,), rejected (n, R))`` with -1
        padding; after R rejections the best remaining candidate is given without a trial.
        """
        n, C = cand.shape
        rows = np.arange(n)
        k = np.broadcast_to(np.asarray(k), (n,))
        valid = cand >= 0
        rejected_mask = np.zeros((n, C), dtype=bool)
        rejected = np.full((n, self.max_trials), -1, dtype=np.intp)
        chosen = np.full(n, -1, dtype=np.intp)
        undecided = n_fin > 0
        for r in range(self.max_trials):
            if not undecided.any():
                break
            remaining = valid & ~rejected_mask
            n_rem = remaining.sum(axis=1)
            k_eff = np.minimum(k, n_rem)
            target = np.minimum((u[:, 2 * r] * k_eff).astype(np.intp), np.maximum(k_eff - 1, 0))
            rank = np.cumsum(remaining, axis=1) - 1
            pos = np.argmax(remaining & (rank == target[:, None]), axis=1)
            item = cand[rows, pos]
            live = undecided & (k_eff > 0)
            accept = live & (u[:, 2 * r + 1] < self.k[np.maximum(item, 0)])
            chosen[accept] = item[accept]
            rej = live & ~accept
            rejected[rej, r] = item[rej]
            rejected_mask[rows[rej], pos[rej]] = True
            undecided = live & ~accept
        if undecided.any():
            remaining = valid & ~rejected_mask
            pos = np.argmax(remaining, axis=1)
            has = remaining[rows, pos]
            force = undecided & has
            chosen[force] = cand[rows[force], pos[force]]
        return chosen, rejected

    def __repr__(self) -> str:
        return f"SympsonHetter(n_restricted={int((self.k < 1).sum())}, max_trials={self.max_trials})"


class ExposureTracker:
    """Exposure counts shared by the sessions (or the cohort) an eligibility rule controls.

    ``cohort``: number of examinees of a batched simulation (cap floor(r_max cohort) per item);
    None: running rate over the examinees started so far (count_j < r_max n keeps j eligible).
    """

    def __init__(self, n_items: int, r_max: float, cohort: int | None = None):
        self.counts = np.zeros(int(n_items), dtype=np.intp)
        self.r_max = float(r_max)
        self.cohort = cohort
        self.n_examinees = 0
        self.pending = None
        self.reserved = None  # items picked earlier in a batched round (cohort simulation)

    def limit(self) -> float:
        if self.cohort is not None:
            return math.floor(self.r_max * self.cohort + 1e-9)
        return self.r_max * max(self.n_examinees, 1)

    def ineligible(self) -> np.ndarray:
        used = self.counts if self.pending is None else self.counts + self.pending
        if self.reserved is not None:
            used = used + self.reserved
        return used >= self.limit()

    def rates(self) -> np.ndarray:
        return self.counts / max(self.n_examinees, 1)

    def to_dict(self) -> dict:
        return {"counts": self.counts.tolist(), "r_max": self.r_max, "cohort": self.cohort,
                "n_examinees": self.n_examinees}

    @classmethod
    def from_dict(cls, d) -> "ExposureTracker":
        t = cls(len(d["counts"]), d["r_max"], d["cohort"])
        t.counts[:] = d["counts"]
        t.n_examinees = int(d["n_examinees"])
        return t


class ItemEligibility:
    """Restricted method: items whose exposure reached r_max are not eligible."""

    uses_trials = False

    def __init__(self, tracker: ExposureTracker):
        self.tracker = tracker
        self.caps_cohort = tracker.cohort is not None

    def start(self, n_examinees: int) -> None:
        self.tracker.n_examinees += int(n_examinees)

    def ineligible(self) -> np.ndarray:
        return self.tracker.ineligible()

    def administered(self, items) -> None:
        np.add.at(self.tracker.counts, np.asarray(items, dtype=np.intp), 1)

    def reserve(self, items) -> None:
        """Count items picked in a batched round as taken until :meth:`release` (the round's
        answers then count them for real)."""
        t = self.tracker
        if t.reserved is None:
            t.reserved = np.zeros_like(t.counts)
        np.add.at(t.reserved, np.asarray(items, dtype=np.intp), 1)

    def release(self) -> None:
        self.tracker.reserved = None

    def resolve_conflicts(self, engine, rows, items, u) -> np.ndarray:
        """Give every item to at most its remaining capacity this step (earlier rows first).

        Rows that lose an item re-select with the items now full blocked (same uniforms);
        rows that won keep their item in later rounds.
        """
        t = self.tracker
        limit = t.limit()
        items = items.copy()
        prio = np.zeros(items.size, dtype=np.intp)
        order_key = np.arange(items.size)
        forced = engine.last_fallback.copy()  # nothing was eligible: over the cap, unavoidably
        for rnd in range(1, 10 * items.size + 2):
            valid = (items >= 0) & ~forced
            idx = np.flatnonzero(valid)
            if idx.size == 0:
                break
            srt = idx[np.lexsort((order_key[idx], prio[idx], items[idx]))]
            it = items[srt]
            start = np.r_[True, it[1:] != it[:-1]]
            first = np.maximum.accumulate(np.where(start, np.arange(it.size), 0))
            rank = np.arange(it.size) - first
            taken = t.counts if t.reserved is None else t.counts + t.reserved
            capacity = limit - taken[it]
            over = srt[rank >= capacity]
            if over.size == 0:
                break
            winners = np.setdiff1d(idx, over)
            t.pending = np.bincount(items[winners], minlength=t.counts.size)
            items[over] = engine.select(rows[over], u[over])
            forced[over] = engine.last_fallback
            prio[over] = rnd
        t.pending = None
        return items

    def __repr__(self) -> str:
        return f"ItemEligibility(r_max={self.tracker.r_max}, cohort={self.tracker.cohort})"


def make_exposure_control(bank, config, *, cohort: int | None = None, tracker=None):
    """The exposure control a config asks for, or None.

    ``cohort``: size of a batched simulation (eligibility caps per cohort); ``tracker``: a shared
    :class:`ExposureTracker` for live sessions (a private running one if None).
    """
    exposure = config.exposure
    if exposure.method == "none":
        return None
    if exposure.method == "sympson_hetter":
        params = exposure.params or {}
        unknown = [i for i in params if i not in bank]
        if unknown:
            raise ConfigError(f"exposure_params name {len(unknown)} item(s) not in the bank, "
                              f"e.g. {unknown[:5]}")
        k = np.array([params.get(str(i), 1.0) for i in bank.item_ids], dtype=float)
        return SympsonHetter(k, exposure.sh_max_trials)
    if tracker is None:
        tracker = ExposureTracker(len(bank), exposure.r_max, cohort)
    elif len(tracker.counts) != len(bank):
        raise ConfigError(f"exposure tracker covers {len(tracker.counts)} items, the bank has "
                          f"{len(bank)}")
    return ItemEligibility(tracker)
