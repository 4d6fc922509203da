"""Multidimensional EAP / MAP scores with posterior SDs (atlascat.irt.multidimscore) and the
CLI that writes them (``atlas score --bank MBANK``, ``atlas calibrate --dims K --scores``).

Parity with mirt 1.45.1's ``fscores(mod, method = "EAP" | "MAP", full.scores.SE = TRUE)``:
fixtures in tests/data/mirt_mdscore (make_fixtures.R there) on tests/data/oblimin/corr2f.csv
(2000 subjects x 12 items, two factors), mirt's parameters fixed to ATLAS's bank
corr2f_bank.csv (varimax loadings), mirt's default grid of 61 x 61 points on [-6, 6]."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.errors import ConfigError, ResponseDataError
from atlascat.irt.multidim import MultidimBank, product_grid
from atlascat.irt.multidimscore import fscores_quadpts, score_multidim

DATA = Path(__file__).parent / "data"
REF = DATA / "mirt_mdscore"
CORR2F = DATA / "oblimin" / "corr2f.csv"
BANK = REF / "corr2f_bank.csv"
COLS = ["theta_1", "theta_2", "se_1", "se_2"]


@pytest.fixture(scope="module")
def bank():
    return MultidimBank.read(BANK)


@pytest.fixture(scope="module")
def full():
    return pd.read_csv(CORR2F, index_col=0)


@pytest.fixture(scope="module")
def missing():
    return pd.read_csv(REF / "corr2f_missing.csv", index_col=0)


def _compare(ours, ref_file, theta_tol, se_tol):
    ref = pd.read_csv(REF / ref_file)
    ours = ours.to_frame() if hasattr(ours, "to_frame") else ours
    assert ours.subject_id.tolist() == ref.subject_id.tolist()
    ok = ref.theta_1.notna().to_numpy()   # mirt: NA for a subject with no answer
    diff = np.abs(ours.loc[ok, COLS].to_numpy() - ref.loc[ok, COLS].to_numpy())
    assert diff[:, :2].max() < theta_tol and diff[:, 2:].max() < se_tol
    return ours, ok


@pytest.mark.parametrize("method, ref_file, theta_tol, se_tol", [
    ("eap", "corr2f_eap.csv", 1e-10, 1e-10),   # the same grid: equal to rounding
    ("map", "corr2f_map.csv", 1e-4, 1e-4),     # mirt's optimizer stops at ~5e-6 (SE ~2e-5)
])
def test_parity_with_mirt_fscores(bank, full, method, ref_file, theta_tol, se_tol):
    _compare(score_multidim(full, bank, method), ref_file, theta_tol, se_tol)


@pytest.mark.parametrize("method, ref_file, tol", [("eap", "corr2f_missing_eap.csv", 1e-10),
                                                   ("map", "corr2f_missing_map.csv", 1e-4)])
def test_missing_answers_are_skipped(bank, missing, method, ref_file, tol):
    ours, ok = _compare(score_multidim(missing, bank, method), ref_file, tol, tol)
    assert not ok[0] and ours.n_items[0] == 0   # no answer: the prior, theta 0 and SE 1
    np.testing.assert_allclose(ours.loc[0, COLS].to_numpy(float), [0, 0, 1, 1], atol=1e-7)
    assert (ours.n_items[1:] < 12).any()


def test_oblimin_axes_match_mirt_with_rotated_slopes_and_phi(bank, full):
    """mirt's oblimin rotation of the bank, slopes 1.702 F* / sqrt(1 - h2), prior N(0, Phi),
    scored on mirt's grid in the rotated space: ATLAS's T^T theta differs by quadrature only."""
    res = score_multidim(full, bank, "eap", rotate="oblimin")
    _compare(res, "corr2f_oblimin_eap.csv", 1e-5, 1e-5)
    phi = pd.read_csv(REF / "corr2f_oblimin_phi.csv").phi12[0]
    assert res.phi[0, 1] == pytest.approx(phi, abs=1e-6)


def test_varimax_of_a_varimax_bank_changes_little(bank, full):
    """The bank keeps varimax loadings: mirt's varimax (on standardized loadings, no Kaiser
    normalization) is close to it, an orthogonal rotation, so Phi is the identity."""
    a = score_multidim(full, bank, "eap")
    b = score_multidim(full, bank, "eap", rotate="varimax")
    np.testing.assert_allclose(b.phi, np.eye(2), atol=1e-12)
    assert np.corrcoef(a.theta[:, 0], b.theta[:, 0])[0, 1] > 0.99


def test_eap_is_the_brute_force_posterior_mean(bank):
    """One subject, three dimensions, answers partly missing: the grid posterior by hand."""
    rng = np.random.default_rng(1)
    b3 = MultidimBank([f"i{j}" for j in range(9)], rng.uniform(0.5, 2, (9, 3)),
                      rng.normal(size=9))
    y = np.array([[1, 0, np.nan, 1, 1, 0, np.nan, 0, 1]])
    res = score_multidim(y, b3, quadpts=15)
    nodes, logw = product_grid(3, 15)
    p = 1 / (1 + np.exp(-(nodes @ b3.loadings.T + b3.intercepts)))
    obs = ~np.isnan(y[0])
    like = np.prod(np.where(y[0][obs] == 1, p[:, obs], 1 - p[:, obs]), axis=1) * np.exp(logw)
    post = like / like.sum()
    mean = post @ nodes
    np.testing.assert_allclose(res.theta[0], mean, atol=1e-12)
    np.testing.assert_allclose(res.se[0], np.sqrt(post @ nodes**2 - mean**2), atol=1e-12)
    assert res.n_items[0] == 7 and fscores_quadpts(3) == 31 and fscores_quadpts(2) == 61


def test_map_is_a_stationary_point_and_eap_in_blocks(bank, full, monkeypatch):
    res = score_multidim(full.iloc[:50], bank, "map")
    p = 1 / (1 + np.exp(-(res.theta @ bank.loadings.T + bank.intercepts)))
    grad = (full.iloc[:50].to_numpy() - p) @ bank.loadings - res.theta
    assert np.abs(grad).max() < 1e-8
    import atlascat.irt.multidimscore as ms

    whole = score_multidim(full.iloc[:50], bank).theta
    monkeypatch.setattr(ms, "_BLOCK_CELLS", 3721 * 7)   # 7 subjects a block
    np.testing.assert_allclose(score_multidim(full.iloc[:50], bank).theta, whole, atol=1e-13)


def test_library_refusals(bank, full):
    with pytest.raises(ConfigError, match="EAP, MAP, ML or WLE"):
        score_multidim(full, bank, "plausible")
    with pytest.raises(ConfigError, match="rotate must be one of"):
        score_multidim(full, bank, rotate="promax")
    with pytest.raises(ResponseDataError, match="0/1"):
        score_multidim(full * 0.5, bank)
    with pytest.raises(ResponseDataError, match="12 items"):
        score_multidim(np.zeros((3, 5)), bank)
    big = MultidimBank(["a", "b"], np.ones((2, 10)), [0, 0])
    with pytest.raises(ConfigError, match="use method='map'"):
        score_multidim(np.ones((1, 2)), big)
    assert score_multidim(np.ones((1, 2)), big, "map").theta.shape == (1, 10)


def test_cli_score_writes_theta_and_se_per_dimension(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["score", str(CORR2F), "--bank", str(BANK), "-o", str(out)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "EAP on the bank's axes (prior N(0, I))" in said
    df = pd.read_csv(out)
    assert list(df.columns) == ["subject_id", *COLS, "n_items", "mean_score"]
    _compare(df, "corr2f_eap.csv", 1e-7, 1e-7)   # written with 8 significant digits
    assert main(["score", str(REF / "corr2f_missing.csv"), "--bank", str(BANK), "-o", str(out),
                 "--method", "map", "--rotate", "oblimin"]) == 0
    assert "MAP on oblimin axes" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("args, words", [
    (["--prior-sd", "2"], "--prior-sd is not available with a multidimensional bank"),
    (["--reconstruct", "pirt"], "--reconstruct is not available with a multidimensional bank"),
    (["--rotate", "promax"], "--rotate must be one of"),
])
def test_cli_score_refusals_in_one_line(tmp_path, capsys, args, words):
    out = tmp_path / "s.csv"
    assert main(["score", str(CORR2F), "--bank", str(BANK), "-o", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert words in " ".join(err.split()) and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_cli_rotate_needs_a_multidimensional_bank(tmp_path, capsys):
    assert main(["score", str(DATA / "mirt_lsat7_2pl.csv"), "--bank",
                 str(DATA / "mirt_lsat7_2pl.csv"), "--rotate", "oblimin"]) == 2
    assert "multidimensional banks" in capsys.readouterr().err


def test_cli_calibrate_dims_writes_scores(tmp_path, capsys):
    """--scores with --dims: EAP on the fitted bank's varimax axes, as atlas score on it."""
    bank, scores, again = tmp_path / "b.csv", tmp_path / "cs.csv", tmp_path / "s.csv"
    assert main(["calibrate", str(CORR2F), "--dims", "2", "-o", str(bank), "--scores",
                 str(scores), "--max-iter", "30", "-q"]) == 0
    df = pd.read_csv(scores)
    assert list(df.columns) == ["subject_id", *COLS, "n_items", "mean_score"] and len(df) == 2000
    assert main(["score", str(CORR2F), "--bank", str(bank), "-o", str(again), "-q"]) == 0
    np.testing.assert_allclose(pd.read_csv(again)[COLS], df[COLS], atol=1e-6)
    assert list(pd.read_csv(again).columns) == list(df.columns)   # atlas score's table
