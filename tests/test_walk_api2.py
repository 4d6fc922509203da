"""A data scientist's walk through the Python API (notebook use, no CLI): bank folders, fitted
objects' reprs and tables, live results read from Python."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.bankdir import build_bank, load_bank_dir


@pytest.fixture(scope="module")
def matrix_csv(tmp_path_factory):
    """A 2PL matrix of 40 models x 60 items, written as a CSV (models = rows)."""
    rng = np.random.default_rng(3)
    theta = rng.normal(size=40)
    a, b = rng.lognormal(0, 0.3, 60), rng.normal(size=60)
    p = 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    y = (rng.random(p.shape) < p).astype(int)
    df = pd.DataFrame(y, index=[f"m{i}" for i in range(40)],
                      columns=[f"q{j}" for j in range(60)]).rename_axis("model")
    path = tmp_path_factory.mktemp("walk") / "results.csv"
    df.to_csv(path)
    return path


@pytest.fixture(scope="module")
def folder(matrix_csv, tmp_path_factory):
    return build_bank(matrix_csv, tmp_path_factory.mktemp("bank") / "b", chance=0.25, folds=0)


def test_bank_folder_repr_is_one_short_line(folder):
    """The dataclass repr printed the whole manifest (every source model and dropped item:
    thousands of characters in a notebook cell)."""
    for f in (folder, load_bank_dir(folder.path)):
        text = repr(f)
        assert "\n" not in text and len(text) < 250, text
        assert "benchmark='results'" in text and "40 models" in text
        assert "ItemBank(" in text and "predictor.json" in text
        assert "m0" not in text            # no model list


def test_replay_predictor_is_atlas_simulate_on_the_folder(folder, matrix_csv, tmp_path):
    """docs/your_benchmark.md named predict_scores as simulate's prediction; on a folder with a
    predictor, `atlas simulate` is replay_predictor(folder, responses, budget, seed): the same
    numbers, row for row, and the same items asked."""
    from typer.testing import CliRunner

    from atlascat.bankdir import replay_predictor
    from atlascat.cli import app
    from atlascat.responses import ResponseMatrix

    out = tmp_path / "sim"
    r = CliRunner().invoke(app, ["simulate", str(matrix_csv), "--bank", str(folder.path),
                                 "--max-items", "20", "--seed", "4", "-o", str(out)])
    assert r.exit_code == 0, r.output
    cli = pd.read_csv(out / "person_scores.csv", keep_default_na=False, na_values=[""])
    py, asked = replay_predictor(load_bank_dir(folder.path), ResponseMatrix.read(matrix_csv),
                                 budget=20, seed=4, selected=True)
    assert list(cli["subject_id"]) == list(py["subject_id"])
    for c in ("n_items", "score", "score_lo", "score_hi", "se", "theta"):
        np.testing.assert_allclose(cli[c].to_numpy(float), py[c].to_numpy(float), rtol=1e-12)
    sel = pd.read_csv(out / "selected_items.csv")
    assert list(sel["item_id"]) == list(asked["item_id"])
    doc = (Path(__file__).resolve().parents[1] / "docs" / "your_benchmark.md").read_text()
    assert "replay_predictor(" in doc and "is the\nprediction `simulate`" not in doc


# ------------------------------------------------------------------ fitted objects, as mirt users read them

@pytest.fixture(scope="module")
def lsat7(shared_data):
    from atlascat import ResponseMatrix

    return ResponseMatrix.read(shared_data / "classic" / "lsat7_patterns.csv", freq_column="freq")


def test_calibration_repr_counts_subjects_not_patterns(lsat7):
    """LSAT7 is 1000 people in 32 response patterns: the repr said n_subjects=32 (the CLI and
    mirt say 1000)."""
    import atlascat as at

    res = at.calibrate(lsat7, "2pl", prior_a=None, se=True)
    text = repr(res)
    assert "n_subjects=1000 (32 patterns)" in text and text.count("\n") == 0
    assert ", se," in text
    with pytest.warns(UserWarning):                     # 6 subjects: weakly identified
        plain = at.calibrate(at.ResponseMatrix(np.eye(6, 3) + np.eye(6, 3, -3)), "1pl")
    assert "n_subjects=6," in repr(plain) and "patterns" not in repr(plain)


def test_calibration_to_frame_is_the_written_bank_with_standard_errors(lsat7, shared_data,
                                                                      tmp_path):
    """No table on the result: `res.bank.to_frame()` had no SEs, which only the CLI put beside
    the parameters. `to_frame(format)` is the file `atlas calibrate --se --format F` writes."""
    from typer.testing import CliRunner

    import atlascat as at
    from atlascat.cli import app

    twopl = at.calibrate(lsat7, "2pl", prior_a=None, se=True)
    mirt = twopl.to_frame("mirt")
    assert list(mirt.columns) == ["X", "a1", "a1_se", "d", "d_se", "g", "u"]
    se = twopl.standard_errors("mirt")
    np.testing.assert_allclose(mirt["a1_se"], se["a1_se"])
    np.testing.assert_allclose(mirt["d"], se["d"])
    ours = twopl.to_frame()
    assert list(ours.columns) == ["item_id", "a", "a_se", "b", "b_se", "c", "u"]
    assert list(at.calibrate(lsat7, "2pl", prior_a=None).to_frame().columns) == [
        "item_id", "a", "b", "c", "u"]
    out = tmp_path / "b.csv"
    r = CliRunner().invoke(app, ["calibrate", str(shared_data / "classic" / "lsat7_patterns.csv"), "--freq-column", "freq",
                                 "--model", "2pl", "--prior-a", "none", "--se",
                                 "--format", "mirt", "-o", str(out)])
    assert r.exit_code == 0, r.output
    written = pd.read_csv(out)
    assert list(written.columns) == list(mirt.columns)
    np.testing.assert_allclose(written[["a1", "a1_se", "d_se"]].to_numpy(),
                               mirt[["a1", "a1_se", "d_se"]].to_numpy(), rtol=1e-6)
    rasch = at.calibrate(lsat7, "rasch", se=True).to_frame()   # as the equivalent 1PL
    assert rasch["a_se"].nunique() == 1 and rasch["b_se"].notna().all()


def test_ordinal_calibration_to_frame_has_standard_errors():
    import atlascat as at

    rng = np.random.default_rng(0)
    theta = rng.normal(size=300)
    y = np.clip(np.round(theta[:, None] + rng.normal(size=(300, 4)) + 2), 0, 4).astype(float)
    res = at.calibrate(pd.DataFrame(y, columns=list("wxyz")), model="graded", se=True)
    frame = res.to_frame()
    assert frame.columns[:5].tolist() == ["X", "model", "a1", "a1_se", "d1"]
    np.testing.assert_allclose(frame["a1_se"], res.standard_errors("mirt")["a1_se"])


def test_standard_errors_repr_is_one_line(lsat7):
    """The dataclass repr printed the whole information matrix."""
    import atlascat as at

    se = at.calibrate(lsat7, "rasch", se=True).se
    text = repr(se)
    assert "\n" not in text and len(text) < 200, text
    assert "n_free=5" in text and "latent_variance_se=0.13" in text



# ------------------------------------------------------------------ live results from Python

def test_live_run_table_and_store_repr(tmp_path):
    """results() is a list of nested dicts (the prediction a dict inside each row): to_frame
    is the table a notebook wants, with the prediction in person_scores.csv's columns and the
    same numbers as run_predictions and compare_runs; a RunStore printed as an object address."""
    from atlascat.catalogue import BankRef
    from atlascat.live.compare import compare_runs
    from atlascat.live.service import LiveRun, run_predictions
    from atlascat.live.store import RunStore
    from atlascat.live.subjects import SimulatedSubject

    ref = BankRef.from_option("arc")
    db = tmp_path / "runs.sqlite"
    live = LiveRun.start(db, ref, [SimulatedSubject(ref.load(), 0.5),
                                   SimulatedSubject(ref.load(), -0.5)])
    live.run()
    df = live.to_frame()
    rows = live.results()
    live.close()                          # the store it opened from the path
    assert list(df["run_id"]) == [r["run_id"] for r in rows]
    assert {"items", "scores", "prediction"}.isdisjoint(df.columns)
    for col in ("score", "score_lo", "score_hi", "percentile"):
        assert df[col].notna().all()
    assert (df["score_lo"] < df["score"]).all() and (df["score"] < df["score_hi"]).all()
    store = RunStore(db)
    for _, r in df.iterrows():
        pred = run_predictions(store, r["run_id"])["arc"]
        assert r["score"] == pytest.approx(pred["score"]) and r["benchmark"] == "arc"
        assert r["score_hi"] == pytest.approx(pred["hi"])
    cmp = compare_runs(df["run_id"][0], df["run_id"][1], db=db)["rows"][0]
    assert cmp["first"] == pytest.approx(100 * df["score"][0])
    assert cmp["difference"] == pytest.approx(100 * (df["score"][0] - df["score"][1]))
    assert repr(store) == f"RunStore({str(db)!r}, 2 runs)"


def test_bank_folder_functions_take_its_path(folder, matrix_csv):
    """load_predictor / replay_predictor / predict_scores took only a loaded BankFolder: a path
    (what a notebook has) raised AttributeError ('str' object has no attribute 'extra'), and
    replay_predictor took only a ResponseMatrix, not the file atlas simulate reads."""
    from atlascat.bankdir import load_predictor, load_predictor_items, predict_scores, \
        replay_predictor
    from atlascat.responses import ResponseMatrix

    path = str(folder.path)
    assert load_predictor(path) is not None and load_predictor_items(path) is None
    by_object = replay_predictor(folder, ResponseMatrix.read(matrix_csv), budget=15, seed=1)
    for where, answers in ((path, str(matrix_csv)), (folder.path, matrix_csv),
                           (folder, pd.read_csv(matrix_csv, index_col=0))):
        got = replay_predictor(where, answers, budget=15, seed=1)
        pd.testing.assert_frame_equal(got, by_object)
    persons = pd.DataFrame({"subject_id": ["m0"], "theta": [0.0], "se": [0.3]})
    administered = pd.DataFrame({"subject_id": ["m0"], "item_id": ["q1"], "score": [1]})
    pd.testing.assert_frame_equal(predict_scores(path, persons, administered),
                                  predict_scores(folder, persons, administered))


def test_response_matrix_repr_says_rows_are_weighted_patterns(lsat7):
    """LSAT7's 32 rows are response patterns of 1000 people: the repr said only n_subjects=32."""
    text = repr(lsat7)
    assert "n_subjects=32" in text and "32 response patterns of 1000 subjects" in text
    assert "weights" not in repr(lsat7.subset(items=[0, 1]).__class__(np.eye(3)))


def test_estimate_ability_with_the_bank_first_says_so(lsat7):
    """mirt's fscores(mod) takes the model first: estimate_ability(bank, responses) said only
    'bank must be an atlascat.ItemBank, got ResponseMatrix'."""
    import atlascat as at
    from atlascat.errors import ConfigError

    bank = at.calibrate(lsat7, "2pl").bank
    with pytest.raises(ConfigError, match="the bank came first"):
        at.estimate_ability(bank, lsat7)
    assert len(at.estimate_ability(lsat7, bank)) == 32


def test_suite_run_table_row_is_its_average(tmp_path):
    from atlascat.catalogue import BankRef
    from atlascat.live.service import LiveRun
    from atlascat.live.subjects import SimulatedSubject

    suite = BankRef.from_option("openllm-v1", kinds=("suite",))
    live = LiveRun.start(tmp_path / "runs.sqlite", suite, [SimulatedSubject(suite.load(), 0.5)])
    live.run()
    row = live.to_frame().iloc[0]
    average = live.results()[0]["average"]
    live.close()
    assert row["benchmark"] == "openllm-v1 average"
    assert row["score"] == pytest.approx(average["score"])
    assert row["score_lo"] == pytest.approx(average["lo"])


@pytest.mark.parametrize("func", ["atlascat.bankdir.builder.build_bank",
                                  "atlascat.live.service.evaluate"])
def test_parameters_sections_name_every_parameter(func):
    """build_bank's docstring left out seed and min_models; evaluate's store, run_id, on_step."""
    import importlib
    import inspect
    import re

    mod, name = func.rsplit(".", 1)
    f = getattr(importlib.import_module(mod), name)
    section = inspect.getdoc(f).split("Parameters\n----------", 1)[1]
    documented = {n.strip() for line in section.splitlines()
                  for m in [re.match(r"^([A-Za-z_][\w, ]*?)\s*:", line)] if m
                  for n in m.group(1).split(",")}
    assert set(inspect.signature(f).parameters) <= documented
