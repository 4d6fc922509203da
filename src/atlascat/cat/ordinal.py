"""The adaptive test on ordinal items (graded / gpcm :class:`PolyBank`), all examinees at once.

Each step gives every examinee still testing one item, as the binary engine
(:mod:`atlascat.cat.state`) does:

* first item: uniform among the items whose location b_j = -mean_k(d_jk) / a_j lies within
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
  theta); EAP theta, and SE = 1 / sqrt(sum_j I_j(theta) + 1 / prior_sd^2) (catR's) or the
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

from ..errors import ConfigError
from ..irt import polytomous as poly
from ..irt.polybank import PolyBank
from ..irt.quadrature import normal_quadrature
from .config import CATConfig

__all__ = ["OrdinalCATResult", "simulate_ordinal_cat", "item_locations"]


def item_locations(bank: PolyBank) -> np.ndarray:
    """b_j = -mean_k(d_jk) / a_j: the theta around which the item's categories sit."""
    return -np.nanmean(bank.params[:, 1:], axis=1) / bank.params[:, 0]


@dataclass
class OrdinalCATResult:
    """``persons``: one row per examinee (subject_id, theta, se, n_items, n_skipped,
    stop_reason [, true_theta]); ``administered``: one row per item given (subject_id, step,
    item_id, category, score (the rating on the item's scale), theta, se after it);
    ``exposure``: the share of examinees who saw each item."""
    persons: pd.DataFrame
    administered: pd.DataFrame
    exposure: pd.Series


def _check(config: CATConfig):
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
        raise ConfigError(f"stopping rule(s) {extra} are for binary banks; an ordinal bank "
                          "stops on min_items, max_items and se_stop")


def simulate_ordinal_cat(bank: PolyBank, config: CATConfig | None = None, *, responses=None,
                         thetas=None, subject_ids=None, rng=None) -> OrdinalCATResult:
    """Adaptive tests of every examinee on an ordinal bank (module docstring).

    ``responses``: recorded ratings to replay (a labelled DataFrame aligned by item id, or an
    array in the bank's item order; ratings on the items' own scales, NaN = not recorded);
    or ``thetas``: true abilities, answers drawn from the model. ``rng``: a
    ``numpy.random.Generator`` (or a seed).
    """
    from ..irt.polyscore import ordinal_codes

    config = CATConfig() if config is None else config
    _check(config)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if (responses is None) == (thetas is None):
        raise ConfigError("give responses (ratings to replay) or thetas (answers drawn from "
                          "the model), not both")
    true_theta = None
    if responses is not None:
        codes = ordinal_codes(responses, bank)
        if subject_ids is None and isinstance(responses, pd.DataFrame):
            subject_ids = [str(s) for s in responses.index]
    else:
        true_theta = np.asarray(thetas, dtype=float).reshape(-1)
        codes = None
    n = len(codes) if codes is not None else true_theta.size
    ids = np.asarray([str(s) for s in (range(n) if subject_ids is None else subject_ids)],
                     dtype=object)
    est, sel, stop, expo = config.estimation, config.selection, config.stopping, config.exposure
    quad = normal_quadrature(est.quadpts, est.theta_range, est.prior_mean, est.prior_sd)
    nodes, log_w = quad.nodes, quad.log_weights.copy()
    if est.quadrature_rule == "trapezoid":
        log_w[[0, -1]] += np.log(0.5)
    J = len(bank)
    lpt = bank.log_prob(nodes).transpose(0, 2, 1)            # (J, K, Q)
    loc = item_locations(bank)
    prec = 1.0 / est.prior_sd**2
    k_best = max(1, int(sel.randomesque))
    max_items = min(int(stop.max_items), J)
    cap = None
    if expo.method == "eligibility":
        cap = int(np.floor(expo.r_max * n))
        if cap < 1:
            raise ConfigError(f"r_max = {expo.r_max} lets no item be given to {n} examinees")
    sh_k = None
    if expo.method == "sympson_hetter":
        sh_k = np.array([expo.params.get(str(i), 1.0) for i in bank.item_ids])
    counts = np.zeros(J, dtype=np.int64)

    log_post = np.tile(log_w - np.logaddexp.reduce(log_w), (n, 1))
    used = np.zeros((n, J), dtype=bool)                 # given, skipped or rejected
    given = np.zeros((n, J), dtype=bool)
    n_items = np.zeros(n, dtype=int)
    n_skip = np.zeros(n, dtype=int)
    done = np.zeros(n, dtype=bool)
    reason = np.full(n, "", dtype=object)
    theta, se = np.full(n, est.prior_mean), np.full(n, est.prior_sd)
    # item information on a 0.01-spaced grid over the theta range, read by linear
    # interpolation (error h^2 |I''| / 8, below 1e-4 of the peak for slopes up to 3)
    lo, hi = (float(v) for v in est.theta_range)
    grid = np.linspace(lo, hi, int(round((hi - lo) / 0.01)) + 1)
    info_grid = poly.item_information(bank.models, bank.params, grid)   # (G, J)
    h = grid[1] - grid[0]

    def info_at(t):
        pos = np.clip((t - lo) / h, 0.0, len(grid) - 1.000001)
        i0 = pos.astype(int)
        f = (pos - i0)[:, None]
        return (1.0 - f) * info_grid[i0] + f * info_grid[i0 + 1]

    info = info_at(theta)                                           # (n, J) at current theta
    log: list[tuple] = []
    step = 0

    def pick(rows, first):
        """Randomesque pick among each row's best available items (vectorized)."""
        blocked = used[rows]
        if cap is not None:
            blocked = blocked | (counts >= cap)[None, :]
        if first:
            score = -np.abs(loc[None, :] - sel.theta0) + 0.0 * info[rows]
            inside = score > -sel.first_item_window
            has = (inside & ~blocked).any(axis=1)
            # uniform among the window's items, else the nearest
            score = np.where(has[:, None], np.where(inside, rng.random(score.shape), -np.inf),
                             score)
            kk = np.ones(len(rows), dtype=int)
        elif sel.criterion == "random":
            score = rng.random((len(rows), J))
            kk = np.ones(len(rows), dtype=int)
        else:
            score = info[rows].copy()
            kk = np.full(len(rows), k_best)
        score = np.where(blocked, -np.inf, score)
        avail = np.isfinite(score).sum(axis=1)
        kk = np.minimum(kk, avail)
        top = int(max(1, kk.max()))
        r = np.arange(len(rows))[:, None]
        best = np.argpartition(-score, top - 1, axis=1)[:, :top] if top < J else \
            np.tile(np.arange(J), (len(rows), 1))
        order = best[r, np.argsort(-score[r, best], axis=1, kind="stable")]
        u = rng.random(len(rows))
        choice = np.minimum((u * np.maximum(kk, 1)).astype(int), np.maximum(kk - 1, 0))
        out = order[r[:, 0], choice]
        return np.where(avail > 0, out, -1)

    while True:
        act = np.flatnonzero(~done)
        if act.size == 0:
            break
        first = n_items[act] == 0
        item = np.full(act.size, -1)
        for grp in (first, ~first):
            if grp.any():
                item[grp] = pick(act[grp], bool(first[grp][0]))
        if sh_k is not None:                            # Sympson-Hetter trials
            for _ in range(int(expo.sh_max_trials)):
                trial = (item >= 0) & (rng.random(act.size) >= sh_k[np.maximum(item, 0)])
                if not trial.any():
                    break
                used[act[trial], item[trial]] = True
                item[trial] = pick(act[trial], False)
        if cap is not None:                             # same-step contention, examinee order
            for _ in range(J):
                ok = item >= 0
                rank = pd.Series(item[ok]).groupby(item[ok]).cumcount().to_numpy()
                over = np.zeros(act.size, dtype=bool)
                over[np.flatnonzero(ok)] = counts[item[ok]] + rank >= cap
                if not over.any():
                    break
                counts_tmp = counts.copy()
                np.add.at(counts_tmp, item[ok & ~over], 1)
                full = counts_tmp >= cap
                used_save = used[act[over]].copy()
                used[act[over]] |= full[None, :]
                item[over] = pick(act[over], False)
                used[act[over]] = used_save
        none = item < 0
        done[act[none]] = True
        reason[act[none]] = "bank exhausted"
        act, item = act[~none], item[~none]
        if act.size == 0:
            continue
        used[act, item] = True
        if codes is not None:
            cat = codes[act, item]
            miss = np.isnan(cat)
            n_skip[act[miss]] += 1
            act, item, cat = act[~miss], item[~miss], cat[~miss].astype(int)
        else:
            # each (item, theta) pair once: slope a theta at the single node 1 gives
            # z = a theta + d (graded) and k a theta + d_k (gpcm)
            pp = bank.params[item].copy()
            pp[:, 0] *= true_theta[act]
            pj = np.nan_to_num(np.exp(poly.log_prob(bank.models[item], pp, [1.0])[:, 0, :]))
            u = rng.random(act.size)[:, None]
            cat = np.minimum((np.cumsum(pj, axis=1) < u).sum(axis=1),
                             bank.n_cat[item] - 1)
        np.add.at(counts, item, 1)
        given[act, item] = True
        n_items[act] += 1
        log_post[act] += lpt[item, cat]
        lp = log_post[act]
        w = np.exp(lp - lp.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        theta[act] = w @ nodes
        info[act] = info_at(theta[act])
        if est.se_method == "information":
            se[act] = 1.0 / np.sqrt((info[act] * given[act]).sum(axis=1) + prec)
        else:
            se[act] = np.sqrt(np.clip(w @ nodes**2 - theta[act] ** 2, 0.0, None))
        step += 1
        log.append((act, item, cat, theta[act].copy(), se[act].copy(), n_items[act].copy()))
        se_ok = stop.se_stop is not None
        hit_se = (n_items >= stop.min_items) & (se <= stop.se_stop) if se_ok else \
            np.zeros(n, dtype=bool)
        hit_max = n_items >= max_items
        left = (~used).any(axis=1)
        for mask, why in ((hit_se, "se"), (hit_max, "max_items"), (~left, "bank exhausted")):
            new = mask & ~done
            reason[new] = why
            done |= new
    cols = ("subject_id", "step", "item_id", "category", "score", "theta", "se")
    adm = pd.DataFrame({c: [] for c in cols})
    if log:
        r_, j_, c_, t_, s_, n_ = (np.concatenate(v) for v in zip(*log))
        adm = pd.DataFrame({"subject_id": ids[r_], "step": n_, "item_id": bank.item_ids[j_],
                            "category": c_,
                            "score": [bank.levels[j][c] for j, c in zip(j_, c_)],
                            "theta": t_, "se": s_})
        adm = adm.sort_values(["subject_id", "step"], kind="stable").reset_index(drop=True)
    persons = pd.DataFrame({"subject_id": ids, "theta": theta, "se": se, "n_items": n_items,
                            "n_skipped": n_skip, "stop_reason": reason})
    if true_theta is not None:
        persons["true_theta"] = true_theta
    exposure = pd.Series(given.sum(axis=0) / max(n, 1), index=bank.item_ids, name="exposure")
    return OrdinalCATResult(persons, adm, exposure)
