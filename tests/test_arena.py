"""Adaptive matchmaking: game information, pair scores, schedules, simulations, CLI."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.design.arena import (
    compare_schedulers,
    games_to_reach,
    pair_information,
    schedule,
    score_pairs,
    simulate_arena,
)
from atlascat.design.bradley_terry import BradleyTerry, Comparisons, outcome_probabilities
from atlascat.errors import ConfigError


class TestInformation:
    def test_no_ties_is_p_times_q(self):
        d = np.linspace(-3, 3, 13)
        p = 1 / (1 + np.exp(-d))
        np.testing.assert_allclose(pair_information(d, 0.0), p * (1 - p), rtol=1e-12)

    def test_with_ties_is_fisher_information_of_the_trinomial(self):
        phi = np.log(1.8)
        for delta in (-1.2, 0.0, 0.4, 2.5):
            h = 1e-6
            probs = np.array(outcome_probabilities(delta, 0.0, phi))
            dp = (np.array(outcome_probabilities(delta + h, 0.0, phi))
                  - np.array(outcome_probabilities(delta - h, 0.0, phi))) / (2 * h)
            assert pair_information(delta, 0.0, phi) == pytest.approx((dp**2 / probs).sum(), rel=1e-6)

    @pytest.mark.parametrize("criterion", ["det", "variance"])
    def test_pair_scores_equal_recomputed_covariance(self, rng, criterion):
        n = 6
        beta = rng.normal(0, 1, n)
        X = rng.normal(size=(20, n))
        S = np.linalg.inv(X.T @ X / 5 + np.eye(n))
        i, j, score, info = score_pairs(beta, S, 0.3, criterion)
        for k in range(i.size):
            v = np.zeros(n)
            v[i[k]], v[j[k]] = 1, -1
            S_new = np.linalg.inv(np.linalg.inv(S) + info[k] * np.outer(v, v))
            if criterion == "det":
                expected = np.linalg.slogdet(S)[1] - np.linalg.slogdet(S_new)[1]
            else:
                expected = np.trace(S) - np.trace(S_new)
            assert score[k] == pytest.approx(expected, rel=1e-9)
        with pytest.raises(ConfigError, match="unknown criterion"):
            score_pairs(beta, S, 0.0, "rank")


class TestSchedule:
    def test_fresh_arena_and_avoiding_known_pairs(self):
        players = ["a", "b", "c", "d"]
        first = schedule(None, 2, players=players)
        assert len(first) == 2 and set(first.columns) >= {"model_a", "model_b", "p_a", "p_tie", "information"}
        # two disjoint pairs: the second pick does not reuse a player of the first
        assert not set(first.iloc[0, :2]) & set(first.iloc[1, :2])
        # after many a-b and c-d games, the next game should bridge the two groups
        rows = [("a", "b", w) for w in "ab" * 20] + [("c", "d", w) for w in "ab" * 20]
        df = pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])
        nxt = schedule(df, 1).iloc[0]
        assert {nxt.model_a, nxt.model_b} not in ({"a", "b"}, {"c", "d"})

    def test_batch_prefers_close_uncertain_pairs(self):
        players = [f"p{k}" for k in range(5)]
        comp = Comparisons.empty(players)
        # p0 far above everyone; p1..p4 even among themselves
        rng = np.random.default_rng(0)
        i = rng.integers(1, 5, 400)
        j = 1 + (i - 1 + rng.integers(1, 4, 400)) % 4
        comp = comp.add(i, j, (rng.random(400) < 0.5).astype(float))
        comp = comp.add(np.zeros(40, int), rng.integers(1, 5, 40), np.ones(40))
        model = BradleyTerry(prior_games=1).fit(comp)
        plan = schedule(comp, 3, model=model)
        assert len(plan) == 3 and (plan.information > 0).all()
        with pytest.raises(ConfigError, match="players"):
            schedule(None, 2)


class TestSimulation:
    def test_games_to_reach(self):
        hist = pd.DataFrame({"games": [10, 20, 30, 40], "spearman": [0.5, 0.96, 0.9, 0.97]})
        assert games_to_reach(hist, 0.95) == 20
        assert games_to_reach(hist, 0.95, sustained=True) == 40
        assert np.isnan(games_to_reach(hist, 0.99))

    def test_strategies_play_what_they_should(self):
        truth = np.linspace(-1, 1, 6)
        rr = simulate_arena(truth, "round_robin", n_games=30, batch_size=15, rng=np.random.default_rng(1))
        assert rr.games.tolist() == [15, 30]
        with pytest.raises(ConfigError, match="strategy"):
            simulate_arena(truth, "swiss", rng=np.random.default_rng(0))

    def test_adaptive_needs_fewer_games_than_random(self):
        """Acceptance in miniature: adaptive matchmaking reaches Spearman >= 0.95 with fewer
        games than random pairing (mean over 8 seeded arenas of 20 players with rating sd 2;
        benchmarks/bench_design.py runs the full comparison over settings and seeds)."""
        df = compare_schedulers(20, rating_sd=2.0, n_seeds=8, n_games=800, batch_size=10,
                                strategies=("adaptive", "random"), seed=3)
        # a run that never keeps 0.95 counts as 800 games, a lower bound: conservative whenever
        # it is the random strategy's
        assert df[df.strategy == "adaptive"].reached.all(), df
        mean = df.groupby("strategy")[["games_first", "games_sustained"]].mean()
        assert mean.loc["adaptive", "games_first"] < mean.loc["random", "games_first"], mean
        assert mean.loc["adaptive", "games_sustained"] < 0.85 * mean.loc["random", "games_sustained"], mean


class TestCLI:
    @pytest.fixture
    def battles_csv(self, tmp_path):
        rng = np.random.default_rng(4)
        truth = {"alpha": 1.0, "beta": 0.3, "gamma": -0.2, "delta": -1.0}
        names = list(truth)
        rows = []
        for _ in range(300):
            a, b = rng.choice(names, 2, replace=False)
            pa, pt, _ = outcome_probabilities(truth[a], truth[b], np.log(1.3))
            u = rng.random()
            rows.append((a, b, "a" if u < pa else ("tie" if u < pa + pt else "b")))
        path = tmp_path / "battles.csv"
        pd.DataFrame(rows, columns=["model_a", "model_b", "winner"]).to_csv(path, index=False)
        return path

    def test_fit_and_schedule(self, battles_csv, tmp_path, capsys):
        out = tmp_path / "ratings.csv"
        assert main(["arena", "fit", str(battles_csv), "-o", str(out)]) == 0
        ratings = pd.read_csv(out)
        assert ratings.player.tolist() == ["alpha", "beta", "gamma", "delta"]
        direct = BradleyTerry().fit(pd.read_csv(battles_csv)).to_frame()
        np.testing.assert_allclose(ratings.rating, direct.rating, rtol=1e-9)
        capsys.readouterr()
        assert main(["arena", "schedule", str(battles_csv), "-n", "3", "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        assert len(plan) == 3 and {"model_a", "model_b", "information"} <= set(plan[0])

    def test_errors(self, tmp_path, capsys):
        bad = tmp_path / "bad.csv"
        pd.DataFrame({"model_a": ["x"], "model_b": ["y"], "winner": ["maybe"]}).to_csv(bad, index=False)
        assert main(["arena", "fit", str(bad)]) == 2
        assert "not one of" in capsys.readouterr().err
        assert main(["arena", "fit", str(tmp_path / "missing.csv")]) == 2


class TestCLIBadInput:
    """Every refusal of `atlas arena` is one line naming the option the user typed, exit 2."""

    @pytest.mark.parametrize("rows,args,needles", [
        ("", ["fit"], ["BATTLES", "is empty"]),
        ("model_a,model_b,winner\n", ["fit"], ["holds no games"]),
        ("model_a,model_b,winner\n", ["schedule"], ["holds no games"]),
        ("model_a,model_b,winner\nx,y,tie\nx,y,tie\n", ["fit"], ["every game is a tie", "--ties half", "--prior-games"]),
        ("model_a,model_b,winner\nx,y,a\nx,z,a\ny,z,a\nz,y,a\n", ["fit"], ["'y', 'z' never beat or tied", "'x'", "--prior-games > 0"]),
        ("model_a,model_b,winner\nx,y,a\ny,x,a\n", ["fit", "--prior-games", "nan"], ["--prior-games"]),
        ("model_a,model_b,winner\nx,y,a\ny,x,a\n", ["fit", "--ties", "davidson"], ["--ties"]),
        ("model_a,model_b,winner\nx,y,a\ny,x,a\n", ["schedule", "-n", "0"], ["-n/--pairs"]),
        ("model_a,model_b,winner\nx,y,a\ny,x,a\n", ["schedule", "--criterion", "rank"], ["--criterion"]),
        ("model_a,model_b,winner\nx,y,a\ny,x,a\n", ["schedule", "--prior-games", "-1"], ["--prior-games"]),
        ("model_a,model_b,winner\nx,,a\nx,,b\n", ["fit"], ["row 0: model_b is missing (2 such row(s))"]),
        ("model_a,model_b,winner\nx,y,a\ny,,b\nx,y,b\n", ["fit"], ["row 1: model_b is missing"]),
    ])
    def test_one_line(self, tmp_path, capsys, rows, args, needles):
        path = tmp_path / "battles.csv"
        path.write_text(rows)
        assert main(["arena", args[0], str(path), *args[1:]]) == 2
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
        for needle in needles:
            assert needle in lines[0], (needle, lines[0])

    def test_tie_handling_is_named_as_used(self, tmp_path, capsys):
        path = tmp_path / "battles.csv"
        path.write_text("model_a,model_b,winner\nx,y,tie\nx,y,a\ny,x,a\n")
        assert main(["arena", "fit", str(path), "--ties", "half"]) == 0
        out = capsys.readouterr().out
        assert "half a win" in out and "Rao-Kupper" not in out
        assert main(["arena", "fit", str(path), "--ties", "drop"]) == 0
        out = capsys.readouterr().out
        assert "2 players, 3 games (1 ties left out)" in out and "Rao-Kupper" not in out

    def test_unconverged_fit_says_so(self, tmp_path, capsys, monkeypatch):
        path = tmp_path / "battles.csv"
        path.write_text("model_a,model_b,winner\nx,y,a\ny,x,a\ny,z,a\nz,y,a\nz,x,b\nx,z,b\nx,z,a\n")
        defaults = list(BradleyTerry.__init__.__defaults__)
        defaults[-2] = 2   # max_iter
        monkeypatch.setattr(BradleyTerry.__init__, "__defaults__", tuple(defaults))
        assert main(["arena", "fit", str(path)]) == 0
        assert "did not converge in 2 iterations" in capsys.readouterr().err


@pytest.mark.parametrize("args,needle", [
    (["--players", "2"], "--players must be >= 3, got 2"),
    (["--seeds", "0"], "--seeds must be >= 1, got 0"),
    (["--games", "0"], "--games must be >= 1, got 0"),
    (["--rating-sd", "-1"], "--rating-sd must be a finite number > 0"),
    (["--rating-sd", "0"], "--rating-sd must be a finite number > 0"),    # no order to recover
    (["--threshold", "2"], "--threshold must be a Spearman correlation in (0, 1]"),
    (["--tie-param", "0.5"], "--tie-param must be Rao and Kupper's theta >= 1"),
])
def test_arena_simulate_bad_settings_are_one_line(capsys, args, needle):
    assert main(["arena", "simulate", *args]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and needle in lines[0], err


def test_arena_fit_says_which_ranks_the_games_tell_apart(tmp_path, capsys):
    """The bundled arena: 2 of its 7 neighbouring pairs are separated at 95%; the line names
    them and counts the others; --json carries every pair."""
    assert main(["arena", "fit", "arena-demo"]) == 0
    out = capsys.readouterr().out
    assert ("neighbouring ranks told apart at 95% (difference > 1.96 SE): 5-6 (ember > fjord), "
            "7-8 (grove > heath); 5 other neighbouring pair(s) could swap") in " ".join(out.split())
    assert main(["arena", "fit", "arena-demo", "--json"]) == 0
    adjacent = json.loads(capsys.readouterr().out)["adjacent"]
    assert [a["separated"] for a in adjacent] == [False, False, False, False, True, False, True]


def test_schedule_cli_enters_a_model_that_has_not_played(capsys):
    """--add-player: a newcomer (no games, rating known only from the prior games) is in the
    first scheduled pair; without it the schedule names only players of the file."""
    assert main(["arena", "schedule", "arena-demo", "-n", "4", "--json",
                 "--add-player", "newcomer"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert "newcomer" in (plan[0]["model_a"], plan[0]["model_b"])
    assert main(["arena", "schedule", "arena-demo", "-n", "4", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert all("newcomer" not in (p["model_a"], p["model_b"]) for p in plan)
