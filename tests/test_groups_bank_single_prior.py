"""A bank of a multiple-group fit (its ``group_priors`` column) used under one prior for every
subject says so once: the library's scoring and adaptive tests (``estimate_ability``,
``CATSession``, ``OrdinalCATSession``, ``simulate_cat``, ``simulate_ordinal_cat``) with a
:class:`~atlascat.irt.grouplabels.GroupPriorWarning`, ``atlas simulate --bank`` and ``atlas
evaluate --bank`` with one warning line; nothing for a bank without groups, for
``score_groups`` (each subject under its group's prior) or for ML scores (no prior)."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from atlascat.cat.config import CATConfig, Stopping
from atlascat.cat.ordinal import OrdinalCATSession, simulate_ordinal_cat
from atlascat.cat.session import CATSession
from atlascat.cat.simulate import simulate_cat
from atlascat.irt.ability import estimate_ability
from atlascat.irt.bank import ItemBank
from atlascat.irt.grouplabels import GroupPriorWarning, with_group_priors
from atlascat.irt.groupscore import score_groups
from atlascat.irt.polybank import PolyBank

from cli_checks import run_cli

PRIORS = {"A": (0.0, 1.0), "B": (0.8, 1.2)}
NOTE = "the bank is from a multiple-group fit (groups A, B)"
CONFIG = CATConfig(stopping=Stopping(min_items=2, max_items=4))


def _binary():
    rng = np.random.default_rng(5)
    one = ItemBank([f"i{j}" for j in range(12)], rng.uniform(0.8, 1.6, 12),
                   np.linspace(-2, 2, 12))
    return one, with_group_priors(one, PRIORS)


def _ordinal():
    d = np.array([[0.5, -0.4, np.nan], [1.0, 0.1, -1.2], [-0.3, -1.0, np.nan],
                  [0.8, 0.0, -0.6], [0.2, -0.5, -1.5]])
    one = PolyBank([f"r{j}" for j in range(5)], np.column_stack([np.full(5, 1.1), d]), "gpcm")
    return one, with_group_priors(one, PRIORS)


def _caught(fn):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        fn()
    return [w for w in got if issubclass(w.category, GroupPriorWarning)]


def test_scoring_a_grouped_bank_under_one_prior_warns_once():
    plain, grouped = _binary()
    y = (np.random.default_rng(1).random((30, 12)) < 0.5).astype(float)
    got = _caught(lambda: estimate_ability(y, grouped))
    assert len(got) == 1 and str(got[0].message).startswith(NOTE + ": scored under N(0, 1)")
    assert got[0].filename == __file__                     # the caller's line
    got = _caught(lambda: estimate_ability(y, grouped, "map", prior_mean=0.5, prior_sd=2.0))
    assert len(got) == 1 and "N(0.5, 2^2)" in str(got[0].message)
    assert not _caught(lambda: estimate_ability(y, plain))
    assert not _caught(lambda: estimate_ability(y, grouped, "ml"))      # no prior
    groups = {str(i): "AB"[i % 2] for i in range(30)}
    assert not _caught(lambda: score_groups(y, grouped, groups, PRIORS,
                                            subject_ids=[str(i) for i in range(30)]))
    ratings = pd.DataFrame(np.random.default_rng(2).integers(0, 3, (10, 5)).astype(float),
                           columns=[f"r{j}" for j in range(5)])
    assert len(_caught(lambda: estimate_ability(ratings, _ordinal()[1]))) == 1


def test_adaptive_tests_of_a_grouped_bank_warn_once():
    plain, grouped = _binary()
    got = _caught(lambda: CATSession(grouped, CONFIG, rng=1))
    assert len(got) == 1 and "tested under N(0, 1)" in str(got[0].message)
    assert len(_caught(lambda: simulate_cat(grouped, CONFIG, thetas=np.zeros(6), rng=1))) == 1
    assert not _caught(lambda: simulate_cat(plain, CONFIG, thetas=np.zeros(6), rng=1))
    poly_plain, poly = _ordinal()
    assert len(_caught(lambda: OrdinalCATSession(poly, CONFIG, rng=1))) == 1
    assert len(_caught(lambda: simulate_ordinal_cat(poly, CONFIG, thetas=np.zeros(4),
                                                    rng=1))) == 1
    # simulate_cat hands an ordinal bank on: still one warning
    assert len(_caught(lambda: simulate_cat(poly, CONFIG, thetas=np.zeros(4), rng=1))) == 1
    assert not _caught(lambda: OrdinalCATSession(poly_plain, CONFIG, rng=1))


def _lines(capsys) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if NOTE in ln]


@pytest.mark.parametrize("kind", ["binary", "ordinal"])
def test_atlas_simulate_on_a_grouped_bank_warns_one_line(tmp_path, capsys, kind):
    plain, grouped = _binary() if kind == "binary" else _ordinal()
    thetas = tmp_path / "thetas.csv"
    pd.DataFrame({"subject_id": ["m1", "m2", "m3"], "theta": [-1.0, 0.0, 1.0]}).to_csv(
        thetas, index=False)
    for bank, n in ((grouped, 1), (plain, 0)):
        path = tmp_path / f"bank_{n}.csv"
        bank.write(path)
        capsys.readouterr()
        assert run_cli(["simulate", "--bank", path, "--thetas", thetas, "--max-items", "4",
                        "-o", tmp_path / f"out_{n}"]) == 0
        lines = _lines(capsys)
        assert len(lines) == n, lines
        if n:
            assert lines[0].startswith("warning: ") and "tested under N(0, 1)" in lines[0]
            assert "atlas score --groups" in lines[0]


def test_atlas_evaluate_on_a_grouped_bank_warns_one_line(tmp_path, capsys):
    plain, grouped = _binary()
    for bank, n in ((grouped, 1), (plain, 0)):
        path = tmp_path / f"bank_{n}.csv"
        bank.write(path)
        capsys.readouterr()
        assert run_cli(["evaluate", "--bank", path, "--subject", "simulate:0.5:3",
                        "--max-items", "4", "-o", tmp_path / f"out_{n}"]) == 0
        lines = _lines(capsys)
        assert len(lines) == n, lines


def test_atlas_ranks_on_a_grouped_bank_warns_one_line(tmp_path, capsys):
    plain, grouped = _binary()
    y = (np.random.default_rng(3).random((20, 12)) < 0.5).astype(int)
    answers = tmp_path / "answers.csv"
    pd.DataFrame(y, index=[f"m{i}" for i in range(20)], columns=plain.item_ids).rename_axis(
        "subject_id").to_csv(answers)
    for bank, n in ((grouped, 1), (plain, 0)):
        path = tmp_path / f"bank_{n}.csv"
        bank.write(path)
        capsys.readouterr()
        assert run_cli(["ranks", answers, "--bank", path]) == 0
        lines = _lines(capsys)
        assert len(lines) == n and (not n or "atlas score --groups" in lines[0]), lines
