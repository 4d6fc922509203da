"""benchmarks/study_fixed_forms.py: one seed of HELM MMLU through the commands a user runs
(build-bank, design, score, simulate), each design scored on the same targets."""
import numpy as np
import pandas as pd
from conftest import load_benchmark


def test_one_seed_scores_every_target_under_every_design(shared_data, tmp_path):
    study = load_benchmark("study_fixed_forms")
    df = study.bp.load("helm_mmlu")
    rows = study.one_seed(df, "helm_mmlu", 0, tmp_path / "s0")
    n_targets = int(0.25 * len(df))
    assert sorted(rows["design"].unique()) == sorted(study.DESIGNS)
    assert (rows.groupby("design").size() == n_targets).all()
    assert np.isfinite(rows[["score", "lo", "hi", "truth"]].to_numpy()).all()
    assert ((rows["lo"] <= rows["score"]) & (rows["score"] <= rows["hi"])).all()
    # the folder's form (its source models' abilities) is another form than N(0, 1)'s
    forms = [set(pd.read_csv(tmp_path / "s0" / f)["item_id"].astype(str))
             for f in ("FORM.csv", "FORM_N01.csv")]
    assert forms[0] != forms[1] and len(forms[0]) == study.BUDGET
    summary = study.summary(rows[rows["design"] == study.DESIGNS[0]])
    assert 0 <= summary["coverage"] <= 1 and summary["mae"] > 0


def test_shipped_study_one_seed_scores_held_out_models_on_both_designs(shared_data):
    """benchmarks/study_fixed_forms_shipped.py: HellaSwag, seed 0, 50 items: the bank and link
    rebuilt on 80% of the population, every held-out target scored under each design; a
    100-item form on a 61-item bank is skipped."""
    study = load_benchmark("study_fixed_forms_shipped")
    rows = study.one_seed("hellaswag", 0, [50, 100])
    assert set(rows["k"]) == {50}
    assert sorted(rows["design"].unique()) == sorted(study.DESIGNS)
    sizes = rows.groupby("design").size()
    assert (sizes == sizes.iloc[0]).all() and sizes.iloc[0] > 300
    assert np.isfinite(rows[["score", "lo", "hi", "truth"]].to_numpy()).all()
    assert ((rows["lo"] <= rows["score"]) & (rows["score"] <= rows["hi"])).all()
    assert rows["answered"].max() == 50
    r = study.summary(rows[rows["design"] == "source"])
    assert 0.9 <= r["coverage"] <= 1 and 0 < r["mae"] < 3
    assert "+-" in study.paired(rows)
