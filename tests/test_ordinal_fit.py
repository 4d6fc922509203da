"""Model fit of ordinal banks against mirt 1.45.1: M2* / C2 (``M2(mod, type)``) and S-X2
(``itemfit(mod)``) on mirt's own parameters (tests/data/mirt_poly, make_fit_reference.R), a
misfitting item flagged, and ``atlas fit`` on a graded bank."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.irt import polytomous as poly
from atlascat.irt import polyfitstats as pf
from atlascat.irt.polybank import PolyBank
from atlascat.irt.quadrature import normal_quadrature

REF = Path(__file__).parent / "data" / "mirt_poly"
# (reference name, data set, model); sim_gpcm: the GPCM fitted to sim_graded.csv; sim_mixed:
# items of 3, 4 and 5 categories
FITS = [("science_graded", "science", "graded"), ("science_gpcm", "science", "gpcm"),
        ("sim_graded", "sim_graded", "graded"), ("sim_gpcm", "sim_graded", "gpcm"),
        ("sim_mixed", "sim_mixed", "graded")]


def _load(name, data, model):
    ratings = pd.read_csv(REF / f"{data}.csv").set_index("subject_id")
    items = pd.read_csv(REF / f"{name}_items.csv")
    levels = [np.sort(ratings[c].unique()) for c in ratings.columns]
    bank = PolyBank(items.item_id, items.drop(columns="item_id").to_numpy(), model, levels)
    return ratings, bank


def _rel(a, b):
    return abs(a - b) / abs(b)


@pytest.mark.parametrize("name,data,model", FITS)
@pytest.mark.parametrize("kind", ["M2*", "C2"])
def test_m2_matches_mirt_on_its_parameters(name, data, model, kind):
    ratings, bank = _load(name, data, model)
    ref = pd.read_csv(REF / f"{name}_m2.csv").set_index("type").loc[kind]
    if isinstance(ref["error"], str):      # Science, 4 items: M2* has -6 df, mirt refuses too
        with pytest.raises(ConfigError, match="too few items"):
            pf.m2_ordinal(ratings, bank, statistic=kind)
        return
    res = pf.m2_ordinal(ratings, bank, statistic=kind, gpcm_slope="mirt")
    assert res.statistic == kind and res.estimated == "all"
    assert res.df == ref["df"] and res.df_null == ref["df_null"]
    assert _rel(res.M2, ref["M2"]) < 1e-8
    assert _rel(res.p, ref["p"]) < 1e-7
    assert _rel(res.SRMSR, ref["SRMSR"]) < 1e-10
    for key in ("RMSEA", "RMSEA_5", "RMSEA_95"):
        assert getattr(res, key) == pytest.approx(ref[key], rel=1e-6, abs=1e-12)
    # the null model: ATLAS's exact maximum likelihood, mirt's EM stopped at TOL = 1e-4
    assert _rel(res.M2_null, ref["M2_null"]) < 1e-3
    assert res.TLI == pytest.approx(ref["TLI"], abs=2e-6)
    assert res.CFI == pytest.approx(ref["CFI"], abs=1e-6)


@pytest.mark.parametrize("data,name", [("science", "science_graded"),
                                       ("sim_graded", "sim_graded")])
def test_null_m2_at_mirts_null_coefficients_is_mirts(data, name):
    """mirt's M2* null model has a rank-deficient Delta; its qr-complement is reproduced."""
    ratings, bank = _load(name, data, "graded")
    y = bank.encode(ratings.to_numpy(float)).astype(int)
    null = pd.read_csv(REF / f"{data}_null_items.csv").drop(columns="item_id").to_numpy()
    ref = pd.read_csv(REF / f"{name}_m2.csv").set_index("type")
    for kind in ("M2*", "C2"):
        if np.isnan(ref.loc[kind, "M2_null"]):
            continue
        m2, df = pf.null_m2(y, np.ones(len(y)), bank.n_cat.astype(int), kind, params=null)
        assert df == ref.loc[kind, "df_null"]
        assert _rel(m2, ref.loc[kind, "M2_null"]) < 1e-9


@pytest.mark.parametrize("name,data,model", FITS)
def test_sx2_matches_mirt(name, data, model):
    ratings, bank = _load(name, data, model)
    ref = pd.read_csv(REF / f"{name}_itemfit.csv")
    got = pf.sx2_ordinal(ratings, bank)
    assert got.item_id.tolist() == ref.item_id.tolist()
    np.testing.assert_array_equal(got.df_S_X2.to_numpy(), ref.df_S_X2.to_numpy())
    np.testing.assert_allclose(got.S_X2, ref.S_X2, rtol=1e-9)
    np.testing.assert_allclose(got.p_S_X2, ref.p_S_X2, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(got.RMSEA_S_X2, ref.RMSEA_S_X2, rtol=1e-7, atol=1e-12)


def test_gpcm_slope_derivative_is_exact_and_mirts_differs():
    """The default Jacobian is dE/da by central differences; mirt's dP (unnormalized exp(z))
    is not, which moves GPCM M2 only (graded items do not use it)."""
    _, bank = _load("science_gpcm", "science", "gpcm")
    nodes = normal_quadrature().nodes
    _, E, _, _, G = pf._pieces(bank.models, bank.params, nodes, True)
    h = 1e-6
    for col in range(bank.params.shape[1]):
        up, down = bank.params.copy(), bank.params.copy()
        up[:, col] += h
        down[:, col] -= h
        num = (pf._pieces("gpcm", up, nodes, False)[1]
               - pf._pieces("gpcm", down, nodes, False)[1]) / (2 * h)
        np.testing.assert_allclose(G[:, :, col], num.T, atol=1e-7)
    _, _, _, _, Gm = pf._pieces(bank.models, bank.params, nodes, True, "mirt")
    assert np.abs(Gm[:, :, 0] - G[:, :, 0]).max() > 1.0
    ratings, _ = _load("science_gpcm", "science", "gpcm")
    exact = pf.m2_ordinal(ratings, bank, statistic="C2").M2
    assert abs(exact - pf.m2_ordinal(ratings, bank, statistic="C2", gpcm_slope="mirt").M2) > 1
    ratings, graded = _load("sim_graded", "sim_graded", "graded")
    assert pf.m2_ordinal(ratings, graded).M2 == pytest.approx(
        pf.m2_ordinal(ratings, graded, gpcm_slope="mirt").M2, rel=1e-12)


@pytest.mark.filterwarnings("ignore:the null model's M2 is below")
def test_a_misfitting_item_is_flagged():
    """Item 0's ratings drawn with a slope of 0.1 against the bank's 2: S-X2 flags it alone,
    and M2 (bank known: estimated none) rejects the data it fits otherwise."""
    rng = np.random.default_rng(11)
    n, k = 8, 4
    a = rng.uniform(1.0, 2.0, n)
    a[0] = 2.0
    d = -np.sort(rng.normal(0, 1, (n, k - 1)), axis=1) * a[:, None]
    params = np.column_stack([a, d])
    bank = PolyBank([f"q{j}" for j in range(n)], params, "graded")
    theta = rng.normal(size=3000)
    good = poly.sample("graded", params, theta, rng).astype(float)
    bad = good.copy()
    wrong = params.copy()
    wrong[0, 0] = 0.1
    bad[:, 0] = poly.sample("graded", wrong, theta, rng)[:, 0]
    fit_good = pf.sx2_ordinal(good, bank, estimated="none")
    fit_bad = pf.sx2_ordinal(bad, bank, estimated="none")
    assert fit_bad.p_S_X2[0] < 1e-10 and fit_good.p_S_X2[0] > 1e-3
    assert (fit_good.p_S_X2 > 1e-3).all()
    assert pf.m2_ordinal(bad, bank, estimated="none").p < 1e-10
    assert pf.m2_ordinal(good, bank, estimated="none").p > 1e-3


# two tables and what mirt:::collapseCells(list(O), list(E), mincell = 1) returns for them
# (mirt 1.45.1, by hand in R): a single-subject score group merged forward and categories
# merged within sparse groups (shifted left, mirt's padding); impossible cells (NA) merged
# into the nearest possible score group
COLLAPSE = [
    ([[2, 1, 0], [0, 1, 0], [3, 4, 1], [2, 5, 3]],
     [[1.5, 1.2, 0.3], [0.4, 0.5, 0.1], [3.2, 3.5, 1.3], [2.5, 4.5, 3.0]],
     [[2, 1, 0], [3, 6, 0], [2, 5, 3]],
     [[1.5, 1.5, None], [3.6, 5.4, None], [2.5, 4.5, 3.0]]),
    ([[1, 0, 0, 0], [3, 1, 0, 0], [2, 2, 1, 0], [1, 3, 2, 1], [0, 2, 3, 2], [0, 0, 2, 3],
      [0, 0, 1, 1]],
     [[0.8, 0.2, 0.1, None], [2.5, 1.2, 0.3, 0.1], [2.0, 2.1, 0.7, 0.2], [1.2, 2.6, 2.2, 0.9],
      [0.3, 1.9, 3.1, 1.7], [0.1, 0.4, 2.2, 2.4], [None, 0.2, 0.9, 1.1]],
     [[4, 1, 0], [2, 3, 0], [1, 3, 3], [2, 3, 2], [3, 4, 0]],
     [[3.3, 1.9, None], [2.0, 3.0, None], [1.2, 2.6, 3.1], [2.2, 3.1, 1.7], [3.8, 3.5, None]]),
]


@pytest.mark.parametrize("O,E,O_mirt,E_mirt", COLLAPSE)
def test_collapse_cells_is_mirts(O, E, O_mirt, E_mirt):
    o, e = pf.collapse_cells(np.array(O, float), np.array(E, dtype=float), 1.0)
    np.testing.assert_array_equal(o, np.array(O_mirt, float))
    np.testing.assert_allclose(e, np.array(E_mirt, dtype=float), rtol=1e-12)


def test_atlas_fit_on_a_graded_bank(tmp_path, capsys):
    ratings, bank = _load("science_graded", "science", "graded")
    bank_path = tmp_path / "bank.csv"
    bank.write(bank_path)
    out = tmp_path / "fit.json"
    assert main(["fit", str(REF / "science.csv"), "--bank", str(bank_path), "--json",
                 "-o", str(out)]) == 0
    rep = json.loads(out.read_text())
    ref = pd.read_csv(REF / "science_graded_m2.csv").set_index("type").loc["C2"]
    assert rep["statistic"] == "C2" and rep["df"] == 2 and "note" in rep
    assert rep["M2"] == pytest.approx(ref["M2"], rel=1e-8)
    sx = pd.read_csv(REF / "science_graded_itemfit.csv")
    assert [it["S_X2"] for it in rep["items"]] == pytest.approx(sx.S_X2.tolist(), rel=1e-9)
    capsys.readouterr()
    assert main(["fit", str(REF / "science.csv"), "--bank", str(bank_path)]) == 0
    text = capsys.readouterr().out
    assert "C2 = 19.179 on 2 df" in text and "S-X2 item fit" in text


def test_an_undetermined_m2_star_is_said_and_auto_gives_c2():
    """20 items of 10 categories, the extreme ones rare: the item-score moments barely see some
    intercepts (Delta's pivoted residuals under 1e-7 of their columns), so M2* rests on a rank
    tolerance (mirt's and ATLAS's differ by 2-40% on such data). It is said; auto gives C2,
    which the category shares determine; the reference fits (5 categories) are not flagged."""
    import warnings

    rng = np.random.default_rng(4)
    a = rng.lognormal(0.2, 0.3, 20)
    d = -np.sort(rng.normal(0, 0.4, (20, 9)) + np.linspace(-3.0, 2.0, 9), axis=1) * a[:, None]
    bank = PolyBank([f"q{j}" for j in range(20)], np.column_stack([a, d]), "graded")
    r = poly.sample("graded", bank.params, rng.normal(size=400), rng).astype(float)
    with pytest.warns(RuntimeWarning, match="M2\\* is not determined.*C2 is given instead"):
        auto = pf.m2_ordinal(r, bank, statistic="auto", null_model=False)
    c2 = pf.m2_ordinal(r, bank, statistic="C2", null_model=False)
    assert auto.statistic == "C2" and (auto.M2, auto.df) == (c2.M2, c2.df)
    with pytest.warns(RuntimeWarning, match="C2 is determined"):
        star = pf.m2_ordinal(r, bank, statistic="M2*", null_model=False)
    assert star.statistic == "M2*" and star.df == 10
    from atlascat.cli._fit_ordinal import ordinal_fit_report

    with pytest.warns(RuntimeWarning, match="M2\\* is not determined"):
        rep = ordinal_fit_report(pd.DataFrame(r, columns=bank.item_ids), bank, items=False)
    assert rep["statistic"] == "C2" and "not determined" in rep["note"]
    ratings, ref_bank = _load("sim_graded", "sim_graded", "graded")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pf.m2_ordinal(ratings, ref_bank, statistic="auto").statistic == "M2*"


def test_the_s_x2_note_names_the_statistic_given(tmp_path, capsys):
    """With missing ratings the S-X2 note says which statistic above used every rating: C2
    where C2 is given (--m2 C2, or M2* without degrees of freedom)."""
    _, bank = _load("science_graded", "science", "graded")
    bank.write(tmp_path / "bank.csv")
    sci = pd.read_csv(REF / "science.csv").set_index("subject_id")
    sci.iloc[:5, 0] = np.nan
    sci.to_csv(tmp_path / "gaps.csv")
    assert main(["fit", str(tmp_path / "gaps.csv"), "--bank", str(tmp_path / "bank.csv"),
                 "--m2", "C2", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["statistic"] == "C2" and "C2 uses every rating" in rep["sx2_note"]
    assert "M2 uses" not in rep["sx2_note"]


@pytest.mark.parametrize("extra,words", [
    (["--q3"], "--q3: binary banks only"),
    (["--partition-size", "2"], "--partition-size: binary banks only"),
    (["--estimated", "2pl"], "--estimated 2pl is not what an ordinal bank takes: all or none"),
    (["--m2", "M2*"], "too few items"),
    (["--m2", "M3"], "--m2 must be"),
])
def test_atlas_fit_refuses_in_one_line(tmp_path, capsys, extra, words):
    _, bank = _load("science_graded", "science", "graded")
    bank.write(tmp_path / "bank.csv")
    assert main(["fit", str(REF / "science.csv"), "--bank", str(tmp_path / "bank.csv"),
                 *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err


def test_pattern_frequencies_and_missing_rows():
    """A pattern table with frequencies gives the expanded data's statistics; a row with a
    missing rating counts for the moments it has (pairwise, as mirt's M2); a row with none is
    left out and counted."""
    ratings, bank = _load("science_graded", "science", "graded")
    patterns = ratings.value_counts().rename("freq").reset_index()
    table = patterns.drop(columns="freq")
    table.index = [f"pat{i}" for i in range(len(table))]
    full = pf.m2_ordinal(ratings, bank, statistic="C2")
    weighted = pf.m2_ordinal(table, bank, statistic="C2", weights=patterns.freq.to_numpy())
    assert weighted.M2 == pytest.approx(full.M2, rel=1e-12) and weighted.n == full.n
    pd.testing.assert_frame_equal(
        pf.sx2_ordinal(table, bank, weights=patterns.freq.to_numpy()), pf.sx2_ordinal(ratings, bank))
    gap = pd.concat([ratings, ratings.iloc[:1].assign(Work=np.nan).rename(index=lambda s: "gap")])
    res = pf.m2_ordinal(gap, bank, statistic="C2")
    assert res.n == full.n + 1 and res.n_dropped == 0 and res.M2 != full.M2
    blank = pd.concat([ratings, ratings.iloc[:1].map(lambda v: np.nan).rename(
        index=lambda s: "blank")])
    res = pf.m2_ordinal(blank, bank, statistic="C2")
    assert res.n_dropped == 1 and res.M2 == pytest.approx(full.M2, rel=1e-12)


def test_an_unobserved_category_leaves_m2_and_drops_the_null_model():
    ratings, bank = _load("sim_graded", "sim_graded", "graded")
    top = ratings["Item_1"] == ratings["Item_1"].max()
    sub = ratings[~top]                      # Item_1's top category: nobody
    with pytest.warns(RuntimeWarning, match="unobserved category"):
        res = pf.m2_ordinal(sub, bank)
    assert np.isfinite(res.M2) and res.df == 110 and np.isnan(res.TLI)
    assert np.isfinite(pf.sx2_ordinal(sub, bank).S_X2).all()


def test_bad_input_is_one_clear_error():
    ratings, bank = _load("science_graded", "science", "graded")
    with pytest.raises(ConfigError, match="statistic must be"):
        pf.m2_ordinal(ratings, bank, statistic="M3")
    with pytest.raises(ConfigError, match="gpcm_slope"):
        pf.m2_ordinal(ratings, bank, statistic="C2", gpcm_slope="approx")
    with pytest.raises(ConfigError, match="rating 7 .* item 'Comfort'"):
        pf.sx2_ordinal(ratings.replace({4: 7}), bank)
