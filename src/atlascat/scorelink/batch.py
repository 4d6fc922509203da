"""Score-link predictions of many examinees at once: :func:`predict_batch`.

The arithmetic of :meth:`ScoreLink.predict <atlascat.scorelink.score_link.ScoreLink.predict>`, on
arrays of examinees instead of one at a time (see :mod:`atlascat.scorelink.score_link` for the model):

    score = g(theta, SE) + c_0 + sum_{j answered} w_j (y_j - P_j(theta))

with the 95% interval widened outside the link's data (floor / top), to the number-correct
interval where the answers do not fit (Snijders' lz* < -2.326; Wilson 95% interval of the
proportion correct mapped through mean_j P_j(theta)), and down to chance where the number right
cannot be told from guessing (binomial tail >= 0.025).

Each examinee's answers are kept in the order they were given (:func:`answer_table`), and the
sums over one examinee's answers (the correction, the expected proportion correct, the number
right) are taken over rows of equal length together: NumPy sums each row of such a block as it
sums one examinee's list, so every row's floating-point result is the one ``predict`` returns
for it. What loops in Python is the distinct answer counts (at most the test length) and the
distinct ties of a score with the leaderboard quantiles, never the examinees.

Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference.
JASA 22(158), 209-212. Snijders, T. A. B. (2001). Asymptotic null distribution of person fit
statistics with estimated person parameter. Psychometrika 66(3), 331-342.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import BankError, ConfigError
from . import honesty
from .settings import LZ_CRITICAL, MIN_FIT_ITEMS, Z95

__all__ = ["Answers", "BatchPrediction", "answer_table", "predict_batch"]


@dataclass(frozen=True)
class Answers:
    """Each examinee's answered items of a link's bank, in the order they were given.

    ``cols`` (n, K): bank positions, -1 padded; ``ys`` (n, K): the scores (NaN padded);
    ``count`` (n,): answers per examinee.
    """

    cols: np.ndarray
    ys: np.ndarray
    count: np.ndarray

    def take(self, rows) -> "Answers":
        return Answers(self.cols[rows], self.ys[rows], self.count[rows])

    def matrix(self, n_items: int) -> np.ndarray:
        """(n, n_items) scores, NaN where not answered."""
        y = np.full((self.count.size, n_items), np.nan)
        r, k = np.nonzero(self.cols >= 0)
        y[r, self.cols[r, k]] = self.ys[r, k]
        return y


def answer_table(link, subject_ids, administered) -> Answers:
    """The answers of every examinee in ``subject_ids`` from a long frame (subject_id, item_id,
    score), as :meth:`ScoreLink.predict` reads a mapping item_id -> score built from the
    frame's rows in order: items outside the link's bank and missing scores are left out; an
    item given twice keeps its first place and its last score."""
    import pandas as pd

    n = len(subject_ids)
    codes, subjects = pd.factorize(administered["subject_id"].to_numpy())
    index = {} if link.item_ids is None else {i: k for k, i in enumerate(link.item_ids)}
    at = pd.Index(list(index)).get_indexer(administered["item_id"].astype(str).to_numpy())
    col = np.append(np.fromiter(index.values(), np.intp, len(index)), -1)[at]   # -1: not in it
    keep = np.flatnonzero((col >= 0) & (codes >= 0))
    code, col = codes[keep], col[keep]
    y = administered["score"].to_numpy(float)[keep]
    o = np.lexsort((keep, col, code))           # by examinee, item, then place in the frame
    code, col, pos, y = code[o], col[o], keep[o], y[o]
    first = np.r_[True, (code[1:] != code[:-1]) | (col[1:] != col[:-1])] if o.size else o > 0
    last = np.r_[first[1:], True] if o.size else first
    code, col, pos, y = code[first], col[first], pos[first], y[last]
    ok = ~np.isnan(y)
    code, col, pos, y = code[ok], col[ok], pos[ok], y[ok]
    o = np.lexsort((pos, code))                 # each examinee's answers in the frame's order
    code, col, y = code[o], col[o], y[o]
    count = np.bincount(code, minlength=len(subjects) + 1)   # + an empty row for the unknown
    rank = np.arange(code.size) - np.repeat(np.cumsum(count) - count, count)
    width = int(count.max()) if count.size else 0
    cols = np.full((count.size, width), -1, dtype=np.intp)
    ys = np.full((count.size, width), np.nan)
    cols[code, rank], ys[code, rank] = col, y
    rows = pd.Index(subjects).get_indexer(pd.Index(subject_ids)) if n else np.zeros(0, np.intp)
    rows = np.where(rows >= 0, rows, len(subjects))
    return Answers(cols, ys, count).take(rows)


@dataclass(frozen=True)
class BatchPrediction:
    """Arrays, one value per examinee (NaN / False where theta or SE is not finite)."""

    score: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    percentile: np.ndarray
    below: np.ndarray       # theta - 1.96 SE below the link's support
    above: np.ndarray       # theta + 1.96 SE above it
    lz: np.ndarray          # lz* where the answers do not fit the model, NaN elsewhere
    guess: np.ndarray       # the number right cannot be told from guessing
    n_right: np.ndarray
    n_answered: np.ndarray

    @property
    def misfit(self) -> np.ndarray:
        return ~np.isnan(self.lz)


def _probabilities(link, theta, cols):
    """P_j(theta) of each row's items ``cols`` (theta broadcast against cols)."""
    a, b, c, u = (link.item_params[cols, q] for q in range(4))
    return c + (u - c) / (1.0 + np.exp(-a * (theta - b)))


def _keys(link, cols, count) -> np.ndarray:
    """The correction of each row ("" none, "cat", "anchors"): ScoreLink._correction_key."""
    keys = np.full(count.size, "", dtype=object)
    if not link.corrections:
        return keys
    has = count > 0
    keys[has] = "cat" if "cat" in link.corrections else ""
    if "anchors" in link.corrections and link.anchor_items:
        index = {i: k for k, i in enumerate(link.item_ids)}
        anchors = np.array([index[a] for a in link.anchor_items])
        every = (cols[:, :, None] == anchors).any(1).all(1)
        keys[has & every] = "anchors"
    return keys


def _row_interp(x, xp, fp):
    """np.interp(x[i], xp[i], fp) for every row i (each row's xp increasing), with np.interp's
    own formula: fp[j] + slope (x - xp[j]), slope = (fp[j+1] - fp[j]) / (xp[j+1] - xp[j]),
    fp[j] where x = xp[j], the end values beyond the ends."""
    n = xp.shape[1]
    j = (xp <= x[:, None]).sum(1) - 1
    jc = np.clip(j, 0, n - 2)
    r = np.arange(x.size)
    x0, x1 = xp[r, jc], xp[r, jc + 1]
    slope = (fp[jc + 1] - fp[jc]) / (x1 - x0)
    out = np.where(x0 == x, fp[jc], slope * (x - x0) + fp[jc])
    return np.where(j < 0, fp[0], np.where(j >= n - 1, fp[-1], out))


def _accuracy_intervals(link, cols, ys, scale):
    """:func:`honesty.accuracy_interval` of rows with the same number of answers k: the Wilson
    interval of the proportion correct through E(theta) = mean_j P_j(theta) on the grid, then
    the curve +- 1.96 x scale x the residual SD (floor / top beyond the support)."""
    n = cols.shape[1]
    p = ys.mean(1)
    z = Z95
    den = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    grid = link.theta_grid
    E = np.maximum.accumulate(_probabilities(link, grid[None, :, None], cols[:, None, :])
                              .mean(-1), axis=1)
    E = E + 1e-12 * np.arange(grid.size)
    low, high = link.support_bounds()
    floor, top = link.support["floor"], link.support["top"]

    def end(q, beyond_first, fallback, side):
        inside = ~beyond_first
        t = np.full(q.size, np.nan)
        t[inside] = _row_interp(q[inside], E[inside], grid)
        sd = np.sqrt(np.interp(t, grid, link.var_grid))
        curve = np.interp(t, grid, link.score_grid)
        spread = z * scale * sd
        out_of, value = (t < low, curve - spread) if side < 0 else (t > high, curve + spread)
        return np.where(beyond_first | out_of, fallback, value)

    p_lo, p_hi = centre - half, centre + half
    lo = end(p_lo, p_lo <= E[:, 0], floor, -1)
    hi = end(p_hi, p_hi >= E[:, -1], top, 1)
    return np.maximum(0.0, lo), np.minimum(1.0, hi)


def _percentiles(link, score) -> np.ndarray:
    """:func:`~atlascat.scorelink.score_link.percentile_of` of every score."""
    if link.quantiles is None:
        raise BankError("this score link carries no leaderboard distribution")
    q = link.quantiles
    levels = np.linspace(0.0, 100.0, q.size)
    out = np.interp(score, q, levels)
    lo = np.searchsorted(q, score, side="left")
    hi = np.searchsorted(q, score, side="right")
    tie = (hi > lo) & (score > q[0]) & (score < q[-1])
    for a, b in set(zip(lo[tie].tolist(), hi[tie].tolist())):   # distinct ties
        out[tie & (lo == a) & (hi == b)] = float(levels[a:b].mean())
    out[score <= q[0]] = 0.0
    out[score >= q[-1]] = 100.0
    return out


def predict_batch(link, theta, se, answers: Answers | None = None) -> BatchPrediction:
    """:meth:`ScoreLink.predict` of every examinee (``answers``: :func:`answer_table`, None for
    theta and SE alone), as arrays; rows without a finite theta and SE get NaN."""
    theta = np.asarray(theta, float).reshape(-1)
    se = np.asarray(se, float).reshape(-1)
    ok = np.isfinite(theta) & np.isfinite(se)
    if (ok & (se < 0)).any():
        i = int(np.flatnonzero(ok & (se < 0))[0])
        raise ConfigError(f"predict needs a finite theta and SE >= 0, got {theta[i]}, {se[i]}")
    if answers is None:
        answers = Answers(np.full((theta.size, 0), -1, np.intp), np.full((theta.size, 0), np.nan),
                          np.zeros(theta.size, np.intp))
    rows = np.flatnonzero(ok)
    th, sv, ans = theta[rows], se[rows], answers.take(rows)
    m = rows.size
    keys = _keys(link, ans.cols, ans.count)
    r, scale = np.zeros(m), np.full(m, link.interval_scale)
    n_right = np.zeros(m)
    for key in ("", "cat", "anchors"):
        g = keys == key
        if g.any():
            base = link.corrections[key]["scale"] if key else link.interval_scale
            scale[g] = base * link._local(key or None, th[g])
    scale = scale * link._length(ans.count)
    for k in np.unique(ans.count[ans.count > 0]):   # rows with k answers, summed together
        g = np.flatnonzero(ans.count == k)
        cols, ys = ans.cols[g, :k], ans.ys[g, :k]
        n_right[g] = ys.sum(1)
        for key in ("cat", "anchors"):
            h = keys[g] == key
            if h.any():
                c = link.corrections[key]
                P = _probabilities(link, th[g[h]][:, None], cols[h])
                r[g[h]] = c["intercept"] + np.sum(c["weights"][cols[h]] * (ys[h] - P), axis=1)
    score, lo, hi = link._predict_arrays(th, sv, r, scale)
    score, lo, hi, below, above = link.honest(th, sv, score, lo, hi)
    lz = np.full(m, np.nan)
    if link.item_params is not None and (enough := ans.count >= MIN_FIT_ITEMS).any():
        y = ans.take(enough).matrix(len(link.item_ids))
        lz[enough] = link._lz_star(th[enough], y)
        lz[~(np.isfinite(lz) & (lz < LZ_CRITICAL))] = np.nan   # kept where they do not fit
    for k in np.unique(ans.count[~np.isnan(lz)]):
        g = np.flatnonzero(~np.isnan(lz) & (ans.count == k))
        alo, ahi = _accuracy_intervals(link, ans.cols[g, :k], ans.ys[g, :k], scale[g])
        lo[g], hi[g] = np.minimum(lo[g], alo), np.maximum(hi[g], ahi)
    guess = honesty.chance_not_excluded(link, ans.count, n_right)
    lo = np.where(guess, np.minimum(lo, link.chance), lo)
    pct = _percentiles(link, score) if m else np.zeros(0)

    def full(values, fill):
        out = np.full(theta.size, fill, dtype=np.asarray(values).dtype)
        out[rows] = values
        return out

    return BatchPrediction(full(score, np.nan), full(lo, np.nan), full(hi, np.nan),
                           full(pct, np.nan), full(below, False), full(above, False),
                           full(lz, np.nan), full(guess, False), full(n_right, np.nan),
                           full(ans.count, 0))
