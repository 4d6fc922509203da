"""``--subject simulate:THETA`` on a bank folder built from lm-evaluation-harness sample logs
scored by a continuous metric (f1 generations), which keeps the items' requests: the live
simulated model answered each item's prompt right or wrong (0/1; on f1 generations a text
prompt was even refused, "no scorer for a text answer"), while ``atlas simulate --thetas``
draws scores in [0, 1] with the folder's dispersions
(:func:`atlascat.bankdir.adaptive.answering_bank`). It is asked by item id now and draws
those scores, as on a folder without requests."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from lmeval_logs import f1_logs


@pytest.fixture(scope="module")
def f1_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("f1_logs")
    f1_logs(root / "logs")
    assert main(["build-bank", str(root / "logs"), "-o", str(root / "bank"), "-q"]) == 0
    return root


def _continuous(scores) -> float:
    s = np.asarray(scores, float)
    return float(((s > 0) & (s < 1)).mean())


def test_live_simulate_on_a_logs_folder_draws_the_scores_simulate_draws(f1_folder, tmp_path):
    """The live run's scores are the draws of ``atlas simulate --thetas`` (the same
    dispersions, at the subject's per-item uniforms), and the live run asks the same items and
    predicts the same score as ``atlas simulate`` on those draws with the same seed."""
    from atlascat.bankdir import load_bank_dir
    from atlascat.bankdir.adaptive import answering_bank
    from atlascat.irt.dispersion import bank_dispersion, draw_scores
    from atlascat.live.subjects import has_requests, item_uniform

    folder = load_bank_dir(f1_folder / "bank")
    assert has_requests(folder.bank) and folder.extra("predictor.json") is None
    live = tmp_path / "live"
    assert main(["evaluate", "--bank", str(f1_folder / "bank"), "--subject", "simulate:0.5:3",
                 "--llm", "sim", "--seed", "7", "-q", "-o", str(live)]) == 0
    row = json.loads((live / "results.json").read_text())[0]
    assert row["status"] == "done" and _continuous(row["scores"]) > 0.9   # not 0/1

    # the draw simulate --thetas makes: mean P_j(theta), the answering bank's dispersion
    bank = answering_bank(folder)
    phi = bank_dispersion(bank)
    p = np.asarray(bank.probability(0.5)).reshape(-1)
    draws = draw_scores(p, phi, np.array([item_uniform(3, i) for i in bank.item_ids]))
    drawn = dict(zip(map(str, bank.item_ids), (float(f"{y:.12g}") for y in draws)))
    assert row["scores"] == [drawn[str(i)] for i in row["items"]]

    # atlas simulate replaying those draws (every item) asks what the live run asked
    pd.DataFrame([drawn], index=pd.Index(["sim"], name="model")).to_csv(tmp_path / "sim.csv")
    assert main(["simulate", str(tmp_path / "sim.csv"), "--bank", str(f1_folder / "bank"),
                 "--seed", "7", "-q", "-o", str(tmp_path / "sim")]) == 0
    asked = pd.read_csv(tmp_path / "sim" / "selected_items.csv", dtype={"item_id": str})
    assert asked.sort_values("order")["item_id"].tolist() == [str(i) for i in row["items"]]
    persons = pd.read_csv(tmp_path / "sim" / "person_scores.csv").iloc[0]
    assert row["theta"] == pytest.approx(persons["theta"], abs=1e-9)
    pred = row["prediction"]
    assert (pred["score"], pred["lo"], pred["hi"]) == pytest.approx(
        (persons["score"], persons["score_lo"], persons["score_hi"]), abs=1e-9)

    # and simulate --thetas on the folder draws scores too
    pd.DataFrame({"subject_id": ["a", "b"], "theta": [0.5, -0.5]}).to_csv(tmp_path / "t.csv",
                                                                          index=False)
    assert main(["simulate", "--bank", str(f1_folder / "bank"), "--thetas",
                 str(tmp_path / "t.csv"), "--seed", "7", "-q", "-o", str(tmp_path / "th")]) == 0
    assert _continuous(pd.read_csv(tmp_path / "th" / "selected_items.csv")["score"]) > 0.9


def test_the_library_subject_and_a_resumed_run_draw_the_same(f1_folder):
    """``SubjectSpec.build`` with the folder (what ``atlas evaluate`` passes, and a resumed run
    rebuilds) gives the by-id subject of scores; a logs folder of 0/1 scores keeps asking
    prompts."""
    from atlascat.catalogue import BankRef
    from atlascat.live.subjects import SimulatedScores, SubjectSpec

    ref = BankRef.from_option(str(f1_folder / "bank"))
    subject = SubjectSpec.parse("simulate:0.5:3").build(ref.load(), folder=ref.folder())
    assert isinstance(subject, SimulatedScores) and subject.kind == "item"
    again = SubjectSpec.rebuild(subject.describe(), ref.load(), folder=ref.folder())
    ids = list(ref.load().item_ids[:10])
    assert again.score_items(ids) == subject.score_items(ids)
    assert _continuous([s for s, _ in subject.score_items(ids)]) > 0.5


def test_a_logs_folder_of_right_or_wrong_answers_keeps_its_prompts(tmp_path):
    """Exact-match generations (0/1): ``simulate:`` still answers the items' prompts."""
    from atlascat.catalogue import BankRef
    from atlascat.live.subjects import SimulatedScores, SimulatedSubject, SubjectSpec
    from lmeval_logs import generation_logs

    generation_logs(tmp_path / "logs", n_items=30)
    assert main(["build-bank", str(tmp_path / "logs"), "-o", str(tmp_path / "bank"), "-q"]) == 0
    ref = BankRef.from_option(str(tmp_path / "bank"))
    subject = SubjectSpec.parse("simulate:0.5").build(ref.load(), folder=ref.folder())
    assert isinstance(subject, SimulatedSubject) and not isinstance(subject, SimulatedScores)
