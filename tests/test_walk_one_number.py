"""One number everywhere, walked across every kind of run (a shipped bank, bank folders from
0/1, continuous and 0-100 scores by either design, a graded bank, a suite, ``atlas simulate``
beside a live run): each test is a defect the walk found, where one surface gave another
number, unit or name than the others (the walks already kept: test_one_number_everywhere.py,
test_simulate_equals_evaluate.py)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main

SUITE = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")


# ------------------------------------------------------------------ a suite: simulate vs live
@pytest.fixture(scope="module")
def suite_answers(tmp_path_factory):
    """Each member's recorded answers of two leaderboard models, one file per member: the
    first model answered every member, the second has no HellaSwag or GSM8K answers (its rows
    are left out of those files)."""
    from atlascat.catalogue import load_responses

    root = tmp_path_factory.mktemp("suite_answers")
    mats = {b: load_responses(b) for b in SUITE}
    ids = [{str(s) for s in m.subject_ids} for m in mats.values()]
    full = sorted(set.intersection(*ids))[5]
    gaps = sorted(ids[0] & ids[2] & ids[3] & ids[4] - ids[1] - ids[5])[0]
    for b, m in mats.items():
        keep = [full] if b in ("hellaswag", "gsm8k") else [full, gaps]
        m.subset(subjects=np.isin(m.subject_ids.astype(str), keep)).write(root / f"{b}.csv")
    return root, [full, gaps]


def test_a_suite_model_is_asked_what_simulate_asks_it_among_others(suite_answers, tmp_path,
                                                                   capsys):
    """``atlas simulate --suite`` of two models and a live ``replay:`` of each with the same
    seed: the same items per member and the same predicted average with its interval. The
    suite replay drew every model's randomesque picks from one generator (a model's items
    hung on who else was in the file: 65.5% alone, 66.5% beside another model), and a live
    run learnt a member's blanks only as it picked them (the other items in the round, another
    average: 59.4% live, 58.8% simulated)."""
    root, models = suite_answers
    pairs = [f"{b}={root / f'{b}.csv'}" for b in SUITE]
    opts = ["--max-items", "18", "--min-items", "18", "--seed", "4", "-q"]
    assert main(["simulate", "--suite", "openllm-v1", *pairs, *opts, "-o",
                 str(tmp_path / "sim")]) == 0
    sim = pd.read_csv(tmp_path / "sim" / "suite_scores.csv").set_index("subject_id")
    spec = ",".join(pairs)
    for model in models:
        out = tmp_path / f"live{models.index(model)}"
        assert main(["evaluate", "--suite", "openllm-v1", "--subject", f"replay:{spec}#{model}",
                     *opts, "-o", str(out)]) == 0
        row = json.loads((out / "results.json").read_text())[0]
        assert [b["items"] for b in row["benchmarks"]] == \
            [int(sim.loc[model, f"{b}_items"]) for b in SUITE], model
        np.testing.assert_allclose(
            [row["average"][k] for k in ("score", "lo", "hi")],
            sim.loc[model, ["average", "average_lo", "average_hi"]].to_numpy(float),
            rtol=1e-9, err_msg=model)
