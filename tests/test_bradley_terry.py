"""Bradley-Terry / Rao-Kupper fits: closed forms, a generic optimizer, SEs, data handling."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from atlascat.design.bradley_terry import (
    BradleyTerry,
    Comparisons,
    comparisons_from_battles,
    outcome_probabilities,
)
from atlascat.errors import ConfigError, ConvergenceError, ResponseDataError


def battles(rows):
    """rows: (a, b, winner, count)."""
    out = []
    for a, b, w, k in rows:
        out += [(a, b, w)] * k
    return pd.DataFrame(out, columns=["model_a", "model_b", "winner"])


def neg_loglik(beta, phi, wins, ties):
    """Independent Rao-Kupper log-likelihood, written out game type by game type."""
    n = len(beta)
    ll = 0.0
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            ll += wins[i, j] * np.log(np.exp(beta[i]) / (np.exp(beta[i]) + np.exp(phi) * np.exp(beta[j])))
            if i < j and ties[i, j]:
                gi, gj, th = np.exp(beta[i]), np.exp(beta[j]), np.exp(phi)
                ll += ties[i, j] * np.log((th**2 - 1) * gi * gj / ((gi + th * gj) * (gj + th * gi)))
    return -ll


def random_arena(rng, n=8, games=400, tie_param=1.6):
    truth = rng.normal(0, 1, n)
    players = [f"m{k}" for k in range(n)]
    comp = Comparisons.empty(players)
    i = rng.integers(n, size=games)
    j = (i + rng.integers(1, n, size=games)) % n
    phi = np.log(tie_param)
    pw, pt, _ = outcome_probabilities(truth[i], truth[j], phi)
    u = rng.random(games)
    out = np.where(u < pw, 1.0, np.where(u < pw + pt, 0.5, 0.0))
    return truth, comp.add(i, j, out)


class TestClosedForms:
    def test_two_players_no_ties(self):
        w, l = 14, 6
        df = battles([("A", "B", "a", w), ("A", "B", "b", l)])
        m = BradleyTerry().fit(df)
        assert m.ratings_[0] - m.ratings_[1] == pytest.approx(np.log(w / l), abs=1e-9)
        p = w / (w + l)
        se_diff = 1 / np.sqrt((w + l) * p * (1 - p))
        np.testing.assert_allclose(m.se_, se_diff / 2, rtol=1e-8)  # sum-zero: beta_A = -beta_B
        assert m.tie_param_ == 1.0
        ref = BradleyTerry(constraint="reference", reference="B").fit(df)
        assert ref.ratings_[0] == pytest.approx(np.log(w / l), abs=1e-9) and ref.ratings_[1] == 0
        assert ref.se_[0] == pytest.approx(se_diff, rel=1e-8) and ref.se_[1] == 0
        assert m.loglik_ == pytest.approx(w * np.log(p) + l * np.log(1 - p), rel=1e-12)

    def test_two_players_with_ties(self):
        """Saturated trinomial: theta = sqrt((n-w)(n-l)/(w l)),
        beta_A - beta_B = 0.5 log(w (n - l) / (l (n - w)))."""
        w, l, t = 9, 4, 7
        n = w + l + t
        df = battles([("A", "B", "a", w), ("B", "A", "a", l), ("A", "B", "tie", t)])
        for method in ("mm", "newton"):
            m = BradleyTerry(method=method).fit(df)
            assert m.tie_param_ == pytest.approx(np.sqrt((n - w) * (n - l) / (w * l)), rel=1e-8)
            assert m.ratings_[0] - m.ratings_[1] == pytest.approx(
                0.5 * np.log(w * (n - l) / (l * (n - w))), abs=1e-8)
            probs = m.predict_proba(["A"], ["B"]).iloc[0]
            np.testing.assert_allclose([probs.p_a, probs.p_tie, probs.p_b], [w / n, t / n, l / n], rtol=1e-7)

    def test_ties_half_and_drop(self):
        df = battles([("A", "B", "a", 6), ("A", "B", "b", 2), ("A", "B", "tie", 4)])
        half = BradleyTerry(ties="half").fit(df)
        assert half.ratings_[0] - half.ratings_[1] == pytest.approx(np.log(8 / 4), abs=1e-9)
        drop = BradleyTerry(ties="drop").fit(df)
        assert drop.ratings_[0] - drop.ratings_[1] == pytest.approx(np.log(6 / 2), abs=1e-9)


class TestAgainstGenericOptimizer:
    def test_three_players_with_ties(self):
        df = battles([("A", "B", "a", 7), ("A", "B", "b", 3), ("A", "B", "tie", 2),
                      ("B", "C", "a", 5), ("B", "C", "b", 4), ("C", "B", "tie", 3),
                      ("A", "C", "a", 6), ("C", "A", "a", 2), ("A", "C", "tie", 1)])
        comp = comparisons_from_battles(df)
        m = BradleyTerry().fit(df)
        assert m.converged_

        def f(x):  # beta_C = -beta_A - beta_B (sum zero), x[2] = log(phi) > 0 via exp
            beta = np.array([x[0], x[1], -x[0] - x[1]])
            return neg_loglik(beta, x[2], comp.wins, comp.ties)

        ref = minimize(f, [0.0, 0.0, 0.3], method="Nelder-Mead",
                       options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 20000})
        np.testing.assert_allclose(m.ratings_, [ref.x[0], ref.x[1], -ref.x[0] - ref.x[1]], atol=1e-6)
        assert m.phi_ == pytest.approx(ref.x[2], abs=1e-6)
        assert -m.loglik_ == pytest.approx(ref.fun, rel=1e-10)
        # SEs: inverse of a finite-difference Hessian in (beta_A, beta_B, phi), mapped to beta_C
        x0 = np.r_[m.ratings_[:2], m.phi_]
        h = 1e-4
        H = np.zeros((3, 3))
        for a in range(3):
            for b in range(3):
                ea, eb = np.eye(3)[a] * h, np.eye(3)[b] * h
                H[a, b] = (f(x0 + ea + eb) - f(x0 + ea - eb) - f(x0 - ea + eb) + f(x0 - ea - eb)) / (4 * h * h)
        cov = np.linalg.inv(H)
        J = np.array([[1, 0, 0], [0, 1, 0], [-1, -1, 0]])
        np.testing.assert_allclose(m.cov_, J @ cov @ J.T, rtol=2e-4, atol=1e-7)
        assert m.phi_se_ == pytest.approx(np.sqrt(cov[2, 2]), rel=2e-4)

    def test_mm_and_newton_agree_and_mm_is_monotone(self, rng):
        _, comp = random_arena(rng)
        mm = BradleyTerry(method="mm").fit(comp)
        nt = BradleyTerry(method="newton").fit(comp)
        np.testing.assert_allclose(mm.ratings_, nt.ratings_, atol=1e-7)
        np.testing.assert_allclose(mm.se_, nt.se_, rtol=1e-6)
        assert mm.tie_param_ == pytest.approx(nt.tie_param_, rel=1e-7)
        # the MM iterates never decrease the log-likelihood
        lls = [BradleyTerry(method="mm", max_iter=k).fit(comp).loglik_ for k in (1, 2, 4, 8, 16, 64)]
        assert np.all(np.diff(lls) >= -1e-9)

    def test_prior_games_equal_explicit_anchor_games(self, rng):
        _, comp = random_arena(rng, n=5, games=60)
        fit = BradleyTerry(prior_games=2.0, constraint="reference", reference="m0").fit(comp)
        players = list(comp.players) + ["anchor"]
        rows = [(p, "anchor", "a", 1) for p in comp.players] + [(p, "anchor", "b", 1) for p in comp.players]
        rec = []
        for i, j in zip(*np.nonzero(comp.wins)):
            rec.append((players[i], players[j], "a", int(comp.wins[i, j])))
        for i, j in zip(*np.nonzero(np.triu(comp.ties))):
            rec.append((players[i], players[j], "tie", int(comp.ties[i, j])))
        explicit = BradleyTerry(constraint="reference", reference="m0").fit(battles(rows + rec))
        np.testing.assert_allclose(fit.ratings_, explicit.ratings_[:5], atol=1e-7)


class TestStandardErrors:
    def test_coverage_on_simulated_arena(self):
        """z = (estimate - truth) / se over many players is about N(0, 1)."""
        rng = np.random.default_rng(5)
        z = []
        for rep in range(4):
            truth, comp = random_arena(rng, n=15, games=3000, tie_param=1.4)
            m = BradleyTerry(method="newton").fit(comp)
            z.append((m.ratings_ - (truth - truth.mean())) / m.se_)
        z = np.concatenate(z)
        assert 0.6 < np.mean(z**2) < 1.5
        assert np.mean(np.abs(z) < 1.96) > 0.85


class TestData:
    def test_winner_codes_and_table(self):
        df = pd.DataFrame({"model_a": ["x", "y", "x", "y"], "model_b": ["y", "x", "y", "x"],
                           "winner": ["model_a", "tie (bothbad)", "y", "B"]})
        comp = comparisons_from_battles(df)
        assert list(comp.players) == ["x", "y"]
        np.testing.assert_array_equal(comp.wins, [[0, 2], [1, 0]])  # x won rows 0 and 3, y row 2
        np.testing.assert_array_equal(comp.ties, [[0, 1], [1, 0]])
        m = BradleyTerry(prior_games=1).fit(df)
        table = m.to_frame()
        assert list(table.columns[:6]) == ["rank", "player", "rating", "se", "elo", "elo_se"]
        assert table.player.iloc[0] == "x" and table.games.tolist() == [4, 4]
        np.testing.assert_allclose(table.elo, 1000 + 400 / np.log(10) * table.rating)

    def test_errors(self):
        with pytest.raises(ResponseDataError, match="not one of"):
            comparisons_from_battles(pd.DataFrame({"model_a": ["a"], "model_b": ["b"], "winner": ["c?"]}))
        with pytest.raises(ResponseDataError, match="plays itself"):
            comparisons_from_battles(pd.DataFrame({"model_a": ["a"], "model_b": ["a"], "winner": ["a"]}))
        with pytest.raises(ResponseDataError, match="missing"):
            comparisons_from_battles(pd.DataFrame({"model_a": ["a"], "winner": ["a"]}))
        undefeated = battles([("A", "B", "a", 3), ("B", "C", "a", 2), ("C", "B", "a", 1)])
        with pytest.raises(ConvergenceError, match="prior_games"):
            BradleyTerry().fit(undefeated)
        fit = BradleyTerry(prior_games=1.0).fit(undefeated)
        assert fit.ratings_[0] > fit.ratings_[1] and np.isfinite(fit.se_).all()
        with pytest.raises(ConfigError, match="reference player"):
            BradleyTerry(constraint="reference", reference="Z").fit(undefeated)
        with pytest.raises(ConfigError, match="ties handling"):
            BradleyTerry(ties="davidson").fit(undefeated)


class TestNoMaximum:
    """When the likelihood has no maximum, the error says which players and why."""

    def test_an_undefeated_player_is_named(self):
        df = battles([("x", "y", "a", 2), ("x", "z", "a", 2), ("y", "z", "a", 1), ("y", "z", "b", 1)])
        with pytest.raises(ConvergenceError, match=r"players 'y', 'z' never beat or tied any of player 'x'"):
            BradleyTerry().fit(df)

    def test_groups_that_never_met_are_named(self):
        df = battles([("x", "y", "a", 1), ("x", "y", "b", 1), ("z", "w", "a", 1), ("z", "w", "b", 1)])
        with pytest.raises(ConvergenceError, match=r"never played players"):
            BradleyTerry().fit(df)

    def test_only_ties_has_no_tie_parameter(self):
        df = battles([("x", "y", "tie", 2), ("y", "z", "tie", 1)])
        with pytest.raises(ConvergenceError, match="every game is a tie"):
            BradleyTerry().fit(df)
        half = BradleyTerry(ties="half").fit(df)            # half a win each: all equal
        np.testing.assert_allclose(half.ratings_, 0, atol=1e-12)
        assert half.converged_
        prior = BradleyTerry(prior_games=1).fit(df)          # the virtual games are decisive
        assert prior.converged_ and np.isfinite(prior.tie_param_)

    def test_nan_prior_games_is_refused(self):
        with pytest.raises(ConfigError, match="prior_games"):
            BradleyTerry(prior_games=float("nan")).fit(battles([("x", "y", "a", 1), ("y", "x", "a", 1)]))


class TestRankStability:
    def test_adjacent_difference_se_is_the_closed_form(self):
        """Two players without ties: the difference log(w / l) has SE 1 / sqrt(n p q), whatever
        the constraint; separated iff difference > 1.96 SE."""
        for w, l, apart in ((14, 6, False), (40, 10, True)):
            df = battles([("A", "B", "a", w), ("A", "B", "b", l)])
            p = w / (w + l)
            for fit in (BradleyTerry().fit(df),
                        BradleyTerry(constraint="reference", reference="B").fit(df)):
                gap = fit.adjacent_differences().iloc[0]
                assert (gap.player, gap.next_player) == ("A", "B")
                assert gap.difference == pytest.approx(np.log(w / l), abs=1e-9)
                assert gap.se == pytest.approx(1 / np.sqrt((w + l) * p * (1 - p)), rel=1e-8)
                assert bool(gap.separated) is apart

    def test_neighbours_follow_the_ratings(self, rng):
        _, comp = random_arena(rng, n=6, games=300)
        fit = BradleyTerry().fit(comp)
        gaps = fit.adjacent_differences()
        table = fit.to_frame()
        assert gaps.player.tolist() == table.player.tolist()[:-1]
        assert gaps.next_player.tolist() == table.player.tolist()[1:]
        assert (gaps.difference >= 0).all() and (gaps.separated == (gaps.difference > 1.96 * gaps.se)).all()


def test_no_games_is_named():
    """An empty battle table is refused in one line that says there are no players."""
    empty = pd.DataFrame({"model_a": [], "model_b": [], "winner": []})
    with pytest.raises(ConfigError, match="got 0 players"):
        BradleyTerry().fit(empty)
