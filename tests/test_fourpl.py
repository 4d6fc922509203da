"""The 4PL's EM keeps c < u on every item (issue 13): on a dense real matrix where the previous
engine drove u below c (ARC: items almost no model answers), on simulated 4PL data (recovery),
with a prior on u (derivatives, CLI) and from an unordered start bank."""
import json
import warnings

import numpy as np
import pytest

from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.irt import calibrate as C
from atlascat.irt.bank import ItemBank
from atlascat.irt.calibrate import Calibrator, calibrate
from atlascat.irt.priors import parse_prior
from atlascat.irt.quadrature import normal_quadrature
from atlascat.responses import ResponseMatrix


@pytest.fixture(scope="module")
def dense_arc(shared_data):
    return ResponseMatrix.read(shared_data / "openllm" / "dense_arc.csv.gz")


@pytest.mark.parametrize("prior_u", [None, "beta(17,5)"])
def test_4pl_on_dense_arc_converges_with_u_above_c(dense_arc, prior_u):
    # before the fix: BankError "asymptotes must satisfy 0 <= c < u <= 1; violated by 811
    # (row 222: c=0.01861, u=0.01844), ..." (a SQUAREM extrapolation crossed u below c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = calibrate(dense_arc, "4pl", prior_a="lognorm(0,0.5)", prior_c="beta(5,17)",
                        prior_u=prior_u, mirt_defaults=True)
    b = res.bank
    assert res.converged
    assert b.model == "4pl" and len(b) > 300
    assert np.all(b.u - b.c >= C._UC_GAP * 0.999)
    assert np.all((b.c >= 0) & (b.u <= 1))
    assert res.settings["prior_u"] == (None if prior_u is None else str(parse_prior(prior_u, "c")))
    if prior_u is not None:  # the prior pulls u off the floor: no degenerate (u ~ c) item left
        assert np.min(b.u - b.c) > 0.05


def test_4pl_recovery_on_simulated_data(rng):
    m = 30
    true = ItemBank([f"i{j}" for j in range(m)], rng.uniform(0.8, 2.2, m), rng.normal(0, 1, m),
                    rng.uniform(0.05, 0.25, m), rng.uniform(0.8, 0.97, m), model="4pl")
    theta = rng.normal(0, 1, 4000)
    y = (rng.random((theta.size, m)) < true.probability(theta)).astype(float)
    res = calibrate(y, "4pl", prior_a="lognorm(0,0.5)", prior_c="beta(5,17)",
                    prior_u="beta(17,5)")
    b = res.bank
    assert res.converged and np.all(b.u > b.c)
    assert np.corrcoef(b.b, true.b)[0, 1] > 0.97
    assert np.corrcoef(b.a, true.a)[0, 1] > 0.6
    assert np.mean(np.abs(b.c - true.c)) < 0.08
    assert np.mean(np.abs(b.u - true.u)) < 0.06
    # the item curves themselves
    x = np.linspace(-2.5, 2.5, 21)
    assert np.max(np.abs(b.probability(x) - true.probability(x))) < 0.12


def test_prior_on_u_derivatives_match_finite_differences(rng):
    im = C._ItemModel("4pl", parse_prior("lognorm(0,0.5)", "a"), parse_prior("beta(5,17)", "c"),
                      parse_prior("beta(17,5)", "c"))
    x = normal_quadrature(21).nodes
    m = 5
    n = rng.uniform(5, 50, (m, x.size))
    r = rng.uniform(0, 1, (m, x.size)) * n
    th = im.internal(rng.uniform(0.5, 2, m), rng.normal(0, 1, m), rng.uniform(0.05, 0.3, m),
                     rng.uniform(0.8, 0.97, m))
    g, h = im.derivatives(th, r, n - r, x)
    eps = 1e-5
    up, dn = th.copy(), th.copy()
    up[:, 3] += eps
    dn[:, 3] -= eps
    num_g = (im.objective(up, r, n - r, x) - im.objective(dn, r, n - r, x)) / (2 * eps)
    np.testing.assert_allclose(g[:, 3], num_g, rtol=1e-6, atol=1e-6)
    gu, _ = im.derivatives(up, r, n - r, x)
    gd, _ = im.derivatives(dn, r, n - r, x)
    np.testing.assert_allclose(h[:, :, 3], (gu - gd) / (2 * eps), rtol=1e-5, atol=1e-5)
    # the prior is really in the objective: it differs from the model without it
    plain = C._ItemModel("4pl", im.prior_a, im.prior_c)
    assert not np.allclose(plain.objective(th, r, n - r, x), im.objective(th, r, n - r, x))


def test_mstep_never_accepts_u_below_c(rng):
    # counts that pull u down and c up (nobody right anywhere): the M-step stops at the gap
    im = C._ItemModel("4pl")
    x = normal_quadrature(21).nodes
    n = np.full((3, x.size), 40.0)
    r = np.full((3, x.size), 0.4)
    th = im.internal(np.ones(3), np.zeros(3), np.full(3, 0.2), np.full(3, 0.3))
    for _ in range(20):
        th = C._mstep(im, th, r, n - r, x)
        assert np.all(im.feasible(th))


def test_unordered_start_bank_is_repaired(rng):
    m = 8
    true = ItemBank([f"i{j}" for j in range(m)], np.ones(m), np.linspace(-1, 1, m),
                    np.full(m, 0.15), np.full(m, 0.9), model="4pl")
    y = (rng.random((1500, m)) < true.probability(rng.normal(0, 1, 1500))).astype(float)
    # a start bank violating c < u cannot be an ItemBank: hand the internal values in directly
    start = ItemBank(true.item_ids, true.a, true.b, np.full(m, 0.5), np.full(m, 0.5000001),
                     model="4pl")
    cal = Calibrator("4pl", prior_a="lognorm(0,0.5)", prior_c="beta(5,17)",
                     prior_u="beta(17,5)", start=start)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal.fit(ResponseMatrix(y, item_ids=true.item_ids))
    assert np.all(cal.result_.bank.u > cal.result_.bank.c + 0.05)


def test_prior_u_needs_the_4pl():
    with pytest.raises(ConfigError, match="prior on u needs the 4PL"):
        Calibrator("3pl", prior_u="beta(17,5)").check_settings()
    with pytest.raises(ConfigError, match="not a prior for"):
        Calibrator("4pl", prior_u="lognorm(0,1)").check_settings()


def test_mirt_defaults_put_no_prior_on_u(rng):
    y = (rng.random((300, 6)) < 0.6).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = calibrate(y, "4pl", mirt_defaults=True, max_iter=20)
    assert res.settings["prior_u"] is None
    assert res.settings["defaults"]["prior_u"] is None


def test_cli_prior_u(tmp_path, rng):
    m = 6
    true = ItemBank([f"i{j}" for j in range(m)], np.ones(m), np.linspace(-1, 1, m),
                    np.full(m, 0.15), np.full(m, 0.9), model="4pl")
    y = (rng.random((800, m)) < true.probability(rng.normal(0, 1, 800))).astype(int)
    import pandas as pd

    src = tmp_path / "r.csv"
    pd.DataFrame(y, columns=true.item_ids).to_csv(src, index_label="subject")
    out, summ = tmp_path / "bank.csv", tmp_path / "s.json"
    rc = main(["calibrate", str(src), "-o", str(out), "--model", "4pl", "--prior-u", "beta(17,5)",
               "--summary", str(summ), "--quiet", "--max-iter", "50"])
    assert rc in (0, None)
    s = json.loads(summ.read_text())
    assert s["settings"]["prior_u"] == str(parse_prior("beta(17,5)", "c"))
    assert s["settings"]["defaults"]["prior_u"] == "beta(17,5)"
    bank = ItemBank.read(out)
    assert np.all(bank.u > bank.c)


@pytest.mark.optional
def test_4pl_default_torch_cpu_equals_numpy(rng):
    pytest.importorskip("torch", reason="PyTorch not installed (optional 'gpu' extra)")
    m = 12
    true = ItemBank([f"i{j}" for j in range(m)], rng.uniform(0.8, 2, m), rng.normal(0, 1, m),
                    rng.uniform(0.05, 0.25, m), rng.uniform(0.8, 0.97, m), model="4pl")
    y = (rng.random((400, m)) < true.probability(rng.normal(0, 1, 400))).astype(float)
    kw = dict(prior_a="norm(1,0.5)", prior_c="beta(5,17)", prior_u="beta(10,2)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = calibrate(y, "4pl", **kw)
        got = calibrate(y, "4pl", device="torch:cpu", **kw)
    assert got.converged and ref.converged
    np.testing.assert_allclose(got.loglik, ref.loglik, rtol=1e-7)
    np.testing.assert_allclose(got.bank.u, ref.bank.u, rtol=1e-6, atol=1e-6)
    assert np.all(got.bank.u > got.bank.c)
