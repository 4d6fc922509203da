"""A user walk of ``atlas arena`` and ``atlascat.design.bradley_terry``: defects found and fixed."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.design.bradley_terry import BradleyTerry, comparisons_from_battles
from atlascat.errors import ResponseDataError


def frame(rows):
    return pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])


def test_a_name_with_stray_spaces_is_the_same_player(tmp_path, capsys):
    """'Llama-3 ü' and ' Llama-3 ü' (a hand-edited CSV) used to be two players, and the fit was
    refused because one of them 'never beat or tied' the other."""
    df = frame([("GPT 4o", "Llama-3 ü", "a"), ("Llama-3 ü", "GPT 4o", "a"),
                ("GPT 4o", "Llama-3 ü", "tie"), (" Llama-3 ü", "GPT 4o ", "b")])
    comp = comparisons_from_battles(df)
    assert sorted(comp.players) == ["GPT 4o", "Llama-3 ü"]
    fit = BradleyTerry().fit(df)
    # two players, w=2, l=1, t=1 of n=4: theta = sqrt((n-w)(n-l)/(wl)), gap 0.5 log(w(n-l)/(l(n-w)))
    assert fit.tie_param_ == pytest.approx(np.sqrt(3), abs=1e-7)
    gap = fit.ratings_[list(fit.players_).index("GPT 4o")] * 2
    assert gap == pytest.approx(0.5 * np.log(3), abs=1e-7)
    path = tmp_path / "b.csv"
    df.to_csv(path, index=False)
    assert main(["arena", "fit", str(path)]) == 0
    with pytest.raises(ResponseDataError, match="row 0: model_b is blank"):
        comparisons_from_battles(frame([("A", "  ", "a")]))


def test_a_winner_that_is_both_a_code_and_a_name_is_refused(tmp_path, capsys):
    """Players named 1 and 2 with the winner written as the winning model: '1' when model_b is
    1 used to count as a win of model_a (the code '1'), silently turning the result around."""
    df = frame([("1", "2", "2"), ("2", "1", "1"), ("1", "2", "1")])
    with pytest.raises(ResponseDataError, match="row 1: winner '1' is both an outcome code and "
                                                "the name of model_b"):
        comparisons_from_battles(df)
    path = tmp_path / "b.csv"
    df.to_csv(path, index=False)
    assert main(["arena", "fit", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "write the winner as model_a, model_b or tie" in err
    # names that agree with the code, or are not codes at all, still read as names
    comp = comparisons_from_battles(frame([("7", "5", "7"), ("5", "7", "7"), ("1", "5", "1")]))
    k = {p: i for i, p in enumerate(comp.players)}
    assert comp.wins[k["7"], k["5"]] == 2 and comp.wins[k["1"], k["5"]] == 1
    with pytest.raises(ResponseDataError, match=r"winner 'x' at row 0 is not one of"):
        comparisons_from_battles(frame([("A", "B", "x")]))


def test_mm_with_virtual_games_converges_in_few_iterations():
    """``prior_games > 0`` (what the error for an undefeated player recommends): MM moved the
    common level of the ratings against the virtual anchor by tiny steps, 80,000 iterations and
    7 s for 100 players x 100,000 games, no convergence in 100,000 at prior_games=0.1, half a
    minute with an undefeated player. The fit now takes a few hundred iterations and agrees
    with Newton's (and with a generic optimizer on an independently written likelihood)."""
    from scipy.optimize import minimize
    from scipy.special import log_expit

    from atlascat.design.arena import random_battles

    rng = np.random.default_rng(11)
    truth = {f"m{k}": v for k, v in enumerate(rng.normal(0, 1.5, 30))}
    truth["m0"], truth["m1"] = 40.0, -40.0    # always wins, never wins
    df = random_battles(truth, 20_000, tie_param=1.3, rng=rng)
    for prior in (1.0, 0.1):
        mm = BradleyTerry(prior_games=prior).fit(df)
        nt = BradleyTerry(prior_games=prior, method="newton").fit(df)
        assert mm.converged_ and mm.n_iter_ < 2_000
        assert np.abs(mm.ratings_ - nt.ratings_).max() < 1e-7
        assert mm.prior_only_ is not None
    # independent: the anchor at 0 plays prior/2 wins and prior/2 losses with every player
    comp = mm.comparisons_
    n, half = comp.n_players, 0.1 / 2

    def nll(x):
        beta, phi = x[:n], np.exp(x[n])
        d = beta[:, None] - beta[None, :]
        ll = (comp.wins * log_expit(d - phi)).sum()
        ll += 0.5 * (comp.ties * (np.log(np.expm1(2 * phi)) + log_expit(d - phi)
                                  + log_expit(-d - phi))).sum()
        ll += half * (log_expit(beta - phi) + log_expit(-beta - phi)).sum()
        return -ll

    ref = minimize(nll, np.r_[nt.ratings_ * 0, np.log(0.2)], method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 20_000})
    keep = ~np.isin(comp.players, ["m0", "m1"])   # nearly flat directions: compare the rest
    ours, theirs = mm.ratings_[keep], ref.x[:n][keep]
    assert np.abs((ours - ours.mean()) - (theirs - theirs.mean())).max() < 1e-4
    assert mm.tie_param_ == pytest.approx(np.exp(np.exp(ref.x[n])), abs=1e-4)


def test_every_gap_without_an_estimate_is_named(tmp_path, capsys):
    """An arena with a model that always wins and one that never wins: the note (and the error
    without virtual games) named only the model that never won, so the undefeated model's
    rating, set just as much by the virtual games, read as measured."""
    rows = [("top", "x", "a"), ("y", "top", "b"), ("x", "y", "a"), ("y", "x", "a"),
            ("x", "low", "a"), ("low", "y", "b"), ("y", "low", "a")]
    df = frame(rows)
    fit = BradleyTerry(prior_games=1).fit(df)
    assert "player 'low' never beat or tied any of players 'y', 'x'" in fit.prior_only_
    assert "player 'top' won every game against players 'y', 'x'" in fit.prior_only_
    assert "each of these gaps is finite only through the virtual games" in fit.prior_only_
    path = tmp_path / "b.csv"
    df.to_csv(path, index=False)
    assert main(["arena", "fit", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "'top' won every game" in err and "'low'" in err
    # one gap, told once: y never beat x (not also "x won every game against y")
    one = BradleyTerry(prior_games=1).fit(frame([("x", "y", "a"), ("y", "x", "b")]))
    assert one.prior_only_.startswith("player 'y' never beat or tied any of player 'x': the gap")


def test_records_count_games_in_whole_numbers(capsys):
    """`atlas arena fit --json` wrote "wins": 59.0, "games": 90.0 beside the table's 59 and 90."""
    import json

    assert main(["arena", "fit", "arena-demo", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)["ratings"][0]
    assert first["player"] == "aurora" and first["wins"] == 59 and first["games"] == 90
    assert all(isinstance(first[k], int) for k in ("wins", "losses", "ties", "games"))


def test_a_player_named_with_stray_spaces_on_the_command_line_is_the_known_one(capsys):
    """`atlas arena schedule --add-player " aurora"` entered a new, unrated player that printed
    as aurora (its games scored as a newcomer's); --reference " heath" was refused."""
    import json

    assert main(["arena", "schedule", "arena-demo", "-n", "2", "--add-player", " aurora",
                 "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["arena", "schedule", "arena-demo", "-n", "2", "--json"]) == 0
    assert plain == json.loads(capsys.readouterr().out)
    assert main(["arena", "fit", "arena-demo", "--reference", " heath", "--json"]) == 0
    rows = {r["player"]: r for r in json.loads(capsys.readouterr().out)["ratings"]}
    assert rows["heath"]["rating"] == 0 and rows["heath"]["se"] == 0
    fit = BradleyTerry().fit(frame([("x", "y", "a"), ("y", "x", "a"), ("x", "y", "a")]))
    assert fit.predict_proba([" x"], ["y "]).p_a.iloc[0] == pytest.approx(2 / 3)


def test_json_lines_named_json_and_a_wrong_delimiter(tmp_path, capsys):
    """A JSON-lines file named battles.json was refused as 'not valid JSON (Trailing data)';
    a semicolon-separated CSV was told it lacked every column, without the one it had."""
    df = frame([("x", "y", "a"), ("y", "x", "a"), ("x", "y", "tie")])
    lines = tmp_path / "battles.json"
    df.to_json(lines, orient="records", lines=True)
    assert main(["arena", "fit", str(lines), "--json"]) == 0
    capsys.readouterr()
    semi = tmp_path / "semi.csv"
    df.to_csv(semi, sep=";", index=False)
    assert main(["arena", "fit", str(semi)]) == 2
    err = capsys.readouterr().err
    assert "(the columns read: 'model_a;model_b;winner')" in err and len(err.strip().splitlines()) == 1


def test_comparisons_add_refuses_games_it_cannot_count():
    """`Comparisons.add` dropped an outcome of 2 or 0.7 without a word, counted a player's game
    against itself, and took position -1 as the last player."""
    from atlascat.design.bradley_terry import Comparisons
    from atlascat.errors import ConfigError

    comp = Comparisons.empty(["x", "y", "z"])
    with pytest.raises(ConfigError, match=r"game 1 \(of 2 such\): i=0, j=1, outcome 2: use 1"):
        comp.add([0, 0, 1], [1, 1, 2], [1, 2, 0.7])
    with pytest.raises(ConfigError, match="a player cannot play itself"):
        comp.add([0], [0], [1])
    with pytest.raises(ConfigError, match=r"add's i must be player positions 0..2, got \[-1\]"):
        comp.add([-1], [0], [1])
    with pytest.raises(ConfigError, match="one equal length"):
        comp.add([0, 1], [1], [1])
    ok = comp.add([0, 1, 2], [1, 2, 0], [1, 0.5, 0])
    assert ok.n_games == 3 and ok.wins[0, 1] == 1 and ok.ties[1, 2] == 1 and ok.wins[0, 2] == 1


def test_a_player_listed_twice_is_refused():
    """`fit(battles, players=["x", "x", ...])` or `schedule(None, players=["a", "a", "b"])` made
    a phantom second 'x' without games, and schedule paired 'a' against 'a'."""
    from atlascat.design.arena import schedule
    from atlascat.errors import ConfigError

    df = frame([("x", "y", "a"), ("y", "x", "a"), ("x", "z", "b"), ("z", "x", "b")])
    with pytest.raises(ConfigError, match="names player 'x' more than once"):
        BradleyTerry().fit(df, players=["x", "x ", "y", "z"])
    with pytest.raises(ConfigError, match="names player 'a' more than once"):
        schedule(None, 2, players=["a", "a", "b"])


def test_schedule_alternates_sides():
    """`schedule` put the same model first every time a pair repeated (beta before gamma in 5
    of the docs' 10 games), so an LLM judge that prefers the first answer favoured it in every
    one; model_a now goes to whoever has been model_a less often in the batch. And
    new_players with a fitted model= were ignored without a word."""
    from atlascat.design.arena import random_battles, schedule
    from atlascat.errors import ConfigError

    rng = np.random.default_rng(2)
    df = random_battles({"p": 1.0, "q": 0.5, "r": 0.0, "s": -0.7}, 300, tie_param=1.2, rng=rng)
    plan = schedule(df, 40)
    first = plan.model_a.value_counts().reindex(["p", "q", "r", "s"], fill_value=0)
    second = plan.model_b.value_counts().reindex(["p", "q", "r", "s"], fill_value=0)
    assert (np.abs(first - second) <= 2).all()   # it was 25 for one model
    pair = plan.apply(lambda r: tuple(sorted((r.model_a, r.model_b))), axis=1)
    assert pair.value_counts().max() > 1   # pairs do repeat in such a batch
    model = BradleyTerry(prior_games=1).fit(df)
    fit = schedule(df, 40, model=model)
    assert np.allclose(fit.p_a + fit.p_tie + fit.p_b, 1) and (fit.model_a != fit.model_b).all()
    with pytest.raises(ConfigError, match="new_players needs a fit that includes them"):
        schedule(df, 2, model=model, new_players=["newcomer"])


def test_mm_is_quick_when_a_model_nearly_always_wins():
    """A strong model that lost 1 of its games (no virtual games needed): MM crept towards its
    rating, 31,000 iterations (9 s) for 100 models and 100,000 games; with a Newton step on
    every rating each 10 iterations it takes about a hundred, and agrees with Newton's fit."""
    from atlascat.design.arena import random_battles

    rng = np.random.default_rng(3)
    truth = {f"m{k}": v for k, v in enumerate(rng.normal(0, 1.5, 40))}
    truth["m0"] = 50.0
    df = random_battles(truth, 20_000, tie_param=1.3, rng=rng)
    df.loc[np.flatnonzero(df.model_a == "m0")[0], "winner"] = "b"
    mm = BradleyTerry().fit(df)
    nt = BradleyTerry(method="newton").fit(df)
    assert mm.converged_ and mm.n_iter_ < 1_000
    assert np.abs(mm.ratings_ - nt.ratings_).max() < 1e-7
    assert mm.loglik_ == pytest.approx(nt.loglik_, abs=1e-8)


def test_json_says_how_ties_were_counted(capsys):
    """`atlas arena fit --ties half --json` reported "tie_param": 1.0, which reads as an arena
    without ties; the table says "a tie counted as half a win". The record now names the tie
    handling, and a tie parameter only where one is estimated."""
    import json

    assert main(["arena", "fit", "arena-demo", "--ties", "half", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ties"] == "half" and out["tie_param"] is None
    assert main(["arena", "fit", "arena-demo", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ties"] == "rao-kupper" and out["tie_param"] == pytest.approx(1.4451, abs=1e-4)


def test_a_header_with_spaces_after_the_commas_is_read(tmp_path, capsys):
    """A hand-written 'model_a, model_b, winner' header (or Model_A, ...) was refused as missing
    model_b and winner, though every value after it reads fine."""
    path = tmp_path / "b.csv"
    path.write_text("model_a, model_b, winner\nGPT 4o, Llama, a\nLlama, GPT 4o, a\n"
                    "GPT 4o, Llama, tie\n", encoding="utf-8")
    assert main(["arena", "fit", str(path), "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["tie_param"] == pytest.approx(2.0, abs=1e-7)   # w = l = t = 1: sqrt(2 * 2 / 1)
    assert sorted(r["player"] for r in out["ratings"]) == ["GPT 4o", "Llama"]
    caps = pd.DataFrame({"Model_A": ["x", "y"], "Model_B": ["y", "x"], "Winner": ["a", "a"]})
    assert comparisons_from_battles(caps).n_games == 2


def test_counts_agree_with_a_group_by_and_unknown_names_are_named():
    """The counts of a large arena (read in a second per million games: the player lookup no
    longer walks every game in Python, 5 s -> 1.3 s) against an independent pandas group-by."""
    from atlascat.design.arena import random_battles

    rng = np.random.default_rng(8)
    truth = {f"org/model {k} ü": v for k, v in enumerate(rng.normal(0, 1, 25))}
    df = random_battles(truth, 50_000, tie_param=1.4, rng=rng)
    comp = comparisons_from_battles(df)
    pos = {p: k for k, p in enumerate(comp.players)}
    won = df[df.winner != "tie"]
    winner = np.where(won.winner == "a", won.model_a, won.model_b)
    loser = np.where(won.winner == "a", won.model_b, won.model_a)
    wins = np.zeros_like(comp.wins)
    for (w, lo), count in pd.Series(1, index=[winner, loser]).groupby(level=[0, 1]).sum().items():
        wins[pos[w], pos[lo]] = count
    tied = df[df.winner == "tie"]
    ties = np.zeros_like(comp.ties)
    for a, b in zip(tied.model_a, tied.model_b):
        ties[pos[a], pos[b]] += 1
        ties[pos[b], pos[a]] += 1
    assert np.array_equal(comp.wins, wins) and np.array_equal(comp.ties, ties)
    with pytest.raises(ResponseDataError, match=r"not in the player list, e\.g\. \['org/model 3 ü'\]"):
        comparisons_from_battles(df, players=[p for p in truth if p != "org/model 3 ü"])


def test_the_stability_line_stays_readable_for_many_models(tmp_path, capsys):
    """100 models, 1M games: the line listed all 44 separated neighbours, 2,500 characters on
    one line (here 40 models, 20 separated); it names 8 and counts the rest."""
    from atlascat.design.arena import random_battles

    rng = np.random.default_rng(0)
    truth = {f"org/model-{k}": v for k, v in enumerate(rng.normal(0, 3, 40))}
    path = tmp_path / "b.parquet"
    random_battles(truth, 60_000, tie_param=1.3, rng=rng).to_parquet(path)
    assert main(["arena", "fit", str(path)]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("neighbouring")][0]
    assert len(line) < 600 and " and 12 more (of 39; --json lists them)" in line
    assert line.endswith("other neighbouring pair(s) could swap")


def test_the_tie_parameter_comes_with_an_interval_that_covers(capsys):
    """The tie parameter was the one estimate printed without its uncertainty (`fit` printed
    "Rao-Kupper tie parameter = 1.445"). `tie_param_interval()` and the line give a 95% Wald
    interval; over seeded simulated arenas it covers the true theta about 95% of the time."""
    from atlascat.design.arena import random_battles

    truth = {f"m{k}": v for k, v in enumerate(np.random.default_rng(5).normal(0, 1, 8))}
    hits = []
    for s in range(120):
        df = random_battles(truth, 300, tie_param=1.5, rng=np.random.default_rng([13, s]))
        lo, hi = BradleyTerry(method="newton").fit(df).tie_param_interval()
        hits.append(lo <= 1.5 <= hi)
    assert 0.90 <= np.mean(hits) <= 0.99
    assert BradleyTerry().fit(frame([("x", "y", "a"), ("y", "x", "a")])).tie_param_interval() is None
    assert main(["arena", "fit", "arena-demo"]) == 0
    out = capsys.readouterr().out
    assert "Rao-Kupper tie parameter = 1.445 (95% 1.318-1.584)" in out


def test_a_sparse_arena_names_a_few_gaps_and_counts_the_rest():
    """250 models, 1,000 games: 19 gaps without a finite estimate. Naming every one (as the
    fix above first did) made a 1,700-character `note:` line (3,500 at 500 models); the note
    and the error name 3 and count the rest."""
    from atlascat.design.arena import random_battles
    from atlascat.errors import ConvergenceError

    rng = np.random.default_rng(0)
    truth = {f"m{k}": v for k, v in enumerate(rng.normal(0, 1, 250))}
    df = random_battles(truth, 1000, tie_param=1.3, rng=rng)
    note = BradleyTerry(prior_games=1).fit(df).prior_only_
    assert len(note) < 600 and "; 16 more such groups: each of these gaps" in note
    with pytest.raises(ConvergenceError, match="16 more such groups, so each of these gaps") as err:
        BradleyTerry().fit(df)
    assert len(str(err.value)) < 600
