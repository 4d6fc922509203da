"""The comparison and item fit of multiple-group graded and GPCM calibrations against mirt
1.45.1 (tests/data/mirt_groups/make_fit_reference_graded.R): ``atlas anova --model graded
--groups`` as ``anova(mirt(X, 1, itemtype), multipleGroup(...))`` and S-X2 within each group
(:func:`atlascat.irt.groupfit.sx2_groups` on an ordinal bank, ``atlas fit --groups``) as
``itemfit(multipleGroup(...))``."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cli_checks import one_line_error, run_cli

DATA = Path(__file__).parent / "data" / "mirt_groups"
RATINGS = DATA / "ordinal_responses.csv"
GROUPS = DATA / "ordinal_groups.csv"


@pytest.mark.parametrize("model", ["graded", "gpcm"])
def test_anova_of_the_stacked_and_the_grouped_ordinal_fit_is_mirts(tmp_path, model):
    out = tmp_path / "t.csv"
    assert run_cli(["anova", RATINGS, "--model", model, "--groups", GROUPS, "-o", out]) == 0
    ours = pd.read_csv(out, index_col=0)
    assert list(ours.index) == [model, f"{model}-groups"]
    ref = pd.read_csv(DATA / f"{model}_ord_anova.csv", index_col=0)   # mirt: stacked, groups
    for col in ("AIC", "SABIC", "HQ", "BIC", "logLik"):
        assert ours[col].to_numpy() == pytest.approx(ref[col].to_numpy(), abs=2e-3), col
    assert ours.iloc[1]["X2"] == pytest.approx(ref.iloc[1]["X2"], abs=2e-3)
    # mirt 1.45.1 prints df -1048573 (its saturated tables' df: one per group), p NaN; the
    # models differ by group B's mean and variance
    assert ours.iloc[1]["df"] == 2 and ours.iloc[1]["p"] < 1e-40


def test_anova_groups_refuses_the_pcm(capsys):
    one_line_error(capsys, ["anova", RATINGS, "--model", "pcm", "--model", "gpcm", "--groups",
                            GROUPS], "--groups", "--model pcm")
