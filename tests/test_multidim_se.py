"""Standard errors of the exploratory multidimensional 2PL (:mod:`atlascat.irt.multidimse`), as
mirt's ``mirt(data, K, SE = TRUE)`` and ``coef(mod, printSE = TRUE)``.

Parity fixtures in tests/data/mirt_multidim_se (make_reference.R there, mirt 1.45.1, SE.type
"Oakes", no priors): seeded simulated answers, mirt's estimates and SEs. The information is also
checked against finite differences of the grid log-likelihood's gradient, independently of mirt.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.irt.information import ObservedInformation
from atlascat.irt.multidim import MultidimBank, product_grid
from atlascat.irt.multidimcal import calibrate_multidim
from atlascat.irt.multidimse import (mirt_free, mirt_orientation, multidim_information,
                                     multidim_standard_errors)
from cli_checks import two_factor_answers

REF = Path(__file__).parent / "data" / "mirt_multidim_se"


def _mirt(name: str, k: int):
    """(answers, estimates (J, K + 1), SEs (NaN: fixed), fit json) of a fixture."""
    y = pd.read_csv(REF / f"{name}_data.csv")
    it = pd.read_csv(REF / f"{name}_items.csv")
    it = it[~it.parameter.str.startswith("logit")]
    cols = [f"a{j + 1}" for j in range(k)] + ["d"]
    rows = list(y.columns)
    val = it.pivot(index="item", columns="parameter", values="value").loc[rows, cols]
    se = it.pivot(index="item", columns="parameter", values="se").loc[rows, cols]
    return y, val.to_numpy(), se.to_numpy(), json.loads((REF / f"{name}_fit.json").read_text())


def _fixtures():
    return [pytest.param(name, k, id=name) for name, k in (("twofactor", 2), ("threefactor", 3))
            if (REF / f"{name}_items.csv").exists()]


# ------------------------------------------------------------------ parity with mirt
@pytest.mark.parametrize("name, k", _fixtures())
def test_information_at_mirts_estimates_matches_mirt(name, k):
    """At mirt's own estimates: the grid log-likelihood is mirt's logLik, the fixed loadings are
    mirt's (no SE) and every SE matches mirt's Oakes SE (reached: 7e-9 relative for K = 2,
    2.5e-5 for K = 3, where mirt stopped at TOL 1e-5 and differentiates numerically)."""
    y, val, se, fit = _mirt(name, k)
    nodes, logw = product_grid(k)
    info, grad, loglik = multidim_information(val[:, :k], val[:, k], y.to_numpy(float), None,
                                              nodes, logw)
    assert loglik == pytest.approx(fit["loglik"], abs=1e-6)
    free = mirt_free(y.shape[1], k)
    assert np.array_equal(free, ~np.isnan(se))
    assert np.allclose(val[~free], 0.0)
    f = free.ravel()
    cov = ObservedInformation(info[np.ix_(f, f)], np.argwhere(free), grad[free]).covariance()
    np.testing.assert_allclose(np.sqrt(np.diag(cov)), se[free], rtol=1e-4)


def test_calibrate_multidim_se_matches_mirt():
    """The whole path, mirt-parity mode (no priors): ATLAS's own fit, rotated to mirt's
    orientation, gives mirt's estimates and SEs (reached: ~1e-6 relative at tol 1e-6)."""
    y, val, se, fit = _mirt("twofactor", 2)
    res = calibrate_multidim(y, 2, prior_a_sd=None, prior_d_sd=None, tol=1e-6, max_iter=5000,
                             se=True)
    assert res.converged and not res.se.posterior_mode
    ours = res.standard_errors("none")
    est = ours[["a1", "a2", "d"]].to_numpy()
    sign = np.sign((est[:, :2] * val[:, :2]).sum(axis=0))     # mirt's factors may be reflected
    np.testing.assert_allclose(est[:, :2] * sign, val[:, :2], atol=1e-3)
    got = ours[["a1_se", "a2_se", "d_se"]].to_numpy()
    assert np.array_equal(np.isnan(got), np.isnan(se))
    np.testing.assert_allclose(got[~np.isnan(se)], se[~np.isnan(se)], rtol=1e-3)
    assert res.settings["se"].startswith("observed information")


# ------------------------------------------------------------------ independent of mirt
@pytest.mark.parametrize("k, quadpts", [(2, 9), (3, 5)])
def test_information_is_minus_the_hessian(k, quadpts):
    """Louis' information equals minus the central-difference Jacobian of the (Fisher identity)
    gradient, and that gradient the differences of the log-likelihood: every parameter, with
    missing answers, pattern weights and the priors."""
    rng = np.random.default_rng(7)
    J, n = 5, 250
    A = rng.uniform(0.5, 1.5, (J, k)) * rng.choice([-1, 1], (J, k))
    d = rng.normal(0, 1, J)
    bank = MultidimBank([f"i{j}" for j in range(J)], A, d)
    from atlascat.irt.multidim import simulate_responses

    y = simulate_responses(bank, rng.standard_normal((n, k)), rng)
    y[rng.random(y.shape) < 0.15] = np.nan
    w = rng.integers(1, 4, n).astype(float)
    nodes, logw = product_grid(k, quadpts)
    beta = np.column_stack([A, d]) + 0.05      # off the maximum: the gradient is not 0

    def run(b):
        return multidim_information(b[:, :k], b[:, k], y, w, nodes, logw, prior_a_sd=2.0,
                                    prior_d_sd=4.0)

    info, grad, ll = run(beta)
    P = beta.size
    jac = np.empty((P, P))
    for p in range(P):
        e = np.zeros(P)
        e[p] = 1e-5
        _, g_hi, l_hi = run(beta + e.reshape(beta.shape))
        _, g_lo, l_lo = run(beta - e.reshape(beta.shape))
        jac[:, p] = (g_hi - g_lo).ravel() / 2e-5
        prior_slope = -beta.ravel()[p] * (0.25 if p % (k + 1) < k else 1 / 16)
        assert (l_hi - l_lo) / 2e-5 + prior_slope == pytest.approx(grad.ravel()[p], rel=1e-6,
                                                                   abs=1e-6)
    np.testing.assert_allclose(info, -0.5 * (jac + jac.T), rtol=1e-6, atol=1e-6 * np.abs(info).max())


def test_orientation_is_mirts():
    """mirt's identification: the last item loads on factor 1 only, the one before on factors
    1-2; the rotation is orthogonal and the diagonal positive."""
    A = np.random.default_rng(1).normal(size=(6, 3))
    R = mirt_orientation(A)
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-12)
    B = A @ R
    np.testing.assert_allclose(B[~mirt_free(6, 3)[:, :3]], 0.0, atol=1e-12)
    assert B[5, 0] > 0 and B[4, 1] > 0 and B[3, 2] > 0
    assert mirt_free(6, 3)[:, :3].sum() == 6 * 3 - 3


def test_bank_standard_errors_do_not_depend_on_the_identification():
    """The bank's varimax loadings are identified without constraints: their delta-method SEs
    are the same whichever items anchor mirt's orientation (here: the items in reverse order),
    and the intercepts' SEs are those of mirt's orientation."""
    bank, y = two_factor_answers(600, 8, seed=5)
    res = calibrate_multidim(y, 2, se=True)
    nodes, logw = product_grid(2)
    rev = res.bank.subset(np.arange(len(res.bank))[::-1])
    other = multidim_standard_errors(rev, y[list(rev.item_ids)].to_numpy(float), None, nodes,
                                     logw, prior_a_sd=3.0, prior_d_sd=5.0)
    a = res.standard_errors("bank").set_index("item_id")
    b = other.frame("bank").set_index("item_id").loc[a.index]
    np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=1e-4)
    np.testing.assert_allclose(a["d_se"], res.standard_errors("none")["d_se"], rtol=1e-10)
    np.testing.assert_allclose(a[["a1", "a2"]], res.bank.loadings, atol=1e-12)
    assert res.se.posterior_mode and "Louis" in repr(res.se)


def test_se_refusals():
    _, y = two_factor_answers(300, 8, seed=2)
    res = calibrate_multidim(y, 2)
    with pytest.raises(ConfigError, match="se=True"):
        res.standard_errors()
    with pytest.raises(ConfigError, match="K <= 3"):
        calibrate_multidim(y, 4, se=True, max_iter=5)
    with pytest.raises(ConfigError, match="rotate must be"):
        calibrate_multidim(y, 2, se=True).standard_errors("varimax")


# ------------------------------------------------------------------ the command line
def test_cli_dims_se_writes_se_columns(tmp_path, capsys):
    """atlas calibrate --dims 2 --se: <parameter>_se beside each parameter, the library's
    numbers, and the bank still reads as a multidimensional bank."""
    _, y = two_factor_answers(500, 8, seed=3)
    data = tmp_path / "y.csv"
    y.to_csv(data)
    out = tmp_path / "b.csv"
    assert main(["calibrate", str(data), "--dims", "2", "--se", "--mirt-defaults",
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "standard errors from the observed information (Louis" in " ".join(text.split())
    df = pd.read_csv(out)
    assert list(df.columns) == ["item_id", "a1", "a1_se", "a2", "a2_se", "d", "d_se"]
    lib = calibrate_multidim(y, 2, prior_a_sd=None, prior_d_sd=None, se=True)
    np.testing.assert_allclose(df[["a1_se", "a2_se", "d_se"]],
                               lib.standard_errors()[["a1_se", "a2_se", "d_se"]], rtol=1e-6)
    assert MultidimBank.read(out).n_dims == 2


def test_cli_dims_se_with_format_mirt(tmp_path):
    """--dims --se --format mirt: mirt's X, a1..aK, d, g, u with <parameter>_se beside each
    (the two options came in at once: neither may drop the other's columns)."""
    _, y = two_factor_answers(500, 8, seed=3)
    data = tmp_path / "y.csv"
    y.to_csv(data)
    out, ours = tmp_path / "m.csv", tmp_path / "o.csv"
    for fmt, path in (("mirt", out), ("ours", ours)):
        assert main(["calibrate", str(data), "--dims", "2", "--se", "--mirt-defaults",
                     "--format", fmt, "-o", str(path)]) == 0
    df, own = pd.read_csv(out), pd.read_csv(ours)
    assert list(df.columns) == ["X", "a1", "a1_se", "a2", "a2_se", "d", "d_se", "g", "u"]
    np.testing.assert_allclose(df[["a1", "a1_se", "a2", "a2_se", "d", "d_se"]],
                               own[["a1", "a1_se", "a2", "a2_se", "d", "d_se"]], rtol=1e-12)
    assert MultidimBank.read(out).n_dims == 2


def test_cli_dims_se_refused_beyond_three(tmp_path, capsys):
    _, y = two_factor_answers(300, 8, seed=3)
    data = tmp_path / "y.csv"
    y.to_csv(data)
    code = main(["calibrate", str(data), "--dims", "4", "--se", "-o", str(tmp_path / "b.csv")])
    assert code == 2 and "2 or 3 dimensions" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "b.csv").exists()
