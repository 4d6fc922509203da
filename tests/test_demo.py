"""``python -m atlascat.demo``: the whole pipeline on the bundled ARC matrix (a model subsample
here to keep the suite fast; ``make demo`` runs all 2193 models)."""
from __future__ import annotations

import json
import re

from atlascat import demo


def test_demo_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "demo"
    assert demo.main(["--out", str(out), "--models", "400", "--fit-partition-size", "40"]) == 0
    text = capsys.readouterr().out
    # fit summary, the three tables, one line per CAT setting, and the report path
    meta = json.loads((out / "run" / "run.json").read_text())
    rows = meta["calibration"]["model_selection"]["candidates"]
    best = min(rows, key=lambda r: r["bic"])["model"]
    assert meta["calibration"]["model"] == best  # the model is the smallest-BIC candidate
    assert f"calibration: {best} MML-EM" in text and "RMSEA" in text
    assert f"-> {best}" in text and "CAT SE factor k on" in text
    for title in ("Table 2. Ability", "Table 3. Accuracy", "Table 6. Security"):
        assert title in text
    assert len(re.findall(r"^ATLAS tau=0\.[123]: theta MAE", text, flags=re.M)) == 3
    assert re.search(r"^\| ATLAS tau=0\.2 +\| +\d+\.\d \| 0\.\d{3} ± 0\.\d{3} \|", text, flags=re.M)
    report = out / "report.html"
    assert f"report: {report.resolve()}" in text
    assert report.stat().st_size > 100_000
    meta = json.loads((out / "run" / "run.json").read_text())
    assert meta["n_models"] == 400 and meta["n_test"] == 40
    assert meta["fit"]["n_partitions"] >= 2
