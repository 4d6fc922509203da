"""Bradley-Terry ratings from paired comparisons (arena battles), with ties.

Model
-----
Player i has strength gamma_i = exp(beta_i). Without ties (Bradley and Terry 1952)::

    P(i beats j) = gamma_i / (gamma_i + gamma_j) = sigma(beta_i - beta_j).

Ties follow Rao and Kupper (1967), with a tie parameter theta = exp(phi) >= 1::

    P(i beats j) = gamma_i / (gamma_i + theta gamma_j)          = sigma(beta_i - beta_j - phi)
    P(tie)       = (theta^2 - 1) gamma_i gamma_j / ((gamma_i + theta gamma_j)(gamma_j + theta gamma_i))

(theta = 1: no ties, plain Bradley-Terry). Rao-Kupper is chosen over Davidson (1970) because it
has a closed-form MM update (Hunter 2004, sec. 3.2) and a two-player closed form (below). Other
tie handlings: ``ties="half"`` counts a tie as half a win for each side (the Elo convention),
``ties="drop"`` ignores ties.

MM algorithm (Hunter 2004)
--------------------------
With w_ij the wins of i over j, t_ij = t_ji the ties, n'_ij = w_ij + t_ij, the log-likelihood is

    l = sum_i (W_i + T_i) log gamma_i - sum_{i != j} n'_ij log(gamma_i + theta gamma_j)
        + T log(theta^2 - 1),

(W_i wins, T_i ties of player i, T the number of tied games). Minorizing -log x by its tangent
gives the updates, applied to all players at once (vectorized over the n x n count matrices)::

    gamma_i <- (W_i + T_i) / ( sum_j n'_ij / (gamma_i + theta gamma_j)
                               + theta sum_j n'_ji / (gamma_j + theta gamma_i) )
    theta   <- T / C + sqrt(1 + (T / C)^2),   C = sum_{i != j} n'_ij gamma_j / (gamma_i + theta gamma_j),

each of which increases l. The maximum likelihood estimate exists iff the "beat-or-tied" graph is
strongly connected (Ford 1957; Hunter 2004, assumption 1) and, for theta, some chain of games
leads from a player back to them with more wins than ties along it (x beat y and y beat x, say;
with only ties, or one player's win and a tie, l grows without bound in theta: ever larger theta
with ever wider rating gaps); otherwise pass ``prior_games > 0``:
every player then plays ``prior_games`` virtual games, half won and half lost, against a virtual
player of rating 0 (a conjugate-style prior that keeps the MM form).

Standard errors
---------------
From the observed information of l in (beta, phi). Each ordered pair contributes
n'_ij q_ij (1 - q_ij) v v^T with q_ij = 1 - P(i beats j), v = e_i - e_j - e_phi, and the tie term
adds 4 T u / (u - 1)^2 (u = theta^2) to the phi entry. Without virtual games the information is
singular along the common shift of beta; the covariance of the identified ratings is
L I^+ L^T, where L applies the constraint: sum-zero (beta - mean beta) or a reference player
(beta - beta_ref, its SE is 0).

Two-player check: with w wins, l losses and t ties in n games the fit is saturated, so
theta = sqrt((n - w)(n - l) / (w l)) and beta_1 - beta_2 = 0.5 log(w (n - l) / (l (n - w)));
without ties beta_1 - beta_2 = log(w / l) with SE 1 / sqrt(n p (1 - p)).

References
----------
Bradley, R. A. and Terry, M. E. (1952). Rank analysis of incomplete block designs I.
    Biometrika 39, 324-345.
Rao, P. V. and Kupper, L. L. (1967). Ties in paired-comparison experiments: a generalization of
    the Bradley-Terry model. JASA 62, 194-204.
Davidson, R. R. (1970). On extending the Bradley-Terry model to accommodate ties in paired
    comparison experiments. JASA 65, 317-328.
Hunter, D. R. (2004). MM algorithms for generalized Bradley-Terry models. Annals of Statistics
    32, 384-406.
Ford, L. R. (1957). Solution of a ranking problem from binary comparisons. American Mathematical
    Monthly 64, 28-33.
Chiang, W.-L. et al. (2024). Chatbot Arena: an open platform for evaluating LLMs by human
    preference. (Arena battle format; Elo scale 400 / ln 10 per logit, anchored at 1000.)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse.csgraph import NegativeCycleError, bellman_ford, connected_components
from scipy.special import expit, log_expit

from ..errors import ConfigError, ConvergenceError, ResponseDataError

__all__ = ["Comparisons", "comparisons_from_battles", "read_battles", "BradleyTerry",
           "outcome_probabilities", "ELO_SCALE", "ELO_BASE"]

ELO_SCALE = 400.0 / np.log(10.0)
ELO_BASE = 1000.0
TIE_HANDLING = ("rao-kupper", "half", "drop")

_WINNER_A = {"a", "model_a", "1", "win_a", "a_wins"}
_WINNER_B = {"b", "model_b", "2", "win_b", "b_wins"}
_TIE = {"tie", "draw", "tie (bothbad)", "tie_bothbad", "both_bad", "bothbad", "0", "=", "t"}


# ============================================================================ data
@dataclass(frozen=True)
class Comparisons:
    """Aggregated paired comparisons: player names, wins (n, n) with wins[i, j] = games i won
    against j, ties (n, n) symmetric with a zero diagonal."""

    players: np.ndarray
    wins: np.ndarray
    ties: np.ndarray

    @property
    def n_players(self) -> int:
        return len(self.players)

    @property
    def games(self) -> np.ndarray:
        """Games played between every pair, (n, n) symmetric."""
        return self.wins + self.wins.T + self.ties

    @property
    def n_games(self) -> int:
        return int(round(self.games.sum() / 2))

    def summary(self) -> pd.DataFrame:
        """Wins, losses, ties and games per player (integers when every count is whole: 59,
        not 59.0, in a JSON record)."""
        counts = {"wins": self.wins.sum(1), "losses": self.wins.sum(0),
                  "ties": self.ties.sum(1), "games": self.games.sum(1)}
        if all(np.all(v == np.round(v)) for v in counts.values()):
            counts = {k: np.round(v).astype(np.int64) for k, v in counts.items()}
        return pd.DataFrame({"player": self.players, **counts})

    def with_players(self, players) -> "Comparisons":
        """The same games with ``players`` not in the field yet added, with no games."""
        known = set(map(str, self.players))
        if any(not str(p).strip() for p in players):
            raise ConfigError("a new player's name is empty (CLI: --add-player ''); name the "
                              "model that joins the arena")
        extra = [p for p in dict.fromkeys(str(p).strip() for p in players) if p not in known]
        if not extra:
            return self
        k = len(extra)
        return Comparisons(np.concatenate([np.asarray(self.players, dtype=object), extra]),
                           np.pad(self.wins, ((0, k), (0, k))), np.pad(self.ties, ((0, k), (0, k))))

    def add(self, i, j, outcome) -> "Comparisons":
        """New counts with games appended: ``outcome`` 1 (i won), 0 (j won) or 0.5 (tie);
        i, j, outcome are arrays of equal length (repeated pairs allowed)."""
        i, j = np.atleast_1d(i), np.atleast_1d(j)
        o = np.atleast_1d(np.asarray(outcome, dtype=float))
        if not i.shape == j.shape == o.shape or i.ndim != 1:
            raise ConfigError(f"add needs i, j and outcome of one equal length, got shapes "
                              f"{i.shape}, {j.shape}, {o.shape}")
        n = self.n_players
        for name, idx in (("i", i), ("j", j)):
            off = ~np.isin(idx, np.arange(n))   # negative, past the end, fractional, a name
            if off.any():
                raise ConfigError(f"add's {name} must be player positions 0..{n - 1}, got "
                                  f"{idx[off][:3].tolist()}")
        bad = np.flatnonzero(~np.isin(o, (0.0, 0.5, 1.0)) | (i == j))
        if bad.size:
            k = bad[0]
            why = "a player cannot play itself" if i[k] == j[k] else "use 1 (i won), 0 or 0.5"
            raise ConfigError(f"game {k} (of {bad.size} such): i={i[k]}, j={j[k]}, outcome "
                              f"{o[k]:g}: {why}")
        i, j = i.astype(np.intp), j.astype(np.intp)
        wins = self.wins.copy()
        ties = self.ties.copy()
        np.add.at(wins, (i[o == 1], j[o == 1]), 1.0)
        np.add.at(wins, (j[o == 0], i[o == 0]), 1.0)
        tie = o == 0.5
        np.add.at(ties, (i[tie], j[tie]), 1.0)
        np.add.at(ties, (j[tie], i[tie]), 1.0)
        return Comparisons(self.players, wins, ties)

    @classmethod
    def empty(cls, players) -> "Comparisons":
        players = np.asarray([str(p).strip() for p in players], dtype=object)
        twice = pd.Index(players)[pd.Index(players).duplicated()].unique().tolist()
        if twice:
            raise ConfigError(f"the player list names {_names(twice)} more than once; each "
                              "player is one row of the ratings")
        n = len(players)
        return cls(players, np.zeros((n, n)), np.zeros((n, n)))


def _winner_codes(winner: pd.Series, a: pd.Series, b: pd.Series) -> np.ndarray:
    """1 (a won), 0 (b won), 0.5 (tie) from the winner column; names of a/b are also accepted."""
    w = winner.astype(str).str.strip()
    low = w.str.lower()
    code = np.full(len(w), np.nan)
    code[low.isin(_WINNER_A).to_numpy()] = 1.0
    code[low.isin(_WINNER_B).to_numpy()] = 0.0
    code[low.isin(_TIE).to_numpy()] = 0.5
    by_name = np.where((w == a).to_numpy(), 1.0, np.where((w == b).to_numpy(), 0.0, np.nan))
    clash = np.flatnonzero(~np.isnan(code) & ~np.isnan(by_name) & (code != by_name))
    if clash.size:   # players named 1 and 2, say: "2" is b's code and a's name
        r = clash[0]
        raise ResponseDataError(
            f"row {winner.index[r]}: winner {w.iloc[r]!r} is both an outcome code and the name of "
            f"model_{'a' if by_name[r] == 1 else 'b'} ({clash.size} such row(s)), so it could mean "
            "either side won; write the winner as model_a, model_b or tie")
    out = np.where(np.isnan(by_name), code, by_name)
    bad = np.flatnonzero(np.isnan(out))
    if bad.size:
        more = f" (and {bad.size - 1} more)" if bad.size > 1 else ""
        raise ResponseDataError(
            f"winner {w.iloc[bad[0]]!r} at row {winner.index[bad[0]]}{more} is not one of "
            "a / b / tie (also model_a, model_b, draw, 'tie (bothbad)', or the winning model's name)")
    return out


def comparisons_from_battles(battles: pd.DataFrame, players=None) -> Comparisons:
    """Aggregate arena battles (columns model_a, model_b, winner) into count matrices.

    ``players`` optionally fixes the player list and order (players without games are kept)."""
    need = {"model_a", "model_b", "winner"}
    if not hasattr(battles, "columns"):
        raise ResponseDataError(f"battles must be a pandas DataFrame with columns model_a, "
                                f"model_b, winner (or a Comparisons), got "
                                f"{type(battles).__name__}")
    missing = need - set(battles.columns)
    spaced = {str(c).strip().lower(): c for c in battles.columns}   # "model_a, model_b, winner"
    if missing and missing <= set(spaced):
        battles = battles.rename(columns={spaced[k]: k for k in missing})
        missing = set()
    if missing:
        found = ", ".join(map(repr, list(map(str, battles.columns))[:8])) or "none"
        raise ResponseDataError(f"battles need columns model_a, model_b, winner; missing "
                                f"{sorted(missing)} (the columns read: {found})")
    df = battles
    for col in ("model_a", "model_b"):
        if df[col].isna().any():
            row = df.index[np.flatnonzero(df[col].isna().to_numpy())[0]]
            raise ResponseDataError(f"row {row}: {col} is missing ({int(df[col].isna().sum())} "
                                    "such row(s)); every game names both players")
    a = df["model_a"].astype(str).str.strip()   # " gpt-4o" in a hand-edited CSV is gpt-4o
    b = df["model_b"].astype(str).str.strip()
    for col, names in (("model_a", a), ("model_b", b)):
        blank = np.flatnonzero((names == "").to_numpy())
        if blank.size:
            raise ResponseDataError(f"row {df.index[blank[0]]}: {col} is blank ({blank.size} such "
                                    "row(s)); every game names both players")
    self_play = np.flatnonzero((a == b).to_numpy())
    if self_play.size:
        raise ResponseDataError(f"row {df.index[self_play[0]]}: model {a.iloc[self_play[0]]!r} plays itself")
    if df["winner"].isna().any():
        row = df.index[np.flatnonzero(df["winner"].isna().to_numpy())[0]]
        raise ResponseDataError(f"row {row}: winner is missing; use a, b or tie")
    codes = _winner_codes(df["winner"], a, b)
    names = (pd.unique(pd.concat([a, b])) if players is None
             else np.asarray([str(p).strip() for p in players]))
    comp = Comparisons.empty(names)   # refuses a name listed twice
    index = pd.Index(comp.players)
    ia, ib = index.get_indexer(a), index.get_indexer(b)   # vectorized: 1M games in a second
    if (ia < 0).any() or (ib < 0).any():
        unknown = sorted(set(a[ia < 0]) | set(b[ib < 0]))
        raise ResponseDataError(f"battles name players not in the player list, e.g. {unknown[:5]}")
    return comp.add(ia, ib, codes)


def read_battles(path, *, option: str | None = None) -> pd.DataFrame:
    """Read arena battles from CSV (optionally .gz), JSON lines or Parquet; a file that cannot
    be read, or holds no games, is one :class:`~atlascat.errors.ResponseDataError` line naming
    it (``option``: the option or argument that gave it)."""
    from pathlib import Path

    from ..validation import check_input_file, read_frame

    path = check_input_file(Path(path), what="battles file", option=option)
    if path.suffix in (".jsonl", ".json"):
        try:
            try:
                df = pd.read_json(path, lines=path.suffix == ".jsonl")
            except ValueError:   # JSON lines named .json: read them as such
                if path.suffix == ".jsonl":
                    raise
                df = pd.read_json(path, lines=True)
        except ValueError as exc:
            where = f"{option} {str(path)!r}" if option else repr(str(path))
            raise ResponseDataError(f"battles file {where} is not valid JSON "
                                    f"({str(exc).splitlines()[0]})") from None
    else:
        df = read_frame(path, what="battles file", option=option)
    if len(df) == 0:
        where = f"{option} {str(path)!r}" if option else repr(str(path))
        raise ResponseDataError(f"battles file {where} holds no games; one row per game: "
                                "model_a, model_b, winner (a, b or tie)")
    return df


# ============================================================================ model
def outcome_probabilities(beta_i, beta_j, phi: float = 0.0):
    """(P(i wins), P(tie), P(j wins)) under Rao-Kupper with log tie parameter phi (0: no ties)."""
    delta = np.asarray(beta_i, dtype=float) - np.asarray(beta_j, dtype=float)
    p_i = expit(delta - phi)
    p_j = expit(-delta - phi)
    return p_i, np.clip(1.0 - p_i - p_j, 0.0, 1.0), p_j


def _strongly_connected(nprime: np.ndarray) -> bool:
    n_comp, _ = connected_components(nprime > 0, directed=True, connection="strong")
    return n_comp == 1


def _tie_param_bounded(wins: np.ndarray, ties: np.ndarray) -> bool:
    """Whether Rao and Kupper's tie parameter has a finite estimate on a strongly connected
    beat-or-tied graph: some chain of games leads from a player back to them with more wins than
    ties along it (a win i over j: an edge i -> j of weight -1; a tie: edges both ways of weight
    +1; a negative cycle). Otherwise a direction (rating gaps d, log tie parameter phi = max |d|
    over the ties, every win's gap >= phi) along which the log-likelihood never decreases sends
    phi to infinity: two players with a win of one and a tie, say."""
    weight = np.where((ties + ties.T) > 0, 1.0, 0.0)
    weight[wins > 0] = -1.0
    if (connected_components(wins > 0, directed=True, connection="strong")[0] < len(wins)):
        return True   # a cycle of wins alone (x beat y, y beat x): the usual arena
    try:
        bellman_ford(weight, indices=0)   # the graph is strongly connected: 0 reaches every cycle
    except NegativeCycleError:
        return True
    return False


def _no_mle_reason(players, nprime: np.ndarray, games: np.ndarray) -> str | None:
    """Why the ratings have no maximum (None: they have one): every group of players that
    never beat or tied anyone outside it (a strongly connected component without an edge out of
    it, Ford 1957), named with the players it lost to, or a group that never played the rest;
    then every group that won all its games against outsiders (no edge into it) unless those
    outsiders are already named as never beating anyone (x beat y, y never beat x: one gap)."""
    n_comp, label = connected_components(nprime > 0, directed=True, connection="strong")
    if n_comp == 1:
        return None
    beat = nprime > 0
    reasons, sunk, apart = [], np.zeros(len(players), dtype=bool), False
    for comp in range(n_comp):
        inside = label == comp
        met = games[inside].sum(0) > 0
        if beat[np.ix_(inside, ~inside)].any() or (apart and not met[~inside].any()):
            continue   # this group beat or tied someone outside it, or is one more that never met
        group, rest = players[inside].tolist(), players[~inside].tolist()
        if not met[~inside].any():
            reasons.append(f"{_names(group)} never played {_names(rest)}")
            apart = True
        else:
            reasons.append(f"{_names(group)} never beat or tied any of "
                           f"{_names(players[~inside & met].tolist())}")
            sunk |= inside
    for comp in range(n_comp):
        inside = label == comp
        opponents = ~inside & (games[inside].sum(0) > 0)
        if opponents.any() and not beat[np.ix_(~inside, inside)].any() and \
                not sunk[opponents].all():
            reasons.append(f"{_names(players[inside].tolist())} won every game against "
                           f"{_names(players[opponents].tolist())}")
    if len(reasons) > 3:   # a sparse arena of 500 models: hundreds, 3,500 characters
        reasons = reasons[:3] + [f"{len(reasons) - 3} more such groups"]
    return "; ".join(reasons) or "the games do not connect every player"


def _no_mle_message(players, nprime: np.ndarray, games: np.ndarray) -> str:
    """The error of a fit without virtual games whose ratings have no maximum."""
    why = _no_mle_reason(players, nprime, games)
    gap = "each of these gaps" if "; " in why else "the gap between their ratings"
    return (f"the maximum likelihood ratings do not exist: {why}, so {gap} has no finite "
            "estimate; pass prior_games > 0 (e.g. 1) to regularize")


def _names(names: list, most: int = 5) -> str:
    shown = ", ".join(repr(x) for x in names[:most])
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return f"{'player' if len(names) == 1 else 'players'} {shown}{more}"


# players (or groups of players) whose ratings (levels) the MM fit moves by a Newton step (a
# k x k solve) every MM_NEWTON_EVERY iterations
MAX_SHIFT_GROUPS, MM_NEWTON_EVERY = 300, 10

# virtual games per player: beyond this the prior swamps any arena's real games and the
# log-likelihood overflows
MAX_PRIOR_GAMES = 1e6

class BradleyTerry:
    """Bradley-Terry / Rao-Kupper ratings by the MM algorithm (scikit-learn style).

    Parameters
    ----------
    ties : "rao-kupper" (default; estimates the tie parameter theta), "half" (a tie is half a win
        for each side, plain Bradley-Terry), "drop" (ties ignored)
    prior_games : virtual games (half won, half lost) of every player against a rating-0 anchor;
        0 = plain maximum likelihood (needs a strongly connected comparison graph)
    constraint : "sum_zero" (ratings sum to 0) or "reference" (``reference`` player at 0)
    reference : player name for ``constraint="reference"``
    method : "mm" (Hunter's MM algorithm, default, with a Newton step on the ratings every
        ``MM_NEWTON_EVERY`` iterations: plain MM converges linearly, and needs tens of
        thousands of iterations when a model nearly always wins) or "newton" (Newton-Raphson
        with step halving on the same concave log-likelihood; used by the arena simulations)
    max_iter, tol : iterations and convergence on the largest change of beta and phi

    Attributes
    ----------
    players_, ratings_ (beta, log-strength), se_, cov_ (n x n), tie_param_ (theta, 1 if no ties),
    loglik_, n_iter_, converged_, comparisons_, prior_only_ (with ``prior_games > 0``: why some
    rating gap is finite only through the virtual games, as when two groups never played each
    other or a player never won; None when the games alone give every rating)
    """

    def __init__(self, ties: str = "rao-kupper", prior_games: float = 0.0,
                 constraint: str = "sum_zero", reference: str | None = None,
                 method: str = "mm", max_iter: int = 100_000, tol: float = 1e-10):
        self.ties = ties
        self.method = method
        self.prior_games = prior_games
        self.constraint = constraint
        self.reference = reference
        self.max_iter = max_iter
        self.tol = tol

    def __repr__(self) -> str:
        """The settings that differ from the defaults, as scikit-learn shows an estimator."""
        from .._repr import changed_settings

        return f"BradleyTerry({changed_settings(self)})"

    # ---------------------------------------------------------------- fitting
    def fit(self, battles, players=None, *, init=None) -> "BradleyTerry":
        """Fit to a battles DataFrame (model_a, model_b, winner) or a :class:`Comparisons`.

        ``init`` optionally warm-starts beta (one value per player)."""
        comp = battles if isinstance(battles, Comparisons) else comparisons_from_battles(battles, players)
        self._check_settings(comp)
        wins, ties = comp.wins, comp.ties
        if self.ties == "half":
            wins, ties = wins + 0.5 * ties, np.zeros_like(ties)
        elif self.ties == "drop":
            ties = np.zeros_like(ties)
        n = comp.n_players
        prior = float(self.prior_games)
        why = _no_mle_reason(comp.players, wins + ties, comp.games) if prior > 0 else None
        self.prior_only_ = None if why is None else (
            f"{why}: {'each of these gaps' if '; ' in why else 'the gap between their ratings'}"
            f" is finite only through the virtual games (prior_games={prior:g}), which set its "
            "size; the games alone give it no finite estimate")
        if prior > 0:  # virtual anchor player at index n
            wins = np.pad(wins, ((0, 1), (0, 1)))
            ties = np.pad(ties, ((0, 1), (0, 1)))
            wins[:n, n] = wins[n, :n] = prior / 2.0
        nprime = wins + ties
        if prior == 0 and (comp.games.sum(1) == 0).any():
            idle = comp.players[comp.games.sum(1) == 0].tolist()
            raise ConvergenceError(f"players {idle[:5]} have no games; pass prior_games > 0 or "
                                   "drop them")
        if prior == 0 and not _strongly_connected(nprime):
            raise ConvergenceError(_no_mle_message(comp.players, nprime, comp.games))
        if self.ties == "rao-kupper" and ties.sum() > 0 and wins.sum() == 0:
            raise ConvergenceError(
                "every game is a tie: Rao and Kupper's tie parameter has no finite estimate (the "
                "more it grows, the likelier all ties); count a tie as half a win (ties='half') or pass "
                "prior_games > 0")
        if (self.ties == "rao-kupper" and prior == 0 and ties.sum() > 0
                and not _tie_param_bounded(wins, ties)):
            raise ConvergenceError(
                "Rao and Kupper's tie parameter has no finite estimate: no chain of games leads "
                "from a player back to them with more wins than ties along it (as when x beat y "
                "and y beat x), so the games fit ever better as the tie parameter and the rating "
                "gaps grow together; count a tie as half a win (ties='half') or pass "
                "prior_games > 0")
        solver = self._mm if self.method == "mm" else self._newton
        beta, phi, n_iter, converged = solver(wins, ties, nprime, n, prior, init)
        self.comparisons_ = comp
        self.players_ = comp.players
        self.tie_param_ = float(np.exp(phi))
        self._phi = phi
        cov_full = self._covariance(beta, phi, nprime, ties, n, prior)
        L = self._constraint_matrix(n)
        self.ratings_ = L @ beta[:n]
        self.cov_ = L @ cov_full[:n, :n] @ L.T
        self.se_ = np.sqrt(np.maximum(np.diag(self.cov_), 0.0))
        self.phi_se_ = float(np.sqrt(max(cov_full[-1, -1], 0.0))) if self._estimates_phi(ties) else 0.0
        self.loglik_ = float(self._loglik(beta[:n], phi, wins[:n, :n], ties[:n, :n]))
        self.n_iter_, self.converged_ = n_iter, converged
        return self

    def _check_settings(self, comp):
        if self.ties not in TIE_HANDLING:
            raise ConfigError(f"unknown ties handling {self.ties!r}; use one of {', '.join(TIE_HANDLING)}")
        if self.constraint not in ("sum_zero", "reference"):
            raise ConfigError(f"unknown constraint {self.constraint!r}; use 'sum_zero' or 'reference'")
        if self.constraint == "reference" and str(self.reference).strip() not in set(comp.players):
            raise ConfigError(f"reference player {self.reference!r} is not among the players")
        if self.method not in ("mm", "newton"):
            raise ConfigError(f"unknown method {self.method!r}; use 'mm' or 'newton'")
        if not 0 <= self.prior_games <= MAX_PRIOR_GAMES:   # NaN and inf too
            raise ConfigError(f"prior_games must be a number in [0, {MAX_PRIOR_GAMES:g}], got "
                              f"{self.prior_games}")
        if comp.n_players < 2:
            raise ConfigError(f"need games between at least two players, got "
                              f"{comp.n_players} player{'' if comp.n_players == 1 else 's'}")

    @staticmethod
    def _estimates_phi(ties) -> bool:
        return ties.sum() > 0

    def _mm(self, wins, ties, nprime, n, prior, init):
        m = wins.shape[0]
        score = wins.sum(1) + ties.sum(1)  # W_i + T_i
        n_ties = ties.sum() / 2.0
        gamma = np.ones(m)
        if init is not None:
            init = np.asarray(init, dtype=float)
            if init.shape != (n,):
                raise ConfigError(f"init needs one rating per player ({n}), got shape {init.shape}")
            gamma[:n] = np.exp(init - (0 if prior > 0 else init.mean()))
        theta = 1.5 if n_ties > 0 else 1.0
        free = np.arange(m) < n  # the virtual anchor stays at gamma = 1
        # every MM_NEWTON_EVERY iterations a Newton step on every rating (up to
        # MAX_SHIFT_GROUPS players), else on the level of each group that beat or tied each
        # other in turn (the slow directions when virtual games hold them)
        n_groups, group = n, np.arange(n)
        if n > MAX_SHIFT_GROUPS:
            n_groups, group = connected_components(nprime[:n, :n] > 0, directed=True,
                                                   connection="strong")
        steps = n_groups <= MAX_SHIFT_GROUPS and (prior > 0 or n_groups == n)
        shift = sparse.csr_matrix((np.ones(n), (np.arange(n), group)), shape=(m, n_groups))
        converged = False
        beta_old = np.log(gamma)
        phi_old = np.log(theta)
        for it in range(1, int(self.max_iter) + 1):
            S = gamma[:, None] + theta * gamma[None, :]
            denom = (nprime / S).sum(1) + theta * (nprime.T / S.T).sum(1)
            new = np.where(free & (denom > 0), score / np.where(denom > 0, denom, 1.0), gamma)
            gamma = np.where(free, new, 1.0)
            if prior == 0:
                gamma = gamma / np.exp(np.log(gamma).mean())
            if steps and it % MM_NEWTON_EVERY == 1:
                gamma = np.exp(self._group_step(np.log(gamma), np.log(theta), wins, ties,
                                                nprime, shift, n, prior))
            if n_ties > 0:
                S = gamma[:, None] + theta * gamma[None, :]
                C = (nprime * gamma[None, :] / S).sum()
                r = n_ties / C
                theta = r + np.sqrt(1.0 + r * r)
            beta = np.log(gamma)
            phi = np.log(theta)
            change = max(np.abs(beta - beta_old).max(), abs(phi - phi_old))
            beta_old, phi_old = beta, phi
            if change < self.tol:
                converged = True
                break
        return beta, phi, it, converged

    def _group_step(self, beta, phi, wins, ties, nprime, shift, n, prior):
        """One Newton step (with step halving, so the likelihood still never decreases) on a
        common shift of each group of ``shift`` (m x groups, the anchor in none; a group per
        player: every rating). MM alone moves a rating by tiny steps when few games, virtual or
        one-sided, hold it: 100 players and 100,000 games took 80,000 iterations with
        ``prior_games=1`` (none at 0.1), 31,000 (9 s) with a model that lost one game."""
        p = expit(beta[:, None] - beta[None, :] - phi)
        grad = (wins + ties).sum(1) - (nprime * p).sum(1) - (nprime.T * (1 - p.T)).sum(1)
        info = self._covariance(beta, phi, nprime, ties, n, prior, return_info=True)
        g = shift.T @ grad
        h = (shift.T @ (shift.T @ info[:-1, :-1]).T).T
        step = shift @ np.linalg.lstsq(h, g, rcond=None)[0]
        current = self._loglik(beta, phi, wins, ties)
        for t in 0.5 ** np.arange(30):   # at the maximum: a step within rounding is taken
            if self._loglik(beta + t * step, phi, wins, ties) >= current - 1e-12 * abs(current):
                return beta + t * step
        return beta

    def _newton(self, wins, ties, nprime, n, prior, init):
        """Newton-Raphson on (beta, phi) with step halving; the log-likelihood is concave (every
        term is a log-sigmoid of a linear function, plus the concave log(e^(2 phi) - 1))."""
        m = wins.shape[0]
        score = wins.sum(1) + ties.sum(1)
        n_ties = ties.sum() / 2.0
        est_phi = n_ties > 0
        beta = np.zeros(m)
        if init is not None:
            init = np.asarray(init, dtype=float)
            if init.shape != (n,):
                raise ConfigError(f"init needs one rating per player ({n}), got shape {init.shape}")
            beta[:n] = init - (0 if prior > 0 else init.mean())
        phi = np.log(1.5) if est_phi else 0.0
        free = np.r_[np.arange(m) < n, [est_phi]]  # the anchor (if any) and phi (no ties) fixed

        def objective(b, f):
            return self._loglik(b, f, wins, ties)

        current = objective(beta, phi)
        converged = False
        for it in range(1, int(self.max_iter) + 1):
            p = expit(beta[:, None] - beta[None, :] - phi)  # P(i beats j)
            grad = np.empty(m + 1)
            grad[:m] = score - (nprime * p).sum(1) - (nprime.T * (1 - p.T)).sum(1)
            u = np.exp(2 * phi)
            grad[m] = -(nprime * (1 - p)).sum() + (2 * n_ties * u / (u - 1) if est_phi else 0.0)
            info = self._covariance(beta, phi, nprime, ties, n, prior, return_info=True)
            g = grad[free]
            step = np.zeros(m + 1)
            step[free] = np.linalg.lstsq(info[np.ix_(free, free)], g, rcond=None)[0]
            t = 1.0
            while True:
                b_new = beta + t * step[:m]
                f_new = phi + t * step[m]
                if not est_phi or f_new > 0:
                    if prior == 0:
                        b_new = b_new - b_new[:n].mean()
                    val = objective(b_new, f_new)
                    if val >= current - 1e-12 * abs(current):
                        break
                t *= 0.5
                if t < 1e-10:
                    b_new, f_new, val = beta, phi, current
                    break
            change = max(np.abs(b_new - beta).max(), abs(f_new - phi))
            beta, phi, current = b_new, f_new, val
            if change < self.tol:
                converged = True
                break
        return beta, phi, it, converged

    @staticmethod
    def _loglik(beta, phi, wins, ties):
        """Log-likelihood of the games: wins log P(i beats j) + ties log P(tie), where
        log P(tie) = log(theta^2 - 1) + log sigma(delta - phi) + log sigma(-delta - phi)."""
        i, j = np.nonzero(wins)   # pairs that played only: a large arena's matrix is sparse
        ll = (wins[i, j] * log_expit(beta[i] - beta[j] - phi)).sum()
        i, j = np.nonzero(np.triu(ties, 1))   # each tied game is counted at (i, j) and (j, i)
        if i.size:
            delta = beta[i] - beta[j]
            ll += (ties[i, j] * (np.log(np.expm1(2.0 * phi)) + log_expit(delta - phi)
                                 + log_expit(-delta - phi))).sum()
        return ll

    def _covariance(self, beta, phi, nprime, ties, n, prior, return_info=False):
        """Inverse observed information in (beta of all players incl. the anchor, phi); with
        ``return_info`` the (m + 1) x (m + 1) information itself (phi row zero without ties)."""
        m = len(beta)
        q = expit(-(beta[:, None] - beta[None, :] - phi))  # 1 - P(i beats j)
        c = nprime * q * (1 - q)  # curvature weight of each ordered pair
        est_phi = self._estimates_phi(ties)
        size = m + 1 if est_phi else m
        info = np.zeros((size, size))
        sym = c + c.T
        info[:m, :m] = np.diag(sym.sum(1)) - sym
        if est_phi:
            # v = e_i - e_j - e_phi: cross terms -c (beta_i), +c (beta_j), phi-phi +c
            info[:m, m] = info[m, :m] = -(c.sum(1) - c.sum(0))
            u = np.exp(2 * phi)
            info[m, m] = c.sum() + 4.0 * (ties.sum() / 2.0) * u / (u - 1.0) ** 2
        if return_info:
            if est_phi:
                return info
            full = np.zeros((m + 1, m + 1))
            full[:m, :m] = info
            return full
        if prior > 0:
            anchor = m - 1
            keep = np.arange(size) != anchor  # anchor fixed at 0: drop its row and column
            sub = np.linalg.inv(info[np.ix_(keep, keep)])
            cov = np.zeros((size, size))
            cov[np.ix_(keep, keep)] = sub
        else:
            cov = np.linalg.pinv(info, hermitian=True)
        if est_phi:
            return cov
        out = np.zeros((size + 1, size + 1))
        out[:size, :size] = cov
        return out

    def _constraint_matrix(self, n):
        if self.constraint == "sum_zero":
            return np.eye(n) - np.full((n, n), 1.0 / n)
        ref = int(np.flatnonzero(self.players_ == str(self.reference).strip())[0])
        L = np.eye(n)
        L[:, ref] -= 1.0
        return L

    # ---------------------------------------------------------------- use
    def _check_fitted(self):
        if not hasattr(self, "ratings_"):
            raise ConfigError("this BradleyTerry model is not fitted yet; call fit(battles) first")

    @property
    def phi_(self) -> float:
        self._check_fitted()
        return self._phi

    def tie_param_interval(self, z: float = 1.959963984540054) -> tuple[float, float] | None:
        """Wald interval of Rao and Kupper's theta, exp(phi -+ z SE(phi)), its lower end at
        least 1 (no ties); None when no tie parameter is estimated (no ties, ``ties`` half or
        drop)."""
        self._check_fitted()
        if not self.phi_se_ > 0:
            return None
        return (float(max(np.exp(self._phi - z * self.phi_se_), 1.0)),
                float(np.exp(self._phi + z * self.phi_se_)))

    def index_of(self, names) -> np.ndarray:
        self._check_fitted()
        pos = {p: k for k, p in enumerate(self.players_)}
        names = [str(x).strip() for x in np.atleast_1d(names)]
        missing = [x for x in names if x not in pos]
        if missing:
            raise ConfigError(f"unknown player(s) {missing[:5]}")
        return np.array([pos[x] for x in names], dtype=np.intp)

    def predict_proba(self, players_a, players_b) -> pd.DataFrame:
        """P(a wins), P(tie), P(b wins) for pairs of player names (arrays of equal length)."""
        ia, ib = self.index_of(players_a), self.index_of(players_b)
        pa, pt, pb = outcome_probabilities(self.ratings_[ia], self.ratings_[ib], self._phi)
        return pd.DataFrame({"model_a": self.players_[ia], "model_b": self.players_[ib],
                             "p_a": pa, "p_tie": pt, "p_b": pb})

    def adjacent_differences(self, z: float = 1.959963984540054) -> pd.DataFrame:
        """Each player against the next in rating order: rank, player, next_player, difference
        (rating - next rating), se (of the difference, from the covariance:
        sqrt(v_i + v_j - 2 c_ij)) and separated (difference > z se: the two ranks would not
        swap at 95%); the ranking is stable only where neighbours are separated."""
        self._check_fitted()
        order = np.argsort(-self.ratings_, kind="stable")
        a, b = order[:-1], order[1:]
        diff = self.ratings_[a] - self.ratings_[b]
        var = self.cov_[a, a] + self.cov_[b, b] - 2.0 * self.cov_[a, b]
        se = np.sqrt(np.maximum(var, 0.0))
        return pd.DataFrame({"rank": np.arange(1, len(a) + 1), "player": self.players_[a],
                             "next_player": self.players_[b], "difference": diff, "se": se,
                             "separated": diff > z * se})

    def to_frame(self) -> pd.DataFrame:
        """Ratings table sorted by rating: player, rating, se, elo, elo_se, rank, record."""
        self._check_fitted()
        df = self.comparisons_.summary()
        df.insert(1, "rating", self.ratings_)
        df.insert(2, "se", self.se_)
        df.insert(3, "elo", ELO_BASE + ELO_SCALE * self.ratings_)
        df.insert(4, "elo_se", ELO_SCALE * self.se_)
        df = df.sort_values("rating", ascending=False, kind="stable").reset_index(drop=True)
        df.insert(0, "rank", np.arange(1, len(df) + 1))
        return df
