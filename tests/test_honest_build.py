"""Honest bank folders: what ``atlas build-bank`` says about what it built, and one model
asked the same items whether replayed (``atlas simulate``) or live (``atlas evaluate``)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.cli import app


@pytest.fixture(scope="module")
def musr(tmp_path_factory, shared_data):
    """A bank folder from 40 MuSR models, and six other models as targets."""
    df = pd.read_csv(shared_data / "benchpred" / "v2_musr.csv.gz", index_col=0)
    df = df[~df.index.duplicated()]
    idx = np.random.default_rng(0).permutation(len(df))
    root = tmp_path_factory.mktemp("musr")
    df.iloc[idx[:40]].to_csv(root / "source.csv")
    df.iloc[idx[40:46]].to_csv(root / "targets.csv")
    r = CliRunner().invoke(app, ["build-bank", str(root / "source.csv"), "--name", "MuSR",
                                 "-o", str(root / "bank")])
    assert r.exit_code == 0, r.output
    return root, r.output


@pytest.mark.slow
@pytest.mark.parametrize("design, budget", [("predictor", []), ("adaptive", []),
                                            ("predictor", ["--max-items", "10"])])
def test_simulate_and_a_live_replay_ask_the_same_items_and_agree(musr, tmp_path, design,
                                                                  budget):
    """Row 4 of the targets, simulated with the other rows and replayed live with the same
    seed: the same number of items, the same theta, prediction and interval, for the folder's
    benchmark predictor (its default budget, and 10 items: the small-sample interval in both)
    and for its adaptive test."""
    root, _ = musr
    r = CliRunner().invoke(app, ["simulate", str(root / "targets.csv"), "--bank",
                                 str(root / "bank"), "--seed", "3", "--design", design,
                                 *budget, "-o", str(tmp_path / "sim")])
    assert r.exit_code == 0, r.output
    ps = pd.read_csv(tmp_path / "sim" / "person_scores.csv").set_index("subject_id")
    model = str(ps.index[4])
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(root / "bank"), "--subject",
                                 f"replay:{root / 'targets.csv'}#{model}", "--seed", "3", "-q",
                                 "--design", design, *budget, "-o", str(tmp_path / "live")])
    assert r.exit_code == 0, r.output
    row = json.loads((tmp_path / "live" / "results.json").read_text())[0]
    assert row["n_items"] == ps.loc[model, "n_items"]
    got = row["prediction"]
    np.testing.assert_allclose(row["theta"], ps.loc[model, "theta"], rtol=1e-9)
    np.testing.assert_allclose([got["score"], got["lo"], got["hi"]],
                               ps.loc[model, ["score", "score_lo", "score_hi"]].to_numpy(float),
                               rtol=1e-12)


@pytest.mark.slow
def test_a_bank_folder_run_reads_one_number_in_its_own_words(musr, tmp_path, capsys):
    """A predictor run on a folder built with --name MuSR: the CLI headline and step lines,
    results.json, ``atlas runs`` (table and JSON) and the HTML page give one predicted MuSR
    score with its interval, a percentile of the source models, never "leaderboard"; the HTML
    trajectory and step table are the predicted score after each item, the last one the
    headline's."""
    import html

    from atlascat.cli import main
    from atlascat.live.report import describe_prediction

    root, _ = musr
    model = pd.read_csv(root / "targets.csv", index_col=0).index[0]
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(root / "bank"), "--subject",
                 f"replay:{root / 'targets.csv'}#{model}", "--max-items", "20", "-o",
                 str(out)]) == 0
    captured = capsys.readouterr()
    row = json.loads((out / "results.json").read_text())[0]
    lb = row["prediction"]
    assert lb["benchmark"] == "MuSR" and lb["population"] == "source models"
    text = describe_prediction(lb)
    assert "percentile of the source models" in text
    assert f"on MuSR: predicted MuSR score {text} (20 items)" in captured.out
    assert "leaderboard" not in (captured.out + captured.err).lower()
    # each step's line is the predicted score after it; the 20th is the headline's
    steps = [ln for ln in (captured.out + captured.err).splitlines() if "  step " in ln]
    assert len(steps) == 20 and all("predicted " in ln and "theta" not in ln for ln in steps)
    assert steps[-1].endswith(f"predicted {describe_prediction(lb, short=True)}")
    page = html.unescape((out / "reports" / f"{row['run_id']}.html").read_text())
    assert f"predicted MuSR score: {text}" in page and "leaderboard" not in page.lower()
    assert "<th>predicted %</th><th>95% interval</th>" in page
    assert f"{100 * lb['lo']:.1f}-{100 * lb['hi']:.1f}</td>" in page   # the 20th step's
    assert "predicted score 95% interval" in page                      # the trajectory's band
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)[0]["prediction"]
    assert {k: listed[k] for k in ("score", "lo", "hi", "percentile")} == \
        {k: lb[k] for k in ("score", "lo", "hi", "percentile")}
    assert main(["runs", "--db", str(out / "runs.sqlite")]) == 0
    assert describe_prediction(lb, short=True) in capsys.readouterr().out


@pytest.mark.slow
def test_a_build_on_real_results_says_what_they_measure(musr):
    """40 MuSR models lie far above random answers, with a second factor in the item
    correlations and in the fit's residuals (the full 448 models too:
    benchmarks/results/dimensionality.md): the summary row and one warning say so, the
    manifest keeps the figures."""
    root, output = musr
    assert "NO: two factors" in output and "do not measure one thing" not in output
    assert output.count("the items measure two things") == 1
    d = json.loads((root / "bank" / "manifest.json").read_text())["dimensionality"]
    assert d["second_dimension"] and d["first_eigenvalue"] > 2 * d["parallel_threshold"]


def test_a_build_on_noise_says_its_items_do_not_measure_one_thing(tmp_path):
    """25 models x 40 random answers: the summary says NO, the warnings say why (Horn's
    parallel analysis) and that 25 models identify a 2PL weakly; the manifest keeps both."""
    rng = np.random.default_rng(0)
    y = (rng.random((25, 40)) < 0.5).astype(int)
    pd.DataFrame(y, index=[f"m{i}" for i in range(25)],
                 columns=[f"q{j}" for j in range(40)]).to_csv(tmp_path / "noise.csv")
    r = CliRunner().invoke(app, ["build-bank", str(tmp_path / "noise.csv"), "-o",
                                 str(tmp_path / "bank")])
    assert r.exit_code == 0, r.output
    assert "NO: first eigenvalue" in r.output
    assert "warning: the items do not measure one thing" in r.output
    assert "weakly identified" in r.output
    m = json.loads((tmp_path / "bank" / "manifest.json").read_text())
    assert m["dimensionality"]["one_trait"] is False
    assert m["dimensionality"]["first_eigenvalue"] <= m["dimensionality"]["parallel_threshold"]


def test_parallel_analysis_tells_noise_from_real_results(shared_data):
    """Five seeds of noise fail it; 20 real models of every shared benchmark pass it."""
    from atlascat.bankdir.checks import parallel_analysis

    for seed in range(5):
        rng = np.random.default_rng(seed)
        y = (rng.random((25, 40)) < rng.uniform(0.2, 0.8, 40)).astype(float)
        assert not parallel_analysis(y, rng=seed).one_trait
    for name in ("v2_musr", "helm_mmlu", "v2_ifeval"):
        df = pd.read_csv(shared_data / "benchpred" / f"{name}.csv.gz", index_col=0)
        idx = np.random.default_rng(0).permutation(len(df))[:20]
        d = parallel_analysis(df.iloc[idx].to_numpy(float), rng=0)
        assert d.one_trait and d.first > 1.5 * d.threshold, (name, d)


def test_logs_that_contradict_themselves_end_in_one_line(tmp_path, capsys):
    """Every logged score disagrees with the option the logged outputs pick (scores drawn at
    random): no item's gold is determined, and build-bank says so in one line (exit 2)."""
    from pathlib import Path

    from lmeval_logs import synthetic_models

    real = sorted((Path(__file__).resolve().parents[2] / "shared" / "data" / "lmeval_samples"
                   / "pythia-14m").glob("samples_metabench_winogrande_secondary_*.jsonl.gz"))[0]
    files = synthetic_models(real, tmp_path / "logs", 21)
    rng = np.random.default_rng(1)
    for f in files:
        recs = [json.loads(line) for line in f.read_text().splitlines()]
        for rec in recs:
            rec["acc"] = float(rng.random() < 0.5)
        f.write_text("".join(json.dumps(rec) + "\n" for rec in recs))
    from atlascat.cli import main

    rc = main(["build-bank", *map(str, sorted((tmp_path / "logs").iterdir())),
               "-o", str(tmp_path / "bank")])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: the sample logs contradict")
    assert "'acc'" in lines[0] and not (tmp_path / "bank").exists()


@pytest.mark.slow
def test_score_on_a_bank_folder_keeps_theta_flag_and_prediction_apart(musr, tmp_path):
    """``atlas score --bank DIR``: theta's ``flag`` and the prediction's ``score_flag`` are two
    columns (one name each), beside score, score_lo, score_hi, percentile, score_warning."""
    root, _ = musr
    r = CliRunner().invoke(app, ["score", str(root / "targets.csv"), "--bank", str(root / "bank"),
                                 "-o", str(tmp_path / "s.csv")])
    assert r.exit_code == 0, r.output
    header = (tmp_path / "s.csv").read_text().splitlines()[0].split(",")
    assert len(header) == len(set(header))
    assert {"flag", "score", "score_lo", "score_hi", "percentile", "score_flag",
            "score_warning"} <= set(header)


def test_a_prediction_on_a_metric_scale_reads_on_it():
    """A folder built with --score-range: the score and its interval are on the metric's
    scale (BLEU 0-100, a 1-10 rating), written as they are, not as a percentage."""
    from atlascat.live.report import describe_prediction, scale_words, score_name

    lb = {"score": 6.25, "lo": 5.5, "hi": 7.0, "percentile": 50.0, "scale": [1, 10],
          "population": "source models", "benchmark": "judge"}
    assert describe_prediction(lb) == ("6.25 (95% interval 5.50-7.00), 50th percentile of the "
                                       "source models")      # 1-10: 2 decimals (score_digits)
    assert describe_prediction(lb, short=True) == "6.25 (5.50-7.00)"
    assert scale_words(lb) == "on the metric's own scale (1-10)"
    assert score_name(lb) == "predicted judge score"
    plain = {k: v for k, v in lb.items() if k != "scale"}
    plain.update(score=0.625, lo=0.55, hi=0.7)
    assert describe_prediction(plain, short=True) == "62.5% (55.0-70.0)"
    assert scale_words(plain) == "in percent (0-100)"
