"""Every command a user runs on a graded bank or a matrix of judge ratings either works on the
ratings' own scale or refuses with one line naming why (never a traceback, never a silent
binary reading, never an option accepted and ignored)."""
from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.cli import app
from atlascat.errors import AtlasError
from atlascat.irt import polytomous as poly
from atlascat.irt.polybank import PolyBank

N_MODELS, N_ITEMS = 120, 12


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """Judge ratings 1-10 of 120 models on 12 prompts (graded model, 10% missing) and the
    graded bank they were drawn from."""
    root = tmp_path_factory.mktemp("ordinal_commands")
    rng = np.random.default_rng(5)
    a = rng.lognormal(0.2, 0.3, N_ITEMS)
    d = -np.sort(rng.normal(0, 1.5, (N_ITEMS, 9)), axis=1) * a[:, None]
    params = np.column_stack([a, d])
    ids = [f"q{j}" for j in range(N_ITEMS)]
    r = poly.sample("graded", params, rng.normal(size=N_MODELS), rng).astype(float) + 1
    r[rng.random(r.shape) < 0.1] = np.nan
    pd.DataFrame(r, index=[f"m{i}" for i in range(N_MODELS)], columns=ids).rename_axis(
        "model").to_csv(root / "judge.csv")
    PolyBank(ids, params, "graded", [np.arange(1.0, 11.0)] * N_ITEMS).write(root / "bank.csv")
    return root


def _run(*args: str, fails: bool = False):
    r = CliRunner().invoke(app, list(args))
    if fails:   # the entry point prints an AtlasError as one line and exits 2
        assert isinstance(r.exception, AtlasError), (r.output, r.exception)
        return str(r.exception)
    assert r.exit_code == 0, r.output + repr(r.exception)
    return r.output


def test_info_describes_a_ratings_matrix_on_its_scale(root):
    out = json.loads(_run("info", str(root / "judge.csv"), "--json"))
    assert out["kind"] == "ratings"
    assert (out["subjects"], out["items"]) == (N_MODELS, N_ITEMS)
    assert out["levels"][0] == 1 and out["levels"][-1] == 10
    assert 1 <= out["mean_rating_quantiles"]["median"] <= 10
    text = _run("info", str(root / "judge.csv"))
    assert "ratings matrix (levels 1-10" in text and "accuracy" not in text


def test_info_describes_a_graded_bank(root):
    out = json.loads(_run("info", str(root / "bank.csv"), "--json"))
    assert out["kind"] == "bank" and out["model"] == "graded" and out["n_items"] == N_ITEMS
    assert out["n_categories"] == {"min": 10, "max": 10}
    assert out["levels"] == {"1;2;3;4;5;6;7;8;9;10": N_ITEMS}
    bank = PolyBank.read(root / "bank.csv")
    assert out["quantiles"]["a1"]["max"] == pytest.approx(bank.a.max(), abs=1e-4)
    assert "12 item(s) rated 1;2;3;4;5;6;7;8;9;10" in _run("info", str(root / "bank.csv"))


def test_ranks_refuses_a_graded_bank_in_one_line(root):
    msg = _run("ranks", str(root / "judge.csv"), "--bank", str(root / "bank.csv"), fails=True)
    assert "ordinal (graded) items" in msg and "\n" not in msg


def test_items_reports_a_graded_bank(root):
    """atlas items takes ordinal banks (slopes, locations, information shares:
    tests/test_walk_link.py checks the shares by hand)."""
    out = json.loads(_run("items", "--bank", str(root / "bank.csv"), "--json"))
    assert out["n_items"] == N_ITEMS


def test_simulate_refuses_batches_on_a_graded_bank(root, tmp_path):
    msg = _run("simulate", str(root / "judge.csv"), "--bank", str(root / "bank.csv"),
               "--batch-size", "3", "-o", str(tmp_path / "sim"), fails=True)
    assert "one item a round" in msg


def test_simulate_writes_the_selected_folder_on_a_graded_bank(root, tmp_path):
    out = tmp_path / "sim"
    _run("simulate", str(root / "judge.csv"), "--bank", str(root / "bank.csv"), "-q",
         "--min-items", "3", "--max-items", "6", "--selected-folder", "-o", str(out))
    files = sorted(p.stem for p in (out / "selected_items").glob("*.csv"))
    assert len(files) == N_MODELS
    long = pd.read_csv(out / "selected_items.csv", dtype={"subject_id": str})
    one = pd.read_csv(out / "selected_items" / "m7.csv")
    mine = long[long.subject_id == "m7"].drop(columns="subject_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(one, mine, check_dtype=False)


def test_ordinal_prediction_is_the_expected_mean_rating(root):
    from atlascat.live.service import ordinal_prediction

    bank = PolyBank.read(root / "bank.csv")
    pred = ordinal_prediction(bank, 0.4, 0.3)
    p = bank.probability(np.array([0.4]))[:, 0, :]                 # (items, categories)
    direct = np.nansum(p * np.arange(1.0, 11.0), axis=1).mean()
    assert pred["score"] == pytest.approx(direct, rel=1e-10)
    assert pred["lo"] < pred["score"] < pred["hi"] and pred["scale"] == [1.0, 10.0]
    rubric = PolyBank.combine(bank.subset(["q0", "q1"]),
                              PolyBank(["r0"], [[1.2, 1.0, 0.0, -1.0]], "gpcm", [[0, 1, 2, 3]]))
    mixed = ordinal_prediction(rubric, 0.4, 0.3)                     # two scales: shares
    assert "scale" not in mixed and 0 < mixed["lo"] < mixed["score"] < mixed["hi"] < 1
    assert mixed["metric"] == "mean rating, as a share of each item's scale"
    p = rubric.probability(np.array([0.4]))[:, 0, :]
    shares = [np.nansum(p[0] * np.arange(10.0)) / 9, np.nansum(p[1] * np.arange(10.0)) / 9,
              np.nansum(p[2, :4] * np.arange(4.0)) / 3]
    assert mixed["score"] == pytest.approx(np.mean(shares), rel=1e-10)


def test_live_graded_run_reads_the_same_in_cli_json_runs_and_html(root, tmp_path):
    """A replayed graded run: the predicted mean rating and the observed mean rating, the
    same in the CLI lines, results.json, `atlas runs` and the HTML page; no accuracy, no
    percent, no hint to use a leaderboard's bank."""
    ratings = pd.read_csv(root / "judge.csv", index_col=0)
    model = ratings.index[ratings.notna().all(axis=1)][0]
    out = tmp_path / "run"
    text = _run("evaluate", "--bank", str(root / "bank.csv"), "--subject",
                f"replay:{root / 'judge.csv'}#{model}", "--min-items", "4", "--max-items", "8",
                "-o", str(out))
    row = json.loads((out / "results.json").read_text())[0]
    pred, asked = row["prediction"], row["scores"]
    assert pred["scale"] == [1.0, 10.0] and pred["metric"] == "mean rating"
    from atlascat.scorelink.prediction import score_text   # the one digits rule (1-10: 2)

    def t(v):
        return score_text(v, pred["scale"])
    shown = f"{t(pred['score'])} (95% interval {t(pred['lo'])}-{t(pred['hi'])})"
    observed = t(np.mean(asked))
    assert shown in text and f"mean rating (1-10): observed {observed} (over the" in text
    plain = text.replace("95%", "")
    assert "accuracy" not in plain and "%" not in plain and "arc" not in plain, text
    runs = _run("runs", "--db", str(out / "runs.sqlite"))
    assert f"{t(pred['score'])} ({t(pred['lo'])}-{t(pred['hi'])})" in runs and observed in runs
    page = html.unescape(next((out / "reports").glob("*.html")).read_text())
    assert shown in page
    assert f"observed mean rating (over the items asked, on the rating scale)</td><td>" \
        f"{observed}<" in page
    assert "accuracy" not in page.lower()


def test_anova_refuses_a_binary_model_on_ratings_in_one_line(root):
    msg = _run("anova", str(root / "judge.csv"), "--model", "2pl", "--model", "graded",
               fails=True)
    assert "--model 2pl fits right/wrong (0/1) answers" in msg and "ratings 1-10" in msg


@pytest.fixture(scope="module")
def r_style(root) -> Path:
    """The ratings with R's column names (q0 -> Xq0: read.csv's check.names on a bank
    whose ids start with a digit looks like this)."""
    df = pd.read_csv(root / "judge.csv", index_col=0)
    df.columns = [f"X{c}" for c in df.columns]
    df.to_csv(root / "judge_r.csv")
    return root / "judge_r.csv"


@pytest.mark.parametrize("command", ["score", "simulate"])
def test_ratings_sharing_no_item_with_the_bank_are_refused(root, r_style, tmp_path, command):
    args = [command, str(r_style), "--bank", str(root / "bank.csv")]
    msg = _run(*args, *(["-o", str(tmp_path / "sim")] if command == "simulate" else []),
               fails=True)
    assert f"none of the {N_ITEMS} response items is in the bank" in msg


def test_score_normalize_ids_on_an_ordinal_bank(root, tmp_path):
    bank = PolyBank.read(root / "bank.csv")
    df = pd.read_csv(root / "judge.csv", index_col=0)
    numbered = [str(i)[1:] for i in bank.item_ids]               # q0 -> 0: ids are numbers
    PolyBank(numbered, bank.params, bank.models, bank.levels).write(tmp_path / "bank_r.csv")
    df.columns = [f"X{c}" for c in numbered]                      # as R's read.csv names them
    df.to_csv(tmp_path / "judge_r.csv")
    _run("score", str(tmp_path / "judge_r.csv"), "--bank", str(tmp_path / "bank_r.csv"),
         "--normalize-ids", "-o", str(tmp_path / "a.csv"))
    _run("score", str(root / "judge.csv"), "--bank", str(root / "bank.csv"),
         "-o", str(tmp_path / "b.csv"))
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "a.csv"),
                                  pd.read_csv(tmp_path / "b.csv"))
    msg = _run("score", str(root / "judge.csv"), "--bank", str(root / "bank.csv"),
               "--lambda", "0.5", fails=True)
    assert "--lambda" in msg


def test_score_title_says_how_many_ordinal_bank_items_were_rated(root, tmp_path):
    """`atlas score RATINGS --bank ORDINAL` titled its table "(12 ordinal bank items)" even
    when RATINGS rated 5 of them; rating all of them keeps that title."""
    df = pd.read_csv(root / "judge.csv", index_col=0)
    df.iloc[:, :5].to_csv(tmp_path / "some.csv")
    out = _run("score", str(tmp_path / "some.csv"), "--bank", str(root / "bank.csv"))
    assert f"theta by EAP (5 of the ordinal bank's {N_ITEMS} items answered)" in out, out
    out = _run("score", str(root / "judge.csv"), "--bank", str(root / "bank.csv"))
    assert f"theta by EAP ({N_ITEMS} ordinal bank items)" in out, out


def test_fit_normalize_ids_keeps_the_banks_declared_scale(root, tmp_path):
    """A bank declared on 1-10 whose first item was never rated 10: a 10 on it is scored (its
    highest category) by atlas fit with or without --normalize-ids, as by atlas score."""
    bank = PolyBank.read(root / "bank.csv")
    p = bank.params.copy()
    p[0, -1] = np.nan                                   # item 0: levels 1-9 on the 1-10 scale
    levels = [np.arange(1.0, 10.0)] + list(bank.levels[1:])
    numbered = [str(i)[1:] for i in bank.item_ids]
    PolyBank(numbered, p, "graded", levels, scales=(1, 10)).write(tmp_path / "bank_r.csv")
    df = pd.read_csv(root / "judge.csv", index_col=0)
    df.columns = [f"X{c}" for c in numbered]
    df.iloc[:, 0] = df.iloc[:, 0].clip(upper=9)
    df.iloc[0, 0] = 10.0                                # a level item 0 never had, on the scale
    df.to_csv(tmp_path / "judge_r.csv")
    args = ("fit", str(tmp_path / "judge_r.csv"), "--bank", str(tmp_path / "bank_r.csv"),
            "--normalize-ids", "--no-items", "--json")
    out = json.loads(_run(*args))
    df.columns = numbered
    df.to_csv(tmp_path / "judge_n.csv")
    same = json.loads(_run("fit", str(tmp_path / "judge_n.csv"), "--bank",
                           str(tmp_path / "bank_r.csv"), "--no-items", "--json"))
    assert out["M2"] == pytest.approx(same["M2"], rel=1e-12) and out["df"] == same["df"]


@pytest.mark.parametrize("model", ["graded", "pcm"])
def test_drop_empty_leaves_out_items_rated_at_one_level_or_none(root, tmp_path, model):
    """--drop-empty on ratings: a prompt no model was rated on, and one every model got 7 on,
    are left out (warned, in the summary's dropped_items); the rest fit as without them."""
    df = pd.read_csv(root / "judge.csv", index_col=0)
    df.to_csv(tmp_path / "plain.csv")
    df.assign(q_none=np.nan, q_same=7.0).to_csv(tmp_path / "gaps.csv")
    msg = _run("calibrate", str(tmp_path / "gaps.csv"), "--model", model, "-o",
               str(tmp_path / "x.csv"), fails=True)
    assert "'q_none' has no response" in msg and "--drop-empty" in msg
    _run("calibrate", str(tmp_path / "gaps.csv"), "--model", model, "--drop-empty", "-o",
         str(tmp_path / "a.csv"), "--summary", str(tmp_path / "a.json"), "-q")
    _run("calibrate", str(tmp_path / "plain.csv"), "--model", model, "-o",
         str(tmp_path / "b.csv"), "--summary", str(tmp_path / "b.json"), "-q")
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "ab")
    assert a["dropped_items"] == ["q_none", "q_same"] and b["dropped_items"] == []
    assert a["loglik"] == pytest.approx(b["loglik"], abs=1e-9)
    assert pd.read_csv(tmp_path / "a.csv")["item_id"].tolist() == list(df.columns)


def test_binary_calibration_of_ratings_names_the_ordinal_models(root, tmp_path):
    msg = _run("calibrate", str(root / "judge.csv"), "-o", str(tmp_path / "b.csv"), fails=True)
    assert "whole numbers 1-10 are ratings: fit them with the graded or gpcm model" in msg
    assert msg.endswith("(--score-range 1 10 of a bank folder)")


def test_simulate_r_max_caps_every_items_exposure(root, tmp_path):
    """--r-max: item eligibility (no item to more than that share of the examinees), on an
    ordinal bank as on a binary one; without it the most used item goes to most examinees."""
    def run(*extra):
        out = tmp_path / ("capped" if extra else "free")
        _run("simulate", str(root / "judge.csv"), "--bank", str(root / "bank.csv"), "-q",
             "--min-items", "4", "--se-stop", "0.4", "-o", str(out), *extra)
        return json.loads((out / "summary.json").read_text())

    assert run()["exposure_max"] > 0.5
    capped = run("--r-max", "0.4")
    assert capped["exposure_max"] <= 0.4 + 1e-12
    assert capped["settings"]["exposure"] == "eligibility" and capped["settings"]["r_max"] == 0.4
    assert "--r-max" in _run("simulate", "--suite", "openllm-v1", "--r-max", "0.2", "-o",
                             str(tmp_path / "s"), fails=True)


def test_simulate_design_predictor_is_refused_on_a_graded_bank(root, tmp_path):
    msg = _run("simulate", str(root / "judge.csv"), "--bank", str(root / "bank.csv"),
               "--design", "predictor", "-o", str(tmp_path / "sim"), fails=True)
    assert "--design predictor needs a bank folder" in msg


def test_anova_of_models_that_are_not_nested_gives_the_criteria_alone(root):
    from atlascat import calibrate
    from atlascat.errors import ConfigError
    from atlascat.irt.compare import anova, nested

    ratings = pd.read_csv(root / "judge.csv", index_col=0)
    g, p = calibrate(ratings, model="graded"), calibrate(ratings, model="gpcm")
    assert not nested("graded", "gpcm") and nested("2pl", "graded")
    with pytest.raises(ConfigError, match="not nested"):
        anova(g, p)
    table = anova(g, p, test=False)
    assert table.loc["graded", "AIC"] == pytest.approx(g.aic) and table["X2"].isna().all()


def test_graded_loglik_from_the_answered_categories_equals_the_full_table(root):
    """ML / MAP / WLE evaluate log L_i at each subject's theta from the answered categories
    alone on a graded bank: the same numbers as the whole (items, subjects, categories) table."""
    from atlascat.irt.polyscore import _graded_loglik_at, ordinal_codes

    bank = PolyBank.read(root / "bank.csv")
    codes = ordinal_codes(pd.read_csv(root / "judge.csv", index_col=0), bank)
    theta = np.random.default_rng(1).normal(0, 2, len(codes))
    lp = poly.log_prob(bank.models, bank.params, theta)                  # (m, n, K)
    obs = ~np.isnan(codes)
    cat = np.where(obs, codes, 0).astype(int).T[:, :, None]
    full = np.where(obs, np.take_along_axis(lp, cat, axis=2)[..., 0].T, 0.0).sum(axis=1)
    np.testing.assert_allclose(_graded_loglik_at(codes, bank, theta), full, rtol=1e-12)


def test_link_takes_graded_banks(root, tmp_path):
    """atlas link links ordinal banks (tests/test_walk_link.py); a bank to itself: A 1, B 0."""
    _run("link", str(root / "bank.csv"), str(root / "bank.csv"), "-o", str(tmp_path / "l.csv"))
    linked, bank = PolyBank.read(tmp_path / "l.csv"), PolyBank.read(root / "bank.csv")
    np.testing.assert_allclose(linked.params, bank.params, atol=1e-5)


def test_a_live_graded_replay_skips_the_gaps_as_simulate_does(root, tmp_path):
    """A model with blank ratings: the live adaptive test skips a blank as it comes up and
    asks what ``atlas simulate`` asks, to the same theta and SE (it used to stop there)."""
    ratings = pd.read_csv(root / "judge.csv", index_col=0)
    gappy = ratings.index[ratings.isna().sum(axis=1) >= 3][:2]
    ratings.loc[gappy].to_csv(tmp_path / "two.csv")
    _run("simulate", str(tmp_path / "two.csv"), "--bank", str(root / "bank.csv"),
         "--seed", "4", "--min-items", "6", "--max-items", "10", "-q", "-o", str(tmp_path / "s"))
    sim = pd.read_csv(tmp_path / "s" / "person_scores.csv", index_col=0)
    asked = pd.read_csv(tmp_path / "s" / "selected_items.csv")
    assert sim["n_skipped"].sum() > 0
    for model in gappy:
        _run("evaluate", "--bank", str(root / "bank.csv"), "--subject",
             f"replay:{tmp_path / 'two.csv'}#{model}", "--seed", "4", "--min-items", "6",
             "--max-items", "10", "-q", "-o", str(tmp_path / model))
        row = json.loads((tmp_path / model / "results.json").read_text())[0]
        assert row["items"] == asked[asked["subject_id"] == model]["item_id"].tolist()
        assert row["theta"] == pytest.approx(sim.loc[model, "theta"], abs=1e-12)
        assert row["se"] == pytest.approx(sim.loc[model, "se"], abs=1e-12)


def test_compare_models_of_two_graded_runs_is_not_in_leaderboard_points(root, tmp_path):
    ratings = pd.read_csv(root / "judge.csv", index_col=0)
    first, second = ratings.index[ratings.notna().all(axis=1)][:2]
    for model in (first, second):
        _run("evaluate", "--bank", str(root / "bank.csv"), "--subject",
             f"replay:{root / 'judge.csv'}#{model}", "--min-items", "4", "--max-items", "8",
             "-q", "-o", str(tmp_path / model))
    out = _run("compare-models", str(tmp_path / first), str(tmp_path / second))
    assert "first minus second (mean rating points, rating scale 1-10, 95% interval)" in out
    assert "leaderboard" not in out


@pytest.mark.parametrize("item,score", [("item", "score"), ("prompt", "rating")])
def test_long_format_ratings_read_as_the_wide_matrix(root, tmp_path, item, score):
    """Long format (model, item, score; a judge's model, prompt, rating), which every command
    takes for 0/1 scores, holds ratings too: calibrate, score and simulate read it as the wide
    matrix."""
    wide = pd.read_csv(root / "judge.csv", index_col=0)
    long = wide.stack().rename(score).rename_axis(["model", item]).reset_index()
    long.to_csv(tmp_path / "long.csv", index=False)
    for name in ("long", "wide"):
        src = tmp_path / "long.csv" if name == "long" else root / "judge.csv"
        _run("calibrate", str(src), "--model", "graded", "-o", str(tmp_path / f"{name}_bank.csv"),
             "-q")
        _run("score", str(src), "--bank", str(root / "bank.csv"), "-o",
             str(tmp_path / f"{name}_scores.csv"))
    a, b = (pd.read_csv(tmp_path / f"{n}_bank.csv", index_col=0).sort_index()
            for n in ("long", "wide"))
    assert a["levels"].tolist() == b["levels"].tolist()
    np.testing.assert_allclose(a.select_dtypes("number"), b.select_dtypes("number"), atol=1e-6)
    sa, sb = (pd.read_csv(tmp_path / f"{n}_scores.csv", index_col=0).sort_index()
              for n in ("long", "wide"))
    np.testing.assert_allclose(sa["theta"], sb["theta"], atol=1e-10)


def test_a_pattern_table_of_ratings_counts_its_subjects(root, tmp_path):
    """--freq-column: the fit line counts subjects (the frequencies' sum) and patterns, as a
    binary pattern table's does, and the fit equals the expanded matrix's."""
    wide = pd.read_csv(root / "judge.csv", index_col=0).iloc[:, :3].dropna()
    wide = pd.concat([wide, wide.iloc[:20].rename(index=lambda s: s + "b")])
    wide.to_csv(tmp_path / "rows.csv")
    pat = wide.groupby(list(wide.columns)).size().rename("freq").reset_index()
    pat.to_csv(tmp_path / "patterns.csv", index=False)
    rows = _run("calibrate", str(tmp_path / "rows.csv"), "--model", "graded", "-o",
                str(tmp_path / "a.csv"), "-q")
    pats = _run("calibrate", str(tmp_path / "patterns.csv"), "--freq-column", "freq", "--model",
                "graded", "-o", str(tmp_path / "b.csv"), "-q")
    assert f"on {len(wide)} subjects:" in rows
    assert f"on {len(wide)} subjects ({len(pat)} response patterns):" in pats
    assert rows.split("log-likelihood ")[1][:10] == pats.split("log-likelihood ")[1][:10]


def test_simulate_summary_names_its_figures_as_a_binary_banks(root, tmp_path):
    """One name per figure: an ordinal bank's `atlas simulate` summary says "max exposure" as a
    binary bank's does (docs/cat.md), not another word for it."""
    out = _run("simulate", str(root / "judge.csv"), "--bank", str(root / "bank.csv"),
               "--min-items", "4", "--se-stop", "0.4", "-o", str(tmp_path / "o"))
    assert "max exposure" in out and "largest exposure" not in out


@pytest.mark.parametrize("model", ["graded", "pcm"])
def test_binary_option_refusal_lists_exactly_what_the_ordinal_fit_takes(root, tmp_path, model):
    """The line refusing a binary model's option names the options an ordinal fit takes
    (--se, --format, --summary among them), and every one it names is accepted."""
    msg = _run("calibrate", str(root / "judge.csv"), "--model", model, "--seed", "1",
               "-o", str(tmp_path / "b.csv"), fails=True)
    assert "\n" not in msg
    listed = msg.split("(it takes ")[1].rstrip(")").split(", ")
    for opt in ("--se", "--format", "--summary", "--rating-range", "--drop-empty"):
        assert opt in listed, msg
    assert ("--prior-a" in listed) == (model != "pcm") and "--seed" not in listed
    values = {"--rating-range": ["1", "10"], "--prior-a": ["lognorm(0,0.5)"],
              "--quadpts": ["21"], "--max-iter": ["5"], "--tol": ["0.01"], "--format": ["mirt"],
              "--summary": [str(tmp_path / "s.json")], "--scores": [str(tmp_path / "t.csv")],
              "--freq-column": None, "--se": [], "--normalize-ids": [], "--drop-empty": [],
              "--mirt-defaults": [], "--quiet": [], "--name": ["judge-bench"],
              "--groups": [str(tmp_path / "g.csv")], "--reference-group": ["B"]}
    ids = pd.read_csv(root / "judge.csv", index_col=0).index   # two groups of the subjects
    pd.DataFrame({"subject_id": ids, "group": np.where(np.arange(len(ids)) % 2, "A", "B")}
                 ).to_csv(tmp_path / "g.csv", index=False)
    assert set(listed) <= set(values), msg
    args = [a for opt in listed if values[opt] is not None for a in (opt, *values[opt])]
    _run("calibrate", str(root / "judge.csv"), "--model", model, *args,
         "-o", str(tmp_path / "b.csv"))
    assert (tmp_path / "s.json").exists() and (tmp_path / "t.csv").exists()
    assert "a1_se" in pd.read_csv(tmp_path / "b.csv").columns


def test_rating_range_names_every_ordinal_model(root, tmp_path):
    msg = _run("calibrate", str(root / "judge.csv"), "--model", "2pl", "--rating-range", "1",
               "10", "-o", str(tmp_path / "b.csv"), fails=True)
    assert "graded|gpcm|pcm" in msg
    _run("calibrate", str(root / "judge.csv"), "--model", "pcm", "--rating-range", "1", "10",
         "--max-iter", "5", "-q", "-o", str(tmp_path / "b.csv"))
    assert PolyBank.read(tmp_path / "b.csv").rating_scale() == (1.0, 10.0)
