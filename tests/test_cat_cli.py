"""``atlas simulate`` end to end on small files."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.cli._common import safe_filename, unique_filenames
from atlascat.catalogue import load_paper_bank as load_bank


@pytest.fixture
def files(tmp_path, rng):
    bank = load_bank("arc").subset(np.arange(200))
    bank_path = bank.write(tmp_path / "bank.csv", format="mirt")  # ids written as given
    df = pd.read_csv(bank_path)
    df["X"] = "X" + df["X"].astype(str)  # R-style ids, as in the paper's banks
    df.to_csv(bank_path, index=False)
    ids = ["org/model-a", "org/model_a", "weird name:1", "plain"]
    thetas = np.array([-1.0, 0.0, 0.5, 1.5])
    pd.DataFrame({"Model_Name": ids, "Theta_WLE": thetas, "SE": 0.1}).to_csv(
        tmp_path / "thetas.csv", index=False)
    p = bank.probability(thetas)
    y = (rng.random(p.shape) < p).astype(float)
    y[rng.random(y.shape) < 0.2] = np.nan
    resp = pd.DataFrame(y, columns=bank.item_ids)
    resp.insert(0, "model", ids)
    resp.to_csv(tmp_path / "responses.csv", index=False)
    return tmp_path, bank, ids, thetas


def test_safe_filenames():
    assert safe_filename("org/model v1:2") == "org_model_v1_2"
    assert safe_filename("../..") == "subject"
    assert unique_filenames(["a/b", "a_b", "A_B", "c"]) == ["a_b", "a_b_2", "A_B_3", "c"]


def test_simulate_with_thetas(files):
    tmp, bank, ids, thetas = files
    out = tmp / "out"
    rc = main(["simulate", "--bank", str(tmp / "bank.csv"), "--thetas", str(tmp / "thetas.csv"),
               "--se-stop", "0.3", "--min-items", "5", "--max-items", "40", "--seed", "3",
               "-o", str(out), "--selected-folder"])
    assert rc == 0
    persons = pd.read_csv(out / "person_scores.csv", dtype={"subject_id": str})
    assert list(persons["subject_id"]) == ids
    np.testing.assert_allclose(persons["theta_ref"], thetas)
    np.testing.assert_allclose(persons["error"], persons["theta"] - thetas)
    files_written = sorted(p.name for p in (out / "selected_items").iterdir())
    assert files_written == sorted(["org_model-a.csv", "org_model_a.csv", "weird_name_1.csv",
                                    "plain.csv"])
    sel = pd.read_csv(out / "selected_items" / "plain.csv")
    assert list(sel.columns) == ["item_id", "order", "score", "theta", "se"]
    assert len(sel) == persons.set_index("subject_id").loc["plain", "n_items"]
    assert set(sel["item_id"].astype(str)) <= set(bank.item_ids)  # 'X' stripped
    # the long file holds the same rows, every examinee's, in one file
    long = pd.read_csv(out / "selected_items.csv")
    assert list(long.columns) == ["subject_id", "item_id", "order", "score", "theta", "se"]
    assert len(long) == persons["n_items"].sum()
    pd.testing.assert_frame_equal(
        long[long["subject_id"] == "plain"].drop(columns="subject_id").reset_index(drop=True),
        sel)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_examinees"] == 4
    assert summary["items_mean"] == pytest.approx(persons["n_items"].mean())
    assert summary["mae"] == pytest.approx(persons["error"].abs().mean())
    assert summary["overlap"]["formula"] == pytest.approx(summary["overlap"]["pairwise"])
    expo = pd.read_csv(out / "item_exposure.csv")
    assert len(expo) == 200 and expo["n_administered"].sum() == persons["n_items"].sum()
    pos = pd.read_csv(out / "item_positions.csv")
    assert pos["first_count"].sum() == 4
    # same seed, same result
    out2 = tmp / "out2"
    main(["simulate", "--bank", str(tmp / "bank.csv"), "--thetas", str(tmp / "thetas.csv"),
          "--se-stop", "0.3", "--min-items", "5", "--max-items", "40", "--seed", "3",
          "-o", str(out2), "--no-selected"])
    pd.testing.assert_frame_equal(persons.drop(columns="seconds"),
                                  pd.read_csv(out2 / "person_scores.csv").drop(columns="seconds"))
    assert not (out2 / "selected_items").exists() and not (out2 / "selected_items.csv").exists()


def test_simulate_batch_size(files):
    tmp, bank, ids, thetas = files
    args = ["simulate", "--bank", str(tmp / "bank.csv"), "--thetas", str(tmp / "thetas.csv"),
            "--se-stop", "0.3", "--min-items", "5", "--max-items", "40", "--seed", "3",
            "--no-selected"]
    assert main(args + ["-o", str(tmp / "k4"), "--batch-size", "4"]) == 0
    persons = pd.read_csv(tmp / "k4" / "person_scores.csv")
    assert (persons["rounds"] >= np.ceil(persons["n_items"] / 4)).all()
    assert (persons["rounds"] < persons["n_items"]).all()
    summary = json.loads((tmp / "k4" / "summary.json").read_text())
    assert summary["batch_size"] == 4
    assert summary["rounds_mean"] == pytest.approx(persons["rounds"].mean())
    assert main(args + ["-o", str(tmp / "k1")]) == 0
    assert json.loads((tmp / "k1" / "summary.json").read_text())["batch_size"] == 1
    assert main(args + ["-o", str(tmp / "k0"), "--batch-size", "0"]) == 2


def test_simulate_replay_with_reference_and_skips(files):
    tmp, bank, ids, thetas = files
    out = tmp / "replay"
    rc = main(["simulate", "--bank", str(tmp / "bank.csv"),
               str(tmp / "responses.csv"), "--thetas", str(tmp / "thetas.csv"),
               "--fixed-length", "20", "--reference", "--seed", "1", "-o", str(out)])
    assert rc == 0
    persons = pd.read_csv(out / "person_scores.csv", dtype={"subject_id": str})
    assert (persons["n_items"] == 20).all()
    assert persons["n_skipped"].sum() > 0
    np.testing.assert_allclose(persons["theta_ref"], thetas)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_skipped"] == persons["n_skipped"].sum()
    assert summary["config"]["quadpts"] == 33
    assert "fixed_length_formula" in summary["overlap"]


def test_bad_input_is_one_line_error(files, capsys):
    tmp, *_ = files
    rc = main(["simulate", "--bank", str(tmp / "bank.csv"), "-o", str(tmp / "x")])
    assert rc == 2
    assert "give RESPONSES" in capsys.readouterr().err
    rc = main(["simulate", "--bank", str(tmp / "bank.csv"), "--thetas", str(tmp / "nope.csv"),
               "-o", str(tmp / "x")])
    assert rc == 2
    rc = main(["simulate", "--bank", str(tmp / "bank.csv"), "--thetas", str(tmp / "thetas.csv"),
               "--min-items", "50", "--max-items", "10", "-o", str(tmp / "x")])
    assert rc == 2


def test_simulate_cost_aware_stopping(files, capsys):
    """--cost-column / --budget / --value-per-se reach the engine's cost stops; each examinee's
    spent cost is in person_scores.csv and the summary; a suite and a wrong pairing refuse."""
    tmp, bank, ids, _ = files
    costs = np.random.default_rng(3).integers(1, 6, len(bank)).astype(float)
    df = bank.to_frame()
    df["tokens"] = costs
    df.to_csv(tmp / "costed.csv", index=False)
    out = tmp / "cost_run"
    assert main(["simulate", str(tmp / "responses.csv"), "--bank", str(tmp / "costed.csv"),
                 "--cost-column", "tokens", "--budget", "40", "--se-stop", "0.01",
                 "--min-items", "1", "-o", str(out), "--quiet"]) == 0
    persons = pd.read_csv(out / "person_scores.csv", dtype={"subject_id": str})
    asked = pd.read_csv(out / "selected_items.csv", dtype={"item_id": str, "subject_id": str})
    spent = asked.assign(cost=asked["item_id"].map(dict(zip(df["item_id"], costs))))
    spent = spent.groupby("subject_id")["cost"].sum()
    np.testing.assert_allclose(persons.set_index("subject_id")["cost"].loc[spent.index], spent)
    assert persons["cost"].max() <= 40 and set(persons["stop_reason"]) == {"budget"}
    persons_budget = persons
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cost_mean"] == pytest.approx(persons["cost"].mean())
    assert summary["config"]["budget"] == 40 and summary["config"]["cost_column"] == "tokens"
    assert main(["simulate", str(tmp / "responses.csv"), "--bank", str(tmp / "costed.csv"),
                 "--cost-per-item", "1", "--value-per-se", "0.5", "--min-items", "1",
                 "-o", str(tmp / "value_run"), "--quiet"]) == 0
    persons = pd.read_csv(tmp / "value_run" / "person_scores.csv")
    assert (persons["stop_reason"] == "cost").all()
    assert (persons["cost"] == persons["n_items"]).all()
    assert main(["simulate", str(tmp / "responses.csv"), "--bank", str(tmp / "costed.csv"),
                 "--cost-column", "tokens", "--budget", "40", "--selection", "mfi-cost",
                 "--min-items", "1", "-o", str(tmp / "per_cost"), "--quiet"]) == 0
    per_cost = pd.read_csv(tmp / "per_cost" / "person_scores.csv")
    assert per_cost["cost"].max() <= 40
    assert per_cost["n_items"].mean() > persons_budget["n_items"].mean()   # cheaper items
    capsys.readouterr()
    for args, words in ((["--budget", "10"], ["budget", "--cost-per-item or --cost-column"]),
                        (["--selection", "mfi-cost"], ["--selection", "mfi-cost",
                                                       "--cost-column"]),
                        (["--cost-column", "nope", "--budget", "5"], ["nope"]),
                        (["--suite", "openllm-v1", "--budget", "5", "--cost-per-item", "1"],
                         ["--budget", "--suite"])):
        bank_args = [] if "--suite" in args else ["--bank", str(tmp / "costed.csv")]
        assert main(["simulate", str(tmp / "responses.csv"), *bank_args, *args,
                     "-o", str(tmp / "bad")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and all(w in err for w in words), err


def test_simulate_estimator(files, capsys):
    """--estimator ml: maximum likelihood theta and its SE 1 / sqrt(I) (catR's ML); a bad
    name or a suite is refused in one line."""
    from atlascat.irt.ability import estimating_terms

    tmp, b, ids, thetas = files
    out = tmp / "ml"
    base = ["simulate", "--bank", str(tmp / "bank.csv"), "--thetas", str(tmp / "thetas.csv"),
            "--fixed-length", "15", "--seed", "3"]
    assert main(base + ["--estimator", "ml", "-o", str(out)]) == 0
    persons = pd.read_csv(out / "person_scores.csv", dtype={"subject_id": str})
    asked = pd.read_csv(out / "selected_items.csv", dtype={"subject_id": str, "item_id": str})
    y = np.full((len(ids), len(b)), np.nan)
    for i, sid in enumerate(persons["subject_id"]):
        rows = asked[asked["subject_id"] == sid]
        y[i, b.index_of(list(rows["item_id"]))] = rows["score"]
    s, info, _ = estimating_terms(persons["theta"].to_numpy(), y, b)
    inner = persons["theta"].abs().to_numpy() < 6
    assert np.all(np.abs(s[inner]) < 1e-7 * info[inner])
    np.testing.assert_allclose(persons["se"], 1 / np.sqrt(info), rtol=1e-9)
    assert main(base + ["--estimator", "bm", "-o", str(tmp / "bad")]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if not line.startswith("warning")]
    assert len(errors) == 1 and "--estimator must be one of" in errors[0]
