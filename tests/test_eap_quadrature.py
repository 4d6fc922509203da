"""EAP ``quadrature="adaptive"``, the default (atlascat.irt.adaptquad; ``atlas score
--quadrature``): the integral to 1e-5 where mirt's 121-node grid ("fixed") is percents off
(short answer sets of a shipped bank's steep items), and the grid's numbers bit for bit where it
resolves the posterior."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.catalogue import BankRef
from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.irt.ability import eap, estimate_ability
from atlascat.irt.adaptquad import coarse_points, refined_points, unresolved
from atlascat.irt import polytomous as poly
from atlascat.irt.bank import ItemBank
from atlascat.irt.estep import bank_estep
from atlascat.irt.groupscore import score_by_prior
from atlascat.irt.polybank import PolyBank
from atlascat.irt.polyfit import eap_codes
from atlascat.irt.polyscore import score_ordinal
from atlascat.irt.quadrature import Quadrature
from atlascat.irt.special import logsumexp

DATA = Path(__file__).parent / "data" / "mirt_scores"


def _dense(y, bank, mean=0.0, sd=1.0, n=20001):
    """EAP and SD on 20,001 nodes over [-6, 6] (0.0006 apart): the integral."""
    x = np.linspace(-6.0, 6.0, n)
    lw = -0.5 * ((x - mean) / sd) ** 2
    es = bank_estep(y, None, bank, Quadrature(x, lw - logsumexp(lw)))
    return np.asarray(es.theta), np.asarray(es.se)


@pytest.fixture(scope="module")
def steep():
    """300 examinees, 5-30 random items each of the shipped mmlu bank (slopes up to 50)."""
    bank = BankRef.from_option("mmlu").load()
    rng = np.random.default_rng(7)
    theta = rng.uniform(-3, 3, 300)
    y = (rng.random((300, len(bank))) < bank.probability(theta)).astype(float)
    k = rng.integers(5, 31, 300)
    keep = np.argsort(rng.random(y.shape), axis=1) < k[:, None]
    return bank, np.where(keep, y, np.nan)


def test_adaptive_is_the_integral_where_the_fixed_grid_is_off(steep):
    bank, y = steep
    t_ref, s_ref = _dense(y, bank)
    t_fix, s_fix = eap(y, bank, quadrature="fixed")      # mirt's 121-node grid alone
    t_ad, s_ad = eap(y, bank)                            # the default: adaptive
    np.testing.assert_array_equal(t_ad, eap(y, bank, quadrature="adaptive")[0])
    assert np.max(np.abs(s_fix / s_ref - 1)) > 0.01      # the defect: SDs percents off
    assert np.max(np.abs(t_fix - t_ref)) > 0.005
    assert np.max(np.abs(s_ad / s_ref - 1)) < 1e-4
    assert np.max(np.abs(t_ad - t_ref)) < 1e-4
    assert np.median(np.abs(s_ad / s_ref - 1)) < 1e-7


def test_estimate_ability_and_group_priors_take_it(steep):
    bank, y = steep
    df = estimate_ability(y, bank, "eap", quadrature="adaptive")
    np.testing.assert_array_equal(df["theta"], eap(y, bank, quadrature="adaptive")[0])
    # a prior per subject (a multiple-group fit's): each group refined under its own prior
    mean = np.where(np.arange(len(y)) % 2 == 0, 0.5, -0.3)
    sd = np.where(np.arange(len(y)) % 2 == 0, 0.8, 1.2)
    got = score_by_prior(y, bank, "eap", mean, sd, quadrature="adaptive")
    for m, s in ((0.5, 0.8), (-0.3, 1.2)):
        rows = mean == m
        t_ref, s_ref = _dense(y[rows], bank, m, s)
        assert np.max(np.abs(got["theta"].to_numpy()[rows] - t_ref)) < 1e-4
        assert np.max(np.abs(got["se"].to_numpy()[rows] / s_ref - 1)) < 1e-4


@pytest.mark.parametrize("name", ["lsat7_2pl", "lsat7_3pl"])
def test_wide_posteriors_keep_the_grids_numbers_bit_for_bit(name):
    """LSAT7 (5 items, slopes near 1): the half grid agrees, nothing is refined, the scores
    are mirt's fscores to 1e-10 either way."""
    pats = pd.read_csv(DATA / "lsat7.csv").drop(columns="freq")
    bank = ItemBank.read(DATA / f"{name}_items.csv")
    ref = pd.read_csv(DATA / f"{name}_scores.csv")
    fixed = estimate_ability(pats, bank, "eap", quadrature="fixed")
    adapt = estimate_ability(pats, bank, "eap", quadrature="adaptive")
    np.testing.assert_array_equal(adapt["theta"], fixed["theta"])
    np.testing.assert_array_equal(adapt["se"], fixed["se"])
    np.testing.assert_allclose(adapt["theta"], ref["EAP_theta"], atol=1e-5)


def _steep_ordinal():
    """A graded bank of slope 25 (four categories, 40 items) and 3-9 ratings (codes 0-3) of
    200 examinees."""
    rng = np.random.default_rng(3)
    m = 40
    d = np.sort(rng.normal(0, 20, (m, 3)), axis=1)[:, ::-1]
    bank = PolyBank([f"i{j}" for j in range(m)], np.column_stack([np.full(m, 25.0), d]),
                    model="graded")
    theta = rng.uniform(-2, 2, 200)
    p = np.nan_to_num(np.asarray(poly.prob(bank.models, bank.params, theta)))     # (m, n, K)
    codes = (rng.random((m, 200, 1)) > np.cumsum(p, axis=2)).sum(2).T.astype(float)
    keep = np.argsort(rng.random(codes.shape), axis=1) < rng.integers(3, 10, 200)[:, None]
    return bank, np.where(keep, np.minimum(codes, 3), np.nan)


def test_ordinal_banks_refine_too():
    bank, codes = _steep_ordinal()
    t_ref, s_ref = eap_codes(codes, bank.models, bank.params, 10001)
    t_fix, s_fix, _, _ = score_ordinal(codes, bank, "eap", quadrature="fixed")
    t_ad, s_ad, _, _ = score_ordinal(codes, bank, "eap")          # the default: adaptive
    assert np.max(np.abs(s_fix / s_ref - 1)) > 0.01
    assert np.max(np.abs(s_ad / s_ref - 1)) < 1e-4 and np.max(np.abs(t_ad - t_ref)) < 1e-4
    # the Science graded fit (4 items, slopes near 1): the grid's numbers, bit for bit
    sci = PolyBank.read(DATA / "science_graded_items.csv")
    ratings = pd.read_csv(DATA / "science.csv", index_col=0)
    a = estimate_ability(ratings, sci, "eap")
    b = estimate_ability(ratings, sci, "eap", quadrature="fixed")
    np.testing.assert_array_equal(a["se"], b["se"])


def test_the_check_and_the_grids():
    assert coarse_points(121) == 61 and refined_points(121) == 961
    assert refined_points(5001) == 10001 and refined_points(10001) == 10001
    flag = unresolved([0.0, 1.0, np.nan], [0.5, 0.1, np.nan], [0.0, 1.001, np.nan],
                      [0.50001, 0.1, np.nan])
    assert flag.tolist() == [False, True, False]
    with pytest.raises(ConfigError, match="quadrature"):
        eap(np.ones((1, 3)), ItemBank(["a", "b", "c"], [1, 1, 1], [0, 0, 0]),
            quadrature="gauss")


def test_atlas_score_quadrature_option(steep, tmp_path, capsys):
    bank, y = steep
    sub = y[:40]
    frame = pd.DataFrame(sub, columns=[str(i) for i in bank.item_ids],
                         index=pd.Index([f"m{i}" for i in range(40)], name="model"))
    resp = tmp_path / "answers.csv"
    frame.to_csv(resp)
    for quad in ("fixed", "adaptive"):
        out = tmp_path / f"{quad}.csv"
        assert main(["score", str(resp), "--bank", "mmlu", "--quadrature", quad, "-q",
                     "-o", str(out)]) == 0
        got = pd.read_csv(out)
        theta, se = eap(sub, bank, quadrature=quad)
        np.testing.assert_allclose(got["theta"], theta, atol=1e-8)   # the CSV's 8 digits
        np.testing.assert_allclose(got["se"], se, atol=1e-8)
    default = pd.read_csv(tmp_path / "adaptive.csv")
    assert main(["score", str(resp), "--bank", "mmlu", "-q", "-o", str(tmp_path / "d.csv")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "d.csv"), default)
    assert not pd.read_csv(tmp_path / "fixed.csv")["se"].equals(default["se"])
    capsys.readouterr()
    assert main(["score", str(resp), "--bank", "mmlu", "--quadrature", "gauss"]) == 2
    for quad in ("adaptive", "fixed"):   # an explicit --quadrature with a method that has none
        assert main(["score", str(resp), "--bank", "mmlu", "--quadrature", quad,
                     "-m", "wle"]) == 2
        err = capsys.readouterr().err
        assert "--quadrature" in err and "wle" in err
    # not given: the default, which ML / MAP / WLE have no use for, is no refusal
    for method in ("wle", "map", "ml"):
        assert main(["score", str(resp), "--bank", "mmlu", "-m", method, "-q", "-o",
                     str(tmp_path / f"{method}.csv")]) == 0


def test_adaptive_on_a_device_and_on_resident_scores(steep):
    """The array-API path (array_api_strict standing for a GPU): the fixed and check passes
    run there, the refined subjects' answers come to the host; the same numbers as NumPy."""
    strict = pytest.importorskip("array_api_strict", reason="array_api_strict not installed")
    bank, y = steep
    want = eap(y[:60], bank, quadrature="adaptive")
    for got in (eap(y[:60], bank, device=strict, quadrature="adaptive"),
                eap(strict.asarray(y[:60]), bank, quadrature="adaptive")):
        np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-12)


def test_atlas_score_quadrature_on_ordinal_and_multidimensional_banks(tmp_path, capsys):
    bank, codes = _steep_ordinal()
    bpath = bank.write(tmp_path / "graded.csv")
    ratings = pd.DataFrame(codes, columns=list(bank.item_ids),         # levels 0-3
                           index=pd.Index([f"m{i}" for i in range(len(codes))], name="model"))
    ratings.to_csv(tmp_path / "ratings.csv")
    out = tmp_path / "s.csv"
    assert main(["score", str(tmp_path / "ratings.csv"), "--bank", str(bpath), "--quadrature",
                 "adaptive", "-q", "-o", str(out)]) == 0
    back = PolyBank.read(bpath)
    want, _, _, _ = score_ordinal(back.encode(ratings.to_numpy()), back, "eap",
                                  quadrature="adaptive")
    fixed, _, _, _ = score_ordinal(back.encode(ratings.to_numpy()), back, "eap",
                                   quadrature="fixed")
    np.testing.assert_allclose(pd.read_csv(out)["theta"], want, atol=1e-8)
    assert np.max(np.abs(want - fixed)) > 1e-4
    assert main(["score", str(tmp_path / "ratings.csv"), "--bank", str(bpath), "-q", "-o",
                 str(tmp_path / "d.csv")]) == 0                     # the default: adaptive
    np.testing.assert_allclose(pd.read_csv(tmp_path / "d.csv")["theta"], want, atol=1e-8)
    assert main(["score", str(tmp_path / "ratings.csv"), "--bank", str(bpath), "--quadrature",
                 "fixed", "-q", "-o", str(out)]) == 0
    np.testing.assert_allclose(pd.read_csv(out)["theta"], fixed, atol=1e-8)
    mdim = Path(__file__).parent / "data" / "mirt_mdscore"
    capsys.readouterr()
    for quad in ("adaptive", "fixed"):   # its EAP keeps its own grid: an explicit one refused
        assert main(["score", str(mdim / "corr2f_missing.csv"), "--bank",
                     str(mdim / "corr2f_bank.csv"), "--quadrature", quad]) == 2
        assert "--quadrature" in capsys.readouterr().err
    assert main(["score", str(mdim / "corr2f_missing.csv"), "--bank",
                 str(mdim / "corr2f_bank.csv"), "-q", "-o", str(tmp_path / "md.csv")]) == 0


def test_a_calibration_carries_the_default_scores():
    """The scores a calibration result carries (one group or several, binary or ordinal) are
    eap's / atlas score's with the default quadrature on the written bank, refined where the
    grid does not resolve the posterior (steep items, few answers each)."""
    from atlascat.irt.calibrate import calibrate
    from atlascat.irt.groupscore import score_groups

    rng = np.random.default_rng(11)
    m, n = 12, 800
    truth = ItemBank([f"i{j}" for j in range(m)], np.full(m, 6.0), np.linspace(-2, 2, m))
    theta = rng.normal(size=n)
    y = (rng.random((n, m)) < truth.probability(theta)).astype(float)
    y[rng.random(y.shape) < 0.6] = np.nan
    y[:, 0] = np.where(np.isnan(y).all(1), 1.0, y[:, 0])
    answers = pd.DataFrame(y, columns=list(truth.item_ids),
                           index=pd.Index([f"s{i}" for i in range(n)], name="subject"))
    res = calibrate(answers, "2pl", prior_a=None, check_dimensions=False)
    want, se = eap(answers, res.bank)
    np.testing.assert_array_equal(res.theta, want)
    np.testing.assert_array_equal(res.theta_se, se)
    assert np.max(np.abs(eap(answers, res.bank, quadrature="fixed")[1] - se)) > 1e-4
    groups = pd.Series(np.where(np.arange(n) % 2 == 0, "A", "B"), index=answers.index)
    res = calibrate(answers, "2pl", prior_a=None, groups=groups, check_dimensions=False)
    again = score_groups(answers, res.bank, groups, res)
    np.testing.assert_array_equal(res.theta, again["theta"])
    fixed = score_groups(answers, res.bank, groups, res, quadrature="fixed")
    assert np.max(np.abs(fixed["se"] - res.theta_se)) > 1e-4
    bank, codes = _steep_ordinal()
    ratings = pd.DataFrame(codes, columns=list(bank.item_ids),
                           index=pd.Index([f"m{i}" for i in range(len(codes))], name="model"))
    res = calibrate(ratings, model="graded")
    np.testing.assert_array_equal(res.theta, estimate_ability(ratings, res.bank)["theta"])
    fixed = estimate_ability(ratings, res.bank, quadrature="fixed")
    assert np.max(np.abs(fixed["se"] - res.theta_se)) > 1e-4
