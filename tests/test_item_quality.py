"""Item quality report: flags, information share, S-X2 misfit detection."""
from __future__ import annotations

import numpy as np
import pytest

from atlascat import catalogue
from atlascat.studies.item_quality import benjamini_hochberg, item_quality
from atlascat.irt.bank import ItemBank


def test_flags_and_information_share():
    bank = ItemBank(["good", "neg", "flat", "guess", "nearguess", "far", "noisy"],
                    a=[1.5, -0.8, 0.05, 1.2, 1.2, 1.0, 1.4],
                    b=[0.0, 0.5, 0.0, 0.0, 0.0, 6.0, 0.0],
                    c=[0.1, 0.0, 0.0, 0.6, 0.45, 0.0, 0.0],
                    u=[1, 1, 1, 1, 1, 1, 0.8])
    q = item_quality(bank).set_index("item_id")
    assert q.loc["good", "issues"] == "" and q.loc["good", "n_issues"] == 0
    assert q.loc["neg", "issues"] == "negative_a"
    assert q.loc["flat", "issues"] == "low_a"
    assert q.loc["guess", "issues"] == "high_c"
    assert q.loc["nearguess", "issues"] == "c_near_max"
    assert q.loc["far", "issues"] == "extreme_b"
    assert q.loc["noisy", "issues"] == "low_u"
    assert q["info_share"].sum() == pytest.approx(1.0)
    # flawed items carry little weight in theta although each counts 1/7 in raw accuracy
    assert q.loc["good", "weight_ratio"] > 1.5
    assert (q.loc[["flat", "far"], "weight_ratio"] < 0.1).all()
    assert q.loc["guess", "weight_ratio"] < 0.5 * q.loc["good", "weight_ratio"]
    # info is the N(0,1)-averaged Fisher information
    nodes = np.linspace(-6, 6, 61)
    w = np.exp(-nodes**2 / 2)
    w /= w.sum()
    assert q.loc["good", "info"] == pytest.approx(w @ bank.subset(["good"]).information(nodes)[:, 0])


def test_poor_fit_flag_from_responses(rng):
    n = 12
    bank = ItemBank([f"i{k}" for k in range(n)], rng.uniform(1, 2, n), rng.normal(0, 1, n))
    true = ItemBank(bank.item_ids, np.r_[-1.0, bank.a[1:]], bank.b)   # item 0 keyed backwards
    theta = rng.normal(size=3000)
    y = (rng.random((3000, n)) < true.probability(theta)).astype(float)
    q = item_quality(bank, y, estimated="none")
    assert q.loc[0, "issues"] == "poor_fit" and q.loc[0, "p_S_X2_bh"] < 1e-6
    # the reversed item also distorts the summed score the others are conditioned on, so they
    # misfit mildly too; the culprit stands out by an order of magnitude
    assert q["S_X2"].idxmax() == 0
    assert q.loc[0, "S_X2"] > 20 * q.loc[1:, "S_X2"].median()


def test_benjamini_hochberg():
    p = np.array([0.01, 0.04, 0.03, 0.005, np.nan])
    adj = benjamini_hochberg(p)
    np.testing.assert_allclose(adj[:4], [0.02, 0.04, 0.04, 0.02])
    assert np.isnan(adj[4])


def test_published_arc_bank_report():
    bank = catalogue.load_paper_bank("arc")
    q = item_quality(bank)
    assert len(q) == 839
    neg = set(q.loc[q["issues"].str.contains("negative_a"), "item_id"])
    assert neg == set(bank.nonpositive_items) - set(bank.item_ids[bank.a == 0])
    # the paper's point: the flawed items get little of the test information
    flawed = q["n_issues"] > 0
    assert q.loc[flawed, "weight_ratio"].median() < q.loc[~flawed, "weight_ratio"].median()
