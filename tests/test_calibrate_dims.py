"""``atlas calibrate --dims K`` and ``atlas anova --dims``: the exploratory K-dimensional 2PL from
the command line, as mirt's ``mirt(data, K)``, ``summary(mod)`` and ``anova(mod1, mod2)``.

Parity fixtures in tests/data/calibrate_dims (make_fixtures.R there, mirt 1.45.1) on
tests/data/oblimin/corr2f.csv (2000 subjects x 12 items, two factors correlated 0.5)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.irt.multidim import MultidimBank
from atlascat.irt.multidimcal import calibrate_multidim, marginal_loglik
from cli_checks import two_factor_answers

DATA = Path(__file__).parent / "data"
REF = DATA / "calibrate_dims"
CORR2F = str(DATA / "oblimin" / "corr2f.csv")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """400 subjects x 8 items, two factors (simple structure): a fast CSV."""
    path = tmp_path_factory.mktemp("dims") / "small.csv"
    two_factor_answers(400, 8, seed=3)[1].to_csv(path)
    return str(path)


def _summary(tmp_path, data, *args):
    out, summ = tmp_path / "b.csv", tmp_path / "s.json"
    assert main(["calibrate", data, "-o", str(out), "--summary", str(summ), "--quiet",
                 *args]) == 0
    return out, json.loads(summ.read_text())


# ------------------------------------------------------------------ parity with mirt
def test_calibrate_dims_matches_mirt(tmp_path):
    """mirt(data, 2, itemtype = "2PL") and summary(mod2): log-likelihood, criteria, parameter
    count, oblimin loadings and factor correlation."""
    out, s = _summary(tmp_path, CORR2F, "--dims", "2", "--mirt-defaults")
    ref = pd.read_csv(REF / "corr2f_anova.csv").iloc[1]
    assert s["converged"] and s["n_dims"] == 2
    assert s["settings"]["prior_a"] is None and s["settings"]["prior_d"] is None
    assert s["loglik"] == pytest.approx(ref.logLik, abs=0.05)
    assert s["n_parameters"] == ref.n_parameters == 12 * 3 - 1
    for k in ("AIC", "BIC", "SABIC", "HQ"):
        assert s[k.lower()] == pytest.approx(ref[k], abs=0.1)
    phi = pd.read_csv(REF / "corr2f_fcor.csv").phi12[0]
    fl = s["factor_loadings"]
    assert fl["rotation"] == "oblimin" and fl["factor_correlations"][0][1] == pytest.approx(phi, abs=0.01)
    mirt = pd.read_csv(REF / "corr2f_oblimin.csv", index_col="item_id")
    ours = pd.DataFrame(fl["loadings"]).T.loc[mirt.index]
    diff = min(np.abs(ours[list(cols)].to_numpy() - mirt[["F1", "F2"]].to_numpy()).max()
               for cols in (("F1", "F2"), ("F2", "F1")))
    assert diff < 0.01
    assert np.abs(ours.h2 - mirt.h2).max() < 0.005
    bank = MultidimBank.read(out)                     # a1, a2, d: what atlas info reads
    assert bank.n_dims == 2 and list(pd.read_csv(out).columns) == ["item_id", "a1", "a2", "d"]


def test_anova_dims_matches_mirt(tmp_path, capsys):
    """anova(mod1, mod2): the unidimensional 2PL against the exploratory 2-dimensional one."""
    out = tmp_path / "anova.csv"
    assert main(["anova", CORR2F, "--model", "2pl", "--dims", "1", "--dims", "2",
                 "-o", str(out)]) == 0
    ours = pd.read_csv(out, index_col="model")
    ref = pd.read_csv(REF / "corr2f_anova.csv")
    assert list(ours.index) == ["2pl", "2pl-2d"]
    for col in ("AIC", "SABIC", "HQ", "BIC"):
        np.testing.assert_allclose(ours[col], ref[col], atol=0.1)
    np.testing.assert_allclose(ours.logLik, ref.logLik, atol=0.05)
    assert ours.df.iloc[1] == ref.df[1] == 11
    assert ours.X2.iloc[1] == pytest.approx(ref.X2[1], abs=0.1)
    assert ours.p.iloc[1] == pytest.approx(ref.p[1], abs=1e-12)
    assert "2pl-2d" in capsys.readouterr().out


# ------------------------------------------------------------------ the command
def test_default_priors_are_stated_and_mirt_setting_offered(small, tmp_path, capsys):
    _, s = _summary(tmp_path, small, "--dims", "2")
    assert s["settings"]["prior_a"] == "norm(0,3)" and s["settings"]["prior_d"] == "norm(0,5)"
    assert s["log_posterior"] < s["loglik"]           # the priors' log density is below 0
    out = capsys.readouterr().out
    assert "priors: a ~ norm(0,3), d ~ norm(0,5)" in out and "--mirt-defaults" in out
    _, s = _summary(tmp_path, small, "--dims", "2", "--prior-a", "none")
    assert s["settings"]["prior_a"] is None and s["settings"]["prior_d"] == "norm(0,5)"
    _, s = _summary(tmp_path, small, "--dims", "2", "--prior-a", "norm(0, 2)")
    assert s["settings"]["prior_a"] == "norm(0,2)"
    # --mirt-defaults drops the priors left at auto; one given stays (as the 1-D path)
    _, s = _summary(tmp_path, small, "--dims", "2", "--mirt-defaults", "--prior-a", "norm(0,4)")
    assert s["settings"]["prior_a"] == "norm(0,4)" and s["settings"]["prior_d"] is None
    assert s["log_posterior"] is not None


def test_summary_rotation_and_bank(small, tmp_path):
    out, s = _summary(tmp_path, small, "--dims", "2", "--rotate", "varimax", "--name", "toy")
    fl = s["factor_loadings"]
    assert fl["rotation"] == "varimax"
    assert fl["factor_correlations"] == [[1.0, 0.0], [0.0, 1.0]]
    assert s["n_parameters"] == 8 * 3 - 1 and s["benchmark"] == "toy"
    df = pd.read_csv(out)
    assert list(df.columns) == ["item_id", "a1", "a2", "d", "benchmark"]
    assert set(df.benchmark) == {"toy"}
    lib = calibrate_multidim(pd.read_csv(small, index_col=0), 2)   # the CLI is the library call
    np.testing.assert_allclose(df[["a1", "a2"]], lib.bank.loadings, atol=1e-8)
    assert main(["info", str(out), "--json"]) == 0


def test_progress_and_report(small, tmp_path, capsys):
    assert main(["calibrate", small, "--dims", "2", "-o", str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "2 dimensions, exploratory" in out and "EM, 31 points per dimension" in out
    assert "oblimin rotation" in out and "factor correlations" in out


@pytest.mark.parametrize("args, words", [
    (["--model", "3pl"], "--dims fits the exploratory multidimensional 2PL"),
    (["--model", "graded"], "--dims fits the exploratory multidimensional 2PL"),
    (["--device", "cuda"], "--device is not available with --dims"),
    (["--groups", "groups.csv"], "--groups is not available with --dims"),
    (["--prior-a", "lognorm(0,0.5)"], "norm(0,SD)"),
    (["--rotate", "promax"], "--rotate must be one of"),
])
def test_refusals_in_one_line(small, tmp_path, capsys, args, words):
    code = main(["calibrate", small, "--dims", "2", "-o", str(tmp_path / "b.csv"), *args])
    err = capsys.readouterr().err
    assert code == 2 and words in " ".join(err.split())
    assert not (tmp_path / "b.csv").exists()


def test_refusals_of_dims_and_rotate(small, tmp_path, capsys):
    out = str(tmp_path / "b.csv")
    assert main(["calibrate", small, "--dims", "1", "-o", out]) == 2
    assert "--dims must be 2 or more" in capsys.readouterr().err
    assert main(["calibrate", small, "--rotate", "geomin", "-o", out]) == 2
    assert "give --dims K" in capsys.readouterr().err


def test_ratings_refused_with_what_is_supported(tmp_path, capsys):
    path = tmp_path / "ratings.csv"
    pd.DataFrame({"a": [1, 3, 5, 2], "b": [2, 2, 4, 1], "c": [5, 1, 3, 3]}).to_csv(path)
    assert main(["calibrate", str(path), "--dims", "2", "-o", str(tmp_path / "b.csv")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--dims fits the exploratory multidimensional 2PL to 0/1 answers of one" in err


def test_groups_refused_with_dims_in_its_own_words(tmp_path, capsys):
    """--dims --groups: refused saying --dims fits one population (it said '0/1 answers only',
    which the 0/1 answers given did not explain)."""
    rng = np.random.default_rng(0)
    ids = [f"s{i}" for i in range(60)]
    y = pd.DataFrame((rng.random((60, 6)) < 0.5).astype(int), index=ids,
                     columns=[f"i{j}" for j in range(6)])
    y.to_csv(tmp_path / "y.csv")
    pd.DataFrame({"subject": ids, "group": ["a"] * 30 + ["b"] * 30}).to_csv(
        tmp_path / "g.csv", index=False)
    assert main(["calibrate", str(tmp_path / "y.csv"), "--dims", "2", "--groups",
                 str(tmp_path / "g.csv"), "-o", str(tmp_path / "b.csv")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--groups is not available with --dims" in err and "one population" in err
    assert "no groups" in err


def test_partial_scores_refused(tmp_path, capsys):
    path = tmp_path / "partial.csv"
    pd.DataFrame({"a": [0, 0.5, 1, 1], "b": [1, 0, 0.25, 1], "c": [0, 1, 1, 0]}).to_csv(path)
    assert main(["calibrate", str(path), "--dims", "2", "-o", str(tmp_path / "b.csv")]) == 2
    assert "0/1" in capsys.readouterr().err


# ------------------------------------------------------------------ anova
def test_anova_dims_with_other_models(small, tmp_path):
    out = tmp_path / "a.csv"
    assert main(["anova", small, "--model", "rasch", "--model", "2pl", "--dims", "1",
                 "--dims", "2", "-o", str(out)]) == 0
    t = pd.read_csv(out, index_col="model")
    assert list(t.index) == ["rasch", "2pl", "2pl-2d"]
    assert list(t.df.iloc[1:]) == [7, 7]               # 9 -> 16 -> 23 parameters
    # without 1 among --dims the 2PL is fitted in the dimensions given only
    assert main(["anova", small, "--model", "rasch", "--model", "2pl", "--dims", "2",
                 "-o", str(out)]) == 0
    assert list(pd.read_csv(out, index_col="model").index) == ["rasch", "2pl-2d"]


def test_anova_dims_not_nested_in_a_one_dimensional_3pl(small, tmp_path, capsys):
    """The 2-dimensional 2PL (23 parameters) is no special case of the 1-D 3PL (24)."""
    out = tmp_path / "a.csv"
    assert main(["anova", small, "--model", "3pl", "--model", "2pl", "--dims", "2",
                 "-o", str(out)]) == 0
    assert "not nested" in capsys.readouterr().out
    assert pd.read_csv(out).X2.isna().all()


def test_anova_dims_refusals(small, capsys):
    assert main(["anova", small, "--model", "rasch", "--dims", "2"]) == 2
    assert "add --model 2pl" in capsys.readouterr().err
    assert main(["anova", small, "--model", "2pl", "--dims", "2"]) == 2
    assert "two or more different --model values (or --dims)" in capsys.readouterr().err
    assert main(["anova", small, "--model", "2pl", "--dims", "0", "--dims", "2"]) == 2
    assert "--dims must be 1 or more" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore")
def test_library_anova_refuses_the_3pl_over_two_dimensions(small):
    from atlascat.irt.calibrate import calibrate
    from atlascat.irt.compare import anova, nested_fits

    y = pd.read_csv(small, index_col=0)
    m3 = calibrate(y, model="3pl", prior_a=None, prior_c=None, prior_u=None)
    m2 = calibrate_multidim(y, 2, prior_a_sd=None, prior_d_sd=None)
    m1 = calibrate(y, model="2pl", prior_a=None)
    assert nested_fits(m1, m2) and not nested_fits(m2, m3) and not nested_fits(m2, m1)
    with pytest.raises(ConfigError, match="2 dimensions"):
        anova(m3, m2)
    table = anova(m1, m2, names=["one", "two"])
    assert table.df.iloc[1] == 7 and table.X2.iloc[1] == pytest.approx(
        2 * (m2.loglik - m1.loglik))


# ------------------------------------------------------------------ K >= 4 and the log-likelihood
def test_quasi_monte_carlo_loglik_matches_the_grid(small):
    """The MH-RM fits' log-likelihood (quasi-Monte Carlo) against the EM grid's, K = 2."""
    y = pd.read_csv(small, index_col=0)
    fit = calibrate_multidim(y, 2, prior_a_sd=None, prior_d_sd=None)
    qmc = marginal_loglik(fit.bank, y.to_numpy(float), rng=np.random.default_rng(1))
    assert qmc == pytest.approx(fit.loglik, abs=0.1)


def test_four_dimensions_by_mhrm(small, tmp_path):
    _, s = _summary(tmp_path, small, "--dims", "4", "--max-iter", "150", "--seed", "1")
    assert s["settings"]["method"] == "mhrm" and s["settings"]["quadpts"] is None
    assert "quasi-Monte Carlo" in s["settings"]["loglik"]
    assert np.isfinite(s["loglik"]) and s["n_parameters"] == 8 * 5 - 6
    assert len(s["factor_loadings"]["factor_correlations"]) == 4


def test_calibrate_multidim_checks_n_dims():
    with pytest.raises(ConfigError, match=">= 2"):
        calibrate_multidim(np.zeros((5, 4)), 1)
