"""A user's walk comparing two checkpoints of their own model on their own benchmark: a bank
folder built from a small matrix, the checkpoints scored, replayed and compared."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from cli_checks import run_cli


def _matrix(n=30, k=40, seed=0):
    """n models x k items (2PL), the last 3 items answered right by every model (the build
    drops them: they tell no model apart, yet the score is the mean over all k)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n)
    a, b = rng.lognormal(0, 0.3, k), rng.normal(size=k)
    y = (rng.random((n, k)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    y[:, -3:] = 1.0
    return pd.DataFrame(y, index=[f"ckpt-{i:02d}" for i in range(n)],
                        columns=[f"mine.{j}" for j in range(k)]).rename_axis("model")


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    from atlascat.bankdir import build_bank

    d = tmp_path_factory.mktemp("walk")
    df = _matrix()
    df.iloc[:26].to_csv(d / "source.csv")
    df.iloc[26:].to_csv(d / "ckpts.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = build_bank(d / "source.csv", d / "bank", folds=0, budget=20, name="MyBench")
    assert folder.manifest["items"]["n_bank"] < folder.manifest["items"]["n_results"]
    return d, df


def test_score_of_a_checkpoint_that_answered_every_item_is_its_mean(walk, capsys):
    """`atlas score CKPTS --bank DIR` of checkpoints that answered every item of the results
    gave the link's prediction with an interval, not their known mean (as `atlas evaluate
    --max-items ALL` does), whenever the build had dropped an item (here 3 that every source
    model answered right): the answers to dropped items never reached the known-mean rule."""
    d, df = walk
    assert run_cli(["score", d / "ckpts.csv", "--bank", d / "bank", "-o", d / "sc.csv"]) == 0
    capsys.readouterr()
    got = pd.read_csv(d / "sc.csv", index_col="subject_id")
    truth = df.iloc[26:].mean(axis=1)
    np.testing.assert_allclose(got.loc[truth.index, "score"], truth, atol=1e-7)
    np.testing.assert_allclose(got.loc[truth.index, "score_lo"], truth, atol=1e-7)
    np.testing.assert_allclose(got.loc[truth.index, "score_hi"], truth, atol=1e-7)


@pytest.fixture(scope="module")
def ratings(tmp_path_factory):
    """A 1-5 rating matrix (a judge's), its folder built with --score-range 1 5."""
    from atlascat.bankdir import build_bank

    d = tmp_path_factory.mktemp("ratings")
    df = (_matrix(seed=1) * 2 + _matrix(seed=2) * 2 + 1).astype(int)      # levels 1, 3, 5
    df.iloc[:26].to_csv(d / "source.csv")
    df.iloc[26:].to_csv(d / "ckpts.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_bank(d / "source.csv", d / "bank", folds=0, budget=20, score_range=(1, 5))
    return d, df


@pytest.mark.parametrize("argv", [["ranks", "ckpts.csv"], ["items", "ckpts.csv"],
                                  ["score", "ckpts.csv"]])
def test_commands_read_ratings_on_the_folders_scale(ratings, argv, capsys):
    """`atlas ranks / items RATINGS --bank DIR` on a folder built with --score-range 1 5
    refused the folder's own ratings ("value 5 outside [0, 1] ... give their scale to read
    them as a score (--score-range 1 5 of a bank folder)"): only `atlas score` and `simulate`
    read RESPONSES on the folder's scale. `atlas items` on continuous scores (the folder's
    ratings mapped to 0-1) ended in "S-X2 needs 0/1 scores": it leaves S-X2 out, with a
    warning."""
    d, df = ratings
    rc = run_cli([argv[0], d / argv[1], "--bank", d / "bank"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "outside [0, 1]" not in out.err
    if argv[0] == "items":
        assert "S-X2" in out.err and "left out" in out.err


def test_fit_of_ratings_says_what_it_tests_in_one_line(ratings, capsys):
    """`atlas fit RATINGS --bank DIR` (a --score-range folder) ends in one line that says M2
    tests right/wrong answers, not only "binarize partial credit first"."""
    d, _ = ratings
    rc = run_cli(["fit", d / "source.csv", "--bank", d / "bank"])
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert rc == 2 and len(errors) == 1, errors
    assert "right/wrong" in errors[0] and "continuous scores or ratings" in errors[0]


def test_adaptive_and_predictor_runs_on_one_folder_compare(walk, tmp_path, capsys):
    """A checkpoint tested with `--design adaptive` and another with the folder's predictor
    (the default), on one folder never rebuilt: compare-models refused them as "asked on bank
    DIR as it was at two times, and it changed in between (rebuilt: its items differ)",
    because the two designs store the hashes of different item sets (the bank's items, the
    results' items). A folder rebuilt between two such runs is still refused."""
    import shutil

    from atlascat.bankdir import build_bank
    from atlascat.live.compare import compare_runs
    from atlascat.errors import ConfigError

    d, df = walk
    bank = tmp_path / "bank"
    shutil.copytree(d / "bank", bank)

    def run(model, out, *design):
        assert run_cli(["evaluate", "--bank", bank, "--subject", f"replay:{d / 'ckpts.csv'}#{model}",
                        "--max-items", 10, "-o", tmp_path / out, "-q", *design]) == 0

    run("ckpt-26", "ad", "--design", "adaptive")
    run("ckpt-27", "pr")
    capsys.readouterr()
    out = compare_runs(tmp_path / "ad", tmp_path / "pr")
    row = out["rows"][0]
    assert row["lo"] <= row["difference"] <= row["hi"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_bank(d / "source.csv", bank, folds=0, budget=20, name="MyBench",
                   scores=None, model="1pl")                      # rebuilt: other parameters
    run("ckpt-28", "pr2")
    with pytest.raises(ConfigError, match="changed in between"):
        compare_runs(tmp_path / "ad", tmp_path / "pr2")


@pytest.mark.parametrize("bad, needle", [("", "RUN_B is empty"),
                                         ("runs/ckpt-9-gone", "'runs/ckpt-9-gone' does not exist")])
def test_compare_models_names_an_empty_or_missing_run(bad, needle, tmp_path, capsys):
    """`atlas compare-models RUN ""` read the empty value as the current folder ("'.' holds
    no results.json"), and a run folder that does not exist as a run id looked up in every
    known store ("no run 'runs/x' in any of the N known run stores"): one line each, saying
    what is wrong with which argument."""
    from cli_checks import one_line_error

    one_line_error(capsys, ["compare-models", "0123456789ab", bad], needle)


def test_evaluate_and_score_say_when_a_checkpoint_is_a_source_model(walk, tmp_path, capsys):
    """`atlas simulate --bank DIR` said a source model's prediction is in-sample; `atlas
    evaluate` (a checkpoint named as one of the folder's source models) and `atlas score`
    said nothing. A held-out checkpoint gets no such line."""
    d, _ = walk
    for model, matrix, said in (("ckpt-03", "source.csv", True), ("ckpt-27", "ckpts.csv", False)):
        assert run_cli(["evaluate", "--bank", d / "bank", "--subject", f"replay:{d / matrix}#{model}",
                        "--max-items", 10, "-o", tmp_path / model, "-q"]) == 0
        err = " ".join(capsys.readouterr().err.split())
        assert (f"model '{model}' is one of the bank folder's source models" in err) == said, err
        assert run_cli(["score", d / matrix, "--bank", d / "bank", "-o", tmp_path / f"{model}.csv"]) == 0
        err = " ".join(capsys.readouterr().err.split())
        assert ("source models" in err and "in-sample" in err) == said, err


def test_a_folder_that_lost_its_predictor_is_one_line_not_another_design(walk, tmp_path, capsys):
    """A bank folder copied without its predictor.json (the manifest says it was built with
    one) ran `atlas evaluate` and `atlas simulate` as the adaptive test, silently: another
    design than the other checkpoint's run on the folder as built. Now one line (exit 2);
    `--design adaptive` still runs."""
    import shutil

    d, _ = walk
    bank = tmp_path / "bank"
    shutil.copytree(d / "bank", bank)
    (bank / "predictor.json").unlink()
    subject = f"replay:{d / 'ckpts.csv'}#ckpt-27"
    for argv in (["evaluate", "--bank", bank, "--subject", subject, "-o", tmp_path / "e"],
                 ["simulate", d / "ckpts.csv", "--bank", bank, "-o", tmp_path / "s"]):
        rc = run_cli([*argv, "-q"])
        err = capsys.readouterr().err
        assert rc == 2 and "predictor.json is missing" in err, err
    assert run_cli(["simulate", d / "ckpts.csv", "--bank", bank, "--design", "adaptive",
                    "--max-items", 10, "-o", tmp_path / "a", "-q"]) == 0


def test_compare_models_warns_of_a_checkpoint_answered_from_the_cache(walk, tmp_path, capsys):
    """Two checkpoints served under one name through one command (`cmd:python harness.py`,
    `--llm mine`, one run store): the second run took all its answers from the answer cache
    (the first checkpoint's), and compare-models printed a difference of 0.0, "not told
    apart", with no warning. It now says which run was answered from the cache."""
    import json
    import sys

    from atlascat.live.compare import compare_runs

    d, df = walk
    harness = tmp_path / "harness.py"
    harness.write_text(
        "import json, sys\nimport pandas as pd\n"
        f"row = pd.read_csv({str(tmp_path / 'answers.csv')!r}, index_col=0).iloc[0]\n"
        "for line in sys.stdin:\n"
        "    item = json.loads(line)['item_id']\n"
        "    print(json.dumps({'item_id': item, 'score': int(row[item])}), flush=True)\n")
    ids = []
    for ckpt in ("ckpt-26", "ckpt-27"):            # the checkpoint the harness serves now
        df.loc[[ckpt]].to_csv(tmp_path / "answers.csv")
        assert run_cli(["evaluate", "--bank", d / "bank", "--subject",
                        f"cmd:{sys.executable} {harness}", "--llm", "mine", "--max-items", 10,
                        "-o", tmp_path / "runs", "-q"]) == 0
        rows = json.loads((tmp_path / "runs" / "results.json").read_text())
        ids += [r["run_id"] for r in rows if r["run_id"] not in ids]
    capsys.readouterr()
    out = compare_runs(ids[1], ids[0], db=tmp_path / "runs" / "runs.sqlite")
    assert out["warning"] and f"run {ids[1]}" in out["warning"] and "answer cache" in out["warning"]
    assert f"run {ids[0]}" not in out["warning"]


def test_replay_of_a_checkpoint_whose_id_holds_a_hash(walk, tmp_path, capsys):
    """`--subject "replay:ckpts.csv#org/m@step-2000#final"`: the target was split at its last
    `#`, so the matrix read as 'ckpts.csv#org/m@step-2000' ("neither an existing file nor a
    bundled response matrix"). It splits where the matrix exists."""
    import json

    d, df = walk
    renamed = df.iloc[26:].rename(index={"ckpt-27": "org/m@step-2000#final"})
    renamed.to_csv(tmp_path / "ckpts.csv")
    assert run_cli(["evaluate", "--bank", d / "bank", "--subject",
                    f"replay:{tmp_path / 'ckpts.csv'}#org/m@step-2000#final",
                    "--max-items", 10, "-o", tmp_path / "run", "-q"]) == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "run" / "results.json").read_text())[0]["model"] == \
        "org/m@step-2000#final"


def test_replaying_another_benchmarks_answers_names_the_mismatch(walk, tmp_path, capsys):
    """`replay:OTHER.csv#MODEL` on a folder whose items the matrix does not answer (the
    results of another benchmark) said "none of the predictor's items can be asked of this
    model (it has no recorded answer to any)"; now one line names the matrix and both sets
    of items."""
    from cli_checks import one_line_error

    d, df = walk
    other = df.iloc[26:].rename(columns=lambda c: c.replace("mine.", "theirs."))
    other.to_csv(tmp_path / "other.csv")
    one_line_error(capsys, ["evaluate", "--bank", d / "bank", "--subject",
                            f"replay:{tmp_path / 'other.csv'}#ckpt-27", "-o", tmp_path / "run"],
                   "no recorded answer to any of the bank's", "theirs.0", "mine.")


def test_compare_models_names_the_rho_option(capsys):
    """`atlas compare-models A B --rho 1.5` said "rho must lie in [-1, 1]": a setting is named
    by its option (docs/cli.md, Errors)."""
    from cli_checks import one_line_error

    one_line_error(capsys, ["compare-models", "0123456789ab", "ba9876543210", "--rho", "1.5"],
                   "--rho must lie in [-1, 1]")


def test_score_extra_items_error_takes_the_items_the_build_dropped(walk, tmp_path, capsys):
    """`atlas score CKPTS --bank DIR --extra-items error` refused the checkpoints' answers to
    the items the folder's build dropped ("3 response item(s) are not in the bank"): they are
    the benchmark's own items (the score is their mean too), not items of another bank.
    An item foreign to the folder is still refused."""
    from cli_checks import one_line_error

    d, df = walk
    assert run_cli(["score", d / "ckpts.csv", "--bank", d / "bank", "--extra-items", "error",
                    "-o", tmp_path / "sc.csv"]) == 0, capsys.readouterr().err
    assert "not in the bank" not in capsys.readouterr().err
    df.iloc[26:].assign(**{"other.0": 1.0}).to_csv(tmp_path / "foreign.csv")
    one_line_error(capsys, ["score", tmp_path / "foreign.csv", "--bank", d / "bank",
                            "--extra-items", "error"], "other.0")
