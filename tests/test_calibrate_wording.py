"""What `atlas calibrate` prints reads as mirt's: the model as mirt's itemtype spells it, and
the shared parameter's SE named for the model fitted (a 1PL's common slope, a Rasch fit's
latent variance)."""
from __future__ import annotations

import pytest

from atlascat.cli import main


@pytest.fixture
def lsat7(shared_data):
    return str(shared_data / "classic" / "lsat7_patterns.csv")


def test_1pl_reports_its_common_slope_se(lsat7, tmp_path, capsys):
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--model", "1pl", "--se",
                 "-o", str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "items (1PL)" in out
    assert "common slope SE 0.0649 (a1_se)" in out     # sqrt(var) = 1.0108, SE(var) 0.1312
    assert "latent variance SE" not in out


def test_rasch_named_as_mirt_and_its_variance_se(lsat7, tmp_path, capsys):
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--model", "rasch", "--se",
                 "-o", str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "items (Rasch)" in out and "RASCH" not in out
    assert "latent variance SE 0.1312" in out           # mirt: COV_11 1.0219, SE 0.13126


def test_ordinal_fit_with_a_slope_prior_says_so(tmp_path, capsys):
    import numpy as np
    import pandas as pd

    from atlascat.irt import polytomous

    rng = np.random.default_rng(0)
    a = rng.lognormal(0.3, 0.3, 6)
    d = -np.sort(rng.normal(0, 1.0, (6, 3)), axis=1) * a[:, None]
    r = polytomous.sample("graded", np.column_stack([a, d]), rng.normal(size=300), rng) + 1
    path = tmp_path / "r.csv"
    pd.DataFrame(r, columns=[f"p{j}" for j in range(6)]).rename_axis("model").to_csv(path)
    assert main(["calibrate", str(path), "--model", "graded", "--prior-a", "lognorm(0,0.5)",
                 "-o", str(tmp_path / "g.csv")]) == 0
    assert "prior a ~ lognorm(0,0.5) on every slope" in capsys.readouterr().out
    assert main(["calibrate", str(path), "--model", "graded", "-o",
                 str(tmp_path / "g.csv")]) == 0
    assert "prior a" not in capsys.readouterr().out


def test_anova_names_a_model_once():
    import pandas as pd

    import atlascat as at
    from atlascat.errors import ConfigError
    from atlascat.irt.compare import anova

    ratings = pd.read_csv(__import__("pathlib").Path(__file__).parent / "data" / "mirt_poly"
                          / "science.csv", index_col=0)
    g, p = at.calibrate(ratings, model="graded"), at.calibrate(ratings, model="gpcm")
    with pytest.raises(ConfigError, match=r"^graded is not nested in gpcm: "):
        anova(g, p)
    with pytest.raises(ConfigError, match=r"^A \(graded\) is not nested in B \(gpcm\): "):
        anova(g, p, names=["A", "B"])


def test_a_2pl_names_only_the_priors_it_has(lsat7, tmp_path, capsys):
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--model", "2pl",
                 "-o", str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "priors a ~ lognorm(0,1)" in out and "None" not in out


def test_priors_reason_lists_each_prior_given():
    from atlascat.irt.defaults import choose_defaults

    why = choose_defaults("4pl", "none", "none", n_subjects=2000, n_items=10,
                          prior_u="beta(10,2)").reason
    assert why.endswith("; priors u ~ beta(10,2)")


def test_anova_says_what_it_wrote(lsat7, tmp_path, capsys):
    out = tmp_path / "table.csv"
    assert main(["anova", lsat7, "--freq-column", "freq", "--model", "rasch", "--model", "2pl",
                 "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out and out.exists()


def test_identification_warning_names_the_cli_option_and_mirts_itemtype():
    import numpy as np

    from atlascat.irt.defaults import identification_problems

    y = (np.random.default_rng(0).random((40, 6)) < 0.6).astype(float)
    msgs = identification_problems(y, None, "4pl", None, None)
    assert any("or use model='auto' (CLI --model auto)" in m for m in msgs)
    assert any(m.startswith("a Rasch on 20 subjects")
               for m in identification_problems(y[:20], None, "rasch", None, None))


def test_items_at_a_bound_are_named(lsat7, tmp_path, capsys):
    """mirt's 3PL on LSAT7 leaves 4 items' g near 0 with logit SEs of 85-134 (unidentified);
    ATLAS's EM takes them to the bound c = expit(-15) and says so."""
    import warnings

    import atlascat as at
    from atlascat.irt.defaults import IdentificationWarning

    rm = at.ResponseMatrix.read(lsat7, freq_column="freq")
    with pytest.warns(IdentificationWarning, match=r"4 item\(s\) ended at a bound .*c -> 0: "
                                                   r"item1, item3, item4, item5"):
        res = at.calibrate(rm, "3pl", mirt_defaults=True)
    assert any("ended at a bound" in w for w in res.settings["defaults"]["warnings"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentificationWarning)
        at.calibrate(rm, "2pl", prior_a=None)
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--mirt-defaults",
                 "-o", str(tmp_path / "b.csv")]) == 0
    assert "4 item(s) ended at a bound" in capsys.readouterr().err


def test_mirt_defaults_says_mirts_own_default_is_the_2pl(lsat7, tmp_path, capsys):
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--mirt-defaults",
                 "-o", str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "model 3PL (mirt): the paper's mirt fit (3PL, no priors)" in out
    assert "mirt's own default itemtype is the 2PL" in out


def test_a_fit_with_priors_names_the_options_for_mirts_fit(lsat7, tmp_path, capsys):
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--model", "3pl",
                 "-o", str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "(mirt's fit has no priors: --prior-a none --prior-c none)" in out
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--model", "2pl", "--prior-a",
                 "none", "-o", str(tmp_path / "b.csv")]) == 0
    assert "mirt's fit has no priors" not in capsys.readouterr().out


def test_anova_of_one_model_under_two_names(lsat7, capsys):
    assert main(["anova", lsat7, "--freq-column", "freq", "--model", "graded",
                 "--model", "2pl"]) == 0
    out = capsys.readouterr().out
    assert "graded and 2pl are one model on these data" in out
    assert "not nested" not in out


def test_mirt_defaults_on_ratings_fit_mirts_graded_model(tmp_path, capsys):
    """mirt(data, 1) fits whole-number ratings as graded items without priors; so does
    --mirt-defaults (without it the ratings are one line naming --model graded)."""
    import numpy as np
    import pandas as pd

    from atlascat.cli import main

    rng = np.random.default_rng(0)
    path = tmp_path / "r.csv"
    pd.DataFrame(rng.integers(1, 5, (200, 6)), columns=[f"i{j}" for j in range(6)],
                 index=[f"s{i}" for i in range(200)]).to_csv(path)
    assert main(["calibrate", str(path), "--mirt-defaults", "-o", str(tmp_path / "m.csv")]) == 0
    out = capsys.readouterr().out
    assert "the graded model" in out and "(graded, 4-4 categories)" in out
    assert main(["calibrate", str(path), "--model", "graded", "--prior-a", "none",
                 "-o", str(tmp_path / "g.csv")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "m.csv"), pd.read_csv(tmp_path / "g.csv"))
    assert main(["calibrate", str(path), "-o", str(tmp_path / "x.csv")]) == 2
    assert "--model graded" in capsys.readouterr().err
