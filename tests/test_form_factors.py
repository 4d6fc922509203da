"""A fixed form's cross-fitted factors (atlascat.bankdir.formfactor): a bank folder keeps its
source answers, `atlas design --bank DIR` fits the factors on held-out folds of them and writes
them with the form, `atlas score --bank DIR --form FORM` widens the SE and the interval by them
(benchmarks/results/fixed_forms.md, "Is the form's predicted precision honest?")."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.bankdir import build_bank, load_bank_dir
from atlascat.bankdir import builder as builder_mod
from atlascat.bankdir.formfactor import (FormFactors, form_factors, read_form,
                                         widen_form_scores, whole_bank_se, with_factors)
from atlascat.cli import main
from atlascat.errors import AtlasError, BankFolderError

K = 15


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """120 models x 80 items whose answers also follow a second trait (misfit the bank's one
    theta does not see, as on real models): the form's model SE is optimistic."""
    rng = np.random.default_rng(5)
    n, j = 120, 80
    theta = np.concatenate([rng.normal(-2.5, 0.3, 30), rng.normal(0.6, 0.5, n - 30)])
    a, b = rng.lognormal(0, 0.25, j), np.linspace(-3.5, 2.5, j)
    second = rng.normal(size=n)[:, None] * rng.normal(size=j) * 0.8
    y = (rng.random((n, j)) < 1 / (1 + np.exp(-a * (theta[:, None] - b) - second))).astype(int)
    root = tmp_path_factory.mktemp("formfactor")
    df = pd.DataFrame(y, index=pd.Index([f"m{i}" for i in range(n)], name="model"),
                      columns=[f"q{k}" for k in range(j)])
    df.to_csv(root / "results.csv")
    build_bank(root / "results.csv", root / "bank")
    return root


def test_the_folder_keeps_its_source_answers(folder):
    loaded = load_bank_dir(folder / "bank")
    got = loaded.source_answers()
    results = pd.read_csv(folder / "results.csv", index_col=0)
    assert list(got.models) == list(results.index)
    assert list(got.item_ids) == [str(i) for i in loaded.bank.item_ids]
    np.testing.assert_array_equal(got.values, results[list(got.item_ids)].to_numpy(float))
    np.testing.assert_allclose(got.scores, results.mean(axis=1).to_numpy())
    assert "source_answers.npz" not in loaded.extras      # the folder's own file
    # an in-memory build carries them too
    mem = build_bank(results.iloc[:, :40], folds=0)
    assert mem.source_answers().values.shape == (120, len(mem.bank))


def test_factors_come_from_held_out_folds(folder, monkeypatch):
    """Each fold's bank and link are fitted without the fold (the build's own _fold_link), every
    source model is held out exactly once, and the form's SE factor is >= 1 (here above: the
    second trait makes the model's SE optimistic)."""
    seen = []
    real = builder_mod._fold_link

    def spy(y, s, train, **kw):
        seen.append(np.asarray(train, bool).copy())
        return real(y, s, train, **kw)

    monkeypatch.setattr(builder_mod, "_fold_link", spy)
    calls = []
    got = form_factors(folder / "bank", K, on_fold=lambda: calls.append(1))
    assert len(seen) == 3 and len(calls) == 3
    held = ~np.stack(seen)
    np.testing.assert_array_equal(held.sum(axis=0), np.ones(120))   # each held out once
    assert got.n == 120 and got.folds == 3
    assert got.se >= 1.0 and got.se == pytest.approx(got.realized / got.model)
    assert got.se > 1.1                       # the misfit shows on held-out models
    assert 0.5 < got.interval < 2.0 and got.coverage_after >= got.coverage_before - 1e-12
    again = form_factors(folder / "bank", K)
    assert again == got                       # seeded by the folder's build seed
    assert form_factors(folder / "bank", K, seed=3) != got


def test_a_folder_without_source_answers_is_one_line(folder, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(folder / "bank", old)
    (old / "source_answers.npz").unlink()
    with pytest.raises(BankFolderError, match="keeps no source answers"):
        form_factors(old, K)


def test_widening_keeps_the_whole_banks_part_and_scales_each_side(folder):
    bank = load_bank_dir(folder / "bank").bank
    frame = pd.DataFrame({"subject_id": ["x", "y"], "theta": [-1.0, 0.5], "se": [0.5, 0.4],
                          "score": [0.3, 0.6], "score_lo": [0.2, 0.45], "score_hi": [0.35, 0.9]})
    same = widen_form_scores(frame, bank, (1.0, 1.0))
    np.testing.assert_allclose(same["se"], frame["se"])
    np.testing.assert_allclose(same[["score_lo", "score_hi"]], frame[["score_lo", "score_hi"]])
    out = widen_form_scores(frame, bank, (2.0, 1.5))
    base = whole_bank_se(bank, frame["theta"])
    assert (base < frame["se"]).all()
    np.testing.assert_allclose(out["se"] ** 2, base ** 2 + 4 * (frame["se"] ** 2 - base ** 2))
    np.testing.assert_allclose(out["se_model"], frame["se"])
    np.testing.assert_allclose(out["score_lo"], [0.3 - 1.5 * 0.1, 0.6 - 1.5 * 0.15])
    np.testing.assert_allclose(out["score_hi"], [0.3 + 1.5 * 0.05, 1.0])   # kept within 0-1


def test_with_factors_replaces_stale_columns():
    frame = pd.DataFrame({"item_id": ["a", "b"], "a": [1.0, 1.2], "se_factor": [9.0, 9.0],
                          "interval_factor": [9.0, 9.0]})
    f = FormFactors(se=1.5, interval=0.9, folds=3, n=10, realized=0.3, model=0.2,
                    coverage_before=0.9, coverage_after=0.95)
    assert list(with_factors(frame, None).columns) == ["item_id", "a"]
    assert with_factors(frame, f)["se_factor"].tolist() == [1.5, 1.5]


def _answers(folder, form, path, rows=slice(0, 6)):
    items = pd.read_csv(form, dtype={"item_id": str})["item_id"].tolist()
    pd.read_csv(folder / "results.csv", index_col=0).iloc[rows][items].to_csv(path)
    return path


def test_design_writes_the_factors_and_score_applies_them(folder, tmp_path, capsys):
    bank, form = folder / "bank", tmp_path / "form.csv"
    assert main(["design", "--bank", str(bank), "-k", str(K), "--json", "-o", str(form),
                 "--random-forms", "0"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = form_factors(bank, K)
    assert got["cross_fit"]["se"] == pytest.approx(want.se)
    assert "warning" not in got                  # the factors exist: no warning
    written = pd.read_csv(form, dtype={"item_id": str})
    assert written["se_factor"].tolist() == pytest.approx([want.se] * K)
    assert read_form(form).factors == pytest.approx((want.se, want.interval))
    answers = _answers(folder, form, tmp_path / "on_form.csv")
    plain, wide = tmp_path / "plain.csv", tmp_path / "wide.csv"
    assert main(["score", str(answers), "--bank", str(bank), "-o", str(plain)]) == 0
    assert main(["score", str(answers), "--bank", str(bank), "--form", str(form),
                 "-o", str(wide)]) == 0
    err = capsys.readouterr().err
    assert f"cross-fitted factor {want.se:.2f}" in err
    p, w = pd.read_csv(plain), pd.read_csv(wide)
    assert "se_model" not in p.columns
    np.testing.assert_allclose(w["se_model"], p["se"], rtol=1e-6)
    np.testing.assert_allclose(w["theta"], p["theta"], rtol=1e-6)       # the estimate stays
    assert (w["se"] > p["se"]).all()
    ratio = (w["score"] - w["score_lo"]) / (p["score"] - p["score_lo"])
    inside = (w["score_lo"] > 0) & (p["score"] - p["score_lo"] > 1e-6)
    np.testing.assert_allclose(ratio[inside], want.interval, rtol=1e-5)
    # a shorter form designed from this one (a bank file) carries no stale factors
    short = tmp_path / "short.csv"
    assert main(["design", "--bank", str(form), "-k", "5", "-o", str(short),
                 "--random-forms", "0"]) == 0
    assert not {"se_factor", "interval_factor"} & set(pd.read_csv(short).columns)


def test_design_prints_the_factors(folder, tmp_path, capsys):
    form = tmp_path / "form.csv"
    assert main(["design", "--bank", str(folder / "bank"), "-k", str(K), "-o", str(form),
                 "--random-forms", "0"]) == 0
    shown = capsys.readouterr()
    out = shown.out.replace("\n", " ")
    assert "cross-fitted on the source models (3 folds, 120 held out)" in out
    assert f"--form {form}" in out and "warning" not in shown.err


def test_a_form_without_factors_scores_as_before(folder, tmp_path, capsys):
    """--no-cross-fit (and a folder built before it kept its source answers): no factor
    columns, the warning of old, and `atlas score --form` gives the plain scores."""
    import shutil

    bank, form = folder / "bank", tmp_path / "form.csv"
    assert main(["design", "--bank", str(bank), "-k", str(K), "--json", "-o", str(form),
                 "--random-forms", "0", "--no-cross-fit"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert "cross_fit" not in got and "skipped here" in got["warning"]
    assert "se_factor" not in pd.read_csv(form).columns
    old = tmp_path / "old"
    shutil.copytree(bank, old)
    (old / "source_answers.npz").unlink()
    assert main(["design", "--bank", str(old), "-k", str(K), "--json", "--random-forms",
                 "0"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert "cross_fit" not in got and "keeps no source answers" in got["warning"]
    assert "1.3-3.0 times" in got["warning"]
    answers = _answers(folder, form, tmp_path / "on_form.csv")
    assert main(["score", str(answers), "--bank", str(bank), "-o", str(tmp_path / "a.csv")]) == 0
    assert main(["score", str(answers), "--bank", str(bank), "--form", str(form),
                 "-o", str(tmp_path / "b.csv")]) == 0
    assert "carries no cross-fitted factors" in capsys.readouterr().err
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "a.csv"), pd.read_csv(tmp_path / "b.csv"))


def test_bad_form_input_is_one_line_exit_2(folder, tmp_path, capsys):
    bank, form = folder / "bank", tmp_path / "form.csv"
    assert main(["design", "--bank", str(bank), "-k", str(K), "-o", str(form),
                 "--random-forms", "0"]) == 0
    capsys.readouterr()
    answers = _answers(folder, form, tmp_path / "on_form.csv")
    bad = pd.read_csv(form, dtype={"item_id": str})

    def fails(args, words):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, err

    # a form file as the bank: no folder, no link
    fails(["score", str(answers), "--bank", str(form), "--form", str(form)],
          "give that folder as --bank")
    bad.assign(se_factor=0.5).to_csv(tmp_path / "low.csv", index=False)
    fails(["score", str(answers), "--bank", str(bank), "--form", str(tmp_path / "low.csv")],
          "se_factor >= 1")
    bad.drop(columns="interval_factor").to_csv(tmp_path / "half.csv", index=False)
    fails(["score", str(answers), "--bank", str(bank), "--form", str(tmp_path / "half.csv")],
          "not interval_factor")
    bad.assign(item_id="zz").to_csv(tmp_path / "other.csv", index=False)
    fails(["score", str(answers), "--bank", str(bank), "--form", str(tmp_path / "other.csv")],
          "not in the bank")
    bad.drop(columns="item_id").to_csv(tmp_path / "noid.csv", index=False)
    fails(["score", str(answers), "--bank", str(bank), "--form", str(tmp_path / "noid.csv")],
          "no item_id column")
    fails(["score", str(answers), "--bank", str(bank), "--form", str(tmp_path / "nope.csv")],
          "nope.csv")
    with pytest.raises(AtlasError):
        form_factors(bank, K, folds=1)
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(bank, broken)
    (broken / "source_answers.npz").write_text("not an npz")
    fails(["design", "--bank", str(broken), "-k", str(K), "--random-forms", "0"],
          "cannot be read as the source answers")


def test_a_folder_of_20_models_gets_more_folds():
    """Each fold's link needs 16 scored models: from 20 source models the factors are fitted
    in 5 folds (3 would leave 13); fewer folds than that are refused in one line."""
    rng = np.random.default_rng(1)
    theta, a, b = rng.normal(size=20), rng.lognormal(0, 0.25, 60), rng.normal(size=60)
    y = (rng.random((20, 60)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(int)
    built = build_bank(pd.DataFrame(y, index=[f"m{i}" for i in range(20)],
                                    columns=[f"q{j}" for j in range(60)]), folds=0)
    got = form_factors(built, 10)
    assert got.folds == 5 and got.n == 20 and got.se >= 1.0
    with pytest.raises(AtlasError, match="must be 5 to 20"):
        form_factors(built, 10, folds=3)


def test_answers_beyond_the_form_are_left_out_with_a_note(folder, tmp_path, capsys):
    """A results file with every item scores the form's items only (the factors hold for
    them), the same rows as the answers to the form alone, and says what it left out."""
    bank, form = folder / "bank", tmp_path / "form.csv"
    assert main(["design", "--bank", str(bank), "-k", str(K), "-o", str(form),
                 "--random-forms", "0"]) == 0
    whole = tmp_path / "whole.csv"
    pd.read_csv(folder / "results.csv", index_col=0).iloc[:6].to_csv(whole)
    only = _answers(folder, form, tmp_path / "on_form.csv")
    capsys.readouterr()
    for src, out in ((whole, "a.csv"), (only, "b.csv")):
        assert main(["score", str(src), "--bank", str(bank), "--form", str(form), "-o",
                     str(tmp_path / out)]) == 0
        err = capsys.readouterr().err
        assert ("not on the form" in err and "left out" in err) == (src == whole), err
    a, b = (pd.read_csv(tmp_path / f) for f in ("a.csv", "b.csv"))
    pd.testing.assert_frame_equal(a, b)


def test_the_warning_reads_the_widened_se_it_prints(folder, tmp_path, capsys):
    """`atlas score --form`: each warning quotes theta's 95% interval at the SE the row prints
    (widened by the form's factor) and says it reaches beyond the source models wherever that
    interval does; it quoted the model's SE (`se_model`), narrower, and kept quiet about rows
    whose printed interval reaches below them. The score and its interval are as before."""
    from atlascat.scorelink.settings import Z95

    bank, form = folder / "bank", tmp_path / "form.csv"
    assert main(["design", "--bank", str(bank), "-k", str(K), "-o", str(form),
                 "--random-forms", "0"]) == 0
    answers = _answers(folder, form, tmp_path / "on_form.csv", rows=slice(0, 120))
    plain, wide = tmp_path / "plain.csv", tmp_path / "wide.csv"
    assert main(["score", str(answers), "--bank", str(bank), "-o", str(plain)]) == 0
    assert main(["score", str(answers), "--bank", str(bank), "--form", str(form),
                 "-o", str(wide)]) == 0
    capsys.readouterr()
    p, w = pd.read_csv(plain), pd.read_csv(wide)
    low, high = load_bank_dir(bank).link.support_bounds()
    theta, se = w["theta"].to_numpy(), w["se"].to_numpy()
    below = theta - Z95 * se < low
    flags = w["score_flag"].fillna("").to_numpy(str)
    assert below.any() and (below != (theta - Z95 * w["se_model"].to_numpy() < low)).any()
    np.testing.assert_array_equal(np.char.find(flags, "below_data") >= 0, below)
    for t, s, text in zip(theta[below], se[below], w["score_warning"].to_numpy(object)[below]):
        assert f"theta's 95% interval {t - Z95 * s:.2f} to {t + Z95 * s:.2f}" in text
    np.testing.assert_allclose(w["score"], p["score"], rtol=1e-7)     # the numbers stay
    np.testing.assert_allclose(w["percentile"], p["percentile"], rtol=1e-7)
    # and the printed interval reaches what the warning says the score may be (the floor)
    floor = load_bank_dir(bank).link.support["floor"]         # on 0-1, as the CSV
    assert (w["score_lo"].to_numpy()[below] <= floor + 1e-9).all()
    assert (w["score_lo"].to_numpy()[~below] > floor).any()
