"""Scores and information against mirt 1.45.1 on its own parameters
(tests/data/mirt_scores/make_reference.R): ``fscores(mod, method, full.scores.SE = TRUE)`` for
EAP, MAP, ML and WLE, ``iteminfo`` and ``testinfo``, for the 2PL and 3PL (LSAT7) and the graded
and GPCM models (Science). What differs on purpose for right/wrong items (docs/scoring.md) is
checked as such: ATLAS's SEs are catR's expected-information ones, 1 / sqrt(I (+ 1 / sigma^2)),
mirt's the observed curvature of its objective (equal for the 2PL's ML and MAP); ATLAS's WLE is
Warm's root of S + J / (2 I), mirt's the maximum of log L + log(I) / 2 (the same for the 2PL,
not for the 3PL)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat import estimate_ability
from atlascat.irt.bank import ItemBank
from atlascat.irt.polybank import PolyBank

DATA = Path(__file__).parent / "data" / "mirt_scores"
FITS = [("lsat7_2pl", False), ("lsat7_3pl", False), ("science_graded", True),
        ("science_gpcm", True)]


def _load(name, ordinal):
    if ordinal:
        return (pd.read_csv(DATA / "science.csv", index_col=0),
                PolyBank.read(DATA / f"{name}_items.csv"))
    pats = pd.read_csv(DATA / "lsat7.csv").drop(columns="freq")
    pats.index = [f"p{i}" for i in range(len(pats))]
    return pats, ItemBank.read(DATA / f"{name}_items.csv")


@pytest.mark.parametrize("name,ordinal", FITS)
def test_item_and_test_information_are_mirts(name, ordinal):
    ref = pd.read_csv(DATA / f"{name}_info.csv")
    _, bank = _load(name, ordinal)
    theta = ref["theta"].to_numpy()
    info = np.asarray(bank.information(theta))
    want = ref[[str(i) for i in bank.item_ids]].to_numpy()
    np.testing.assert_allclose(info if info.shape == want.shape else info.T, want, rtol=1e-10)
    np.testing.assert_allclose(bank.test_information(theta), ref["test"], rtol=1e-10)


@pytest.mark.parametrize("name,ordinal", FITS)
@pytest.mark.parametrize("method", ["EAP", "MAP", "ML", "WLE"])
def test_scores_are_mirts_fscores(name, ordinal, method):
    ref = pd.read_csv(DATA / f"{name}_scores.csv")
    responses, bank = _load(name, ordinal)
    got = estimate_ability(responses, bank, method.lower())
    want_t, want_se = ref[f"{method}_theta"].to_numpy(), ref[f"{method}_se"].to_numpy()
    theta, se = got["theta"].to_numpy(), got["se"].to_numpy()
    np.testing.assert_array_equal(np.isinf(theta), np.isinf(want_t))   # ML's +-inf patterns
    ok = np.isfinite(want_t) & np.isfinite(theta)
    fin = ok & np.isfinite(want_se)
    if name == "lsat7_3pl" and method == "WLE":   # Warm's J is not d log I / d theta here
        assert 0.01 < np.max(np.abs(theta[ok] - want_t[ok])) < 0.2
    else:   # mirt's fscores optimizers stop at ~1e-6 in theta
        np.testing.assert_allclose(theta[ok], want_t[ok], atol=1e-5)
    if ordinal or method == "EAP" or (name == "lsat7_2pl" and method != "WLE"):
        np.testing.assert_allclose(se[fin], want_se[fin], rtol=2e-3, atol=5e-4)
        return
    # right/wrong items, on purpose: catR's expected-information SE, not mirt's curvature
    prior = 1.0 if method == "MAP" else 0.0
    np.testing.assert_allclose(se[ok], 1.0 / np.sqrt(bank.test_information(theta[ok]) + prior),
                               rtol=1e-8)
    assert np.max(np.abs(se[fin] - want_se[fin]) / want_se[fin]) > 0.01
