"""A replayed run's page shows the recorded scores, not the log-likelihoods and the "chosen"
option the replay subject makes up so that the leaderboard's rule scores them as recorded."""
from __future__ import annotations

import json

from atlascat.cli import main


def test_a_replayed_runs_page_invents_no_answer(tmp_path, capsys):
    model = "Kukedlc/SuperMente-7B-v4"
    code = main(["evaluate", "--bank", "arc", "--subject", f"replay:arc#{model}", "--se-stop",
                 "0.3", "-o", str(tmp_path / "run"), "--json"])
    assert code == 0
    res = json.loads(capsys.readouterr().out)[0]
    page = (tmp_path / "run" / "reports" / f"{res['run_id']}.html").read_text()
    assert "log-likelihoods (" not in page and "-1000.000" not in page and "chose " not in page
    assert page.count("recorded score, replayed (the matrix holds scores, not the model&#x27;s "
                      "text)") == res["n_items"]
    # a live model's page keeps its options and log-likelihoods
    code = main(["evaluate", "--bank", "arc", "--subject", "simulate:0.5", "--se-stop", "0.3",
                 "-o", str(tmp_path / "sim"), "--json"])
    assert code == 0 and "recorded score" not in (tmp_path / "sim" / "reports").joinpath(
        json.loads(capsys.readouterr().out)[0]["run_id"] + ".html").read_text()


def test_a_replay_with_no_answer_to_the_bank_leaves_nothing_behind(tmp_path, capsys):
    """A matrix that does not belong to the bank is one line before the run exists: no
    folder, no store, no run in the `error` state."""
    (tmp_path / "other.csv").write_text("model,q1,q2\nm,1,0\nn,0,1\n")
    out = tmp_path / "run"
    code = main(["evaluate", "--bank", "arc", "--subject", f"replay:{tmp_path / 'other.csv'}#m",
                 "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "has no recorded answer to any of the bank's" in err, err
    assert not out.exists()
