"""Two checkpoints compared (`atlas compare-models`, :func:`atlascat.live.compare.compare_runs`):
the Python API gives what the command prints, in the benchmark's own words."""
from __future__ import annotations

import json

import numpy as np
import pytest

from atlascat.cli import main


@pytest.fixture(scope="module")
def folder_runs(tmp_path_factory):
    """A bank folder built from a matrix (its benchmark named "mybench") and two of its
    models' runs, replayed."""
    import atlascat as at

    root = tmp_path_factory.mktemp("walk_compare")
    rm = at.catalogue.load_responses("arc")
    rm.subset(subjects=range(0, 2193, 60), items=range(80)).write(root / "mine.csv")
    assert main(["build-bank", str(root / "mine.csv"), "-o", str(root / "bank"),
                 "--name", "mybench", "--budget", "20", "--chance", "0.25", "-q"]) == 0
    runs = []
    for k, who in enumerate((rm.subject_ids[5], rm.subject_ids[900])):
        out = root / f"ckpt{k}"
        assert main(["evaluate", "--bank", str(root / "bank"), "--subject",
                     f"replay:arc#{who}", "-o", str(out), "-q"]) == 0
        runs.append(out)
    return runs


def test_compare_runs_api_matches_the_command_and_names_the_folders_score(folder_runs,
                                                                          capsys):
    import atlascat.live
    from atlascat.live.compare import compare_runs

    assert atlascat.live.compare_runs is compare_runs
    out = compare_runs(*folder_runs)
    row = out["rows"][0]
    assert row["benchmark"] == "mybench"
    assert out["score"] == row["score"] == "predicted mybench score"
    assert out["unit"] == row["unit"] == "points"
    preds = [json.loads((f / "results.json").read_text())[0]["prediction"]
             for f in folder_runs]
    assert row["first"] == pytest.approx(100 * preds[0]["score"])
    assert row["difference"] == pytest.approx(100 * (preds[0]["score"] - preds[1]["score"]))
    capsys.readouterr()
    assert main(["compare-models", *map(str, folder_runs), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(out))
    assert main(["compare-models", *map(str, folder_runs)]) == 0
    text = capsys.readouterr().out
    assert "predicted mybench score, first minus second (points, 95% interval)" in text
    assert "leaderboard" not in text


def test_comparison_frame_is_the_commands_json_as_a_table(folder_runs, capsys):
    """compare_runs gave only nested dicts; comparison_frame is one row per benchmark with
    the numbers `atlas compare-models --json` prints, the runs and models on every row."""
    import atlascat.live
    from atlascat.live.compare import compare_runs, comparison_frame

    assert atlascat.live.comparison_frame is comparison_frame
    capsys.readouterr()
    assert main(["compare-models", *map(str, folder_runs), "--json", "--rho", "0.3"]) == 0
    printed = json.loads(capsys.readouterr().out)
    df = comparison_frame(compare_runs(*folder_runs, rho=0.3))
    assert len(df) == len(printed["rows"]) == 1
    assert list(df.columns) == [*printed["rows"][0], "first_run", "second_run", "first_model",
                                "second_model", "rho", "warning"]
    for row, (_, got) in zip(printed["rows"], df.iterrows()):
        for key, value in row.items():
            assert got[key] == (pytest.approx(value) if isinstance(value, float) else value)
        assert (got["first_run"], got["second_run"]) == (printed["first"], printed["second"])
        assert [got["first_model"], got["second_model"]] == printed["models"]
        assert got["rho"] == 0.3 and got["warning"] == printed["warning"]
        assert got["warning"].startswith("rho 0.3 on mybench: the benchmark predictor's error")
    assert df["hi"].iloc[0] - df["lo"].iloc[0] > 0 and df["told_apart"].iloc[0] in ("yes", "no")


def test_a_shipped_banks_rows_say_leaderboard_points_in_json_as_in_the_table(tmp_path, capsys):
    """The table said "leaderboard points" while the JSON rows said "points"."""
    outs = []
    for theta in ("1.5", "-0.5"):
        out = tmp_path / f"run{theta}"
        assert main(["evaluate", "--bank", "arc", "--subject", f"simulate:{theta}:3",
                     "--se-stop", "0.3", "-o", str(out), "-q"]) == 0
        outs.append(str(out))
    capsys.readouterr()
    assert main(["compare-models", *outs, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["unit"] == got["rows"][0]["unit"] == "leaderboard points"
    assert got["score"] == "predicted leaderboard score"
    assert main(["compare-models", *outs]) == 0
    assert ("predicted leaderboard score, first minus second (leaderboard points, 95% "
            "interval)") in capsys.readouterr().out


def _half_width(preds, scale):
    """The upper side of first minus second: the first's upper side with the second's lower."""
    a, b = preds
    return 100 * scale * np.hypot(a["hi"] - a["score"], b["score"] - b["lo"])


def test_a_suite_runs_benchmarks_get_the_plain_combination_and_its_average_its_scale(tmp_path):
    """A shipped bank's pair scale (0.73-0.84) was fitted on two single-bank adaptive tests,
    whose intervals cover 97%; a suite member's cover about 95%, and at that scale their pairs
    covered only 88-94% of held-out pairs (bench_suite.py seeds 0 and 1): a suite run's benchmarks are
    combined plainly (1.0), its average at PAIR_SCALE["average"], two single-bank runs at the
    bank's scale."""
    from atlascat.live.compare import compare_runs
    from atlascat.studies.paired import PAIR_SCALE

    outs = {}
    for name, opts in (("s1", ["--suite", "openllm-v1", "--subject", "simulate:1.0"]),
                       ("s2", ["--suite", "openllm-v1", "--subject", "simulate:-1.0"]),
                       ("b1", ["--bank", "arc", "--subject", "simulate:1.0"]),
                       ("b2", ["--bank", "arc", "--subject", "simulate:-1.0"])):
        out = tmp_path / name
        assert main(["evaluate", *opts, "--max-items", "36", "-o", str(out), "-q"]) == 0
        outs[name] = out
    res = [json.loads((outs[k] / "results.json").read_text())[0] for k in ("s1", "s2")]
    rows = {r["benchmark"]: r for r in compare_runs(outs["s1"], outs["s2"])["rows"]}
    for bench in ("arc", "hellaswag", "gsm8k"):
        preds = [next(b for b in r["benchmarks"] if b["name"] == bench) for r in res]
        assert rows[bench]["hi"] - rows[bench]["difference"] == pytest.approx(
            _half_width(preds, 1.0)), bench
    assert rows["average"]["hi"] - rows["average"]["difference"] == pytest.approx(
        _half_width([r["average"] for r in res], PAIR_SCALE["average"]))
    # a suite run's ARC against a single-bank run's: not two single-bank tests either
    mixed = compare_runs(outs["s1"], outs["b1"])["rows"][0]
    preds = [next(b for b in res[0]["benchmarks"] if b["name"] == "arc"),
             json.loads((outs["b1"] / "results.json").read_text())[0]["prediction"]]
    assert mixed["hi"] - mixed["difference"] == pytest.approx(_half_width(preds, 1.0))
    single = compare_runs(outs["b1"], outs["b2"])["rows"][0]
    preds = [json.loads((outs[k] / "results.json").read_text())[0]["prediction"]
             for k in ("b1", "b2")]
    assert single["hi"] - single["difference"] == pytest.approx(
        _half_width(preds, PAIR_SCALE["arc"]))


def test_two_runs_on_a_folder_rebuilt_between_them_are_not_compared(tmp_path, capsys):
    """The same path, two banks: a folder rebuilt from other results between two runs (another
    population, another metric) is refused with one line, not compared as one score."""
    import atlascat as at

    rm = at.catalogue.load_responses("arc")
    bank = tmp_path / "bank"
    outs = []
    for k, subjects in enumerate((range(0, 2193, 60), range(7, 2193, 55))):
        rm.subset(subjects=subjects, items=range(80)).write(tmp_path / f"mine{k}.csv")
        assert main(["build-bank", str(tmp_path / f"mine{k}.csv"), "-o", str(bank), "--name",
                     "mybench", "--budget", "20", "--chance", "0.25", "-q"]) == 0
        out = tmp_path / f"run{k}"
        assert main(["evaluate", "--bank", str(bank), "--subject",
                     f"replay:arc#{rm.subject_ids[900 + k]}", "-o", str(out), "-q"]) == 0
        outs.append(str(out))
    capsys.readouterr()
    assert main(["compare-models", *outs]) == 2
    err = capsys.readouterr().err.strip()
    assert "changed in between" in err and "\n" not in err, err


def test_a_run_whose_folder_moved_is_pointed_at_its_new_place(tmp_path, capsys):
    """Run A on a folder, the folder moved, run B on its new place: the two shared no
    benchmark (A's known only by the old folder's name); the line now says why and how to fix
    it, and the fix it gives works."""
    import atlascat as at

    rm = at.catalogue.load_responses("arc")
    rm.subset(subjects=range(0, 2193, 60), items=range(80)).write(tmp_path / "mine.csv")
    assert main(["build-bank", str(tmp_path / "mine.csv"), "-o", str(tmp_path / "bank"),
                 "--name", "mybench", "--budget", "20", "--chance", "0.25", "-q"]) == 0
    out_a, out_b = tmp_path / "a", tmp_path / "b"
    assert main(["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
                 f"replay:arc#{rm.subject_ids[5]}", "-o", str(out_a), "-q"]) == 0
    (tmp_path / "bank").rename(tmp_path / "moved")
    assert main(["evaluate", "--bank", str(tmp_path / "moved"), "--subject",
                 f"replay:arc#{rm.subject_ids[900]}", "-o", str(out_b), "-q"]) == 0
    run_a = json.loads((out_a / "results.json").read_text())[0]["run_id"]
    capsys.readouterr()
    assert main(["compare-models", str(out_b), str(out_a)]) == 2
    err = capsys.readouterr().err.strip()
    assert "no longer exists" in err and f"--resume {run_a}" in err and "\n" not in err, err
    assert f"--db {out_a / 'runs.sqlite'}" in err, err
    from atlascat.errors import MovedBankError
    from atlascat.live.compare import compare_runs

    with pytest.raises(MovedBankError) as info:     # the library names no command
        compare_runs(out_b, out_a)
    assert info.value.run_id == run_a and "atlas" not in str(info.value)
    assert main(["evaluate", "--resume", run_a, "--bank", str(tmp_path / "moved"), "--db",
                 str(out_a / "runs.sqlite"), "-q"]) == 0
    capsys.readouterr()
    assert main(["compare-models", str(out_b), str(out_a), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["benchmark"] == "mybench"
