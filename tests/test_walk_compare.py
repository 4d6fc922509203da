"""Two checkpoints compared (`atlas compare-models`, :func:`atlascat.live.compare.compare_runs`):
the Python API gives what the command prints, in the benchmark's own words."""
from __future__ import annotations

import json

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
    from atlascat.live.compare import compare_runs

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
