"""Walk of the evaluation-design features as a user (atlas design / arena / cost-aware stop)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.irt.polybank import PolyBank


def test_design_on_a_graded_bank_prints_the_thresholds(tmp_path, capsys):
    """A graded bank's form table shows each item's thresholds, not only its slope."""
    frame = pd.DataFrame({"item_id": [f"r{j}" for j in range(8)], "model": "graded",
                          "a1": np.linspace(0.8, 2.0, 8),
                          "d1": 1.5, "d2": 0.0, "d3": -1.5, "levels": "0;1;2;3"})
    path = tmp_path / "graded.csv"
    frame.to_csv(path, index=False)
    assert isinstance(PolyBank.read(path), PolyBank)
    assert main(["design", "--bank", str(path), "-k", "3", "--random-forms", "5"]) == 0
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if "item_id" in line).split()
    assert {"a1", "d1", "d2", "d3"} <= set(header)
    assert "r7" in text   # the steepest item is in the form


def test_cost_stop_judges_only_items_the_budget_allows():
    """An informative item the budget can never pay for does not end the test as 'cost' while
    cheap, still worthwhile items remain."""
    from atlascat.cat.config import CATConfig
    from atlascat.cat.simulate import simulate_cat
    from atlascat.irt.bank import ItemBank

    n = 40
    a = np.full(n, 1.2)
    a[0] = 4.0                                  # the best item, far too expensive
    meta = pd.DataFrame({"cost": np.r_[1000.0, np.ones(n - 1)]})
    bank = ItemBank([f"i{j}" for j in range(n)], a, np.linspace(-1, 1, n), np.zeros(n),
                    np.ones(n), metadata=meta)
    cfg = CATConfig(cost_column="cost", budget=20, value_per_se=200, min_items=1, max_items=30,
                    se_stop=None)
    res = simulate_cat(bank, cfg, thetas=np.zeros(5), rng=0)
    frame = res.persons
    assert (frame["stop_reason"] != "cost").all()
    assert (frame["n_items"] == 20).all() and (frame["cost"] <= 20).all()


def test_a_negative_cost_names_the_item():
    """A bad cost names the item that holds it (the message used to name only the column)."""
    from atlascat.cat.config import CATConfig
    from atlascat.cat.simulate import simulate_cat
    from atlascat.errors import ConfigError
    from atlascat.irt.bank import ItemBank

    n = 10
    meta = pd.DataFrame({"tokens": [5.0] * 3 + [-2.0] + [5.0] * 6})
    bank = ItemBank([f"q{j}" for j in range(n)], np.ones(n), np.linspace(-1, 1, n), np.zeros(n),
                    np.ones(n), metadata=meta)
    with pytest.raises(ConfigError, match=r"item 'q3' has -2\.0 \(1 such item"):
        simulate_cat(bank, CATConfig(cost_column="tokens", budget=20), thetas=np.zeros(2), rng=0)


def test_a_form_longer_than_the_bank_is_refused_in_the_banks_words(capsys):
    assert main(["design", "--bank", "arc", "-k", "5000"]) == 2
    err = capsys.readouterr().err
    assert "-k/--length (5000) must be between 1 and the bank's" in err
    assert "candidate" not in err and len(err.strip().splitlines()) == 1


def test_an_unknown_cost_column_is_named_as_the_option(tmp_path, capsys):
    """atlas simulate --cost-column NAME that the bank lacks: the error names --cost-column,
    the option the user typed, not the configuration's cost_column field."""
    code = main(["simulate", "arc", "--bank", "arc", "--cost-column", "nope", "--budget", "4000",
                 "--max-items", "5", "-o", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "--cost-column 'nope' is not a bank metadata column" in err


def test_a_tie_parameter_without_a_finite_estimate_is_refused(tmp_path, capsys):
    """x tied y and y beat x: the likelihood grows without bound as the tie parameter and the
    gap grow together. The fit used to run 100,000 MM iterations and print ratings with SE 107
    and a tie parameter of 608; it is refused, and a fit with a win-tie cycle still works."""
    from atlascat.design.bradley_terry import BradleyTerry
    from atlascat.errors import ConvergenceError

    bad = pd.DataFrame({"model_a": ["x", "x"], "model_b": ["y", "y"], "winner": ["tie", "b"]})
    with pytest.raises(ConvergenceError, match="tie parameter has no finite estimate"):
        BradleyTerry().fit(bad)
    path = tmp_path / "battles.csv"
    bad.to_csv(path, index=False)
    assert main(["arena", "fit", str(path)]) == 2
    err = capsys.readouterr().err
    assert "--ties half" in err and "--prior-games > 0" in err and len(err.strip().splitlines()) == 1
    assert BradleyTerry(ties="half").fit(bad).converged_          # ties as half wins: finite
    assert BradleyTerry(prior_games=1).fit(bad).converged_
    # x beat y, y beat z, z tied x: two wins against one tie around the cycle, a finite maximum
    ok = pd.DataFrame({"model_a": ["x", "y", "z", "x"], "model_b": ["y", "z", "x", "z"],
                       "winner": ["a", "a", "tie", "tie"]})
    fit = BradleyTerry().fit(ok)
    assert fit.converged_ and 1 < fit.tie_param_ < 100 and fit.n_iter_ < 10_000


def test_a_budget_below_every_items_cost_is_refused(tmp_path, capsys):
    """--budget smaller than the cheapest item: no test can ask anything. It used to run tests
    of no item and crash with an IndexError (a traceback) while writing the summary."""
    from atlascat.cat.config import CATConfig
    from atlascat.cat.simulate import simulate_cat
    from atlascat.errors import ConfigError
    from atlascat.irt.bank import ItemBank

    n = 12
    meta = pd.DataFrame({"tokens": np.r_[40.0, 25.0, np.full(n - 2, 60.0)]})
    bank = ItemBank([f"q{j}" for j in range(n)], np.ones(n), np.linspace(-1, 1, n), np.zeros(n),
                    np.ones(n), metadata=meta)
    with pytest.raises(ConfigError, match=r"budget 20 pays for no item: the cheapest, 'q1', "
                                          r"costs 25"):
        simulate_cat(bank, CATConfig(cost_column="tokens", budget=20), thetas=np.zeros(3), rng=0)
    assert simulate_cat(bank, CATConfig(cost_column="tokens", budget=25, se_stop=None),
                        thetas=np.zeros(3), rng=0).persons["n_items"].tolist() == [1, 1, 1]
    code = main(["simulate", "arc", "--bank", "arc", "--cost-per-item", "5", "--budget", "4",
                 "-o", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "--budget 4 pays for no item" in err and "Traceback" not in err


def test_a_form_with_a_repeated_item_or_a_fractional_length_is_refused():
    """An item twice in a form used to count once in form_criterion and twice in the integrated
    information (random_form_baseline then compared it with random forms of the wrong length);
    optimal_form(bank, 2.5) silently built a 2-item form."""
    from atlascat.catalogue import load_bank
    from atlascat.design.optimal import (form_criterion, integrated_information, optimal_form,
                                         random_form_baseline)
    from atlascat.errors import ConfigError

    bank = load_bank("arc")
    first, second = (str(i) for i in bank.item_ids[:2])
    for call in (lambda: form_criterion(bank, [first, first]),
                 lambda: integrated_information(bank, [first, second, first]),
                 lambda: random_form_baseline(bank, [first, first], rng=np.random.default_rng(0))):
        with pytest.raises(ConfigError, match=rf"item '{first}' appears more than once in the form"):
            call()
    with pytest.raises(ConfigError, match="appears more than once in form 1"):
        form_criterion(bank, np.array([[0, 1], [2, 2]]))
    assert np.isfinite(form_criterion(bank, [first, second]))
    with pytest.raises(ConfigError, match=r"form length k \(2\.5\) must be a whole number"):
        optimal_form(bank, 2.5)
    assert optimal_form(bank, 2.0).k == 2


def test_cost_options_on_an_ordinal_bank_are_refused_in_the_options_words(tmp_path, capsys):
    """--budget / --cost-per-item on a graded bank: the refusal named the configuration's fields
    as a Python list (['budget', 'cost_per_item'], min_items, se_stop), not the options typed."""
    frame = pd.DataFrame({"item_id": [f"r{j}" for j in range(6)], "model": "graded",
                          "a1": np.linspace(0.8, 2.0, 6), "d1": 1.5, "d2": 0.0, "d3": -1.5,
                          "levels": "0;1;2;3"})
    frame.to_csv(tmp_path / "graded.csv", index=False)
    pd.DataFrame({"theta": [0.0, 1.0]}).to_csv(tmp_path / "thetas.csv", index=False)
    code = main(["simulate", "--bank", str(tmp_path / "graded.csv"), "--thetas",
                 str(tmp_path / "thetas.csv"), "--cost-per-item", "2", "--budget", "20",
                 "-o", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "stopping rule(s) --budget, --cost-per-item are for binary banks" in err
    assert "--min-items, --max-items and --se-stop" in err and "[" not in err


def test_a_thetas_file_with_no_rows_is_named(tmp_path, capsys):
    """An empty --thetas file: the error named the library's 'thetas' array and its shape."""
    path = tmp_path / "thetas.csv"
    path.write_text("theta\n")
    assert main(["design", "--bank", "arc", "-k", "5", "--thetas", str(path)]) == 2
    err = capsys.readouterr().err
    assert "holds no abilities" in err and "--thetas" in err and "shape" not in err


def test_cost_stop_under_mfi_cost_judges_the_item_it_would_ask():
    """--selection mfi-cost --value-per-se: the stop compared the most informative item (cost
    200, not worth it) with its cost and ended every test after 1 item (SE 0.90), though the
    item mfi-cost asks next (cost 1) was worth its cost; plain mfi keeps judging the most
    informative item."""
    from atlascat.cat.config import CATConfig
    from atlascat.cat.simulate import simulate_cat
    from atlascat.irt.bank import ItemBank

    n = 30
    a = np.r_[np.full(3, 3.0), np.ones(n - 3)]
    meta = pd.DataFrame({"cost": np.r_[np.full(3, 200.0), np.ones(n - 3)]})
    bank = ItemBank([f"i{j}" for j in range(n)], a, np.zeros(n), np.zeros(n), np.ones(n),
                    metadata=meta)

    def run(selection):
        cfg = CATConfig(cost_column="cost", value_per_se=100, selection=selection, min_items=1,
                        max_items=20, se_stop=None)
        return simulate_cat(bank, cfg, thetas=np.zeros(4), rng=0).persons

    per_cost = run("mfi-cost")
    assert (per_cost["n_items"] > 5).all() and (per_cost["cost"] < 200).all()
    assert (per_cost["se"] < 0.6).all() and (per_cost["stop_reason"] == "cost").all()
    assert (run("mfi")["n_items"] == 1).all()


def test_costs_from_a_column_and_one_cost_per_item_are_refused_together(tmp_path, capsys):
    """Both sources of the items' costs: one was silently ignored (the column won); now one
    line naming both options."""
    from atlascat.cat.config import CATConfig
    from atlascat.errors import ConfigError

    with pytest.raises(ConfigError, match="cost_column .*cost_per_item .*not both"):
        CATConfig(cost_column="tokens", cost_per_item=3.0, budget=10.0)
    code = main(["simulate", "arc", "--bank", "arc", "--cost-column", "tokens",
                 "--cost-per-item", "3", "--budget", "10", "-o", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "--cost-column" in err and "--cost-per-item" in err and "not both" in err


def test_a_gap_set_by_the_virtual_games_alone_is_stated(tmp_path, capsys):
    """Two groups that never played each other, fitted with virtual games: finite ratings,
    and a line saying the gap between the groups comes from the virtual games only."""
    from atlascat.design.bradley_terry import BradleyTerry

    battles = pd.DataFrame({"model_a": ["A", "B", "C", "D", "C"],
                            "model_b": ["B", "A", "D", "C", "D"],
                            "winner": ["a", "a", "a", "b", "a"]})
    bt = BradleyTerry(prior_games=1.0).fit(battles)
    assert np.isfinite(bt.ratings_).all() and np.isfinite(bt.se_).all()
    assert "never played" in bt.prior_only_ and "'C', 'D'" in bt.prior_only_
    assert BradleyTerry(prior_games=1.0).fit(battles.iloc[:2]).prior_only_ is None
    path = tmp_path / "battles.csv"
    battles.to_csv(path, index=False)
    assert main(["arena", "fit", str(path), "--prior-games", "1"]) == 0
    out = capsys.readouterr().out
    assert "note: players 'A', 'B' never played" in out and "(--prior-games 1)" in out
