"""`atlas runs --run` of a suite run reads its steps as the run's page does: the predicted
average and its SE in percent, not as a theta and its SE (what the store's columns are named)."""
from __future__ import annotations

import json

from atlascat.cli import main
from atlascat.live.store import RunStore


def test_a_suite_runs_steps_show_the_average_in_percent(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["evaluate", "--suite", "openllm-v1", "--subject", "simulate:0.5",
                 "--max-items", "36", "-o", str(out), "--json"]) == 0
    rid = json.loads(capsys.readouterr().out)[0]["run_id"]
    assert main(["runs", "--run", rid, "--db", str(out / "runs.sqlite")]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines[1].split()
    assert "theta" not in head and "average" in head and "(points)" in head
    first = RunStore(out / "runs.sqlite").steps(rid).iloc[0]
    want = f"{100 * first['theta']:.1f}", f"{100 * first['se']:.2f}"   # as the step lines
    assert lines[2].split()[4:6] == list(want)
    page = (out / "reports" / f"{rid}.html").read_text()
    assert f"<td class='num'>{want[0]}</td><td class='num'>{want[1]}</td>" in page
