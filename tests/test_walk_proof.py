"""A skeptical user's walk of the "prove it" path (atlas benchmark, compare, report) on small
matrices of their own: what the tables, files and page say must hold for a user's benchmark."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.irt.bank import ItemBank
from atlascat.responses import ResponseMatrix
from atlascat.studies.protocol import BenchmarkConfig, BenchmarkRun, run_benchmark
from atlascat.studies.report import build_report
from atlascat.studies.tables import comparison, make_table, whole_bank_note

from cli_checks import run_cli

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

_FAST = dict(taus=(0.1, 0.6), random_k=15, random_replicates=2, anchor_k=10, info_k=0,
             optimal_k=0, model="2pl", model_fit=False, se_calibration=False, filter=False)


def _matrix(n=40, j=45, continuous=False, seed=3) -> ResponseMatrix:
    rng = np.random.default_rng(seed)
    bank = ItemBank([f"q{k}" for k in range(j)], rng.lognormal(0.2, 0.3, j), rng.normal(0, 1, j))
    p = bank.probability(rng.normal(size=n))
    y = (np.clip(p + rng.normal(0, 0.1, p.shape), 0, 1).round(3) if continuous
         else (rng.random(p.shape) < p).astype(float))
    return ResponseMatrix(y, [f"org/model-{k}" for k in range(n)], bank.item_ids)


@pytest.fixture(scope="module")
def small_run():
    return run_benchmark(_matrix(), BenchmarkConfig(**_FAST), name="mine")


@pytest.fixture(scope="module")
def continuous_run():
    return run_benchmark(_matrix(continuous=True), BenchmarkConfig(**_FAST), name="scores")


# ------------------------------------------------------------ a CAT that gave the whole bank
def test_a_cat_that_gave_every_bank_item_is_flagged_in_every_output(small_run, tmp_path):
    """On a 45-item bank the CAT at tau 0.1 gives every item: its tiny error against the
    whole-bank theta is the reference itself, and every output must say so (summary, tables,
    Markdown files, HTML page), not rank it as the most efficient test."""
    s = small_run.summary.set_index("method")
    assert s.loc["ATLAS tau=0.1", "whole_bank"] == 1.0
    assert s.loc["Random-15", "whole_bank"] == 0.0
    ability = make_table(small_run.summary, "ability")
    assert "whole_bank" in ability.columns and "whole_bank" in make_table(small_run.summary,
                                                                          "accuracy").columns
    note = whole_bank_note(small_run.summary)
    assert note and "ATLAS tau=0.1 to 100% of the test models" in note
    assert "Random-15" not in note
    out = small_run.write(tmp_path / "run")
    md = (out / "table_ability.md").read_text()
    assert "Whole bank given" in md and "100%" in md and note in md
    assert note in (out / "tables.md").read_text()
    assert "whole_bank" in pd.read_csv(out / "table_ability.csv").columns
    page = build_report([BenchmarkRun.read(out)])
    assert "Whole bank given" in page and "by construction" in page


def test_no_whole_bank_column_when_no_method_gave_the_whole_bank(small_run):
    """A run where no method gave every item keeps the paper's table layout."""
    summary = small_run.summary[small_run.summary["whole_bank"] == 0]
    assert "whole_bank" not in make_table(summary, "ability").columns
    assert whole_bank_note(summary) is None


# ------------------------------------------------------------ compare on continuous scores
def test_compare_says_mean_score_on_continuous_runs(continuous_run, small_run, tmp_path, capsys):
    """atlas compare of a run on continuous scores (F1, ROUGE) says mean score, as atlas
    benchmark and its files do, in the terminal and in the tables it writes."""
    assert continuous_run.continuous
    cdir = continuous_run.write(tmp_path / "scores")
    assert comparison([continuous_run])[1] is True
    mixed, words = comparison([continuous_run, small_run])
    assert words is False
    assert set(mixed["benchmark"]) == {"scores (mean score)", "mine"}
    assert run_cli(["compare", cdir, "-o", tmp_path / "tables"]) == 0
    out = capsys.readouterr().out
    assert "Table 3. Mean score" in out and "p-IRT score MAE" in out
    assert "accuracy" not in out.lower()
    written = (tmp_path / "tables" / "tables.md").read_text()
    assert "Mean score" in written and "accuracy" not in written.lower()


# ------------------------------------------------------------ the split a user asked for
@pytest.mark.parametrize("n, size, expected", [(40, 0.1, 4), (30, 0.1, 3), (60, 0.1, 6),
                                                (83, 0.25, (20, 21))])
def test_test_share_is_what_was_asked_on_a_small_matrix(n, size, expected):
    """--test-size 0.1 on 40 models holds out 4 (not one per score bin: 10, a quarter of the
    models, leaving 30 to calibrate on); the split stays seeded and stratified."""
    from atlascat.filtering import stratified_split

    rm = _matrix(n=n, j=30, seed=n)
    train, test = stratified_split(rm, test_size=size, rng=np.random.default_rng(0))
    assert test.n_subjects in np.atleast_1d(expected)
    assert train.n_subjects + test.n_subjects == n
    again = stratified_split(rm, test_size=size, rng=np.random.default_rng(0))[1]
    assert again.subject_ids.tolist() == test.subject_ids.tolist()


def test_benchmark_holds_out_the_asked_share_and_never_calibrates_on_it(small_run):
    """4 of 40 models are held out, and the bank never sees them: shuffling each test model's
    answers across items (same total score, so the same seeded split) leaves the bank and
    every baseline's items unchanged while the test models' reference moves."""
    info = small_run.info
    assert (info["n_train"], info["n_test"]) == (36, 4)
    rm = _matrix()
    held = np.isin(rm.subject_ids.astype(str), small_run.reference["subject_id"].astype(str))
    y = rm.values.copy()
    rng = np.random.default_rng(9)
    for i in np.flatnonzero(held):
        y[i] = rng.permutation(y[i])
    shuffled = run_benchmark(ResponseMatrix(y, rm.subject_ids, rm.item_ids),
                             BenchmarkConfig(**_FAST), name="mine")
    assert shuffled.reference["subject_id"].tolist() == small_run.reference["subject_id"].tolist()
    pd.testing.assert_frame_equal(shuffled.bank.to_frame(), small_run.bank.to_frame())
    pd.testing.assert_frame_equal(shuffled.forms, small_run.forms)
    assert not np.allclose(shuffled.reference["theta_ref"], small_run.reference["theta_ref"])


# ------------------------------------------------------------ the report's figures
def _captions(page: str) -> list[str]:
    import html
    import re

    return [html.unescape(c) for c in re.findall(r"<figcaption>(.*?)</figcaption>", page)]


def test_report_has_accuracy_identity_plots_on_the_metric_scale(small_run, continuous_run):
    """Table 3's numbers get their identity plots (p-IRT score against the full one, on 0-1),
    in the run's words: accuracy on 0/1 answers, mean score on continuous scores."""
    binary = _captions(build_report([small_run]))
    assert any("p-IRT accuracy from the method's items" in c and "Table 3" in c for c in binary)
    scores = _captions(build_report([continuous_run]))
    assert any("p-IRT mean score" in c for c in scores)
    assert not any("accuracy" in c for c in scores)


def test_rank_shift_threshold_scales_with_a_small_test_set(small_run):
    """On 4 test models no model can move more than 10 positions: the rank-shift figure counts
    shifts of more than a tenth of the models (at least 1), 10 on 100 or more as in the paper."""
    caps = _captions(build_report([small_run]))
    assert any("move more than 1 position." in c for c in caps), caps
    assert not any("more than 10 positions" in c for c in caps)


# ------------------------------------------------------------ the peers' estimators
def test_aipw_is_the_difference_estimator_of_a_per_item_ridge():
    """aipw_accuracy = mean over the bank of each item's ridge prediction from the form's
    answers (learned on the train models) + the mean residual on the form's items: checked
    against the per-item ridge written out, at a fixed penalty."""
    from atlascat.studies.baselines import aipw_accuracy

    rng = np.random.default_rng(4)
    src = (rng.random((50, 30)) < rng.random((50, 1))).astype(float)
    tgt = (rng.random((6, 30)) < rng.random((6, 1))).astype(float)
    idx = np.array([1, 4, 7, 11, 20, 25])
    lam = 3.0
    x = src[:, idx]
    xc, yc = x - x.mean(0), src - src.mean(0)
    b = np.linalg.solve(xc.T @ xc + lam * np.eye(idx.size), xc.T @ yc)   # (k, N)
    f = src.mean(0) + (tgt[:, idx] - x.mean(0)) @ b                      # (T, N)
    expected = f.mean(1) + (tgt[:, idx] - f[:, idx]).mean(1)
    np.testing.assert_allclose(aipw_accuracy(src, idx, tgt, penalties=[lam]), expected,
                               rtol=1e-10)
    # the residual term is what makes it AIPW rather than the regression alone
    assert not np.allclose(expected, f.mean(1))


def test_random_k_is_also_scored_by_gpirt_and_aipw(small_run):
    """Table 3 holds the peers' estimators: tinyBenchmarks' gp-IRT (weight from the train
    models) on the random and anchor forms, BenchPred's AIPW on the random ones; '–' on the
    other methods."""
    p = small_run.persons
    rnd = p[p["method"] == "Random-15"]
    lam = small_run.info["gpirt_lambda"]["15"]
    assert 0 <= lam <= 1
    np.testing.assert_allclose(rnd["accuracy_gpirt"],
                               lam * rnd["accuracy_direct"] + (1 - lam) * rnd["accuracy_pirt"])
    assert rnd["accuracy_aipw"].notna().all()
    s = small_run.summary.set_index("method")
    assert np.isfinite(s.loc["Random-15", ["acc_gpirt_mae", "acc_aipw_mae"]]).all()
    assert s.loc["ATLAS tau=0.6", ["acc_gpirt_mae", "acc_aipw_mae"]].isna().all()
    # tinyBenchmarks' default: gp-IRT on its anchor points (cluster-weighted mean, p-IRT)
    anc = p[p["method"] == "Anchor-10"]
    lam10 = small_run.info["gpirt_lambda"]["10"]
    np.testing.assert_allclose(anc["accuracy_gpirt"], lam10 * anc["accuracy_direct"]
                               + (1 - lam10) * anc["accuracy_pirt"])
    assert np.isfinite(s.loc["Anchor-10", "acc_gpirt_mae"])
    assert np.isnan(s.loc["Anchor-10", "acc_aipw_mae"])   # AIPW assumes a uniform sample
    acc = make_table(small_run.summary, "accuracy")
    assert {"acc_gpirt_mae", "acc_aipw_mae"} <= set(acc.columns)


# ------------------------------------------------------------ bad input
def test_report_never_overwrites_a_data_file(small_run, tmp_path, capsys):
    """atlas report -o answers.csv (a slip for report.html) is one line, exit 2, and the CSV
    is left as it was; an earlier page is replaced as before."""
    from cli_checks import one_line_error

    run_dir = small_run.write(tmp_path / "run")
    data = tmp_path / "answers.csv"
    data.write_text("model,q1\nm1,1\n")
    one_line_error(capsys, ["report", run_dir, "-o", data], "answers.csv", ".html")
    assert data.read_text() == "model,q1\nm1,1\n"
    page = tmp_path / "page.html"
    page.write_text("old")
    assert run_cli(["report", run_dir, "-o", page]) == 0
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_coverage_on_few_test_models_is_read_as_a_count(small_run, tmp_path, capsys):
    """On 4 test models "100.0%" coverage is 4 of 4: the terminal, the tables and the page
    say so under the tables; 20 test models or more get no such note."""
    from atlascat.studies.tables import few_models_note

    note = few_models_note(small_run.summary)
    assert note and "4 test models" not in note and "Few test models: 4" in note and "25%" in note
    out = small_run.write(tmp_path / "few")
    assert note in (out / "table_ability.md").read_text()
    assert note in build_report([small_run])
    assert run_cli(["compare", out]) == 0
    assert "Few test models: 4" in capsys.readouterr().out
    many = small_run.summary.assign(n_models=220)
    assert few_models_note(many) is None


def test_a_test_share_that_leaves_too_few_train_models_is_one_line(tmp_path, capsys):
    """--test-size 0.95 on 30 models leaves one model to calibrate on: one line naming the
    option and the counts (it read "the response matrix is empty (shape (1, 0))")."""
    from cli_checks import one_line_error

    rm = _matrix(n=30, j=20)
    path = tmp_path / "mine.csv"
    pd.DataFrame(rm.values, index=pd.Index(rm.subject_ids, name="model"),
                 columns=rm.item_ids).to_csv(path)
    one_line_error(capsys, ["benchmark", path, "-o", tmp_path / "run", "--test-size", "0.95"],
                   "--test-size 0.95", "leaves 1 of the 30 models")


def test_too_few_train_models_for_validation_is_a_note_not_an_error():
    """The SE factor's internal validation split on too few train models is skipped with its
    note; it never fails naming test_size, which the user did not set to 0.2."""
    from atlascat.studies.protocol import validation_se_factors

    out = validation_se_factors(_matrix(n=4, j=20), "2pl", BenchmarkConfig(**_FAST),
                                np.random.default_rng(0))
    assert out["factors"] == {} and "no SE factor" in out["note"]


def test_aipw_residual_uses_only_the_answered_form_items():
    """A target that skipped some form items: their imputed answers feed the regression, but
    the residual mean runs over the items it answered (an imputed 'answer' is no evidence)."""
    from atlascat.studies.baselines import aipw_accuracy

    rng = np.random.default_rng(5)
    src = (rng.random((60, 25)) < rng.random((60, 1))).astype(float)
    tgt = (rng.random((1, 25)) < 0.7).astype(float)
    idx = np.arange(8)
    gap = tgt.copy()
    gap[0, :3] = np.nan
    lam = 2.0
    x = src[:, idx]
    xc, yc = x - x.mean(0), src - src.mean(0)
    b = np.linalg.solve(xc.T @ xc + lam * np.eye(idx.size), xc.T @ yc)
    feats = np.where(np.isnan(gap[:, idx]), x.mean(0), gap[:, idx])
    f = src.mean(0) + (feats - x.mean(0)) @ b
    expected = f.mean(1) + (gap[0, idx][3:] - f[0, idx][3:]).mean()
    np.testing.assert_allclose(aipw_accuracy(src, idx, gap, penalties=[lam]), expected,
                               rtol=1e-10)


def test_one_number_in_terminal_csv_markdown_and_page(tmp_path, capsys):
    """The peers' new estimates and the whole-bank share read the same in the terminal, the
    Markdown table, the numeric CSV (rounded) and the HTML page of one CLI run."""
    import html
    import re

    rm = _matrix()
    path = tmp_path / "mine.csv"
    pd.DataFrame(rm.values, index=pd.Index(rm.subject_ids, name="model"),
                 columns=rm.item_ids).to_csv(path)
    run_dir, page = tmp_path / "run", tmp_path / "page.html"
    argv = ["benchmark", path, "-o", run_dir, "--report", page, "--taus", "0.1,0.6",
            "--random-k", "15", "--replicates", "2", "--anchor-k", "0", "--info-k", "0",
            "--optimal-k", "0", "--no-fit", "--no-se-calibration", "--model", "2pl",
            "--no-filter"]
    assert run_cli(argv) == 0
    term = capsys.readouterr().out
    csv = pd.read_csv(run_dir / "table_accuracy.csv").set_index("method")
    r = csv.loc["Random-15"]
    aipw = f"{r['acc_aipw_mae']:.3f} ± {r['acc_aipw_mae_se']:.3f}"
    gp = f"{r['acc_gpirt_mae']:.3f} ± {r['acc_gpirt_mae_se']:.3f}"
    row = next(ln for ln in (run_dir / "table_accuracy.md").read_text().splitlines()
               if ln.startswith("| Random-15"))
    assert aipw in row and gp in row
    assert row in term
    cells = [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", page.read_text())]
    assert aipw in cells and gp in cells and "100%" in cells


def test_se_factor_ignores_validation_models_given_the_whole_bank():
    """On a 40-item bank the CAT at tau 0.1 gives every validation model every item: their
    |theta - theta_ref| / SE compares a theta with itself, so tau 0.1 gets no SE factor (and
    says why) instead of a factor of ~0.2 that would shrink the test models' intervals."""
    from atlascat.studies.protocol import validation_se_factors

    cfg = BenchmarkConfig(**{**_FAST, "taus": (0.1, 0.5)})
    out = validation_se_factors(_matrix(n=130, j=40, seed=8), "2pl", cfg,
                                np.random.default_rng(0))
    assert out["n_validation"] >= 20
    assert out["whole_bank"][0.1] == 1.0 and 0.1 not in out["factors"]
    assert "tau=0.1" in out["note"] and "whole bank" in out["note"]
    assert out["whole_bank"][0.5] < 1.0


def test_split_of_models_one_per_score_bin():
    """Ten models with ten different scores (one per bin) at test size 0.3 hold out three,
    not none (a bin's rounded share of one model is 0)."""
    from atlascat.filtering import stratified_split

    rm = ResponseMatrix(np.array([[1.0] * i + [0.0] * (10 - i) for i in range(10)]))
    _, test = stratified_split(rm, test_size=0.3, rng=np.random.default_rng(0))
    assert test.n_subjects == 3
