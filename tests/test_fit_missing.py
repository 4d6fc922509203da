"""Fit statistics on data with missing answers against mirt 1.45.1
(tests/data/mirt_missing/make_reference.R): M2 uses every answer (pairwise available moments, as
mirt's ``M2(mod)``), S-X2 the subjects who answered every item (mirt's ``itemfit(mod, na.rm =
TRUE)``), and ``atlas fit`` says which subjects each statistic used."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat import ResponseMatrix
from atlascat.cli import main
from atlascat.irt import fit
from atlascat.irt.bank import ItemBank
from atlascat.irt.polybank import PolyBank
from atlascat.irt.polyfitstats import m2_ordinal

DATA = Path(__file__).parent / "data" / "mirt_missing"
KEYS = ("M2", "df", "p", "RMSEA", "RMSEA_5", "RMSEA_95", "SRMSR", "TLI", "CFI")


def _check(res, ref):
    d = res.to_dict()
    assert d["df"] == int(ref["df"])
    for key in ("M2", "p", "RMSEA", "SRMSR"):
        assert d[key] == pytest.approx(float(ref[key]), rel=1e-8, abs=1e-12), key
    for key in ("RMSEA_5", "RMSEA_95"):   # mirt's RMSEA.CI root search stops at ~1e-5
        assert d[key] == pytest.approx(float(ref[key]), rel=1e-4, abs=1e-9), key
    # mirt's null model is an EM fit stopped at TOL 1e-4; ATLAS's is the exact MLE
    for key in ("TLI", "CFI"):
        assert d[key] == pytest.approx(float(ref[key]), abs=1e-5), key


def test_binary_m2_with_missing_answers_is_mirts():
    rm = ResponseMatrix.read(DATA / "bin2pl.csv")
    assert np.isnan(rm.values).any(axis=1).mean() > 0.7     # most rows miss an answer
    bank = ItemBank.read(DATA / "bin2pl_items.csv")
    res = fit.m2(rm, bank, estimated="2pl")
    _check(res, pd.read_csv(DATA / "bin2pl_m2.csv").iloc[0])
    assert res.n == rm.n_subjects and res.n_dropped == 0


def test_binary_sx2_uses_complete_rows_as_mirts_na_rm():
    rm = ResponseMatrix.read(DATA / "bin2pl.csv")
    bank = ItemBank.read(DATA / "bin2pl_items.csv")
    sx = fit.sx2(rm, bank, estimated="2pl")
    ref = pd.read_csv(DATA / "bin2pl_itemfit.csv")
    np.testing.assert_allclose(sx["S_X2"], ref["S_X2"], rtol=1e-10)
    np.testing.assert_array_equal(sx["df_S_X2"], ref["df_S_X2"])


@pytest.mark.parametrize("name,types", [("graded", ("M2*", "C2")), ("science_graded", ("C2",)),
                                        ("science_gpcm", ("C2",))])
def test_ordinal_m2_with_missing_ratings_is_mirts(name, types):
    data = "graded" if name == "graded" else "science"
    ratings = pd.read_csv(DATA / f"{data}.csv", index_col=0)
    bank = PolyBank.read(DATA / f"{name}_items.csv")
    refs = pd.read_csv(DATA / f"{name}_m2.csv").set_index("type")
    for kind in types:
        res = m2_ordinal(ratings, bank, statistic=kind,
                         gpcm_slope="mirt" if "gpcm" in name else "exact")
        _check(res, refs.loc[kind])
        assert res.n == len(ratings)


def test_m2_complete_data_unchanged_by_the_pairwise_form(rng):
    """With every answer given, the pairwise weights are N for every moment: the same M2 as
    the complete-data formula, N (p - pi)' C (p - pi)."""
    bank = ItemBank([f"q{k}" for k in range(6)], rng.uniform(0.7, 2, 6), rng.normal(size=6))
    y = (rng.random((400, 6)) < bank.probability(rng.normal(size=400))).astype(float)
    full = fit.m2(y, bank, estimated="2pl")
    p1, cross, n1, n2, w, _ = fit._available_binary(y, np.ones(400))
    assert np.all(n1 == 400) and np.all(n2 == 400)
    y2 = np.vstack([y, np.full((1, 6), np.nan)])               # a row with no answer at all
    again = fit.m2(y2, bank, estimated="2pl")
    assert again.M2 == pytest.approx(full.M2, rel=1e-12) and again.n_dropped == 1


def test_m2_refuses_items_never_answered_together():
    y = np.array([[1, 0, np.nan], [0, 1, np.nan], [np.nan, np.nan, 1], [np.nan, np.nan, 0],
                  [1, 1, np.nan]] * 20, dtype=float)
    bank = ItemBank(["a", "b", "c"], [1.0, 1.2, 0.8], [0.0, 0.3, -0.2])
    with pytest.raises(Exception, match="never answered by the same subject.*'a' and 'c'"):
        fit.m2(y, bank, estimated="none")


def test_atlas_fit_says_which_subjects_each_statistic_used(tmp_path, capsys):
    code = main(["fit", str(DATA / "bin2pl.csv"), "--bank", str(DATA / "bin2pl_items.csv"),
                 "-o", str(tmp_path / "fit.json")])
    assert code == 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "M2 = 72.881 on 54 df" in text
    assert "S-X2 on the 125 of 500 subjects who answered every item" in text
    rep = json.loads((tmp_path / "fit.json").read_text())
    assert rep["M2"] == pytest.approx(72.881225449334977, rel=1e-8)
    assert rep["n_sx2"] == 125


def test_atlas_fit_without_complete_rows_still_gives_m2(tmp_path, capsys):
    """No subject answered every item: M2 is still given; S-X2 is left out with one line."""
    rm = ResponseMatrix.read(DATA / "bin2pl.csv")
    y = rm.values.copy()
    y[np.arange(y.shape[0]), np.arange(y.shape[0]) % y.shape[1]] = np.nan
    path = tmp_path / "holes.csv"
    pd.DataFrame(y, index=rm.subject_ids, columns=rm.item_ids).rename_axis(
        "subject_id").to_csv(path)
    code = main(["fit", str(path), "--bank", str(DATA / "bin2pl_items.csv")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "M2 = " in out.out
    assert "S-X2 left out: no subject answered every item" in out.out + out.err
    assert "Traceback" not in out.out + out.err


def test_pattern_weights_with_missing_answers_equal_expanded_rows():
    rm = ResponseMatrix.read(DATA / "bin2pl.csv")
    bank = ItemBank.read(DATA / "bin2pl_items.csv")
    y = rm.values[:200]
    key = pd.DataFrame(y).fillna(-1)
    patterns = key.value_counts().rename("freq").reset_index()
    table = patterns.drop(columns="freq").replace(-1, np.nan).to_numpy(float)
    full = fit.m2(y, bank, estimated="2pl")
    weighted = fit.m2(table, bank, estimated="2pl", weights=patterns["freq"].to_numpy(float))
    assert weighted.M2 == pytest.approx(full.M2, rel=1e-10)
    assert weighted.SRMSR == pytest.approx(full.SRMSR, rel=1e-10)
    assert weighted.CFI == pytest.approx(full.CFI, rel=1e-10)
