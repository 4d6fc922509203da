"""The adaptive test of a bank folder of continuous scores (LongBench QMSum's ROUGE in [0, 1])
with simulated models: ``atlas simulate --bank DIR --thetas FILE`` and ``simulate:THETA`` with
``--design adaptive`` drew each answer as a 0/1 coin (the folder's bank, scored by the
Bernoulli likelihood, carries no dispersion), so a simulated model scored 0 or 100 on every
item. They draw scores now, Beta draws of mean P(theta) with each item's dispersion as the
folder's predictor draws them (:func:`atlascat.bankdir.adaptive.answering_bank`), in the
library's ``simulate_cat``, the live subject and a resumed run alike."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main


@pytest.fixture(scope="module")
def qmsum(tmp_path_factory, shared_data):
    """QMSum's ROUGE of 30 source models built into a folder (``bank``, 200 items: it has a
    predictor) and into one of 40 items (``small``: none)."""
    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    idx = np.random.default_rng(0).permutation(len(df))
    root = tmp_path_factory.mktemp("qmsum")
    df.iloc[idx[:30]].to_csv(root / "source.csv")
    df.iloc[idx[:30], :40].to_csv(root / "small.csv")
    for name in ("source", "small"):
        out = root / ("bank" if name == "source" else name)
        assert main(["build-bank", str(root / f"{name}.csv"), "--name", "qmsum", "-q",
                     "-o", str(out)]) == 0
    thetas = np.linspace(-2, 2, 40)
    pd.DataFrame({"subject_id": [f"m{i}" for i in range(40)], "theta": thetas}) \
        .to_csv(root / "thetas.csv", index=False)
    return root, thetas


def _continuous(scores) -> float:
    s = np.asarray(scores, float)
    return float(((s > 0) & (s < 1)).mean())


def test_simulate_thetas_draws_scores_on_a_continuous_folder(qmsum, tmp_path):
    """`atlas simulate --bank DIR --thetas FILE`: the answers are scores in (0, 1), not 0/1,
    and the thetas follow the true ones (correlation 0.70 with coins, 0.98 with scores)."""
    root, thetas = qmsum
    assert main(["simulate", "--bank", str(root / "bank"), "--thetas", str(root / "thetas.csv"),
                 "--seed", "1", "-q", "-o", str(tmp_path / "sim")]) == 0
    asked = pd.read_csv(tmp_path / "sim" / "selected_items.csv")
    assert _continuous(asked["score"]) > 0.9
    persons = pd.read_csv(tmp_path / "sim" / "person_scores.csv", index_col="subject_id")
    est = persons.loc[[f"m{i}" for i in range(40)], "theta"].to_numpy()
    assert np.corrcoef(est, thetas)[0, 1] > 0.95


def test_the_library_draws_the_same_scores(qmsum):
    """simulate_adaptive(DIR, thetas=...) is the command's test; simulate_cat takes the
    answers' dispersion apart from the bank it scores (which keeps none), and refuses it for
    recorded answers."""
    from atlascat.bankdir import load_bank_dir, simulate_adaptive
    from atlascat.bankdir.adaptive import answering_bank
    from atlascat.cat.simulate import simulate_cat
    from atlascat.errors import ConfigError
    from atlascat.irt.dispersion import bank_dispersion

    root, thetas = qmsum
    folder = load_bank_dir(root / "bank")
    assert bank_dispersion(folder.bank) is None               # scored by the Bernoulli
    phi = bank_dispersion(answering_bank(folder))
    assert phi is not None and (phi < 1).mean() > 0.9
    res = simulate_adaptive(folder, thetas=thetas[:5], subject_ids=list("abcde"), seed=2)
    assert _continuous(res.administered["score"]) > 0.9
    coins = simulate_cat(folder.bank, thetas=thetas[:5], rng=2)
    assert _continuous(coins.administered["score"]) == 0.0     # the bank alone: coins
    with pytest.raises(ConfigError, match="dispersion is of the answers drawn at thetas="):
        simulate_cat(folder.bank, responses=np.zeros((1, len(folder.bank))), dispersion=phi)


def test_a_folder_without_predictor_draws_with_its_source_dispersions(qmsum):
    """40 items (no predictor): the dispersions come from the source answers it keeps."""
    from atlascat.bankdir import load_bank_dir
    from atlascat.bankdir.adaptive import answering_bank
    from atlascat.bankdir.predict import load_predictor
    from atlascat.irt.dispersion import bank_dispersion

    root, _ = qmsum
    small = load_bank_dir(root / "small")
    assert load_predictor(small) is None
    phi = bank_dispersion(answering_bank(small))
    assert phi is not None and len(phi) == len(small.bank) and (phi < 1).mean() > 0.9


def test_a_live_simulated_model_answers_scores_in_the_adaptive_design(qmsum, tmp_path):
    """`atlas evaluate --bank DIR --subject simulate:0.5 --design adaptive`: each reply is a
    score, their mean near the model's expected score."""
    from atlascat.bankdir import load_bank_dir

    root, _ = qmsum
    out = tmp_path / "live"
    assert main(["evaluate", "--bank", str(root / "bank"), "--subject", "simulate:0.5",
                 "--design", "adaptive", "-q", "-o", str(out)]) == 0
    row = json.loads((out / "results.json").read_text())[0]
    assert _continuous(row["scores"]) > 0.9
    bank = load_bank_dir(root / "bank").bank
    p = dict(zip(map(str, bank.item_ids), np.asarray(bank.probability(0.5)).reshape(-1)))
    expected = np.mean([p[str(i)] for i in row["items"]])
    assert abs(np.mean(row["scores"]) - expected) < 0.08


def test_a_stopped_simulated_run_resumes_to_the_same_scores(qmsum, tmp_path):
    """A run of simulate: stopped half-way resumes with its subject rebuilt from the store
    (the folder's dispersions again): the same items, scores and theta as one run through."""
    from atlascat.catalogue import BankRef
    from atlascat.errors import RunStoppedError
    from atlascat.live.service import LiveRun, resume
    from atlascat.live.store import RunStore
    from atlascat.live.subjects import SubjectError, SubjectSpec

    root, _ = qmsum
    ref = BankRef.from_option(str(root / "bank"))
    spec = SubjectSpec.parse("simulate:0.3:4")

    class Flaky:
        def __init__(self, inner):
            self.inner, self.calls = inner, 0

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def score_items(self, item_ids):
            self.calls += 1
            if self.calls == 9:
                raise SubjectError("the scorer died")
            return self.inner.score_items(item_ids)

    def start_run(db, subject, **kw):   # the store it opens closed after it
        with LiveRun.start(str(db), ref, [subject], seed=3, design="adaptive") as live:
            return live.run(**kw)

    whole = start_run(tmp_path / "whole.sqlite",
                      spec.build(ref.load(), folder=ref.folder()))[0]
    with pytest.raises(RunStoppedError) as stop:
        start_run(tmp_path / "part.sqlite",
                  Flaky(spec.build(ref.load(), folder=ref.folder())), raise_errors=True)
    assert 0 < RunStore(str(tmp_path / "part.sqlite")).get_run(stop.value.run_id)["n_items"] \
        < len(whole.items)
    done = resume(str(tmp_path / "part.sqlite"), stop.value.run_id)
    assert done.items == whole.items
    assert done.theta == pytest.approx(whole.theta, abs=1e-12)
