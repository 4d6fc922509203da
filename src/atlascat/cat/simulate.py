"""simulate_cat: the adaptive test of many examinees at once, on the engine live sessions share.

Algorithm (ATLAS paper, Algorithm 1), for every examinee::

    first item: uniform among items with |b - theta0| < window (nearest item if none)
    repeat:     administer, score, update the posterior, estimate theta and SE
                stop?  (SE <= tau and n >= min_items, or n = max_items, or another rule)
                next item: randomesque pick among the k best by the selection criterion

Estimation. The log-posterior of each examinee lives on a fixed quadrature grid and is updated
incrementally: answering item j with score y adds y log P_j(theta_q) + (1 - y) log Q_j(theta_q)
to node q (O(n_nodes) per answer). EAP theta = sum_q w_q theta_q / sum_q w_q and posterior SD
follow (Bock and Mislevy, 1982). The reported SE is either the posterior SD or, as catR's
``semTheta`` for a Bayesian estimate, 1 / sqrt(sum_j I_j(theta) + 1 / prior_sd^2) over the
administered items (``se_method``).

Batching. The engine (:mod:`atlascat.cat.state`) holds the state of n examinees as arrays;
:func:`simulate_cat` (this module) advances all active examinees together (one step = one
selection + one answer for each of them), so the hot path is NumPy over (examinee x item)
blocks with no Python loop over items or examinees. :class:`CATSession`
(:mod:`atlascat.cat.session`) is the same core with n = 1. Every computation is row-wise, and
each examinee draws its random numbers from its own generator in a fixed amount per selection
(``config.uniforms_per_step``), so with ``rng.spawn`` children a batched simulation and
sessions run one by one give identical item sequences and estimates.

Modules: :mod:`~atlascat.cat.tables` (grid and log P / log Q tables per bank and config),
:mod:`~atlascat.cat.state` (engine state and one step), :mod:`~atlascat.cat.rounds` (joint
rounds of k items), :mod:`~atlascat.cat.session` (:class:`CATSession`),
:mod:`~atlascat.cat.result` (:class:`CATResult`), :mod:`~atlascat.cat.generators`
(per-examinee generators).

References
----------
Bock, R. D. and Mislevy, R. J. (1982). Adaptive EAP estimation of ability in a microcomputer
environment. Applied Psychological Measurement, 6(4), 431-444.
Magis, D. and Raiche, G. (2012). Random generation of response patterns under computerized
adaptive testing with the R package catR. Journal of Statistical Software, 48(8).
"""
from __future__ import annotations

import time

import numpy as np

from .._blas import with_small_products
from ..errors import ConfigError
from ..irt.bank import ItemBank, check_bank
from ..validation import check_thetas
from .answers import CallableAnswers, ModelAnswers, ReplayAnswers, UniformStreams
from .config import CATConfig, tested_under_one_prior
from .exposure import make_exposure_control
from .generators import _as_generator
from .result import CATResult
from .rounds import BATCH_METHODS
from .state import _Engine

__all__ = ["simulate_cat"]

_REPICK_EXTRA = 16  # ranked candidates kept beyond the pick size for re-picks after skips


@with_small_products
def simulate_cat(bank: ItemBank, config: CATConfig | None = None, *, responses=None, thetas=None,
                 answer_fn=None, rng=None, subject_ids=None, theta_ref=None,
                 progress=None, batch_size: int = 1, batch_cut: str = "predicted",
                 batch_method: str = "mepv", dispersion=None, answer_seeds=None) -> CATResult:
    """Run the adaptive test for many examinees at once.

    Exactly one answer source: ``responses`` (ResponseMatrix or (n, J) array in bank order:
    replay real answers; cells without an answer are skipped and counted, and an examinee whose
    pool holds no answered item any more is finished, ``bank_exhausted``), ``thetas`` (true
    abilities: answers drawn from the bank's model), or ``answer_fn(subject_ids, item_ids) ->
    scores`` (with ``subject_ids``). With ``thetas`` the true values are the reference for the
    error columns; ``theta_ref`` supplies reference values otherwise. ``dispersion`` (with
    ``thetas``): each bank item's phi_j of the drawn answers, Beta scores of mean P and
    variance phi_j P Q, while the test scores ``bank`` as it is (a bank folder of continuous
    scores: :func:`atlascat.bankdir.adaptive.answering_bank`); default the bank's own column.
    ``answer_seeds`` (with ``thetas``): one answer seed per examinee, who then answers item j
    at :func:`~atlascat.cat.answers.item_uniform` of (its seed, j), as the live
    ``simulate:THETA:SEED`` subject does (``atlas simulate --thetas``).

    Randomness: ``rng`` a seed or Generator, or a list of n Generators (examinee i's selection
    generator; with ``thetas`` only beside ``answer_seeds``). ``sel = rng.spawn(n)`` gives examinee i's selection
    generator (the one a
    :class:`CATSession` for it would get); with ``thetas``, a second ``ans = rng.spawn(n)`` gives
    its answer stream (answer k = 1{ans[i].random() < P}; on a bank with a ``dispersion``
    column the Beta score at that uniform, :func:`atlascat.irt.dispersion.draw_scores`). So::

        rng = np.random.default_rng(s); sel = rng.spawn(n); ans = rng.spawn(n)
        CATSession(bank, config, sel[i])   # reproduces examinee i exactly

    ``batch_size=k`` runs the test in rounds of up to k items chosen jointly
    (:meth:`CATSession.next_items`, ``cut=batch_cut``, ``method=batch_method``), all answered before the next round;
    examinee i is then exactly a session driven by ``next_items(k)`` / ``record_many`` with
    ``sel[i]`` (answers with no value are skipped; no re-pick inside a round). The number of
    rounds per examinee is the ``rounds`` column of ``persons``. ``k = 1`` is the classic CAT.

    ``progress(n_done, n_total)`` is called after every step (round).

    A :class:`~atlascat.irt.polybank.PolyBank` (graded / gpcm items) runs the ordinal adaptive
    test, :func:`atlascat.cat.ordinal.simulate_ordinal_cat` (``responses`` or ``thetas``;
    rounds of one item), and returns its :class:`~atlascat.cat.ordinal.OrdinalCATResult`.
    """
    from ..irt.polybank import PolyBank

    if isinstance(bank, PolyBank):
        if answer_fn is not None or batch_size != 1 or theta_ref is not None or \
                dispersion is not None:
            raise ConfigError("an ordinal bank's adaptive test takes responses= or thetas=, "
                              "one item per round (no answer_fn, batch_size or theta_ref)")
        from .ordinal import simulate_ordinal_cat

        return simulate_ordinal_cat(bank, config, responses=responses, thetas=thetas,
                                    subject_ids=subject_ids, rng=rng, answer_seeds=answer_seeds)
    t_start = time.perf_counter()
    check_bank(bank, what="an ItemBank or a PolyBank")
    config = CATConfig() if config is None else config
    if not isinstance(config, CATConfig):
        raise ConfigError(f"config must be a CATConfig, got {type(config).__name__}")
    tested_under_one_prior(bank, config)
    given = [x is not None for x in (responses, thetas, answer_fn)]
    if sum(given) != 1 and not (responses is not None and thetas is not None
                                and answer_fn is None):
        raise ConfigError("give exactly one answer source: responses=, thetas= or answer_fn=")
    if dispersion is not None and (thetas is None or responses is not None):
        raise ConfigError("dispersion is of the answers drawn at thetas=; recorded answers "
                          "(responses=, answer_fn=) are what they are")
    per_examinee = isinstance(rng, (list, tuple))   # one selection Generator per examinee
    if answer_seeds is not None and (thetas is None or responses is not None):
        raise ConfigError("answer_seeds are of the answers drawn at thetas=")
    if per_examinee and thetas is not None and responses is None and answer_seeds is None:
        raise ConfigError("one Generator per examinee is for replayed answers (responses=) or "
                          "answers keyed by answer_seeds=; with thetas= alone give one "
                          "Generator or seed")
    rng = list(rng) if per_examinee else _as_generator(rng)
    ref_name = "theta_ref"
    if responses is not None:
        source = ReplayAnswers(responses, bank, subject_ids)
        sel_rngs = rng if per_examinee else rng.spawn(source.n_examinees)
        if thetas is not None:  # thetas then only serve as the reference
            theta_ref, ref_name = thetas, "thetas (the reference of responses=)"
    elif thetas is not None:
        # answers drawn from the model: 0/1, or on a bank of continuous scores Beta scores
        # whose variance is the one its dispersion column (the posterior's) describes
        n = check_thetas(thetas, "true thetas").size
        sel_rngs = rng if per_examinee else rng.spawn(n)
        source = ModelAnswers(thetas, bank, None if answer_seeds is not None else rng.spawn(n),
                              subject_ids, dispersion, seeds=answer_seeds)
        theta_ref = source.thetas if theta_ref is None else theta_ref
    else:
        if subject_ids is None:
            raise ConfigError("answer_fn needs subject_ids (one per examinee)")
        source = CallableAnswers(answer_fn, bank, subject_ids)
        sel_rngs = rng if per_examinee else rng.spawn(source.n_examinees)
    n = source.n_examinees
    if len(sel_rngs) != n:
        raise ConfigError(f"{len(sel_rngs)} Generators for {n} examinees")
    if theta_ref is not None:
        theta_ref = check_thetas(theta_ref, "thetas (the reference)", error=ConfigError,
                                 finite=False)
        if theta_ref.size != n:
            raise ConfigError(f"{ref_name} has {theta_ref.size} values for {n} examinees "
                              "(one per examinee, in their order)")
        if n and np.isnan(theta_ref).all():
            raise ConfigError(f"{ref_name} holds no reference theta for any of the {n} "
                              "examinees (CLI: the --thetas file names none of RESPONSES' "
                              "subjects); give the reference thetas under the matrix's "
                              "subject ids, or drop them")

    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ConfigError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    batch_size = min(int(batch_size), len(bank.item_ids))   # a round asks at most the bank
    if batch_cut not in ("predicted", "none"):
        raise ConfigError(f"batch_cut must be 'predicted' or 'none', got {batch_cut!r}")
    if batch_method not in BATCH_METHODS:
        raise ConfigError(f"batch_method must be one of {BATCH_METHODS}, got {batch_method!r}")
    exp = make_exposure_control(bank, config, cohort=n)
    if exp is not None:
        exp.start(n)
    eng = _Engine(bank, config, n, exposure=exp)
    streams = UniformStreams(sel_rngs)
    seconds = np.zeros(n)
    # replayed answers: once an examinee has no answered item left in its pool it is finished
    # (instead of skipping through the rest of the bank one item per step)
    answerable = getattr(source, "answerable", None)
    left = None if answerable is None else answerable.copy()
    if left is not None:
        eng.finish(np.flatnonzero(left == 0), "bank_exhausted")
    if batch_size > 1:
        rounds = _simulate_rounds(eng, source, streams, exp, int(batch_size), batch_cut,
                                  batch_method, seconds, progress, left)
        wall = time.perf_counter() - t_start
        res = _collect(bank, config, eng, source.subject_ids, seconds, theta_ref, wall)
        res.insert_person_column("n_skipped", "rounds", rounds)
        res.batch_size = int(batch_size)
        return res
    k = config.uniforms_per_step
    # skipped items re-picked from the ranking already made (theta has not moved): replay only,
    # and not under exposure control (its state changes between picks)
    repick = answerable is not None and exp is None and config.selection.criterion != "random"
    active = np.flatnonzero(~eng.done)
    while active.size:
        t0 = time.perf_counter()
        u = streams.next(active, k)
        if repick:
            items, cache = eng.select(active, u, keep=True, extra=_REPICK_EXTRA)
        else:
            items = eng.select(active, u)
        if exp is not None and exp.caps_cohort:
            items = exp.resolve_conflicts(eng, active, items, u)
        none = items < 0
        if none.any():
            eng.finish(active[none], "bank_exhausted")
        where = np.flatnonzero(~none)
        rows, items = active[where], items[where]
        y = source.answers(rows, items)
        miss = np.isnan(y)
        if miss.any() and repick:
            y, items = _repick_skipped(eng, source, streams, cache, where, rows, items, y)
            miss = np.isnan(y)
        elif miss.any():
            eng.skip(rows[miss], items[miss])
        eng.record(rows[~miss], items[~miss], y[~miss])
        if left is not None:
            scored = rows[~miss]
            left[scored] -= 1
            eng.finish(scored[left[scored] == 0], "bank_exhausted")
        seconds[active] += (time.perf_counter() - t0) / active.size
        active = active[~eng.done[active]]
        if progress is not None:
            progress(int(eng.done.sum()), n)
    wall = time.perf_counter() - t_start
    return _collect(bank, config, eng, source.subject_ids, seconds, theta_ref, wall)


def _simulate_rounds(eng: _Engine, source, streams, exp, k: int, cut: str, method: str,
                     seconds, progress, left) -> np.ndarray:
    """The batched loop of :func:`simulate_cat`: rounds of up to k items per examinee.

    Mirrors a session driven by ``next_items(k)`` / ``record_many``: the round's picks
    (:meth:`_Engine.select_batch`), then its answers in pick order (scored, or skipped when
    missing), then one stopping check for the rows that scored something. Replayed answers:
    an examinee with no answered item left in its pool (``left``: answered items left per
    examinee, None: not a replay) is finished (``bank_exhausted``). Returns the number of rounds
    of every examinee.
    """
    n = eng.n
    ups = eng.config.uniforms_per_step
    cohort = exp is not None and exp.caps_cohort
    resolve = (lambda r, items, u: exp.resolve_conflicts(eng, r, items, u)) if cohort else None
    reserve = exp.reserve if cohort else None
    rounds = np.zeros(n, dtype=np.intp)
    active = np.flatnonzero(~eng.done)
    while active.size:
        t0 = time.perf_counter()
        picks = eng.select_batch(active, k, lambda r: streams.next(r, ups), cut=cut,
                                 method=method, resolve=resolve, reserve=reserve)
        if cohort:
            exp.release()
        none = picks[:, 0] < 0
        eng.finish(active[none], "bank_exhausted")
        rounds[active[~none]] += 1
        scored = np.zeros(active.size, dtype=bool)
        for m in range(k):
            idx = np.flatnonzero(picks[:, m] >= 0)
            if idx.size == 0:
                break
            rows, items = active[idx], picks[idx, m]
            y = source.answers(rows, items)
            miss = np.isnan(y)
            eng.record(rows[~miss], items[~miss], y[~miss], check_stop=False)
            if miss.any():
                eng.skip(rows[miss], items[miss])
            scored[idx[~miss]] = True
            if left is not None:
                left[rows[~miss]] -= 1
        eng.check_stop(active[scored])
        if left is not None:
            eng.finish(active[left[active] == 0], "bank_exhausted")
        seconds[active] += (time.perf_counter() - t0) / active.size
        active = active[~eng.done[active]]
        if progress is not None:
            progress(int(eng.done.sum()), n)
    return rounds


def _repick_skipped(eng, source, streams, cache, where, rows, items, y):
    """Skip unanswered picks and pick again from the cached ranking until every row has an
    answer or its cached list no longer settles the pick (it then selects afresh next step).

    Exactly the picks a fresh selection would make: theta, n and costs are unchanged by a
    skip, so the ranking of the other items is too; the top k of what is left is the first k
    remaining entries of the cached list, provided it still has k of them (or holds every
    eligible item). Each pick consumes one uniform, as a fresh selection would.
    """
    cand_all, k_all, complete_all = cache
    cand, k, complete = cand_all[where], k_all[where], complete_all[where]
    removed = np.zeros(cand.shape, dtype=bool)
    items = items.copy()
    y = y.copy()
    todo = np.flatnonzero(np.isnan(y))
    while todo.size:
        eng.skip(rows[todo], items[todo])
        removed[todo] |= cand[todo] == items[todo][:, None]
        remaining = (cand[todo] >= 0) & ~removed[todo]
        n_rem = remaining.sum(axis=1)
        ok = ((complete[todo] | (n_rem >= k[todo])) & (n_rem > 0) & ~eng.done[rows[todo]])
        if not ok.any():
            break
        t, rem = todo[ok], remaining[ok]
        u = streams.next(rows[t], eng.config.uniforms_per_step)[:, 0]
        k_eff = np.minimum(k[t], n_rem[ok])
        target = np.minimum((u * k_eff).astype(np.intp), k_eff - 1)
        rank = np.cumsum(rem, axis=1) - 1
        pos = np.argmax(rem & (rank == target[:, None]), axis=1)
        items[t] = cand[t, pos]
        y[t] = source.answers(rows[t], items[t])
        todo = t[np.isnan(y[t])]
    return y, items


def _collect(bank, config, eng: _Engine, subject_ids, seconds, theta_ref, wall) -> CATResult:
    n = eng.n
    sids = np.asarray([str(s) for s in subject_ids], dtype=object)
    persons = {
        "subject_id": sids,
        "theta": eng.theta.copy(),
        "se": eng.se.copy(),
        "posterior_sd": eng.post_sd.copy(),
        "n_items": eng.n_items.copy(),
        "n_skipped": eng.n_skipped.copy(),
        "seconds": seconds,
        "stop_reason": eng.stop_reason.astype(str),
    }
    if config.stopping.cost_column is not None or config.stopping.cost_per_item is not None:
        persons["cost"] = eng.spent.copy()    # the items' summed cost (cost-aware stopping)
    if theta_ref is not None:
        persons["theta_ref"] = theta_ref
        persons["error"] = persons["theta"] - theta_ref
    item_matrix = eng.items[:, :config.stopping.max_items].copy()
    mask = item_matrix >= 0
    rows, cols = np.nonzero(mask)
    administered = {
        "subject_id": sids[rows],
        "item_id": bank.item_ids[item_matrix[rows, cols]].astype(str),
        "order": cols + 1,
        "score": eng.scores[rows, cols],
        "theta": eng.theta_hist[rows, cols],
        "se": eng.se_hist[rows, cols],
    }
    counts = np.bincount(item_matrix[mask], minlength=len(bank))
    return CATResult(person_columns=persons, administered_columns=administered,
                     n_skipped=int(eng.n_skipped.sum()), exposure_rates=counts / max(n, 1),
                     config=config, wall_seconds=wall, item_matrix=item_matrix,
                     item_ids=bank.item_ids.copy(), sh_trials=eng.sh_trials.copy())
