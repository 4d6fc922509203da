"""Multidimensional ML and WLE scores (atlascat.irt.multidimml through
``score_multidim(..., "ml" | "wle")`` and ``atlas score --bank MBANK -m ml|wle``).

Parity with mirt 1.45.1's ``fscores(mod, method = "ML" | "WLE", full.scores.SE = TRUE)``:
fixtures in tests/data/mirt_mdscore (make_ml_wle.R there), mirt's parameters fixed to ATLAS's
banks: K = 2 (corr2f, 2000 subjects; 500 with missing answers; hand-made extreme patterns) and
K = 3 (300 subjects, every 7th answer missing). mirt's nlm stops at ~1e-5 in theta and its SEs
come from a finite-difference Hessian (~1e-3 relative); ATLAS's from the analytic one."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat import estimate_ability
from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.irt.bank import ItemBank
from atlascat.irt.multidim import MultidimBank
from atlascat.irt.multidimml import objective
from atlascat.irt.multidimscore import score_multidim

DATA = Path(__file__).parent / "data"
REF = DATA / "mirt_mdscore"
CORR2F = DATA / "oblimin" / "corr2f.csv"
BANK = REF / "corr2f_bank.csv"
SETS = {"corr2f": (CORR2F, BANK), "corr2f_missing": (REF / "corr2f_missing.csv", BANK),
        "threefactor": (REF / "threefactor_missing.csv", REF / "threefactor_bank.csv")}


def _load(name):
    data, bank = SETS[name]
    return pd.read_csv(data, index_col=0), MultidimBank.read(bank)


def _ref(name, method, k):
    ref = pd.read_csv(REF / f"{name}_{method}.csv")
    return (ref[[f"theta_{i + 1}" for i in range(k)]].to_numpy(),
            ref[[f"se_{i + 1}" for i in range(k)]].to_numpy(), ref.subject_id.tolist())


@pytest.mark.parametrize("name", list(SETS))
@pytest.mark.parametrize("method", ["ml", "wle"])
def test_parity_with_mirt_fscores(name, method):
    """Scored in mirt's box (max_theta = 20). WLE: every subject with an answer ok, theta and
    SE as mirt's. ML: all answers right / wrong +-inf as mirt's; a subject ATLAS flags
    diverged is one mirt left at its box (|theta| = 20, its optimizer stopped by the bound) or
    gave an Inf; for the others ATLAS's theta and SE are mirt's where mirt's are finite, and
    where mirt writes +-Inf (its rule: SE > 30) ATLAS's SE is over 30, the sign the same."""
    responses, bank = _load(name)
    res = score_multidim(responses, bank, method, bounds=(-20, 20))
    want_t, want_se, ids = _ref(name, method, bank.n_dims)
    assert res.to_frame().subject_id.tolist() == ids
    answered = res.n_items > 0
    assert np.array_equal(np.isnan(want_t).all(1), ~answered)       # no answer: NA, NaN
    assert np.isnan(res.theta[~answered]).all() and set(res.flag[~answered]) <= {"no_items"}
    if method == "wle":
        assert set(res.flag[answered]) == {"ok"}
        fin = answered[:, None] & np.ones(bank.n_dims, bool)
    else:
        y = responses[list(bank.item_ids)].to_numpy(float)
        right, wrong = np.nansum(y, 1) == res.n_items, np.nansum(y, 1) == 0
        assert np.array_equal(res.flag == "perfect", right & answered)
        assert np.array_equal(res.flag == "zero", wrong & answered)
        ends = np.isin(res.flag, ["perfect", "zero"])
        np.testing.assert_array_equal(res.theta[ends], want_t[ends])
        boxed = (np.isfinite(want_t) & (np.abs(want_t) > 19.99)).any(1)
        ok = res.flag == "ok"
        assert not boxed[ok].any() and set(res.flag[answered & ~ends & ~ok]) == {"diverged"}
        assert (boxed | np.isinf(want_t).any(1))[res.flag == "diverged"].all()
        mirt_inf = ok[:, None] & np.isinf(want_t)
        assert (res.se[mirt_inf] > 30).all() and (mirt_inf.sum() > 0 or name == "threefactor")
        assert (np.sign(res.theta[mirt_inf]) == np.sign(want_t[mirt_inf])).all()
        part = ok[:, None] & np.isfinite(want_t) & mirt_inf.any(1, keepdims=True)
        assert (np.abs(res.theta[part] - want_t[part]) < 1e-3).all()   # mirt stopped far out
        fin = ok[:, None] & np.isfinite(want_t) & ~part
    assert fin.all(1).sum() > 0.7 * len(fin) and (fin.all(1) | ~fin.any(1)).all()
    assert np.abs(res.theta[fin] - want_t[fin]).max() < 1e-4
    np.testing.assert_allclose(res.se[fin], want_se[fin], rtol=2e-3)


def test_default_bounds_flag_ml_beyond_ten_as_the_unidimensional_path(capsys):
    """With the default bounds (-10, 10), an ML coordinate mirt puts between 10 and 20 is +-inf
    (flag diverged; the unidimensional ML's rule at its bounds); the others are unchanged."""
    responses, bank = _load("corr2f")
    wide = score_multidim(responses, bank, "ml", bounds=(-20, 20))
    res = score_multidim(responses, bank, "ml")
    beyond = (wide.flag == "ok") & (np.abs(wide.theta) > 10).any(1)
    assert beyond.sum() > 0 and set(res.flag[beyond]) == {"diverged"}
    assert np.isinf(res.theta[beyond][np.abs(wide.theta[beyond]) > 10]).all()
    same = wide.flag == "ok"
    same &= ~beyond
    np.testing.assert_allclose(res.theta[same], wide.theta[same], atol=1e-12)


def test_extreme_patterns():
    """mirt: ML +-Inf (SE NA) for all answers right / wrong, missing ones aside, one answer
    included; a separable pattern (factor-1 items right, factor-2 items wrong) runs into mirt's
    box (theta_1 20, theta_2 -17.7): ATLAS +inf / -inf, diverged. WLE is finite for all of
    them as mirt's, but for one answer (I singular: mirt stops, NA; ATLAS NaN, singular)."""
    responses = pd.read_csv(REF / "extreme.csv", index_col=0)
    bank = MultidimBank.read(BANK)
    ml = score_multidim(responses, bank, "ml")
    assert ml.flag.tolist() == ["perfect", "zero", "perfect", "zero", "perfect", "diverged",
                                "diverged", "ok", "no_items"]
    want_t, want_se, _ = _ref("extreme", "ml", 2)
    inf = np.isinf(want_t)
    np.testing.assert_array_equal(ml.theta[inf], want_t[inf])
    np.testing.assert_array_equal(ml.theta[5], [np.inf, -np.inf])
    assert np.isinf(ml.se[:6]).all() and np.isnan(ml.theta[8]).all()
    assert np.abs(ml.theta[7] - want_t[7]).max() < 1e-4             # one_right: ok, SE 28
    np.testing.assert_allclose(ml.se[7], want_se[7], rtol=2e-3)
    assert np.isinf(ml.theta[6, 0]) and abs(ml.theta[6, 1] - want_t[6, 1]) < 1e-3
    wle = score_multidim(responses, bank, "wle")
    want_t, want_se, _ = _ref("extreme", "wle", 2)
    assert wle.flag.tolist() == ["ok"] * 4 + ["singular"] + ["ok"] * 3 + ["no_items"]
    np.testing.assert_array_equal(np.isnan(wle.theta), np.isnan(want_t))
    ok = ~np.isnan(want_t)
    assert np.abs(wle.theta[ok] - want_t[ok]).max() < 1e-5
    np.testing.assert_allclose(wle.se[ok], want_se[ok], rtol=2e-3)
    assert np.isnan(wle.se[[4, 8]]).all()


@pytest.mark.parametrize("method", ["ml", "wle"])
def test_gradient_and_hessian_are_the_objectives(method):
    """Central differences of log L (+ log det I / 2) at random thetas, K = 3, missing answers."""
    rng = np.random.default_rng(3)
    A, d = rng.uniform(-0.5, 2, (10, 3)), rng.normal(size=10)
    y = (rng.random((4, 10)) < 0.5).astype(float)
    w = (rng.random((4, 10)) < 0.8).astype(float)
    y1, theta = y * w, rng.normal(size=(4, 3))
    _, g, neg_h = objective(theta, y1, w, A, d, method)
    eps = 1e-5
    for k in range(3):
        e = np.zeros(3)
        e[k] = eps
        fp, gp, _ = objective(theta + e, y1, w, A, d, method)
        fm, gm, _ = objective(theta - e, y1, w, A, d, method)
        np.testing.assert_allclose(g[:, k], (fp - fm) / (2 * eps), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(-neg_h[:, :, k], (gp - gm) / (2 * eps), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("method", ["ml", "wle"])
def test_one_dimension_is_the_unidimensional_estimator(method):
    """K = 1: log L + log I / 2 is Warm's WLE for the 2PL, so the multidimensional ML and WLE
    are ATLAS's unidimensional ones (b = -d / a); SEs: ML 1 / sqrt(I) both, WLE mirt's
    curvature here, catR's 1 / sqrt(I) there."""
    rng = np.random.default_rng(5)
    a, d = rng.uniform(0.6, 2, 15), rng.normal(size=15)
    y = (rng.random((60, 15)) < 0.55).astype(float)
    y[rng.random(y.shape) < 0.2] = np.nan
    md = score_multidim(y, MultidimBank([f"i{j}" for j in range(15)], a[:, None], d), method)
    uni = estimate_ability(pd.DataFrame(y, columns=[f"i{j}" for j in range(15)]),
                           ItemBank([f"i{j}" for j in range(15)], a, -d / a), method)
    fin = md.flag == "ok"
    assert (uni.flag.to_numpy()[fin] == "ok").all()
    np.testing.assert_allclose(md.theta[fin, 0], uni.theta.to_numpy()[fin], atol=1e-7)
    if method == "ml":
        np.testing.assert_allclose(md.se[fin, 0], uni.se.to_numpy()[fin], rtol=1e-6)
        assert np.array_equal(np.isinf(md.theta[:, 0]), np.isinf(uni.theta.to_numpy()))
    else:
        assert (md.se[:, 0] < uni.se.to_numpy()).all()   # the curvature adds -d2 log I / 2 > 0


def test_rotated_scores_are_the_rotated_banks():
    """rotate='oblimin' gives T^T theta with covariance T^T C T: the estimates of the bank with
    the rotated slopes A T^{-T} (log det I changes by a constant: WLE is equivariant too)."""
    responses, bank = _load("corr2f")
    responses = responses.iloc[:300]
    from atlascat.irt.rotation import rotate, standardized_loadings

    T = rotate(standardized_loadings(bank.loadings), "oblimin").T
    turned = MultidimBank(bank.item_ids, bank.loadings @ np.linalg.inv(T.T), bank.intercepts)
    for method in ("ml", "wle"):
        rot = score_multidim(responses, bank, method, rotate="oblimin", bounds=(-40, 40))
        direct = score_multidim(responses, turned, method, bounds=(-40, 40))
        ok = (direct.flag == "ok") & (rot.flag == "ok")
        assert ok.sum() > 200
        np.testing.assert_allclose(rot.theta[ok], direct.theta[ok], atol=1e-7)
        np.testing.assert_allclose(rot.se[ok], direct.se[ok], rtol=1e-6)
        perfect = rot.flag == "perfect"
        assert np.isinf(rot.theta[perfect]).all()


def test_wle_where_its_objective_is_not_concave():
    """Patterns whose WLE objective has an indefinite Hessian on the way (weak items: loadings
    0.06, 0.02 and 0.04, 0.19): Fisher scoring steps there reach the maximum (a plain gradient
    step left them 0.002-0.04 from stationary after 100 steps); with max_iter=1, not_converged."""
    rng = np.random.default_rng(0)
    A, d = rng.uniform(0, 1.5, (12, 2)), rng.normal(size=12)
    th = rng.normal(size=(100000, 2))
    y = (rng.random((100000, 12)) < 1 / (1 + np.exp(-(th @ A.T + d)))).astype(float)
    y[rng.random(y.shape) < 0.2] = np.nan
    y = y[[3095, 4766, 6254, 6911, 9240, 15836, 17317, 18925]]
    bank = MultidimBank([f"i{j}" for j in range(12)], A, d)
    res = score_multidim(y, bank, "wle", bounds=(-40, 40))   # two maxima lie beyond 10
    assert set(res.flag) == {"ok"}
    obs = ~np.isnan(y)
    _, g, neg_h = objective(res.theta, np.where(obs, y, 0), obs * 1.0, A, d, "wle")
    assert np.abs(g).max() < 1e-8 and (np.linalg.eigvalsh(neg_h)[:, 0] > 0).all()
    assert "not_converged" in score_multidim(y, bank, "wle", max_iter=1).flag


def test_blocks_of_subjects_give_the_same_scores(monkeypatch):
    import atlascat.irt.multidimml as mm

    responses, bank = _load("corr2f_missing")
    whole = [score_multidim(responses, bank, m) for m in ("ml", "wle")]
    monkeypatch.setattr(mm, "_BLOCK_CELLS", 12 * 7)        # 256 subjects a block (the least)
    for m, res in zip(("ml", "wle"), whole):
        again = score_multidim(responses, bank, m)
        np.testing.assert_array_equal(again.flag, res.flag)
        np.testing.assert_allclose(again.theta, res.theta, atol=1e-12)
        np.testing.assert_allclose(again.se, res.se, atol=1e-12)
    empty = score_multidim(np.zeros((0, 12)), bank, "wle")
    assert empty.theta.shape == (0, 2) and empty.flag.shape == (0,)


def test_refusals():
    bank = MultidimBank.read(BANK)
    with pytest.raises(ConfigError, match="bounds"):
        score_multidim(np.ones((1, 12)), bank, "ml", bounds=(1, 5))
    res = score_multidim(np.ones((1, 12)), bank, "eap")
    assert res.flag is None and "flag" not in res.to_frame()


@pytest.mark.parametrize("method", ["ml", "wle"])
def test_cli_score_ml_and_wle(tmp_path, capsys, method):
    out = tmp_path / "s.csv"
    assert main(["score", str(REF / "corr2f_missing.csv"), "--bank", str(BANK), "-m", method,
                 "-o", str(out)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"{method.upper()} on the bank's axes, median SE of the ok scores" in said
    assert "1 no_items" in said and ("diverged" in said) == (method == "ml")
    df = pd.read_csv(out)
    assert list(df.columns) == ["subject_id", "theta_1", "theta_2", "se_1", "se_2", "n_items",
                                "mean_score", "flag"]
    lib = score_multidim(pd.read_csv(REF / "corr2f_missing.csv", index_col=0),
                         MultidimBank.read(BANK), method)
    assert df.flag.tolist() == lib.flag.tolist()
    np.testing.assert_allclose(df[["theta_1", "theta_2"]], lib.theta, rtol=1e-7)
    assert np.isinf(df.loc[df.flag == "perfect", "theta_1"]).all()
    assert main(["score", str(CORR2F), "--bank", str(BANK), "-m", method, "-o", str(out),
                 "--rotate", "oblimin"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"{method.upper()} on oblimin axes (Phi_12 0.589), median SE of the ok" in said
