"""A mirt user's walk of scoring and fit on the real dense matrices (../shared/data/openllm) against
mirt 1.45.1 on the same, fixed, item parameters (tests/data/walk_score_fit/make_*.R)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_checks import one_line_error

from atlascat import calibrate, estimate_ability
from atlascat.catalogue import load_paper_bank
from atlascat.errors import ConfigError
from atlascat.irt import fit
from atlascat.irt.bank import ItemBank
from atlascat.responses import ResponseMatrix

REF = Path(__file__).parent / "data" / "walk_score_fit"


@pytest.fixture(scope="module")
def arc_block(shared_data):
    """make_scores.R's 62 x 292 block: every 37th row of dense_arc, an all-right and an
    all-wrong pattern, on the items the paper's ARC bank has; and the same with ~20% blank."""
    ref = pd.read_csv(REF / "arc_scores.csv")
    bank = load_paper_bank("arc")
    dense = pd.read_csv(shared_data / "openllm" / "dense_arc.csv.gz", index_col=0)
    items = [c for c in dense.columns if c in set(bank.item_ids)]
    rows = dense.iloc[ref["row"].to_numpy()[:-2] - 1][items].to_numpy(float)
    y = np.vstack([rows, np.ones(len(items)), np.zeros(len(items))])
    i, j = np.meshgrid(np.arange(1, y.shape[0] + 1), np.arange(1, y.shape[1] + 1), indexing="ij")
    y_missing = np.where((7 * i + 3 * j) % 5 == 0, np.nan, y)
    ids = [f"s{k}" for k in range(len(y))]
    return ref, bank, {"full": ResponseMatrix(y, ids, items),
                       "missing": ResponseMatrix(y_missing, ids, items)}


@pytest.mark.parametrize("data", ["full", "missing"])
def test_eap_is_mirts_fscores_on_292_items(arc_block, data):
    """fscores' EAP integrates on 121 nodes; 61 nodes (0.2 apart) were up to 0.05 off mirt
    when the posterior SD is 0.1 (292 items). Blank cells are skipped, as mirt does."""
    ref, bank, rm = arc_block
    # mirt's fscores integrates on its grid alone: quadrature="fixed" is its computation (the
    # default, adaptive, moves 13 of the 62 by up to 8e-4: their posterior SD is ~0.07)
    got = estimate_ability(rm[data], bank, "eap", quadrature="fixed")
    np.testing.assert_allclose(got["theta"], ref[f"{data}_EAP_theta"], atol=1e-6)
    np.testing.assert_allclose(got["se"], ref[f"{data}_EAP_se"], atol=1e-6)


@pytest.mark.parametrize("data", ["full", "missing"])
@pytest.mark.parametrize("method", ["MAP", "ML"])
def test_map_ml_theta_are_mirts(arc_block, data, method):
    ref, bank, rm = arc_block
    got = estimate_ability(rm[data], bank, method.lower())
    want = ref[f"{data}_{method}_theta"].to_numpy(float)
    theta = got["theta"].to_numpy()
    fin = np.isfinite(want)
    np.testing.assert_allclose(theta[fin], want[fin], atol=1e-5)


def test_ml_all_right_all_wrong(arc_block):
    """mirt's ML gives +-Inf to an all-right / all-wrong row by its pattern (and a finite theta
    once a blank breaks the pattern); ATLAS takes the likelihood's maximum: this bank has 189
    negative slopes, so both rows have a finite one (S = 0 there), and only a likelihood that
    keeps rising gives +-inf (flag perfect / zero)."""
    ref, bank, rm = arc_block
    got = estimate_ability(rm["full"], bank, "ml").iloc[-2:]
    assert np.isinf(ref["full_ML_theta"].to_numpy(float)[-2:]).all()
    assert np.isfinite(got["theta"]).all() and (got["flag"] == "ok").all()
    assert got["theta"].iloc[0] > 1.5 and got["theta"].iloc[1] < -4
    keep = [i for i, a in zip(bank.item_ids, bank.a) if a > 0 and i in rm["full"].item_ids]
    pos = estimate_ability(rm["full"].subset(items=keep), bank.subset(keep), "ml").iloc[-2:]
    assert list(pos["theta"]) == [np.inf, -np.inf] and list(pos["flag"]) == ["perfect", "zero"]


def test_m2_partitions_never_exceed_one_m2(arc_block):
    """--partition-size 150 on 220 items made one partition of 220 (round(220 / 150) = 1),
    which M2 then refused with 'use --partition-size 100'; a size over 150 (600 on GSM8K's 552
    items, 200 on its 552 -> 184-item parts) failed the same way after reading everything."""
    assert [len(p) for p in fit.partition_items(220, 150, max_size=fit.MAX_M2_ITEMS)] == [110, 110]
    assert [len(p) for p in fit.partition_items(839, 100, max_size=150)] == [105] * 7 + [104]
    with pytest.raises(ConfigError, match="at most 150"):
        fit.partition_items(552, 200, max_size=fit.MAX_M2_ITEMS)
    _, bank, rm = arc_block
    with pytest.raises(ConfigError, match="at most 150"):
        fit.m2_partitioned(rm["full"], bank.subset(rm["full"].item_ids), partition_size=600,
                           estimated="none")
    small = rm["full"].subset(items=rm["full"].item_ids[:155])
    table, _ = fit.m2_partitioned(small, bank.subset(small.item_ids), partition_size=150,
                                  estimated="none")
    assert list(table["n_items"]) == [78, 77]


def test_fit_cli_partition_size_over_the_limit(capsys, tmp_path, arc_block):
    _, _, rm = arc_block
    path = tmp_path / "arc.csv"
    rm["full"].write(path)
    one_line_error(capsys, ["fit", path, "--bank", "paper-arc", "--partition-size", "600",
                            "--no-items"], "partition size 600", "at most 150")


@pytest.fixture(scope="module")
def arc500(shared_data):
    """make_fit.R's block: every 4th row of dense_arc (500) x 60 items, and mirt's 2PL on it."""
    items = pd.read_csv(REF / "arc500x60_2pl_items.csv", dtype={"X": str})
    dense = pd.read_csv(shared_data / "openllm" / "dense_arc.csv.gz", index_col=0)
    block = dense.iloc[::4].iloc[:500][list(items["X"])]
    bank = ItemBank(items["X"], items["a1"], -items["d"] / items["a1"])
    return ResponseMatrix.from_frame(block), bank, items


def test_calibrate_se_is_mirts_oakes(arc500):
    """atlas calibrate --model 2pl --prior-a none --se (mirt's defaults, TOL 1e-6) against
    mirt(..., SE = TRUE, SE.type = "Oakes"): parameters to 2e-4, SEs to 1e-3 relative."""
    rm, _, ref = arc500
    res = calibrate(rm, "2pl", prior_a=None, se=True, tol=1e-6)
    got = res.standard_errors("mirt").set_index("item_id").loc[ref["X"]]
    np.testing.assert_allclose(got["a1"], ref["a1"], atol=2e-4)
    np.testing.assert_allclose(got["d"], ref["d"], atol=2e-4)
    np.testing.assert_allclose(got["a1_se"], ref["SE_a1"], rtol=1e-3)
    np.testing.assert_allclose(got["d_se"], ref["SE_d"], rtol=1e-3)


def test_fit_is_mirts_m2_itemfit_personfit(arc500):
    """M2(mod), itemfit(mod) and personfit(mod) on mirt's own 2PL parameters; personfit is at
    fscores' EAP, which person_fit(method="eap") now takes (it refused all but ml/wle/map)."""
    rm, bank, _ = arc500
    m2 = pd.read_csv(REF / "arc500x60_2pl_m2.csv").iloc[0]
    got = fit.m2(rm, bank, estimated="2pl").to_dict()
    for key in ("M2", "df", "RMSEA", "RMSEA_5", "RMSEA_95", "SRMSR"):
        assert got[key] == pytest.approx(m2[key], rel=1e-8), key
    for key in ("TLI", "CFI"):   # mirt's null model is itself fitted: 8e-8 apart
        assert got[key] == pytest.approx(m2[key], rel=1e-6), key
    sx2 = pd.read_csv(REF / "arc500x60_2pl_itemfit.csv")
    mine = fit.sx2(rm, bank, estimated="2pl")
    np.testing.assert_allclose(mine["S_X2"], sx2["S_X2"], rtol=1e-9)
    np.testing.assert_array_equal(mine["df_S_X2"], sx2["df.S_X2"])
    pf = pd.read_csv(REF / "arc500x60_2pl_personfit.csv")
    mine = fit.person_fit(rm, bank, method="eap")
    for ours, theirs in [("lz", "Zh"), ("outfit", "outfit"), ("z_outfit", "z.outfit"),
                         ("infit", "infit"), ("z_infit", "z.infit")]:
        np.testing.assert_allclose(mine[ours], pf[theirs], atol=1e-9)
    assert mine["lz_star"].isna().all()


def test_m2_with_missing_answers_warns(shared_data):
    """mirt's M2(mod) takes pairwise available moments and says nothing; so did ATLAS. On dense
    ARC's first 60 bank items (p from 0.01 to 0.9995), blanking 17% at random multiplies M2 by
    5 (and SRMSR by 2.6): the moments come from different rows, Xi assumes one set."""
    bank = load_paper_bank("arc")
    dense = pd.read_csv(shared_data / "openllm" / "dense_arc.csv.gz", index_col=0)
    block = dense[[c for c in dense.columns if c in set(bank.item_ids)][:60]]
    sub = bank.subset(list(block.columns))
    whole = fit.m2(ResponseMatrix.from_frame(block), sub, estimated="none")
    blank = block.mask(np.random.default_rng(0).random(block.shape) < 0.17)
    with pytest.warns(UserWarning, match="pairwise, as mirt's M2"):
        part = fit.m2(ResponseMatrix.from_frame(blank), sub, estimated="none")
    assert part.M2 > 4 * whole.M2 and part.SRMSR > 2 * whole.SRMSR
