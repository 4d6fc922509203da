"""A suite test step by step: next items to ask, update with answers, current prediction.

:class:`SuiteSession` holds any number of subjects at once (a live run drives one; the replay
simulation drives hundreds). Each round: the joint posterior's normal approximation
(:func:`gaussian_posterior`), the aggregate's delta-method SE

    SE^2 = d' S d + sum_bc w_b w_c R_bc sd_b sd_c       (d_b = w_b g_b'(m_b); sd_b residual SD)

(g' by statistical linearization over the posterior; with a joint link d = (beta' w) g'(m)
and the residual term w' D w + d2' S d2, d2 = (beta' K w) g'(m), the link's heteroscedastic
part, :class:`~atlascat.suite.link.SuiteLink`) is checked against ``target_se`` (points, 0-100) from
``min_items`` on; else up to ``batch_size`` items are chosen for the aggregate
(:func:`pick_round`; members below ``min_per_member`` items first). The prediction pushes
importance-weighted posterior draws through the members' score links (:func:`predict_scores`).
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from ..errors import ConfigError
from .config import SuiteConfig
from .posterior import GridLikelihood, ItemPool, gaussian_posterior, importance, normal_draws
from .predict import (answer_corrections, answer_residuals, chance_bounds,
                      correction_weights, curve_slopes,
                      link_draws, predict_scores, residual_sd)
from .selection import expected_information, pick_round

__all__ = ["SuiteSession"]

#: subjects predicted at once (bounds the (n, draws, members) arrays of the prediction)
PREDICT_BLOCK = 256
#: neighbours scored at once by the neighbour correction (bounds the sub-sessions' (n, items)
#: arrays)
NEIGHBOUR_BLOCK = 2048


class SuiteSession:
    """Adaptive suite test of ``subject_ids`` (vectorized). ``available`` (N, G) bool: items
    whose answer can be obtained (replay); default all."""

    def __init__(self, suite, config: SuiteConfig | None = None, subject_ids=("subject",),
                 available=None):
        if suite.prior is None:
            raise ConfigError(f"suite {suite.name!r} has no joint prior; fit one with "
                              "atlascat.suite.fit_prior")
        self.suite = suite.resolved()
        self.config = config or SuiteConfig()
        self.links = [m.link for m in self.suite.members]
        self.weights = self.suite.weights
        self.prior = self.suite.prior
        joint = self.suite.joint_link
        #: the joint link as this session applies it (without its neighbour correction when
        #: ``config.neighbours`` is off)
        self.joint = (joint.without_neighbours() if joint is not None
                      and not self.config.neighbours else joint)
        self.pool = ItemPool.from_banks([m.bank for m in self.suite.members])
        self.subject_ids = [str(s) for s in subject_ids]
        n, g = len(self.subject_ids), len(self.pool)
        self.y = np.full((n, g), np.nan)
        self.asked = np.zeros((n, g), bool)
        self.available = (np.ones((n, g), bool) if available is None
                          else np.asarray(available, bool).copy())
        self.done = np.zeros(n, bool)
        self.stop_reason = np.array([""] * n, dtype=object)
        #: one generator per subject, each seeded alike: a subject's picks are what it gets
        #: tested alone (a live run of it), whoever else is in the replay
        self.rngs = [np.random.default_rng([self.config.seed, 18]) for _ in range(n)]
        self._index = {(int(m), i): k for k, (m, i) in
                       enumerate(zip(self.pool.member, self.pool.item_ids))}
        z = normal_draws(self.config.draws, 2 * self.pool.n_members, self.config.seed)
        self._z = z[:, :self.pool.n_members]
        self._e = z[:, self.pool.n_members:]
        self.mode = np.tile(self.prior.mean, (n, 1))
        self.cov = np.tile(self.prior.cov, (n, 1, 1))
        self._corrections = correction_weights(self.links, self.pool)
        self._answers = 0            # answers recorded; the posterior is of _posterior_at
        self._posterior_at = -1
        self.se = np.full(n, np.inf)
        self.lik = GridLikelihood(self.pool, n)

    # ------------------------------------------------------------------ state
    @property
    def n_items(self) -> np.ndarray:
        return self.asked.sum(1)

    def items_per_member(self) -> np.ndarray:
        return self.asked.astype(int) @ self.pool.onehot.astype(int)

    def column(self, member: str, item_id) -> int:
        b = self.suite.names.index(member)
        try:
            return self._index[(b, str(item_id))]
        except KeyError:
            raise ConfigError(f"item {item_id!r} is not in the suite's {member} bank") from None

    def refresh(self) -> None:
        """Joint posterior mode / covariance and the aggregate's SE (points) of every subject."""
        self._posterior()
        slopes = curve_slopes(self.links, self.mode,
                              np.sqrt(np.diagonal(self.cov, axis1=1, axis2=2)))
        joint = self.joint
        if joint is None:
            d = slopes * self.weights
        else:   # average = w' (beta g + alpha + e): gradient (beta' w) * g', residual w' D w
            d = slopes * (self.weights @ joint.coef[:, :-1])
        var = np.einsum("ni,nij,nj->n", d, self.cov, d) + self._residual_var()
        if joint is not None and joint.post_scale is not None:
            # the heteroscedastic part w' K beta G beta' K w, G = J S J (J: the slopes)
            d2 = slopes * ((joint.post_scale * self.weights) @ joint.coef[:, :-1])
            var = var + np.einsum("ni,nij,nj->n", d2, self.cov, d2)
        self.se = 100.0 * np.sqrt(var)
        self._slopes, self._d = slopes, d
        cfg = self.config
        n = self.n_items
        left = (self.available & ~self.asked).any(1)
        rules = [(n >= cfg.max_items, "max_items"), (~left, "no_items"),
                 ((n >= cfg.min_items) & (self.se <= (cfg.target_se or 0.0)), "target_se")]
        for hit, why in rules:
            new = hit & ~self.done
            self.stop_reason[new] = why
            self.done |= hit

    def _posterior(self) -> None:
        """The joint posterior's normal approximation (``mode``, ``cov``), recomputed only when
        answers were recorded since the last one."""
        if self._posterior_at != self._answers:
            self.mode, self.cov = gaussian_posterior(self.prior, self.lik)
            self._posterior_at = self._answers

    def _residual_var(self) -> np.ndarray:
        """Per subject, the aggregate's residual variance (0-1 scale): w' D w with the joint
        link (its heteroscedastic part d2' S d2 shrinks with the answers and is added in
        :meth:`refresh`); else from the members' residual SDs at the current mode and their
        correlation."""
        joint = self.joint
        if joint is not None:
            return np.full(len(self.subject_ids), self.weights @ joint.resid_cov @ self.weights)
        sd = np.stack([residual_sd(l, self.mode[:, b]) for b, l in enumerate(self.links)], 1)
        wsd = sd * self.weights
        return np.einsum("ni,ij,nj->n", wsd, self.prior.resid_corr, wsd)

    def floor_se(self) -> np.ndarray:
        """The part of the aggregate's SE (points, per subject) that no item removes: the
        links' residual (:meth:`_residual_var`). ``target_se`` at or below it never stops the
        test."""
        return 100.0 * np.sqrt(self._residual_var())

    # ------------------------------------------------------------------ steps
    def next_columns(self) -> np.ndarray:
        """(N, k) pool columns to ask next (-1: none; done subjects get none)."""
        self.refresh()
        cfg = self.config
        k = max(1, min(cfg.batch_size, cfg.max_items - int(self.n_items.min(initial=0))))
        out = np.full((len(self.subject_ids), cfg.batch_size), -1, int)
        act = ~self.done
        if not act.any():
            return out
        info = expected_information(self.pool, self.mode[act], self.cov[act])
        avail = self.available[act] & ~self.asked[act]
        room = (cfg.max_items - self.n_items[act])[:, None] > np.arange(cfg.batch_size)[None]
        bonus = None
        if cfg.min_per_member > 0:
            short = self.items_per_member()[act] < cfg.min_per_member
            bonus = np.where(short[:, self.pool.member], 1e6, 0.0)
        # the members' own variances count as much as the member counts in the aggregate:
        # a member of weight 0 (a custom subset of the suite) gets none of them
        own = self._slopes[act] * (self.weights / self.weights.max())
        picks = pick_round(self.pool, self.cov[act], self._d[act], own, info,
                           avail, k, [self.rngs[i] for i in np.flatnonzero(act)],
                           randomesque=cfg.randomesque,
                           member_weight=cfg.member_weight, bonus=bonus)
        picks = np.where(room[:, :k], picks, -1)
        out[act, :k] = picks
        return out

    def next_items(self) -> list[list[tuple[str, str]]]:
        """Per subject, the (member, item_id) pairs to ask next ([] once it is done)."""
        cols = self.next_columns()
        names = self.suite.names
        return [[(names[int(self.pool.member[c])], str(self.pool.item_ids[c])) for c in row
                 if c >= 0] for row in cols]

    def record(self, rows, cols, values) -> None:
        """Record answers by pool column (vectorized); NaN values mark the item unavailable."""
        rows, cols = np.asarray(rows, int), np.asarray(cols, int)
        values = np.asarray(values, float)
        ok = np.isfinite(values)
        new = ok & ~self.asked[rows, cols]
        self.y[rows[new], cols[new]] = values[new]
        self.asked[rows[new], cols[new]] = True
        self.lik.add(rows[new], cols[new], values[new])
        self._answers += int(new.sum())
        self.available[rows[~ok], cols[~ok]] = False

    def record_matrix(self, asked, y) -> None:
        """Record every subject's answers at once into a session with none yet: ``asked``
        (N, G) bool, ``y`` (N, G) 0/1 (read where asked and finite); one matrix product per
        member (:meth:`GridLikelihood.add_matrix`) instead of :meth:`record`'s answer-by-answer
        sums."""
        if self._answers:
            raise ConfigError("record_matrix is for a session without answers; use record")
        y = np.asarray(y, float)
        self.asked = np.asarray(asked, bool) & np.isfinite(y)
        self.y = np.where(self.asked, y, np.nan)
        self.lik.add_matrix(self.asked, self.y)
        self._answers = int(self.asked.sum())

    def update(self, answers, subject: int = 0) -> None:
        """Record one subject's answers: mapping (member, item_id) -> 0/1 (None: not
        obtainable)."""
        cols, vals = [], []
        for (member, item), v in dict(answers).items():
            cols.append(self.column(member, item))
            vals.append(np.nan if v is None else float(v))
        self.record(np.full(len(cols), subject), cols, vals)

    # ------------------------------------------------------------------ prediction
    def predict(self, joint: bool = True, on_block=None) -> dict:
        """The current prediction arrays (see :func:`predict_scores`), 0-1; ``joint=False``:
        without the suite's joint link (the members' own curves); ``resid`` (N, G) the answer
        residuals at the posterior mean (:func:`answer_residuals`). ``on_block(done, total)``
        is called after each block of subjects (a progress bar's hook)."""
        self._posterior()
        link = self.joint if joint else None
        parts = []
        starts = range(0, len(self.subject_ids), PREDICT_BLOCK)
        for s0 in starts:
            r = slice(s0, s0 + PREDICT_BLOCK)
            th, w, resid, shift, jshift = self._draws(r, link)
            if link is not None and link.neighbours is not None:
                nshift = link.neighbours.shift(self._plain_points, self.asked[r], self.y[r],
                                               self.subject_ids[r])
                jshift = nshift if jshift is None else jshift + nshift
            pred = predict_scores(self.links, self.weights, th, w, self._e,
                                  self.prior.resid_corr, link, shift, jshift)
            pred = chance_bounds(self.links, self.weights, self.pool, self.asked[r], self.y[r],
                                 pred)
            parts.append(pred | {"resid": resid})
            if on_block is not None:
                on_block(len(parts), len(starts))
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def nearest_models(self, k: int = 5) -> list[list[tuple[str, float]]]:
        """Per subject, the ``k`` calibration models of the joint link's neighbour correction
        that answered the asked items most alike: (model id, share of the same answers);
        [] without a neighbour correction or answers."""
        nb = None if self.joint is None else self.joint.neighbours
        if nb is None:
            return [[] for _ in self.subject_ids]
        idx, sim = nb.nearest(self.asked, self.y, exclude=nb.index_of(self.subject_ids), k=k)
        return [[(nb.ids[i], float(a)) for i, a in zip(ri, ra) if i >= 0]
                for ri, ra in zip(idx, sim)]

    def _draws(self, r, link):
        """Subjects ``r``: posterior draws and weights, answer residuals at the posterior mean,
        the member links' answer corrections and the joint link's answer stacking shift."""
        th, w = importance(self.prior, self.lik.rows(r), self._z)
        theta = np.einsum("nk,nkb->nb", w, th)
        resid = answer_residuals(self.pool, theta, self.y[r], self.asked[r])
        shift = jshift = None
        if self.config.corrections:
            shift = answer_corrections(self._corrections, self.pool, resid, self.asked[r])
        if link is not None and link.answer_weights is not None:
            jshift = link.answer_shift(resid)
        return th, w, resid, shift, jshift

    def _plain_points(self, asked, y) -> np.ndarray:
        """(R, B) point predictions of the joint link without its neighbour correction (the
        posterior mean of the recalibrated draws, no interval) for answers ``y`` to the items
        ``asked`` (R, G): how the neighbour correction scores the neighbours."""
        out = []
        link = self.joint.without_neighbours()
        for s0 in range(0, len(asked), NEIGHBOUR_BLOCK):
            r = slice(s0, s0 + NEIGHBOUR_BLOCK)
            sub = SuiteSession(self.suite, self.config, range(len(asked[r])))
            sub.record_matrix(asked[r], y[r])
            sub._posterior()
            for t0 in range(0, len(sub.asked), PREDICT_BLOCK):
                rr = slice(t0, t0 + PREDICT_BLOCK)
                th, w, _, shift, jshift = sub._draws(rr, link)
                pts = np.einsum("nk,nkb->nb", w, link.apply(link_draws(self.links, th, shift)))
                out.append(pts if jshift is None else pts + jshift)
        return np.concatenate(out) if out else np.zeros((0, self.pool.n_members))

    def prediction(self, on_block=None) -> pd.DataFrame:
        """One row per subject: subject_id, n_items, average(_lo, _hi) and per member
        <name>, <name>_lo, <name>_hi, <name>_items (scores 0-1), stop_reason
        (``on_block``: see :meth:`predict`)."""
        p = self.predict(on_block=on_block)
        cols = {"subject_id": self.subject_ids, "n_items": self.n_items,
                "average": p["average"], "average_lo": p["average_lo"],
                "average_hi": p["average_hi"]}
        per = self.items_per_member()
        for b, name in enumerate(self.suite.names):
            cols[name] = p["score"][:, b]
            cols[f"{name}_lo"] = p["lo"][:, b]
            cols[f"{name}_hi"] = p["hi"][:, b]
            cols[f"{name}_items"] = per[:, b]
        cols["stop_reason"] = self.stop_reason
        return pd.DataFrame(cols)
