"""A partial credit bank (``calibrate(ratings, model="pcm")``, mirt's ``"Rasch"`` of ratings)
says it is one: model column ``pcm`` in both file formats, read back as GPCM items of one
common slope (``PolyBank.is_pcm``), kept by subset / linking / group priors; its M2* / C2 and
S-X2 count its parameters as mirt's ``M2(mirt(X, 1, itemtype = "Rasch"))`` and ``itemfit``
(tests/data/mirt_pcm/make_reference.R: Science, 392 x 4 items, and the ordinal set, 2000 x 10
items, 4 categories each). An old bank that says gpcm stays a GPCM bank."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.errors import BankError
from atlascat.irt.calibrate import calibrate
from atlascat.irt.polybank import PolyBank
from atlascat.irt.polyfitstats import m2_ordinal, sx2_ordinal

from cli_checks import run_cli

DATA = Path(__file__).parent / "data"
REF = DATA / "mirt_pcm"
SETS = {"science": DATA / "mirt_poly" / "science.csv",
        "ordinal": DATA / "mirt_groups" / "ordinal_responses.csv"}


@pytest.fixture(scope="module")
def fits():
    """ATLAS's pcm fit of each set at mirt's TOL 1e-6."""
    out = {}
    for name, path in SETS.items():
        y = pd.read_csv(path, index_col=0)
        out[name] = (y, calibrate(y, model="pcm", tol=1e-6, check_dimensions=False).bank)
    return out


@pytest.mark.parametrize("fmt", ["ours", "mirt"])
def test_pcm_bank_file_says_pcm_and_reads_back(tmp_path, fmt):
    out = tmp_path / "b.csv"
    assert run_cli(["calibrate", SETS["ordinal"], "--model", "pcm", "--format", fmt,
                    "-o", out]) == 0
    df = pd.read_csv(out)
    assert set(df["model"]) == {"pcm"}
    bank = PolyBank.read(out)
    assert bank.is_pcm and set(bank.kinds) == {"pcm"} and set(bank.models) == {"gpcm"}
    assert repr(bank).startswith("PolyBank(10 items, model='pcm'")
    assert bank.summary()["model"] == "pcm" and bank.summary()["models"] == {"pcm": 10}
    # the kernel is the GPCM's: the same probabilities as the bank labelled gpcm
    gp = PolyBank(bank.item_ids, bank.params, "gpcm", bank.levels)
    x = np.linspace(-3, 3, 7)
    assert np.array_equal(bank.probability(x), gp.probability(x))
    # what derives a bank from it keeps the label
    assert bank.subset(["Item_2", "Item_5"]).is_pcm
    assert bank.with_ids([f"i{j}" for j in range(10)]).is_pcm
    assert PolyBank.combine(bank.subset(["Item_1"]), bank.subset(["Item_3"])).is_pcm
    from atlascat.irt.polylinking import transform_poly

    moved = transform_poly(bank, 1.3, 0.2)
    assert moved.is_pcm and np.allclose(moved.a, bank.a / 1.3)
    from atlascat.irt.grouplabels import with_group_priors

    assert with_group_priors(bank, {"A": (0.0, 1.0), "B": (0.5, 1.2)}).is_pcm


def test_pcm_items_share_one_slope():
    params = [[0.7, 0.1, -0.2], [0.8, 0.3, 0.1]]
    with pytest.raises(BankError, match="one slope"):
        PolyBank(["x", "y"], params, "pcm")
    with pytest.raises(BankError, match="graded, gpcm or pcm"):
        PolyBank(["x", "y"], params, "rasch")
    one = PolyBank(["x"], params[:1], "pcm")
    two = PolyBank(["y"], params[1:], "pcm")
    both = PolyBank.combine(one, two)          # two fits' slopes: GPCM items, not one pcm
    assert not both.is_pcm and set(both.kinds) == {"gpcm"}


def test_the_fits_compared_are_mirts(fits):
    """ATLAS's pcm fit is mirt's Rasch (the basis of the comparisons below): intercepts, and
    the bank's one slope sigma = sqrt(mirt's latent variance)."""
    for name, (y, bank) in fits.items():
        items = pd.read_csv(REF / f"{name}_pcm_items.csv")
        fit = pd.read_csv(REF / f"{name}_pcm_fit.csv").iloc[0]
        assert list(bank.item_ids) == list(items.item_id)
        d = items[["d1", "d2", "d3"]].to_numpy()
        assert np.max(np.abs(bank.params[:, 1:] - d)) < 3e-4             # 1.3e-4
        assert np.allclose(bank.a, np.sqrt(fit.variance), rtol=1e-4)     # 1.7e-5


def test_pcm_m2_counts_parameters_as_mirts_rasch(fits):
    for name, (y, bank) in fits.items():
        ref = pd.read_csv(REF / f"{name}_pcm_m2.csv").set_index("type")
        for kind, r in ref.iterrows():
            if isinstance(r.error, str) and r.error:     # Science M2*: too few df
                with pytest.raises(Exception, match="degrees of freedom"):
                    m2_ordinal(y, bank, statistic=kind)
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                exact = m2_ordinal(y, bank, statistic=kind)
                mirt = m2_ordinal(y, bank, statistic=kind, gpcm_slope="mirt")
            assert exact.df == mirt.df == int(r.df), (name, kind)
            assert exact.n_free == int(bank.n_cat.sum()) - len(bank) + 1
            # mirt 1.45.1 leaves the latent variance out of Delta: "mirt" reproduces it
            assert mirt.M2 == pytest.approx(r.M2, rel=5e-5), (name, kind)    # 2.2e-5
            assert exact.M2 == pytest.approx(r.M2, rel=5e-3), (name, kind)   # 2.6e-3 (Science C2)
            assert exact.M2 <= mirt.M2 + 1e-9
            for k in ("RMSEA", "SRMSR", "TLI", "CFI"):
                assert getattr(mirt, k) == pytest.approx(r[k], abs=2e-5), (name, kind, k)  # 4.5e-6


def test_pcm_sx2_is_mirts_itemfit(fits):
    for name, (y, bank) in fits.items():
        ref = pd.read_csv(REF / f"{name}_pcm_itemfit.csv")
        got = sx2_ordinal(y, bank)
        assert got["df_S_X2"].tolist() == ref["df_S_X2"].tolist()
        assert np.allclose(got["S_X2"], ref["S_X2"], rtol=0, atol=1e-3)   # 3.5e-4


def _fit_json(capsys, bank, *extra):
    assert run_cli(["fit", SETS["ordinal"], "--bank", bank, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_atlas_fit_of_its_own_pcm_bank_has_mirts_df(tmp_path, capsys):
    bank = tmp_path / "pcm.csv"
    assert run_cli(["calibrate", SETS["ordinal"], "--model", "pcm", "--tol", "1e-6",
                    "-o", bank]) == 0
    capsys.readouterr()
    ref = pd.read_csv(REF / "ordinal_pcm_m2.csv").set_index("type")
    rep = _fit_json(capsys, bank)
    assert rep["model"] == "pcm" and rep["statistic"] == "M2*"
    assert rep["df"] == int(ref.loc["M2*", "df"]) == 24 and rep["n_free"] == 31
    assert rep["M2"] == pytest.approx(ref.loc["M2*", "M2"], rel=1e-3)
    rep = _fit_json(capsys, bank, "--gpcm-slope", "mirt", "--m2", "C2")
    assert rep["df"] == int(ref.loc["C2", "df"]) == 44
    assert rep["M2"] == pytest.approx(ref.loc["C2", "M2"], rel=1e-4)
    items = pd.read_csv(REF / "ordinal_pcm_itemfit.csv").set_index("item_id")
    got = {row["item_id"]: row for row in rep["items"]}
    assert all(got[i]["df_S_X2"] == items.loc[i, "df_S_X2"] for i in items.index)
    # the same file labelled gpcm, as banks were written before: a GPCM bank, 40 parameters
    old = tmp_path / "old.csv"
    pd.read_csv(bank).assign(model="gpcm").to_csv(old, index=False)
    assert not PolyBank.read(old).is_pcm
    rep = _fit_json(capsys, old)
    assert rep["model"] == "gpcm" and rep["df"] == 15 and rep["n_free"] == 40


def test_atlas_items_names_the_pcm_model(tmp_path, capsys):
    bank, out = tmp_path / "pcm.csv", tmp_path / "items.csv"
    assert run_cli(["calibrate", SETS["science"], "--model", "pcm", "-o", bank]) == 0
    assert run_cli(["items", SETS["science"], "--bank", bank, "-o", out]) == 0
    df = pd.read_csv(out)
    assert set(df["model"]) == {"pcm"}
    ref = pd.read_csv(REF / "science_pcm_itemfit.csv")
    assert df.set_index("item_id").loc[ref.item_id, "df_S_X2"].tolist() == \
        ref["df_S_X2"].tolist()


def test_pcm_bank_scores_and_runs_an_adaptive_test(fits):
    from atlascat.cat.config import CATConfig, Stopping
    from atlascat.cat.ordinal import simulate_ordinal_cat
    from atlascat.irt.ability import estimate_ability

    y, bank = fits["ordinal"]
    gp = PolyBank(bank.item_ids, bank.params, "gpcm", bank.levels)
    a, b = estimate_ability(y.iloc[:20], bank), estimate_ability(y.iloc[:20], gp)
    assert np.allclose(a["theta"], b["theta"]) and np.allclose(a["se"], b["se"])
    config = CATConfig(stopping=Stopping(min_items=3, max_items=6))
    one = simulate_ordinal_cat(bank, config, responses=y.iloc[:15], rng=3)
    two = simulate_ordinal_cat(gp, config, responses=y.iloc[:15], rng=3)
    assert one.administered.item_id.tolist() == two.administered.item_id.tolist()
    assert np.allclose(one.persons.theta, two.persons.theta)
