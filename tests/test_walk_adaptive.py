"""The adaptive test on a bank folder in one Python call (:mod:`atlascat.bankdir.adaptive`):
``replay_adaptive`` / ``simulate_adaptive`` give what ``atlas simulate --design adaptive``
writes, its score link's stops included; before them a Python user had to rebuild the
command's glue (the config, the link's floor / top stops with their margin on the folder's
scale, each model's generator, the predicted scores)."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.bankdir import build_bank, load_bank_dir
from atlascat.cli import app


def _matrix(n_models: int, seed: int, scale: float = 1.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    item = np.random.default_rng(3)      # the same 60 items for sources and targets
    a, b = item.lognormal(0, 0.3, 60), item.normal(size=60)
    theta = rng.normal(size=n_models)
    p = 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    y = (rng.random(p.shape) < p).astype(int) * scale
    return pd.DataFrame(y, index=[f"m{seed}_{i}" for i in range(n_models)],
                        columns=[f"q{j}" for j in range(60)]).rename_axis("model")


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    """A folder built from 40 models, and 12 other models' answers (targets.csv); the same on
    a 0-100 metric scale (--score-range 0 100)."""
    root = tmp_path_factory.mktemp("adaptive")
    _matrix(40, 1).to_csv(root / "source.csv")
    _matrix(12, 2).to_csv(root / "targets.csv")
    _matrix(40, 1, 100.0).to_csv(root / "source100.csv")
    _matrix(12, 2, 100.0).to_csv(root / "targets100.csv")
    build_bank(root / "source.csv", root / "bank", chance=0.25, folds=0)
    build_bank(root / "source100.csv", root / "bank100", chance=25.0, folds=0,
               score_range=(0, 100))
    return root


def _cli(args, out):
    r = CliRunner().invoke(app, ["simulate", *map(str, args), "--design", "adaptive", "-q",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    return (pd.read_csv(out / "person_scores.csv", keep_default_na=False),
            pd.read_csv(out / "selected_items.csv"))


def _as_written(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as its CSV reads back (what the command wrote is compared with it)."""
    return pd.read_csv(io.StringIO(frame.to_csv(index=False)), keep_default_na=False)


def _same(cli: pd.DataFrame, py: pd.DataFrame) -> None:
    assert list(cli.columns) == list(py.columns)
    assert {"score", "score_lo", "score_hi", "n_items", "theta", "se"} <= set(cli.columns)
    # every column but the time each test took, exactly as written
    pd.testing.assert_frame_equal(cli.drop(columns="seconds"),
                                  _as_written(py).drop(columns="seconds"))


@pytest.mark.parametrize("where", ["path", "folder"])
def test_replay_adaptive_is_atlas_simulate_design_adaptive(bank, tmp_path, where):
    from atlascat.bankdir import replay_adaptive
    from atlascat.responses import ResponseMatrix

    cli, cli_sel = _cli(["--bank", bank / "bank", bank / "targets.csv", "--max-items", "20",
                         "--seed", "4"], tmp_path / "sim")
    folder = str(bank / "bank") if where == "path" else load_bank_dir(bank / "bank")
    answers = (str(bank / "targets.csv") if where == "path"
               else ResponseMatrix.read(bank / "targets.csv"))
    py, asked = replay_adaptive(folder, answers, max_items=20, seed=4, selected=True)
    _same(cli, py)
    assert (py["n_items"] <= 20).all() and py["score"].between(0, 1).all()
    assert (py["score_lo"] <= py["score"]).all() and (py["score"] <= py["score_hi"]).all()
    pd.testing.assert_frame_equal(cli_sel, _as_written(asked))
    # another seed asks other items: the seed is the command's
    other = replay_adaptive(folder, answers, max_items=20, seed=5)
    assert not other["theta"].equals(py["theta"])


def test_metric_scale_folder_and_link_stop_options_match_the_command(bank, tmp_path):
    """A --score-range folder: scores read from its scale, the predictions and the recorded
    answers written on it, --bound-margin given on it; --no-bound-stop and --min-items as
    the command's."""
    from atlascat.bankdir import replay_adaptive

    args = ["--bank", bank / "bank100", bank / "targets100.csv", "--max-items", "25"]
    cli, cli_sel = _cli(args + ["--bound-margin", "5"], tmp_path / "m")
    py, asked = replay_adaptive(bank / "bank100", bank / "targets100.csv", max_items=25,
                                bound_margin=5, selected=True)
    _same(cli, py)
    assert py["score"].max() > 1 and set(asked["score"]) <= {0.0, 100.0}
    pd.testing.assert_frame_equal(cli_sel, _as_written(asked))
    cli, _ = _cli(args + ["--no-bound-stop", "--min-items", "10", "--seed", "2"],
                  tmp_path / "n")
    py = replay_adaptive(bank / "bank100", bank / "targets100.csv", max_items=25,
                         min_items=10, bound_stop=False, seed=2)
    _same(cli, py)


def test_adaptive_config_adds_the_links_stops(bank):
    """The link's floor / top and score-precision stops, the margin on the folder's scale;
    none with bound_stop=False; the bank's own minimum only when no min_items is given,
    never above max_items."""
    from atlascat.bankdir import adaptive_config
    from atlascat.cat.config import CATConfig
    from atlascat.scorelink import with_link_stops

    folder = load_bank_dir(bank / "bank100")
    plain = adaptive_config(folder, max_items=25, bound_stop=False)
    assert plain == CATConfig(max_items=25, min_items=min(CATConfig().stopping.min_items, 25))
    stops = adaptive_config(folder, max_items=25, bound_margin=5)
    assert stops == plain.replace(**{k: v for k, v in folder.link.stop_settings(0.05).items()
                                     if k != "min_items"})
    assert stops != adaptive_config(folder, max_items=25)     # 5 points of 100 is not 2
    settings = {"floor_theta": -2.0, "min_items": 40}
    assert with_link_stops(plain, settings).stopping.min_items == 25
    assert with_link_stops(plain, settings, True).stopping.min_items == plain.stopping.min_items


def test_simulate_adaptive_on_a_bundled_bank_is_the_command(tmp_path):
    """A bundled bank with thetas: the published score predicted, the same as the command."""
    from atlascat.bankdir import simulate_adaptive

    thetas = pd.DataFrame({"subject_id": [f"s{i}" for i in range(6)],
                           "theta": np.linspace(-2, 2, 6)})
    thetas.to_csv(tmp_path / "thetas.csv", index=False)
    r = CliRunner().invoke(app, ["simulate", "--bank", "arc", "--thetas",
                                 str(tmp_path / "thetas.csv"), "--max-items", "15", "--seed",
                                 "3", "-q", "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    cli = pd.read_csv(tmp_path / "out" / "person_scores.csv", keep_default_na=False)
    res = simulate_adaptive("arc", thetas=thetas["theta"].to_numpy(),
                            subject_ids=list(thetas["subject_id"]), max_items=15, seed=3)
    _same(cli, res.persons)


def test_replay_adaptive_is_the_glue_it_replaces(bank):
    """What a Python user had to write by hand: the link's stops added to the config, each
    model's own generator (as a live run of it with the seed), the folder's predicted scores
    beside the test's columns."""
    from atlascat.bankdir import predict_scores, replay_adaptive
    from atlascat.bankdir.predict import read_targets
    from atlascat.cat.config import CATConfig
    from atlascat.cat.simulate import simulate_cat
    from atlascat.predict.session import subject_generator
    from atlascat.scorelink import with_link_stops

    folder = load_bank_dir(bank / "bank")
    rm = read_targets(folder, bank / "targets.csv")
    config = with_link_stops(CATConfig(max_items=20, min_items=20),
                             folder.link.stop_settings(), False)
    res = simulate_cat(folder.bank, config, responses=rm,
                       rng=[subject_generator(7, s) for s in rm.subject_ids])
    by_hand = pd.concat([res.persons, predict_scores(folder, res.persons, res.administered)],
                        axis=1)
    got = replay_adaptive(folder, rm, max_items=20, seed=7)
    pd.testing.assert_frame_equal(got.drop(columns="seconds"),
                                  by_hand.drop(columns="seconds"))
