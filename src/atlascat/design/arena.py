"""Adaptive matchmaking for arenas: which pairs to compare next, and what it buys.

Expected information of one game
--------------------------------
Under the Rao-Kupper model (``bradley_terry``) a game between i and j has three outcomes with
probabilities p_w = sigma(delta - phi), p_l = sigma(-delta - phi), p_t = 1 - p_w - p_l,
delta = beta_i - beta_j. Its Fisher information about delta (phi held at its estimate) is

    I_ij = sum_o (d p_o / d delta)^2 / p_o
         = p_w (1 - p_w)^2 + p_l (1 - p_l)^2 + (p_w (1 - p_w) - p_l (1 - p_l))^2 / p_t,

which is p (1 - p) without ties. The information matrix of the ratings grows by I_ij v v^T with
v = e_i - e_j, so with the current covariance Sigma of the ratings the game would leave

    Sigma' = Sigma - I_ij Sigma v v^T Sigma / (1 + I_ij v^T Sigma v)        (Sherman-Morrison).

Criteria (all pairs scored at once from Sigma and Sigma^2, no loop over pairs):
``"variance"`` (A-optimal): the drop of the total variance, I ||Sigma v||^2 / (1 + I v^T Sigma v);
``"det"`` (D-optimal, the default): log(1 + I v^T Sigma v), the information gain in nats about
the ratings: it plays the pair whose outcome is most informative given how uncertain their
difference still is.
A batch of n pairs is chosen greedily, updating Sigma after each pick (the information does not
depend on the outcome, so the batch design is exact for the linearized model). This is the
paired-comparison version of the optimal design idea in ``design.optimal`` (the efficient-
measurement chapter's section 4.2.6; compare Glickman and Jensen 2005,
"Adaptive paired comparison design", J. Statistical Planning and Inference 127, 279-293).

Simulation (:func:`simulate_arena`) plays games from known true ratings with three schedulers,
``"adaptive"``, ``"random"`` (uniform random pair) and ``"round_robin"`` (every pair once per
round in a shuffled order), refits every batch, and records the Spearman correlation of the
fitted with the true ratings; :func:`compare_schedulers` averages the number of games each needs
to reach a target correlation over seeds.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import spearmanr

from ..errors import ConfigError
from .bradley_terry import BradleyTerry, Comparisons, comparisons_from_battles, outcome_probabilities

__all__ = ["pair_information", "score_pairs", "schedule", "simulate_arena", "games_to_reach",
           "compare_schedulers", "STRATEGIES", "random_battles", "DEMO_RATINGS"]

STRATEGIES = ("adaptive", "random", "round_robin")


def pair_information(beta_i, beta_j, phi: float = 0.0) -> np.ndarray:
    """Fisher information about beta_i - beta_j of one game (formula in the module docstring)."""
    p_w, p_t, p_l = outcome_probabilities(beta_i, beta_j, phi)
    dw = p_w * (1 - p_w)
    dl = p_l * (1 - p_l)
    info = dw * (1 - p_w) + dl * (1 - p_l)
    if phi > 0:
        info = info + np.where(p_t > 0, (dw - dl) ** 2 / np.where(p_t > 0, p_t, 1.0), 0.0)
    return info


def score_pairs(ratings, cov, phi: float = 0.0, criterion: str = "det"):
    """Score every unordered pair: returns (i, j, score, information) for i < j, vectorized."""
    beta = np.asarray(ratings, dtype=float)
    S = np.asarray(cov, dtype=float)
    n = beta.size
    i, j = np.triu_indices(n, k=1)
    info = pair_information(beta[i], beta[j], phi)
    d = np.diag(S)
    vsv = d[i] + d[j] - 2.0 * S[i, j]
    if criterion == "variance":
        S2 = S @ S
        d2 = np.diag(S2)
        norm2 = d2[i] + d2[j] - 2.0 * S2[i, j]
        score = info * norm2 / (1.0 + info * vsv)
    elif criterion == "det":
        score = np.log1p(info * vsv)
    else:
        raise ConfigError(f"unknown criterion {criterion!r}; use 'det' or 'variance'")
    return i, j, score, info


def _greedy_pairs(beta, cov, phi, n_pairs, criterion, rng=None):
    S = np.array(cov, dtype=float)
    picks = []
    for _ in range(int(n_pairs)):
        i, j, score, info = score_pairs(beta, S, phi, criterion)
        top = score.max()
        ties = np.flatnonzero(score >= top - 1e-12 * max(abs(top), 1e-300))
        k = ties[0] if rng is None or ties.size == 1 else rng.choice(ties)
        a, b = i[k], j[k]
        v = np.zeros(beta.size)
        v[a], v[b] = 1.0, -1.0
        Sv = S @ v
        S = S - info[k] * np.outer(Sv, Sv) / (1.0 + info[k] * v @ Sv)
        picks.append((a, b, score[k], info[k]))
    return picks


MAX_PAIRS = 10_000  # pairs scheduled at once: the ratings are refitted on their results long before

def schedule(battles, n_pairs: int = 10, *, criterion: str = "det", players=None,
             prior_games: float = 1.0, model: BradleyTerry | None = None,
             rng: np.random.Generator | None = None, new_players=()) -> pd.DataFrame:
    """The next ``n_pairs`` pairs to play, chosen greedily by expected information.

    ``battles``: DataFrame (model_a, model_b, winner) or :class:`Comparisons` (may be empty when
    ``players`` names the field); ``new_players``: models that have not played yet, added to
    the field (:meth:`Comparisons.with_players`); the current ratings come from a Bradley-Terry fit with
    ``prior_games`` virtual games (so that a fresh arena has a covariance), or from ``model`` if
    given. Returns model_a, model_b, p_a, p_tie, p_b, information, score, in play order.
    """
    if model is None:
        if isinstance(battles, Comparisons):
            comp = battles
        elif battles is None or len(battles) == 0:
            if players is None:
                raise ConfigError("no battles yet: pass the list of players")
            comp = Comparisons.empty(players)
        else:
            comp = comparisons_from_battles(battles, players)
        model = BradleyTerry(prior_games=prior_games).fit(comp.with_players(new_players))
    else:
        model._check_fitted()
        if len(new_players):
            raise ConfigError("new_players needs a fit that includes them: pass the battles "
                              "without model=, or fit the model on comps.with_players(...)")
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, (int, np.integer)) or \
            not 1 <= n_pairs <= MAX_PAIRS:   # each pick updates the information greedily
        raise ConfigError(f"n_pairs must be in [1, {MAX_PAIRS}], got {n_pairs}; schedule a "
                          "round, fit its results and schedule the next")
    picks = _greedy_pairs(model.ratings_, model.cov_, model.phi_, n_pairs, criterion, rng)
    a, b = _balanced_sides(np.array([p[0] for p in picks]), np.array([p[1] for p in picks]),
                           model.players_.size)
    pa, pt, pb = outcome_probabilities(model.ratings_[a], model.ratings_[b], model.phi_)
    return pd.DataFrame({"model_a": model.players_[a], "model_b": model.players_[b],
                         "p_a": pa, "p_tie": pt, "p_b": pb,
                         "information": [p[3] for p in picks], "score": [p[2] for p in picks]})


def _balanced_sides(i, j, n):
    """Who plays model_a in each pick: the player who has so far played model_a less often
    than model_b in the batch (ties: the order picked), so a pair that repeats swaps sides and
    no model always goes first: an LLM judge's preference for the first answer cancels."""
    lead = np.zeros(n, dtype=int)   # times model_a minus times model_b
    a, b = i.copy(), j.copy()
    for k in range(i.size):
        if lead[j[k]] < lead[i[k]]:
            a[k], b[k] = j[k], i[k]
        lead[a[k]] += 1
        lead[b[k]] -= 1
    return a, b


# ============================================================================ simulation
def _play(beta, phi, i, j, rng):
    """Outcomes of games (i vs j) drawn from Rao-Kupper: 1 (i won), 0 (j won), 0.5 (tie)."""
    p_w = expit(beta[i] - beta[j] - phi)
    p_l = expit(beta[j] - beta[i] - phi)
    u = rng.random(i.size)
    return np.where(u < p_w, 1.0, np.where(u < p_w + p_l, 0.0, 0.5))


def random_battles(true_ratings: dict, n_games: int, *, tie_param: float = 1.0,
                   rng: np.random.Generator) -> pd.DataFrame:
    """``n_games`` battles between players drawn uniformly at random (sides at random), each
    outcome drawn from Rao-Kupper at the true ratings (``tie_param`` = theta >= 1; 1: no ties).
    ``true_ratings``: player -> rating (logits). Returns model_a, model_b, winner (a|b|tie), as
    :func:`~atlascat.design.bradley_terry.read_battles` reads them (the bundled ``arena-demo``
    battles are ``random_battles(DEMO_RATINGS, 400, tie_param=1.5, rng=default_rng(0))``)."""
    names = np.array(list(true_ratings), dtype=object)
    truth = np.array([float(true_ratings[k]) for k in names])
    if names.size < 2:
        raise ConfigError("random_battles needs at least two players")
    if tie_param < 1:
        raise ConfigError(f"tie_param must be >= 1 (1: no ties), got {tie_param}")
    all_i, all_j = np.triu_indices(names.size, k=1)
    k = rng.integers(all_i.size, size=int(n_games))
    swap = rng.random(k.size) < 0.5
    i, j = np.where(swap, all_j[k], all_i[k]), np.where(swap, all_i[k], all_j[k])
    won = _play(truth, float(np.log(tie_param)), i, j, rng)
    return pd.DataFrame({"model_a": names[i], "model_b": names[j],
                         "winner": np.where(won == 1.0, "a", np.where(won == 0.0, "b", "tie"))})


#: the true ratings of the bundled ``arena-demo`` battles (made-up players)
DEMO_RATINGS = {"aurora": 1.2, "birch": 0.8, "cedar": 0.5, "dune": 0.2, "ember": 0.0,
                "fjord": -0.3, "grove": -0.7, "heath": -1.1}


def simulate_arena(true_ratings, strategy: str = "adaptive", *, n_games: int = 2000,
                   batch_size: int = 10, tie_param: float = 1.0, prior_games: float = 1.0,
                   criterion: str = "det", rng: np.random.Generator) -> pd.DataFrame:
    """Play ``n_games`` games in batches with one scheduler and track rating recovery.

    After every batch the ratings are refitted (Rao-Kupper when ``tie_param`` > 1, with
    ``prior_games`` virtual games for every strategy so that early fits exist) and compared with
    the truth. Returns one row per batch: games, spearman, rmse (of centered ratings), information
    (mean Fisher information of the batch's games about their rating difference, at the truth).
    """
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    truth = np.asarray(true_ratings, dtype=float)
    n = truth.size
    if n < 3:
        raise ConfigError("simulate at least three players")
    for name, value in (("n_games", n_games), ("batch_size", batch_size)):
        if not int(value) >= 1:
            raise ConfigError(f"{name} must be >= 1, got {value}")
    if not tie_param >= 1 or not np.isfinite(tie_param):
        raise ConfigError(f"tie_param must be Rao and Kupper's theta >= 1 (1: no ties), got "
                          f"{tie_param}")
    phi = float(np.log(tie_param))
    players = np.array([f"p{k}" for k in range(n)], dtype=object)
    comp = Comparisons.empty(players)
    ties = "rao-kupper" if tie_param > 1 else "drop"
    fitter = BradleyTerry(ties=ties, prior_games=prior_games, method="newton", tol=1e-8)
    model = fitter.fit(comp)
    all_i, all_j = np.triu_indices(n, k=1)
    rr_queue: list[int] = []
    rows = []
    played = 0
    centered = truth - truth.mean()
    while played < n_games:
        m = min(batch_size, n_games - played)
        if strategy == "adaptive":
            picks = _greedy_pairs(model.ratings_, model.cov_, model.phi_, m, criterion, rng)
            i = np.array([p[0] for p in picks])
            j = np.array([p[1] for p in picks])
        elif strategy == "random":
            k = rng.integers(all_i.size, size=m)
            i, j = all_i[k], all_j[k]
        else:
            while len(rr_queue) < m:
                rr_queue.extend(rng.permutation(all_i.size).tolist())
            k = np.array(rr_queue[:m])
            del rr_queue[:m]
            i, j = all_i[k], all_j[k]
        swap = rng.random(m) < 0.5  # random sides
        i, j = np.where(swap, j, i), np.where(swap, i, j)
        comp = comp.add(i, j, _play(truth, phi, i, j, rng))
        played += m
        model = fitter.fit(comp, init=model.ratings_)
        rho = spearmanr(model.ratings_, truth).statistic
        info = float(pair_information(truth[i], truth[j], phi).mean())
        rows.append((played, float(rho), float(np.sqrt(np.mean((model.ratings_ - centered) ** 2))), info))
    return pd.DataFrame(rows, columns=["games", "spearman", "rmse", "information"])


def games_to_reach(history: pd.DataFrame, threshold: float = 0.95, *, sustained: bool = False):
    """Games after which the Spearman correlation first reaches ``threshold`` (``sustained``: and
    stays at or above it to the end of the run); NaN if never."""
    ok = history.spearman.to_numpy() >= threshold
    if sustained:
        after = np.flip(np.logical_and.accumulate(np.flip(ok)))
        ok = after
    hit = np.flatnonzero(ok)
    return float(history.games.iloc[hit[0]]) if hit.size else float("nan")


#: :func:`compare_schedulers`' largest simulated arena: players, games, seeds
MAX_SIM_PLAYERS, MAX_SIM_GAMES, MAX_SIM_SEEDS = 1_000, 1_000_000, 1_000


def compare_schedulers(n_players: int = 20, *, rating_sd: float = 1.0, n_seeds: int = 5,
                       n_games: int = 3000, batch_size: int = 10, tie_param: float = 1.0,
                       threshold: float = 0.95, strategies=STRATEGIES, criterion: str = "det",
                       seed: int = 0) -> pd.DataFrame:
    """Games needed to reach Spearman >= ``threshold`` with the true ratings, per strategy and
    seed (true ratings ~ N(0, rating_sd^2), the same ratings for every strategy within a seed).

    Returns one row per (seed, strategy): games_first (first time reached), games_sustained
    (reached and kept to the end), reached (bool; when False both counts are censored at
    ``n_games``, a lower bound), info_per_game (mean Fisher information of a game at the true
    ratings), final_spearman, final_rmse.
    """
    if not int(n_players) >= 3:
        raise ConfigError(f"n_players must be >= 3, got {n_players}")
    if not int(n_seeds) >= 1:
        raise ConfigError(f"n_seeds must be >= 1, got {n_seeds}")
    # each batch refits every player's rating: past these, a run takes days (200 players x
    # 3000 games: a minute), never an answer
    for name, value, most in (("n_players", n_players, MAX_SIM_PLAYERS),
                              ("n_games", n_games, MAX_SIM_GAMES),
                              ("n_seeds", n_seeds, MAX_SIM_SEEDS)):
        if int(value) > most:
            raise ConfigError(f"{name} must be at most {most:,}, got {value:,}; a simulated "
                              "arena that large takes days")
    if not rating_sd > 0 or not np.isfinite(rating_sd):
        raise ConfigError(f"rating_sd must be a finite number > 0 (equal ratings have no order "
                          f"to recover), got {rating_sd}")
    if not 0 < threshold <= 1:
        raise ConfigError(f"threshold must be a Spearman correlation in (0, 1], got {threshold}")
    rows = []
    for s in range(int(n_seeds)):
        truth = np.random.default_rng([seed, s, 0]).normal(0.0, rating_sd, n_players)
        for k, strat in enumerate(strategies):
            hist = simulate_arena(truth, strat, n_games=n_games, batch_size=batch_size,
                                  tie_param=tie_param, criterion=criterion,
                                  rng=np.random.default_rng([seed, s, 1 + k]))
            first = games_to_reach(hist, threshold)
            kept = games_to_reach(hist, threshold, sustained=True)
            rows.append({"seed": s, "strategy": strat,
                         "games_first": n_games if np.isnan(first) else first,
                         "games_sustained": n_games if np.isnan(kept) else kept,
                         "reached": not np.isnan(kept),
                         "info_per_game": float(hist.information.mean()),
                         "final_spearman": hist.spearman.iloc[-1], "final_rmse": hist.rmse.iloc[-1]})
    return pd.DataFrame(rows)
