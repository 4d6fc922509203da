"""The judge-ratings / continuous-metric path walked as a new user meets it: a 1-10 judge's
ratings of prompts (graded, GPCM; a 0-3 rubric) and a metric on another scale (BLEU 0-100),
from the matrix to `atlas score`, `simulate` and a live run. Each test is a defect the walk
found, checked through the library (the CLI only displays what it returns)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.bankdir import build_bank, predict_scores, replay_predictor
from atlascat.cli import app


def bleu_matrix(n_models: int, n_items: int = 60, seed: int = 0) -> pd.DataFrame:
    """BLEU 0-100 per sentence (one decimal), Beta draws around a 2PL mean."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    b, a = rng.normal(size=n_items), rng.lognormal(0, 0.3, n_items)
    p = 1 / (1 + np.exp(-(a * (theta[:, None] - b))))
    y = rng.beta(p * 8 + 0.01, (1 - p) * 8 + 0.01)
    return pd.DataFrame(np.round(100 * y, 1), index=[f"mt-{i}" for i in range(n_models)],
                        columns=[f"sent-{k}" for k in range(n_items)]).rename_axis("model")


@pytest.fixture(scope="module")
def bleu(tmp_path_factory):
    """A BLEU folder (--score-range 0 100) from 30 source models, and 4 new models."""
    root = tmp_path_factory.mktemp("bleu")
    df = bleu_matrix(34)
    df.iloc[:30].to_csv(root / "source.csv")
    df.iloc[30:].to_csv(root / "new.csv")
    folder = build_bank(str(root / "source.csv"), str(root / "bank"), name="BLEU-MT",
                        score_range=(0, 100), seed=0)
    return folder, df.iloc[30:]


def test_score_of_a_model_that_answered_every_item_is_its_mean(bleu):
    """`atlas score NEW --bank DIR` of a model that answered every item of a folder whose
    score is the mean over its items: the score is that mean, known (no interval width), as
    `atlas simulate --max-items ALL` gives it; it was the link's regression on theta (BLEU
    8.1 read as 12.8, 95% interval 0-16.7)."""
    folder, new = bleu
    ids = [str(i) for i in folder.bank.item_ids]
    rows = [(s, i, new.loc[s, i] / 100) for s in new.index for i in ids]
    administered = pd.DataFrame(rows, columns=["subject_id", "item_id", "score"])
    persons = pd.DataFrame({"subject_id": list(new.index), "theta": 0.0, "se": 0.5})
    pred = predict_scores(folder, persons, administered)
    truth = new[ids].mean(axis=1).to_numpy()
    np.testing.assert_allclose(pred["score"], truth, atol=1e-9)
    np.testing.assert_allclose(pred["score_lo"], truth, atol=1e-9)
    np.testing.assert_allclose(pred["score_hi"], truth, atol=1e-9)
    full = replay_predictor(folder, new[ids] / 100, budget=len(ids), seed=0)
    np.testing.assert_allclose(pred["score"], full["score"], atol=1e-6)
    np.testing.assert_allclose(pred["percentile"], full["percentile"], atol=1e-6)
    # one item short: still the link's prediction with its interval
    short = administered[administered["item_id"] != ids[0]]
    part = predict_scores(folder, persons, short)
    assert (part["score_hi"] - part["score_lo"]).min() > 0


def judge_ratings(n_models: int, n_items: int, levels: int, seed: int = 0) -> pd.DataFrame:
    """Ratings 1..levels from a graded model (decreasing intercepts)."""
    from atlascat.irt import polytomous

    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.2, 0.3, n_items)
    d = -np.sort(rng.normal(0, 1.5, (n_items, levels - 1)), axis=1) * a[:, None]
    r = polytomous.sample("graded", np.column_stack([a, d]), rng.normal(size=n_models), rng) + 1
    return pd.DataFrame(r, index=[f"model-{i}" for i in range(n_models)],
                        columns=[f"prompt-{j}" for j in range(n_items)])


def test_calibration_on_a_declared_scale_names_levels_an_item_never_had():
    """--rating-range 1 10 (value_range) where an item was never rated 1: one warning naming
    an item and the levels it lacks, kept in the fit's settings (--summary); none when every
    item had every level."""
    import atlascat as at

    ratings = judge_ratings(150, 8, 10)
    ratings.iloc[:10] = np.repeat(np.arange(1, 11)[:, None], 8, axis=1)   # every level seen
    ratings.iloc[:, 3] = ratings.iloc[:, 3].clip(lower=2)   # but prompt-3: never rated 1
    with pytest.warns(UserWarning, match=r"^1 of 8 item\(s\) were never rated at some levels "
                                         r"of the declared 1-10 scale \(e.g. 'prompt-3' "
                                         r"never 1\)") as got:
        res = at.calibrate(ratings, model="graded", value_range=(1, 10))
    lines = [str(w.message) for w in got if "never rated at some levels" in str(w.message)]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert any("'prompt-3' never 1" in w for w in res.settings["warnings"])
    full = judge_ratings(60, 3, 3)
    full.iloc[:3] = [[1, 1, 1], [2, 2, 2], [3, 3, 3]]       # every item every level
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        at.calibrate(full, model="graded", value_range=(1, 3))
    assert not [w for w in seen if "never rated" in str(w.message)]


def test_calibrate_name_is_what_every_output_calls_the_bank(tmp_path):
    """`atlas calibrate --name JudgeBench -o graded.csv`: the bank keeps the benchmark's name,
    so a live run, `atlas runs` and `atlas simulate` call it JudgeBench, not the file's name
    ("graded", the IRT model's word); a blank name is one line, exit 2; a binary bank in
    mirt's format keeps it too (`ItemBank.with_benchmark`)."""
    from atlascat.catalogue import BankRef
    from atlascat.irt.bank import ItemBank
    from atlascat.irt.polybank import PolyBank

    judge_ratings(120, 6, 5).rename_axis("model").to_csv(tmp_path / "judge.csv")
    runner = CliRunner()
    bank = tmp_path / "graded.csv"
    out = runner.invoke(app, ["calibrate", str(tmp_path / "judge.csv"), "--model", "graded",
                              "--rating-range", "1", "5", "--name", "JudgeBench", "--se",
                              "--format", "mirt", "-o", str(bank), "-q",
                              "--summary", str(tmp_path / "s.json")])
    assert out.exit_code == 0, out.output
    import json

    assert json.loads((tmp_path / "s.json").read_text())["benchmark"] == "JudgeBench"
    assert BankRef.from_option(str(bank)).title == "JudgeBench"
    assert set(PolyBank.read(bank).metadata["benchmark"]) == {"JudgeBench"}
    run = runner.invoke(app, ["evaluate", "--bank", str(bank), "--subject",
                              f"replay:{tmp_path / 'judge.csv'}#model-3", "--min-items", "3",
                              "-o", str(tmp_path / "run"), "-q"])
    assert run.exit_code == 0, run.output
    assert "model-3 on JudgeBench:" in run.output and " on graded" not in run.output
    listed = runner.invoke(app, ["runs", "--db", str(tmp_path / "run" / "runs.sqlite")])
    assert "JudgeBench" in listed.output
    info = runner.invoke(app, ["info", str(bank)])
    assert info.exit_code == 0 and "  benchmark: JudgeBench" in info.output
    from atlascat.cli import main

    assert main(["calibrate", str(tmp_path / "judge.csv"), "--model", "graded", "--name", " ",
                 "-o", str(tmp_path / "x.csv")]) == 2
    assert not (tmp_path / "x.csv").exists()
    # a shipped benchmark's name would score the user's bank by its leaderboard link
    assert main(["calibrate", str(tmp_path / "judge.csv"), "--model", "graded", "--name",
                 "arc", "-o", str(tmp_path / "x.csv")]) == 2
    assert not (tmp_path / "x.csv").exists()
    rm = (judge_ratings(60, 5, 2) - 1).astype(float)
    named = ItemBank.from_frame(pd.DataFrame({"item_id": list(rm.columns), "a": 1.0, "b": 0.0}))
    path = named.with_benchmark("RightWrong").write(tmp_path / "b.csv", format="mirt")
    assert BankRef.from_option(str(path)).title == "RightWrong"


def test_bleu_frame_in_memory_is_refused_naming_the_folders_scale(bleu):
    """replay_predictor(folder, BLEU DataFrame): answers in memory are on 0-1; the refusal said
    to give --score-range to a folder that has one (0-100). Now it names the folder's scale,
    the file path and the mapping; the mapped frame gives the file's prediction."""
    from atlascat.errors import ResponseDataError

    folder, new = bleu
    with pytest.raises(ResponseDataError, match=r"this folder's scores are on 0-100: give the "
                                                r"file's path .* \(score - 0\) / 100") as got:
        replay_predictor(folder, new, budget=10, seed=0)
    assert "\n" not in str(got.value) and "--score-range LO HI" not in str(got.value)
    mapped = replay_predictor(folder, new / 100, budget=10, seed=0)
    assert mapped["score"].between(0, 100).all() and mapped["score"].max() > 1


def test_score_map_of_a_judge_folder_reads_on_the_judges_scale(tmp_path, capsys):
    """build-bank RATINGS --score-range 1 10 --scores S.csv (published score 0.8 + 0.9 x the
    mean rating): the summary's score map read "score = 0.078 + 0.900 x item mean", the
    intercept on 0-1 beside scores and means on 1-10; it reads 0.800 now
    (bankdir.scaled.score_map_on_scale)."""
    from atlascat.bankdir.scaled import score_map_on_scale
    from atlascat.cli import main

    ratings = judge_ratings(40, 60, 10).rename_axis("model")
    ratings.to_csv(tmp_path / "judge.csv")
    (0.8 + 0.9 * ratings.mean(axis=1)).rename("score").to_csv(tmp_path / "scores.csv")
    assert main(["build-bank", str(tmp_path / "judge.csv"), "--score-range", "1", "10",
                 "--scores", str(tmp_path / "scores.csv"), "--name", "MT-Bench",
                 "-o", str(tmp_path / "bank")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "score = 0.800 + 0.900 x item mean (+- 0.00 points)" in out
    from atlascat.bankdir import load_bank_dir

    sm = load_bank_dir(tmp_path / "bank").manifest["predictor"]["score_map"]
    on = score_map_on_scale(sm, (1, 10))
    assert on["intercept"] == pytest.approx(0.8, abs=1e-6)
    assert on["slope"] == pytest.approx(0.9, abs=1e-6)
    assert score_map_on_scale(sm, None) == sm


def test_simulated_model_on_a_bleu_folder_answers_bleu_not_0_or_100(bleu, tmp_path):
    """`atlas evaluate --bank BLEU_DIR --subject simulate:0.5` (the folder's predictor): the
    simulated model scored each item 0 or 100 (a coin: the predictor's items carried no
    dispersion), so its theta came out -1.2 +- 0.48 at theta 0.5; now its scores are Beta
    draws with each item's dispersion, on 0-100, as the source models' BLEU was."""
    from atlascat.catalogue import BankRef
    from atlascat.live.service import LiveRun, design_bank
    from atlascat.live.subjects import SubjectSpec

    folder, _ = bleu
    ref = BankRef.from_option(str(folder.path))
    bank = design_bank(ref, "predictor")
    assert "dispersion" in bank.metadata.columns
    subject = SubjectSpec.parse("simulate:0.5").build(bank, score_range=(0.0, 100.0))
    live = LiveRun.start(tmp_path / "runs.sqlite", ref, [subject], seed=0)
    live.run()
    row = live.results()[0]
    live.close()                                          # the store it opened
    scores = np.asarray(row["scores"], float)
    assert len(scores) == 50 and ((scores > 0) & (scores < 100)).mean() > 0.8
    assert abs(row["theta"] - 0.5) < 2.5 * row["se"], (row["theta"], row["se"])
    truth = 100 * bank.probability(0.5).mean()      # the simulated model's expected BLEU
    assert abs(row["prediction"]["score"] - truth) < 5, (row["prediction"], truth)


def test_anova_refuses_continuous_scores(tmp_path, capsys):
    """`atlas anova ROUGE.csv --model 1pl --model 2pl` printed a likelihood-ratio test of the
    Bernoulli quasi-likelihood (X2 31.5 on 79 df, p = 1.000: the 1PL kept), which is no
    likelihood for scores in [0, 1]; refused now in one line (exit 2), a 0/1 matrix as
    before."""
    import atlascat as at
    from atlascat.cli import main
    from atlascat.errors import ConfigError
    from atlascat.irt.compare import anova

    rouge = bleu_matrix(40, 20, seed=3) / 100
    fits = [at.calibrate(rouge, model=m, prior_a=None) for m in ("1pl", "2pl")]
    assert fits[0].settings["scores"] == "continuous"
    with pytest.raises(ConfigError, match="continuous scores .* quasi-likelihood"):
        anova(*fits)
    rouge.to_csv(tmp_path / "rouge.csv")
    assert main(["anova", str(tmp_path / "rouge.csv"), "--model", "1pl", "--model",
                 "2pl"]) == 2
    capsys.readouterr()
    assert main(["calibrate", str(tmp_path / "rouge.csv"), "-o", str(tmp_path / "b.csv")]) == 0
    assert "continuous scores: a quasi-likelihood's, not for comparing models" in " ".join(
        capsys.readouterr().out.split())
    coins = (rouge > 0.5).astype(float)
    table = anova(*[at.calibrate(coins, model=m, prior_a=None) for m in ("1pl", "2pl")])
    assert np.isfinite(table["X2"].iloc[1])


def test_build_named_after_its_file_warns_in_one_line(tmp_path):
    """build-bank source.csv (item ids prompt-0.. share no name, no --name): every output then
    reads "predicted source score"; the build says so in one warning line with the fix, and
    --name or an item-id stem builds without it."""
    ratings = judge_ratings(30, 20, 10).rename_axis("model")
    ratings.to_csv(tmp_path / "source.csv")
    with pytest.warns(UserWarning, match=r"named 'source' after its results file .* "
                                         r"'predicted source score'; --name NAME") as got:
        folder = build_bank(str(tmp_path / "source.csv"), str(tmp_path / "a"),
                            score_range=(1, 10))
    assert folder.benchmark == "source"
    assert len([w for w in got if "after its results file" in str(w.message)]) == 1
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        named = build_bank(str(tmp_path / "source.csv"), str(tmp_path / "b"),
                           score_range=(1, 10), name="JudgeBench")
    assert named.benchmark == "JudgeBench"
    assert not [w for w in seen if "after its results file" in str(w.message)]
