"""The judge-ratings / continuous-metric path walked as a new user meets it: a 1-10 judge's
ratings of prompts (graded, GPCM; a 0-3 rubric) and a metric on another scale (BLEU 0-100),
from the matrix to `atlas score`, `simulate` and a live run. Each test is a defect the walk
found, checked through the library (the CLI only displays what it returns)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.bankdir import build_bank, predict_scores, replay_predictor


def bleu_matrix(n_models: int, n_items: int = 60, seed: int = 0) -> pd.DataFrame:
    """BLEU 0-100 per sentence (one decimal), Beta draws around a 2PL mean."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    b, a = rng.normal(size=n_items), rng.lognormal(0, 0.3, n_items)
    p = 1 / (1 + np.exp(-(a * (theta[:, None] - b))))
    y = rng.beta(p * 8 + 0.01, (1 - p) * 8 + 0.01)
    return pd.DataFrame(np.round(100 * y, 1), index=[f"mt-{i}" for i in range(n_models)],
                        columns=[f"sent-{k}" for k in range(n_items)]).rename_axis("model")


@pytest.fixture(scope="module")
def bleu(tmp_path_factory):
    """A BLEU folder (--score-range 0 100) from 30 source models, and 4 new models."""
    root = tmp_path_factory.mktemp("bleu")
    df = bleu_matrix(34)
    df.iloc[:30].to_csv(root / "source.csv")
    df.iloc[30:].to_csv(root / "new.csv")
    folder = build_bank(str(root / "source.csv"), str(root / "bank"), name="BLEU-MT",
                        score_range=(0, 100), seed=0)
    return folder, df.iloc[30:]


def test_score_of_a_model_that_answered_every_item_is_its_mean(bleu):
    """`atlas score NEW --bank DIR` of a model that answered every item of a folder whose
    score is the mean over its items: the score is that mean, known (no interval width), as
    `atlas simulate --max-items ALL` gives it; it was the link's regression on theta (BLEU
    8.1 read as 12.8, 95% interval 0-16.7)."""
    folder, new = bleu
    ids = [str(i) for i in folder.bank.item_ids]
    rows = [(s, i, new.loc[s, i] / 100) for s in new.index for i in ids]
    administered = pd.DataFrame(rows, columns=["subject_id", "item_id", "score"])
    persons = pd.DataFrame({"subject_id": list(new.index), "theta": 0.0, "se": 0.5})
    pred = predict_scores(folder, persons, administered)
    truth = new[ids].mean(axis=1).to_numpy()
    np.testing.assert_allclose(pred["score"], truth, atol=1e-9)
    np.testing.assert_allclose(pred["score_lo"], truth, atol=1e-9)
    np.testing.assert_allclose(pred["score_hi"], truth, atol=1e-9)
    full = replay_predictor(folder, new[ids] / 100, budget=len(ids), seed=0)
    np.testing.assert_allclose(pred["score"], full["score"], atol=1e-6)
    np.testing.assert_allclose(pred["percentile"], full["percentile"], atol=1e-6)
    # one item short: still the link's prediction with its interval
    short = administered[administered["item_id"] != ids[0]]
    part = predict_scores(folder, persons, short)
    assert (part["score_hi"] - part["score_lo"]).min() > 0
