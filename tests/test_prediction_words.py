"""What a predicted score is of is decided once (``BankRef.prediction_words``) and read by
every output: a live run's prediction (``predict_score``), its title (``score_title``: the
headline, ``atlas design``), ``atlas simulate``'s summary (``prediction_words`` /
``prediction_summary``) and ``atlas info``. Every kind of bank: a shipped one, a bank file
naming a shipped benchmark, a plain bank file, a bank folder (a plain and a --score-range
one)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.bankdir.adaptive import prediction_words
from atlascat.catalogue.bankref import BankRef
from atlascat.cli import main
from atlascat.live.service import predict_score, score_title
from atlascat.scorelink.frames import prediction_summary


@pytest.fixture(scope="module")
def banks(tmp_path_factory, shared_data):
    """{kind: bank option}: shipped arc, a bank file naming arc, a plain bank file, a bank
    folder from 30 models' QMSum ROUGE-L and one on a 0-100 scale (``--score-range``)."""
    root = tmp_path_factory.mktemp("words")
    full = BankRef.from_option("arc").load().to_frame()   # the shipped bank's items
    full[["item_id", "a", "b", "c", "u", "benchmark"]].to_csv(root / "named.csv", index=False)
    full[["item_id", "a", "b", "c", "u"]].to_csv(root / "mine.csv", index=False)
    named_path, plain = root / "named.csv", root / "mine.csv"
    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    df = df.iloc[np.random.default_rng(0).permutation(len(df))[:30]]
    df.to_csv(root / "qmsum.csv")
    (df * 100).to_csv(root / "qmsum100.csv")
    assert main(["build-bank", str(root / "qmsum.csv"), "-o", str(root / "folder"), "-q"]) == 0
    assert main(["build-bank", str(root / "qmsum100.csv"), "-o", str(root / "folder100"),
                 "--score-range", "0", "100", "--name", "qmsum-100", "-q"]) == 0
    return {"shipped": "arc", "named file": str(named_path), "plain file": str(plain),
            "folder": str(root / "folder"), "folder100": str(root / "folder100")}


EXPECTED = {"shipped": ("arc", "leaderboard", "predicted leaderboard score"),
            "named file": ("arc", "leaderboard", "predicted leaderboard score"),
            "plain file": ("mine", None, "predicted mine score"),
            "folder": ("qmsum", "source models", "predicted qmsum score"),
            "folder100": ("qmsum-100", "source models", "predicted qmsum-100 score")}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_every_output_reads_one_decision(banks, kind, tmp_path, capsys):
    ref = BankRef.from_option(banks[kind], option="bank")
    words = ref.prediction_words()
    bench, population, title = EXPECTED[kind]
    assert (words["benchmark"], words["population"]) == (bench, population)
    assert score_title(ref) == title
    # a live run's prediction carries the same words (a note where there is no link)
    pred = predict_score(ref, 0.0, 0.3)
    assert {k: pred[k] for k in words} == words
    # atlas simulate's summary: the same words where there is a predicted score
    sim = prediction_words(banks[kind])
    if kind == "plain file":
        assert sim is None and "note" in pred
        return
    assert sim == words
    _, name = prediction_summary(sim, {"score": [0.5], "score_lo": [0.4], "score_hi": [0.6]})
    assert name == f"{title}, mean over models"
    if ref.kind == "dir":   # a folder's metric and scale as atlas info shows them
        assert "leaderboard" not in json.dumps(words)
        assert ("scale" in words) == (kind == "folder100")
        assert main(["info", banks[kind], "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        assert {k: info[k] for k in words} == words


def test_an_unreadable_folder_keeps_its_name(banks, tmp_path):
    """A run's folder deleted since: its prediction is still named after the folder."""
    import shutil

    gone = tmp_path / "gone"
    shutil.copytree(banks["folder"], gone)
    ref = BankRef.from_option(str(gone), option="bank")
    shutil.rmtree(gone)
    assert ref.prediction_words() == {"benchmark": "gone", "population": "source models"}
