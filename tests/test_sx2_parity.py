"""Binary S-X2 against mirt 1.45.1's ``itemfit(mod)`` on mirt's own parameters
(tests/data/mirt_sx2, make_reference.R): S-X2, df, RMSEA and p for LSAT7 (2PL), LSAT6 (Rasch,
and a 1PL with a common slope), 1000 x 20 2PL, 2000 x 15 3PL, and a sparse 250 x 30 2PL whose
score groups must be collapsed as mirt's ``collapseCells`` (mincell 1 and 5)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.irt import fit
from atlascat.irt.bank import ItemBank
from atlascat.irt.sx2table import collapse_cells
from atlascat.responses import ResponseMatrix

REF = Path(__file__).parent / "data" / "mirt_sx2"
# (reference name, data set, ATLAS's `estimated`, mincell)
FITS = [("lsat7_2pl", "lsat7", "2pl", 1), ("lsat6_rasch", "lsat6", "rasch", 1),
        ("lsat6_1pl", "lsat6", "1pl", 1), ("sim2pl_2pl", "sim2pl", "2pl", 1),
        ("sim3pl_3pl", "sim3pl", "3pl", 1), ("sparse2pl_2pl", "sparse2pl", "2pl", 1),
        ("sparse2pl_2pl_mincell5", "sparse2pl", "2pl", 5)]


def _load(name, data):
    path = REF / f"{data}.csv"
    freq = "freq" if data.startswith("lsat") else None
    rm = ResponseMatrix.read(path, freq_column=freq)
    bank = ItemBank.read(REF / f"{name}_items.csv")
    group = pd.read_csv(REF / f"{name}_group.csv").iloc[0]
    return rm, bank, float(group.MEAN_1), float(np.sqrt(group.COV_11))


@pytest.mark.parametrize("name,data,estimated,mincell", FITS)
def test_sx2_is_mirts_itemfit(name, data, estimated, mincell):
    rm, bank, mean, sd = _load(name, data)
    ref = pd.read_csv(REF / f"{name}_itemfit.csv")
    got = fit.sx2(rm, bank, estimated=estimated, mincell=mincell, prior_mean=mean, prior_sd=sd)
    assert list(got.item_id) == list(ref.item_id)
    np.testing.assert_array_equal(got.df_S_X2.to_numpy(), ref.df_S_X2.to_numpy())
    np.testing.assert_allclose(got.S_X2, ref.S_X2, rtol=1e-10)
    np.testing.assert_allclose(got.p_S_X2, ref.p_S_X2, rtol=1e-9)
    np.testing.assert_allclose(got.RMSEA_S_X2, ref.RMSEA_S_X2, rtol=1e-9, atol=1e-15)
    # a binary item's collapsed table has two cells per group: df = groups - parameters
    per_item = {"2pl": 2, "3pl": 3, "rasch": 2, "1pl": 2}[estimated]
    np.testing.assert_array_equal(got.n_groups - per_item, got.df_S_X2)


def test_collapse_of_a_binary_table_is_mirts():
    """mirt:::collapseCells(list(O), list(E), mincell = 1) in R (mirt 1.45.1): the empty group
    (row 6) is dropped, the one-subject group (row 7) joins the next; then the first group with
    an expected count below 1 joins the neighbour with fewer subjects: row 2 (0.5) the group
    above it (4 subjects against 5), row 4 (0.9) the one above it too (4 against 7), and the
    last group (0.5) the one before."""
    O = np.array([[3, 2], [2, 1], [1, 3], [2, 2], [1, 3], [0, 0], [1, 0], [1, 4], [2, 2],
                  [0, 2], [1, 1]], float)
    E = np.array([[3.0, 2.0], [2.5, 0.5], [1.8, 2.2], [0.9, 3.1], [1.2, 2.8], [0.1, 0.2],
                  [0.4, 0.6], [1.1, 3.9], [1.5, 2.5], [1.0, 1.0], [0.5, 1.5]])
    o, e = collapse_cells(O, E, 1.0)
    np.testing.assert_array_equal(o, [[3, 2], [3, 4], [3, 5], [2, 4], [2, 2], [1, 3]])
    np.testing.assert_allclose(e, [[3.0, 2.0], [4.3, 2.7], [2.1, 5.9], [1.5, 4.5], [1.5, 2.5],
                                   [1.5, 2.5]], rtol=1e-15)


def _collapse_binary_direct(O, E, mincell):
    """mirt's collapseCells for two categories, line by line (the oracle for the walks)."""
    keep = O.sum(axis=1) != 0
    O, E = O[keep].copy(), E[keep].copy()
    drop = []
    for j in range(len(O) - 1):
        if O[j].sum() == 1:
            drop.append(j)
            O[j + 1] += O[j]
            E[j + 1] += E[j]
    O, E = np.delete(O, drop, axis=0), np.delete(E, drop, axis=0)
    if O[-1].sum() == 1:
        O[-2] += O[-1]
        E[-2] += E[-1]
        O, E = O[:-1], E[:-1]
    if np.sum(E[:, 1] > 0) / len(E) < 0.05:
        return None
    while ((E < mincell) & (E != 0)).any():
        if len(E) < 2:
            return None
        whc = np.flatnonzero(((E < mincell) & (E != 0)).any(axis=1))[0]
        if whc == 0:
            pick = 1
        elif whc == len(E) - 1:
            pick = whc - 1
        else:
            pick = whc - 1 if O[whc - 1].sum() <= O[whc + 1].sum() else whc + 1
        E[pick] += E[whc]
        O[pick] += O[whc]
        O, E = np.delete(O, whc, axis=0), np.delete(E, whc, axis=0)
    return (O, E) if len(E) >= 2 else None


def test_collapse_walks_equal_the_direct_transcription(rng):
    """Sparse random tables (runs of one-subject groups, ties in the neighbours' sizes)."""
    for _ in range(300):
        rows = int(rng.integers(2, 40))
        n_k = rng.choice([0, 1, 1, 2, 3, 5, 8], size=rows).astype(float)
        p = rng.uniform(0.02, 0.98, rows)
        o1 = rng.binomial(n_k.astype(int), p).astype(float)
        O = np.column_stack([n_k - o1, o1])
        E = np.column_stack([n_k * (1 - p), n_k * p])
        mincell = float(rng.choice([1.0, 2.0, 5.0]))
        if (n_k > 0).sum() < 2:
            continue
        want = _collapse_binary_direct(O, E, mincell)
        got = collapse_cells(O, E, mincell)
        if want is None:
            assert got is None
            continue
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], np.where(want[1] == 0, np.nan, want[1]))


def test_no_df_gives_nan_as_mirt():
    rm, bank, mean, sd = _load("lsat7_2pl", "lsat7")
    got = fit.sx2(rm, bank, estimated="4pl")          # 4 groups - 4 parameters
    assert (got.df_S_X2 == 0).all()
    assert got.S_X2.isna().all() and got.p_S_X2.isna().all() and got.RMSEA_S_X2.isna().all()


def test_atlas_fit_reports_mirts_item_fit(tmp_path):
    out = tmp_path / "fit.json"
    assert main(["fit", str(REF / "sparse2pl.csv"), "--bank",
                 str(REF / "sparse2pl_2pl_items.csv"), "--json", "-o", str(out)]) == 0
    rep = json.loads(out.read_text())
    ref = pd.read_csv(REF / "sparse2pl_2pl_itemfit.csv")
    items = pd.DataFrame(rep["items"])
    assert list(items.item_id) == list(ref.item_id)
    assert list(items.df_S_X2) == list(ref.df_S_X2)
    np.testing.assert_allclose(items.S_X2, ref.S_X2, rtol=1e-10)
    np.testing.assert_allclose(items.RMSEA_S_X2, ref.RMSEA_S_X2, rtol=1e-9, atol=1e-15)
