"""A mirt user's walk through atlas: what differed from mirt 1.45.1 and is fixed here.

References: tests/data/mirt_walk/, made by its make_reference.R (mirt's LSAT7 and Science)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import atlascat as at

DATA = Path(__file__).parent / "data" / "mirt_walk"


@pytest.fixture(scope="module")
def lsat7():
    return at.ResponseMatrix.read(DATA / "lsat7_patterns.csv", freq_column="freq")


def test_anova_of_a_fit_with_priors_is_mirts_logpost_and_df_without_a_test(lsat7):
    """mirt's anova(rasch, 2PL with an lnorm(0, 1) prior on a1): a posterior mode is no
    maximum-likelihood fit, so mirt gives logPost (log-likelihood + log prior) and df, no X2 or
    p; atlas gave X2 12.08, p 0.017 (a warning aside) and no logPost."""
    ref = pd.read_csv(DATA / "anova_prior.csv").set_index("model")
    rasch = at.calibrate(lsat7, "rasch", tol=1e-6)
    twopl = at.calibrate(lsat7, "2pl", prior_a="lognorm(0,1)", tol=1e-6)
    table = at.anova(rasch, twopl)
    assert list(table.columns) == list(ref.columns)           # AIC SABIC HQ BIC logLik logPost df
    np.testing.assert_allclose(table.to_numpy(float), ref.to_numpy(float), atol=2e-4)
    assert np.isnan(table.loc["rasch", "df"]) and table.loc["2pl", "df"] == 4
    ml = at.anova(rasch, at.calibrate(lsat7, "2pl", prior_a=None, tol=1e-6))
    assert "logPost" not in ml.columns and ml.loc["2pl", "X2"] == pytest.approx(12.1916, abs=1e-3)
