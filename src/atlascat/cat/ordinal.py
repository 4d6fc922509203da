"""The adaptive test on ordinal items (graded / gpcm :class:`PolyBank`), all examinees at once.

Each step gives every examinee still testing one item, as the binary engine
(:mod:`atlascat.cat.state`) does:

* first item: uniform among the items whose location b_j = mean_k(b_jk) lies within
  ``first_item_window`` of ``theta0`` (the nearest item if none);
* then maximum Fisher information at the current theta, I_j(theta) = sum_k P'_jk^2 / P_jk
  (:func:`atlascat.irt.polytomous.item_information`), randomesque among the ``randomesque``
  best (Kingsbury and Zara, 1989), or uniform (``criterion="random"``);
* exposure control: item eligibility (a cohort of N examinees gives an item at most
  floor(r_max N) times, same-step contention resolved in examinee order) or Sympson-Hetter
  (the selected item is administered with probability K_j, else it leaves the examinee's pool
  and the pick is repeated);
* the answer's category k adds log P_jk(theta_q) to the log-posterior on the grid (replayed
  from a recorded matrix, a missing cell skips the item; or drawn from the model at a true
  theta); EAP theta (or catR's MAP / ML / WLE, ``estimator``:
  :mod:`atlascat.cat.ordinal_estimators`), and SE = 1 / sqrt(sum_j I_j(theta) + 1 / prior_sd^2) (catR's) or the
  posterior SD (``se_method="posterior"``);
* stop when n >= min_items and SE <= se_stop, at max_items, or when no item is left.

Every operation is a NumPy array operation over the examinees (and items); loops run over
steps. Stopping rules beyond min / max items and the SE, content balancing and selection
criteria other than MFI and random are the binary engine's only and are refused here.

References
----------
Bock, R. D. and Mislevy, R. J. (1982). Applied Psychological Measurement 6, 431-444.
Dodd, B. G., De Ayala, R. J. and Koch, W. R. (1995). Computerized adaptive testing with
polytomous items. Applied Psychological Measurement 19, 5-22.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ConfigError, ResponseDataError
from ..irt import polytomous as poly
from ..irt.polybank import PolyBank
from ..irt.quadrature import normal_quadrature
from . import ordinal_estimators as OE
from .config import CATConfig, tested_under_one_prior
from .generators import _as_generator, generator_from_state, generator_state

__all__ = ["OrdinalCATResult", "OrdinalCATSession", "simulate_ordinal_cat", "item_locations"]


def item_locations(bank: PolyBank) -> np.ndarray:
    """b_j = mean_k(b_jk), the mean of the item's thresholds (:meth:`PolyBank.locations`):
    the theta around which the item's categories sit."""
    return bank.locations()


@dataclass
class OrdinalCATResult:
    """``persons``: one row per examinee (subject_id, theta, se, n_items, n_skipped,
    stop_reason [, true_theta]); ``administered``: one row per item given (subject_id, step,
    item_id, category, score (the rating on the item's scale), theta, se after it);
    ``exposure``: the share of examinees who saw each item."""
    persons: pd.DataFrame
    administered: pd.DataFrame
    exposure: pd.Series


def _check_bank(bank) -> None:
    """A PolyBank, else a ConfigError naming the argument (not an AttributeError inside)."""
    if not isinstance(bank, PolyBank):
        raise ConfigError(f"bank must be an atlascat.PolyBank (graded / gpcm items), got "
                          f"{type(bank).__name__}" + ("; a 0/1 bank's test is CATSession"
                                                      if type(bank).__name__ == "ItemBank"
                                                      else ""))


def _check(config: CATConfig):
    if not isinstance(config, CATConfig):
        raise ConfigError(f"config must be a CATConfig, got {type(config).__name__}")
    sel, stop = config.selection, config.stopping
    if not isinstance(sel.criterion, str) or sel.criterion not in ("mfi", "random"):
        raise ConfigError(f"selection {sel.criterion!r} is for binary banks; an ordinal bank's "
                          "adaptive test selects by mfi (maximum Fisher information) or random")
    if config.content.enabled:
        raise ConfigError("content balancing is for binary banks; drop it for an ordinal bank")
    extra = [name for name in ("reliability_stop", "min_info_stop", "floor_theta",
                               "ceiling_theta", "score_curve", "score_sd_stop", "budget",
                               "value_per_se", "cost_column", "cost_per_item")
             if getattr(stop, name) is not None] + (["rules"] if stop.rules else [])
    if extra:
        raise ConfigError(f"stopping rule(s) {', '.join(extra)} are for binary banks; an ordinal bank "
                          "stops on min_items, max_items and se_stop")


class _OrdinalEngine:
    """The state of n examinees on an ordinal bank and the vectorized steps of the test:
    :meth:`select` the next item of some rows, :meth:`record` their answers (category
    indices), :meth:`skip` unanswered items, :meth:`check_stops`."""

    def __init__(self, bank: PolyBank, config: CATConfig, n: int, rng, *, cohort: bool):
        _check_bank(bank)
        _check(config)
        self.bank, self.config, self.n = bank, config, n
        # one generator for all, or one per examinee (each row draws from its own stream)
        self.rng, self.rngs = (None, list(rng)) if isinstance(rng, (list, tuple)) else (rng, None)
        est, sel, stop, expo = (config.estimation, config.selection, config.stopping,
                                config.exposure)
        quad = normal_quadrature(est.quadpts, est.theta_range, est.prior_mean, est.prior_sd)
        self.nodes, log_w = quad.nodes, quad.log_weights.copy()
        if est.quadrature_rule == "trapezoid":
            log_w[[0, -1]] += np.log(0.5)
        J = self.J = len(bank)
        self.lpt = bank.log_prob(self.nodes).transpose(0, 2, 1)              # (J, K, Q)
        self.loc = item_locations(bank)
        self.prec = 1.0 / est.prior_sd**2
        self.k_best = max(1, int(sel.randomesque))
        self.cap = None
        if expo.method == "eligibility":
            if not cohort:
                raise ConfigError("item eligibility caps a simulated cohort; a single "
                                  "session of an ordinal bank takes exposure none or "
                                  "sympson_hetter")
            self.cap = int(np.floor(expo.r_max * n))
            if self.cap < 1:
                raise ConfigError(f"r_max = {expo.r_max} lets no item be given to {n} "
                                  "examinees")
        self.sh_k = None
        if expo.method == "sympson_hetter":
            self.sh_k = np.array([expo.params.get(str(i), 1.0) for i in bank.item_ids])
        self.counts = np.zeros(J, dtype=np.int64)
        self.log_prior = log_w - np.logaddexp.reduce(log_w)
        self.log_post = np.tile(self.log_prior, (n, 1))
        self.used = np.zeros((n, J), dtype=bool)            # given, skipped or rejected
        self.given = np.zeros((n, J), dtype=bool)
        self.n_items = np.zeros(n, dtype=int)
        self.n_skip = np.zeros(n, dtype=int)
        self.done = np.zeros(n, dtype=bool)
        self.reason = np.full(n, "", dtype=object)
        self.theta, self.se = np.full(n, est.prior_mean), np.full(n, est.prior_sd)
        # MAP / ML / WLE: each row's answers in order (item, category) and S, I, J at every node
        self.grids = self.tables = None
        if est.method != "eap":
            width = max(1, min(int(stop.max_items), J))
            self.asked = np.full((2, n, width), -1, dtype=np.int64)
            self.tables = OE.node_tables(bank, self.nodes)
            self.grids = np.zeros((3, n, self.nodes.size))
        # item information on a 0.01-spaced grid over the theta range, read by linear
        # interpolation (error h^2 |I''| / 8, below 1e-4 of the peak for slopes up to 3)
        self.lo, hi = (float(v) for v in est.theta_range)
        grid = np.linspace(self.lo, hi, int(round((hi - self.lo) / 0.01)) + 1)
        self.info_grid = poly.item_information(bank.models, bank.params, grid)  # (G, J)
        self.h = grid[1] - grid[0]
        self.info = self.info_at(self.theta)                     # (n, J) at current theta

    def info_at(self, t):
        G = len(self.info_grid)
        pos = np.clip((t - self.lo) / self.h, 0.0, G - 1.000001)
        i0 = pos.astype(int)
        f = (pos - i0)[:, None]
        return (1.0 - f) * self.info_grid[i0] + f * self.info_grid[i0 + 1]

    def uniform(self, rows, width: int | None = None) -> np.ndarray:
        """U(0, 1) draws for ``rows``, (len(rows),) or (len(rows), width): from the shared
        generator, or each row's own (then a row's draws do not depend on the others')."""
        if self.rngs is None:
            return self.rng.random(len(rows) if width is None else (len(rows), width))
        if width is None:
            return np.array([self.rngs[r].random() for r in rows], dtype=float)
        return np.array([self.rngs[r].random(width) for r in rows],
                        dtype=float).reshape(len(rows), width)

    def _pick(self, rows, first):
        """Randomesque pick among each row's best available items (vectorized)."""
        sel, J = self.config.selection, self.J
        blocked = self.used[rows]
        if self.cap is not None:
            blocked = blocked | (self.counts >= self.cap)[None, :]
        if first:
            score = np.broadcast_to(-np.abs(self.loc - sel.theta0), (len(rows), J))
            inside = score > -sel.first_item_window
            has = (inside & ~blocked).any(axis=1)
            # uniform among the window's items, else the nearest
            score = np.where(has[:, None], np.where(inside, self.uniform(rows, J), -np.inf),
                             score)
            kk = np.ones(len(rows), dtype=int)
        elif sel.criterion == "random":
            score = self.uniform(rows, J)
            kk = np.ones(len(rows), dtype=int)
        else:
            score = self.info[rows].copy()
            kk = np.full(len(rows), self.k_best)
        score = np.where(blocked, -np.inf, score)
        avail = np.isfinite(score).sum(axis=1)
        kk = np.minimum(kk, avail)
        top = int(max(1, kk.max()))
        r = np.arange(len(rows))[:, None]
        best = np.argpartition(-score, top - 1, axis=1)[:, :top] if top < J else \
            np.tile(np.arange(J), (len(rows), 1))
        order = best[r, np.argsort(-score[r, best], axis=1, kind="stable")]
        u = self.uniform(rows)
        choice = np.minimum((u * np.maximum(kk, 1)).astype(int), np.maximum(kk - 1, 0))
        out = order[r[:, 0], choice]
        return np.where(avail > 0, out, -1)

    def select(self, act):
        """Next item of every row in ``act`` (-1: nothing left, the row is finished); the
        items are marked used."""
        first = self.n_items[act] == 0
        item = np.full(act.size, -1)
        for grp in (first, ~first):
            if grp.any():
                item[grp] = self._pick(act[grp], bool(first[grp][0]))
        if self.sh_k is not None:                            # Sympson-Hetter trials
            # each row's pick is administered with probability K_j (then it is settled), else
            # it leaves the row's pool and the row picks again
            trying = np.flatnonzero(item >= 0)
            for _ in range(int(self.config.exposure.sh_max_trials)):
                if trying.size == 0:
                    break
                rejected = trying[self.uniform(act[trying]) >= self.sh_k[item[trying]]]
                if rejected.size:
                    self.used[act[rejected], item[rejected]] = True
                    item[rejected] = self._pick(act[rejected], False)
                trying = rejected[item[rejected] >= 0]
        if self.cap is not None:                             # same-step contention
            for _ in range(self.J):
                ok = item >= 0
                rank = pd.Series(item[ok]).groupby(item[ok]).cumcount().to_numpy()
                over = np.zeros(act.size, dtype=bool)
                over[np.flatnonzero(ok)] = self.counts[item[ok]] + rank >= self.cap
                if not over.any():
                    break
                counts_tmp = self.counts.copy()
                np.add.at(counts_tmp, item[ok & ~over], 1)
                full = counts_tmp >= self.cap
                used_save = self.used[act[over]].copy()
                self.used[act[over]] |= full[None, :]
                item[over] = self._pick(act[over], False)
                self.used[act[over]] = used_save
        none = item < 0
        self.done[act[none]] = True
        self.reason[act[none]] = "bank_exhausted"
        ok = ~none
        self.used[act[ok], item[ok]] = True
        return item

    def skip(self, rows):
        self.n_skip[rows] += 1

    def record(self, act, item, cat):
        """Answers (category indices) of rows ``act`` to ``item``: posterior, theta, SE."""
        np.add.at(self.counts, item, 1)
        self.given[act, item] = True
        self.n_items[act] += 1
        self.log_post[act] += self.lpt[item, cat]
        if self.grids is not None:
            self.asked[:, act, self.n_items[act] - 1] = item, cat
            dl, info, warm = self.tables
            self.grids[0, act] += dl[item, cat]
            self.grids[1, act] += info[item]
            self.grids[2, act] += warm[item]
            self._point_estimate(act)
            return
        lp = self.log_post[act]
        w = np.exp(lp - lp.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        nodes = self.nodes
        self.theta[act] = w @ nodes
        self.info[act] = self.info_at(self.theta[act])
        if self.config.estimation.se_method == "information":
            self.se[act] = 1.0 / np.sqrt((self.info[act] * self.given[act]).sum(axis=1)
                                         + self.prec)
        else:
            self.se[act] = np.sqrt(np.clip(w @ nodes**2 - self.theta[act] ** 2, 0.0, None))

    def _point_estimate(self, act):
        """MAP / ML / WLE of rows ``act`` (:mod:`atlascat.cat.ordinal_estimators`), SE as
        catR's ``semTheta``: 1 / sqrt(I + 1 / sigma^2) (MAP), 1 / sqrt(I) (ML, WLE)."""
        est = self.config.estimation
        m = max(1, int(self.n_items[act].max()))   # the widest row's answers
        theta, info = OE.point_estimate(est.method, self.grids[:, act],
                                        self.log_post[act] - self.log_prior, self.nodes,
                                        self.bank, *self.asked[:, act, :m], est.prior_mean,
                                        est.prior_sd)
        self.theta[act] = theta
        self.info[act] = self.info_at(theta)
        self.se[act] = 1.0 / np.sqrt(info + (self.prec if est.method == "map" else 0.0))

    def check_stops(self):
        stop = self.config.stopping
        hit_se = ((self.n_items >= stop.min_items) & (self.se <= stop.se_stop)
                  if stop.se_stop is not None else np.zeros(self.n, dtype=bool))
        hit_max = self.n_items >= int(stop.max_items)   # a bank used up is bank_exhausted
        left = (~self.used).any(axis=1)
        for mask, why in ((hit_se, "se"), (hit_max, "max_items"), (~left, "bank_exhausted")):
            new = mask & ~self.done
            self.reason[new] = why
            self.done |= new


def simulate_ordinal_cat(bank: PolyBank, config: CATConfig | None = None, *, responses=None,
                         thetas=None, subject_ids=None, rng=None,
                         answer_seeds=None) -> OrdinalCATResult:
    """Adaptive tests of every examinee on an ordinal bank (module docstring).

    ``responses``: recorded ratings to replay (a labelled DataFrame aligned by item id, or an
    array in the bank's item order; ratings on the items' own scales, NaN = not recorded);
    or ``thetas``: true abilities, answers drawn from the model. ``rng``: a
    ``numpy.random.Generator`` (or a seed), or a list of them, one per examinee: each
    examinee's draws then come from its own stream, so it is asked what an
    :class:`OrdinalCATSession` with that generator asks (item eligibility, which caps the
    cohort, couples them still). ``answer_seeds`` (with ``thetas``): one per examinee, who
    rates item j at :func:`~atlascat.cat.answers.item_uniform` of (its seed, j), as the live
    ``simulate:THETA:SEED`` subject does, not from the selection stream.
    """
    from ..irt.polyscore import aligned_ratings

    _check_bank(bank)
    config = CATConfig() if config is None else config
    _check(config)
    tested_under_one_prior(bank, config)
    if not isinstance(rng, (list, tuple)):
        rng = _as_generator(rng)   # a bad one: a ConfigError naming rng
    if (responses is None) == (thetas is None):
        raise ConfigError("give responses (ratings to replay) or thetas (answers drawn from "
                          "the model), not both")
    true_theta = None
    if responses is not None:
        ratings, labels = aligned_ratings(responses, bank)
        codes = bank.encode(ratings, labels)   # a rating the item never had: its category
        if subject_ids is None and isinstance(responses, pd.DataFrame):
            subject_ids = [str(s) for s in responses.index]
    else:
        from ..validation import check_thetas

        true_theta = check_thetas(thetas, "thetas", error=ConfigError)
        codes = None
    n = len(codes) if codes is not None else true_theta.size
    keys = None
    if answer_seeds is not None:
        if true_theta is None:
            raise ConfigError("answer_seeds are of the answers drawn at thetas=")
        from .answers import answer_keys, keyed_uniforms

        keys = answer_keys(answer_seeds, n, bank.item_ids)
    ids = np.asarray([str(s) for s in (range(n) if subject_ids is None else subject_ids)],
                     dtype=object)
    if isinstance(rng, (list, tuple)) and len(rng) != n:
        raise ConfigError(f"rng: {len(rng)} generators for {n} examinees; give one per "
                          "examinee, or one for all")
    eng = _OrdinalEngine(bank, config, n, rng, cohort=True)
    log: list[tuple] = []
    while True:
        act = np.flatnonzero(~eng.done)
        if act.size == 0:
            break
        item = eng.select(act)
        act, item = act[item >= 0], item[item >= 0]
        if act.size == 0:
            continue
        if codes is not None:
            cat = codes[act, item]
            miss = np.isnan(cat)
            eng.skip(act[miss])
            act, item, cat = act[~miss], item[~miss], cat[~miss].astype(int)
        else:
            # each (item, theta) pair once: slope a theta at the single node 1 gives
            # z = a theta + d (graded) and k a theta + d_k (gpcm)
            pp = bank.params[item].copy()
            pp[:, 0] *= true_theta[act]
            pj = np.nan_to_num(np.exp(poly.log_prob(bank.models[item], pp, [1.0])[:, 0, :]))
            u = eng.uniform(act) if keys is None else keyed_uniforms(keys, act, item)
            cat = poly.category_at(pj, u, bank.n_cat[item])
        eng.record(act, item, cat)
        log.append((act, item, cat, eng.theta[act].copy(), eng.se[act].copy(),
                    eng.n_items[act].copy()))
        eng.check_stops()
    cols = ("subject_id", "step", "item_id", "category", "score", "theta", "se")
    adm = pd.DataFrame({c: [] for c in cols})
    if log:
        r_, j_, c_, t_, s_, n_ = (np.concatenate(v) for v in zip(*log))
        adm = pd.DataFrame({"subject_id": ids[r_], "step": n_, "item_id": bank.item_ids[j_],
                            "category": c_,
                            "score": (ratings[r_, j_] if codes is not None else
                                      [bank.levels[j][c] for j, c in zip(j_, c_)]),
                            "theta": t_, "se": s_})
        adm = adm.sort_values(["subject_id", "step"], kind="stable").reset_index(drop=True)
    persons = pd.DataFrame({"subject_id": ids, "theta": eng.theta, "se": eng.se,
                            "n_items": eng.n_items, "n_skipped": eng.n_skip,
                            "stop_reason": eng.reason})
    if true_theta is not None:
        persons["true_theta"] = true_theta
    exposure = pd.Series(eng.given.sum(axis=0) / max(n, 1), index=bank.item_ids,
                         name="exposure")
    return OrdinalCATResult(persons, adm, exposure)


class OrdinalCATSession:
    """One examinee's adaptive test on an ordinal bank, driven by the caller's harness:
    :meth:`next_item` (an item id, or None once the test has stopped), :meth:`record` (the
    rating on the item's own scale; None or NaN when it could not be obtained), ``theta``,
    ``se``, ``posterior_sd``, ``done``, ``stop_reason``, :meth:`history`. The same engine and
    rules as :func:`simulate_ordinal_cat` (exposure: none or Sympson-Hetter)."""

    def __init__(self, bank: PolyBank, config: CATConfig | None = None, rng=None):
        config = CATConfig() if config is None else config
        rng = _as_generator(rng)
        self.bank = bank
        self._eng = _OrdinalEngine(bank, config, 1, rng, cohort=False)
        tested_under_one_prior(bank, config)
        self._pending: int | None = None
        self._rows: list[dict] = []

    @property
    def theta(self) -> float:
        """The estimate after the ratings recorded so far (the config's estimator: EAP unless
        ``estimator`` is "map", "ml" or "wle")."""
        return float(self._eng.theta[0])

    @property
    def posterior_sd(self) -> float:
        """The SD of theta's posterior on the quadrature grid (what
        :func:`~atlascat.irt.ability.estimate_ability`'s EAP reports as its SE), whatever
        ``se_method``."""
        lp = self._eng.log_post[0]
        w = np.exp(lp - lp.max())
        w /= w.sum()
        nodes = self._eng.nodes
        return float(np.sqrt(max(float(w @ nodes**2) - float(w @ nodes) ** 2, 0.0)))

    def __repr__(self) -> str:
        state = f"done ({self.stop_reason})" if self.done else "running"
        return (f"OrdinalCATSession(n_items={self.n_items}, theta={self.theta:.4f}, "
                f"se={self.se:.4f}, {state})")

    @property
    def n_items(self) -> int:
        """Items answered (rated) so far."""
        return int(self._eng.n_items[0])

    def expected_accuracy(self) -> float:
        """The expected share of each item's scale at theta, averaged over the bank:
        mean_j (E[X_j | theta] - lo_j) / (hi_j - lo_j), the ordinal analogue of the expected
        proportion correct (the same number for a binary item scored 0/1)."""
        lo, hi = self.bank.scales[:, 0], self.bank.scales[:, 1]
        return float(np.mean((self.bank.expected_score(self.theta) - lo) / (hi - lo)))

    def predicted_mean_rating(self) -> tuple[float, float, float]:
        """(score, lo, hi): the mean rating over the whole bank predicted from the ratings
        recorded so far, with its 95% interval (the asked items as rated, the others at the
        EAP under a wide prior: :func:`~atlascat.irt.polyscore.predict_mean_rating`, what a
        live run and ``atlas simulate`` report)."""
        from ..irt.polyscore import predict_mean_rating

        ratings = {r["item_id"]: r["score"] for r in self._rows}
        score, lo, hi = predict_mean_rating(ratings if ratings else
                                            np.full((1, len(self.bank)), np.nan), self.bank)
        return float(score[0]), float(lo[0]), float(hi[0])

    def credit(self, item_id: str, rating) -> float:
        """A rating's share of its item's scale [lo, hi] (the bank's ``scales``),
        (rating - lo) / (hi - lo), in [0, 1]."""
        lo, hi = self.bank.scales[self.bank.index_of(str(item_id))]
        return float((float(rating) - lo) / (hi - lo))

    def to_dict(self) -> dict:
        """JSON-serializable snapshot of the test so far; ``from_dict(d, bank)`` continues it
        exactly (the random generator's state included)."""
        eng = self._eng
        return {"format": "atlascat.OrdinalCATSession/1", "config": eng.config.to_dict(),
                "item_ids": [str(i) for i in self.bank.item_ids],
                "used": np.flatnonzero(eng.used[0]).tolist(),
                "given": np.flatnonzero(eng.given[0]).tolist(),
                "counts": eng.counts.tolist(), "log_post": eng.log_post[0].tolist(),
                "n_items": self.n_items, "n_skipped": int(eng.n_skip[0]), "done": self.done,
                "stop_reason": self.stop_reason, "theta": self.theta, "se": self.se,
                "pending": self._pending, "rows": [dict(r) for r in self._rows],
                "rng": generator_state(eng.rng)}

    @classmethod
    def from_dict(cls, d: dict, bank: PolyBank) -> "OrdinalCATSession":
        """The session of a :meth:`to_dict` snapshot, on the same bank."""
        if d.get("format") != "atlascat.OrdinalCATSession/1":
            raise ConfigError("not an ordinal adaptive test's snapshot (format "
                              f"{d.get('format')!r})")
        if d["item_ids"] != [str(i) for i in bank.item_ids]:
            raise ConfigError("the bank differs from the one the session was run with (its "
                              "item ids); pass the same bank")
        session = cls(bank, CATConfig.from_dict(d["config"]), generator_from_state(d["rng"]))
        eng = session._eng
        eng.used[0, d["used"]] = True
        eng.given[0, d["given"]] = True
        eng.counts[:] = d["counts"]
        eng.log_post[0] = d["log_post"]
        eng.n_items[0], eng.n_skip[0] = d["n_items"], d["n_skipped"]
        eng.done[0], eng.reason[0] = bool(d["done"]), d["stop_reason"]
        eng.theta[0], eng.se[0] = d["theta"], d["se"]
        if eng.grids is not None:   # the answers in the order given: the same sums, bit for bit
            for step, row in enumerate(d["rows"]):
                j, cat = bank.index_of(str(row["item_id"])), int(row["category"])
                eng.asked[:, 0, step] = j, cat
                eng.grids[:, 0] += [eng.tables[0][j, cat], eng.tables[1][j], eng.tables[2][j]]
        eng.info[0] = eng.info_at(eng.theta[:1])[0]
        session._pending, session._rows = d["pending"], list(d["rows"])
        return session

    @property
    def se(self) -> float:
        """The config's ``se_method``: 1 / sqrt(test information + 1 / prior_sd^2) (catR's,
        the default) or the posterior SD (what :func:`~atlascat.irt.ability.estimate_ability`'s
        EAP reports)."""
        return float(self._eng.se[0])

    @property
    def done(self) -> bool:
        return bool(self._eng.done[0])

    @property
    def stop_reason(self) -> str:
        return str(self._eng.reason[0])

    def next_item(self) -> str | None:
        """The item to ask next (the same one until it is recorded), or None when done."""
        if self._pending is not None:
            return str(self.bank.item_ids[self._pending])
        if self.done:
            return None
        item = int(self._eng.select(np.array([0]))[0])
        if item < 0:
            return None
        self._pending = item
        return str(self.bank.item_ids[item])

    def record(self, item_id: str, rating) -> None:
        """The answer to the pending item: a rating on the item's scale (one it never had at
        calibration is scored as the category it falls in, :meth:`PolyBank.encode`), or None /
        NaN or ``pd.NA`` (a nullable table's missing rating): skipped, the item leaves the pool
        and is not scored."""
        if self._pending is None:
            raise ConfigError(f"no item is pending, so {item_id!r} cannot be recorded; ask "
                              "next_item() first and record its answer")
        if str(item_id) != str(self.bank.item_ids[self._pending]):
            raise ConfigError(f"item {item_id!r} is not the pending item "
                              f"{self.bank.item_ids[self._pending]!r}; ask next_item() first "
                              "and record its answer")
        j = self._pending
        skipped = rating is None or (np.ndim(rating) == 0 and bool(pd.isna(rating)))
        if not skipped:   # a rating off the item's scale raises here; the item stays pending
            try:
                value = float(rating)
            except (TypeError, ValueError):
                raise ResponseDataError(f"the rating of item {item_id!r} must be a number on "
                                        f"the item's scale (or None to skip it), got {rating!r}"
                                        ) from None
            cat = int(self.bank.subset([str(item_id)]).encode(np.array([[value]]))[0, 0])
        self._pending = None
        if skipped:
            self._eng.skip(np.array([0]))
        else:
            self._eng.record(np.array([0]), np.array([j]), np.array([cat]))
            self._rows.append({"step": int(self._eng.n_items[0]), "item_id": str(item_id),
                               "category": cat, "score": float(rating), "theta": self.theta,
                               "se": self.se})
        self._eng.check_stops()

    def skip(self, item_id: str) -> None:
        """Take the pending item out of the pool unscored (no rating could be obtained): the
        same as recording None."""
        self.record(item_id, None)

    def history(self) -> pd.DataFrame:
        """One row per item answered: step, item_id, category, score, theta, se after it."""
        return pd.DataFrame(self._rows, columns=["step", "item_id", "category", "score",
                                                 "theta", "se"])
