"""One number everywhere (issue 19, item 3): the predicted leaderboard score, its interval,
percentile and warning read the same in the CLI output, results.json, the HTML report and
``atlas runs`` (table and JSON)."""
from __future__ import annotations

import html
import json

import pytest

from atlascat.cli import main
from atlascat.live.report import describe_prediction


@pytest.mark.parametrize("theta", ["-3", "0.5"])
def test_cli_json_html_and_runs_agree(tmp_path, capsys, theta):
    out = tmp_path / "run"
    code = main(["evaluate", "--bank", "arc", "--subject", f"simulate:{theta}:3", "--se-stop",
                 "0.2", "-o", str(out)])
    captured = capsys.readouterr()
    cli, err = captured.out, captured.err  # warnings go to stderr
    assert code == 0
    row = json.loads((out / "results.json").read_text())[0]
    lb = row["prediction"]
    assert lb["score"] is not None and lb["lo"] <= lb["score"] <= lb["hi"]
    text = describe_prediction(lb)
    assert f"predicted leaderboard score: {text}" in cli
    page = html.unescape((out / "reports" / f"{row['run_id']}.html").read_text())
    assert text in page
    if lb["warning"]:
        assert f"warning: {lb['warning']}" in err and lb["warning"] in page
    assert (theta == "-3") == bool(lb["warning"])  # at chance: warned; mid-range: not

    code = main(["runs", "--db", str(out / "runs.sqlite"), "--json"])
    listed = json.loads(capsys.readouterr().out)
    assert code == 0 and len(listed) == 1
    got = listed[0]["prediction"]
    for key in ("score", "lo", "hi", "percentile", "warning", "flag"):
        assert got[key] == lb[key], key
    code = main(["runs", "--db", str(out / "runs.sqlite")])
    table = capsys.readouterr().out
    assert code == 0 and describe_prediction(lb, short=True) in table


def test_describe_prediction_forms():
    lb = {"score": 0.719, "lo": 0.685, "hi": 0.753, "percentile": 88.0}
    assert describe_prediction(lb) == ("71.9% (95% interval 68.5-75.3%), 88th percentile of "
                                       "the leaderboard's models")
    assert describe_prediction(lb, short=True) == "71.9% (68.5-75.3)"
    assert describe_prediction({"note": "no link"}) == "not available (no link)"
    assert describe_prediction({"score": 0.5, "percentile": 21.0}).endswith("21st percentile "
                                                                            "of the leaderboard's "
                                                                            "models")
