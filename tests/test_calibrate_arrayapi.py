"""The EM kernels run unchanged on any array-API namespace.

- ``array_api_strict`` (a NumPy-backed namespace that allows only the standard): the full EM
  run equals the NumPy run to 1e-10 (float64), missing data and pattern weights included.
- the sync-free (masked) M-step used on accelerators gives the iterates of the host M-step.
- float32 E-step: converges, and its solution is the float64 one within 1e-3 log-likelihood
  per subject.
- PyTorch (CPU) runs the same code with ``device="torch:cpu"``: skipped with a reason where
  torch or array_api_compat is absent (CI has neither).
"""
import warnings

import numpy as np
import pytest

from atlascat.errors import ConfigError
from atlascat.irt import arrays as _xp
from atlascat.irt import calibrate as C
from atlascat.irt.bank import ItemBank
from atlascat.irt.calibrate import Calibrator, calibrate
from atlascat.irt.priors import parse_prior
from atlascat.irt.quadrature import normal_quadrature


def _sim(rng, n=200, m=10, missing=0.3, model="3pl"):
    a = rng.uniform(0.6, 2.2, m)
    b = rng.normal(0, 1, m)
    c = rng.uniform(0.05, 0.25, m) if model in ("3pl", "4pl") else np.zeros(m)
    bank = ItemBank([f"i{j}" for j in range(m)], a, b, c)
    theta = rng.standard_normal(n)
    y = (rng.random((n, m)) < bank.probability(theta)).astype(float)
    drop = rng.random((n, m)) < missing
    drop[:, 0] = False                      # no all-missing subject
    y[drop] = np.nan
    return y


@pytest.fixture(scope="module")
def strict():
    return pytest.importorskip("array_api_strict", reason="array_api_strict not installed")


@pytest.mark.parametrize("model,prior_a,prior_c,missing,max_iter", [
    ("3pl", None, None, 0.3, 1000),                  # to convergence
    ("2pl", "lognorm(0,0.5)", None, 0.0, 1000),      # to convergence
    ("3pl", "norm(1,1)", "beta(5,17)", 0.2, 1000),   # to convergence
    ("rasch", None, None, 0.25, 1000),               # to convergence
    ("4pl", None, "logitnorm(-1.4,1)", 0.0, 20),     # 20 iterations (the 4PL is slow)
    ("4pl", "norm(1,0.5)", "beta(5,17)", 0.1, 1000),  # the large-N default (u ~ beta(10,2))
])
def test_full_em_under_array_api_strict_equals_numpy(rng, strict, model, prior_a, prior_c,
                                                     missing, max_iter):
    y = _sim(rng, missing=missing, model=model)
    w = rng.integers(1, 4, y.shape[0]).astype(float)
    kw = dict(prior_a=prior_a, prior_c=prior_c, max_iter=max_iter, weights=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = calibrate(y, model, **kw)
        got = calibrate(y, model, device=strict, **kw)
    assert got.n_iter == ref.n_iter and got.converged == ref.converged
    assert ref.converged or max_iter < 1000
    np.testing.assert_allclose(got.loglik, ref.loglik, rtol=1e-12)
    np.testing.assert_allclose(got.loglik_trace, ref.loglik_trace, rtol=1e-12)
    for attr in ("a", "b", "c", "u"):
        np.testing.assert_allclose(getattr(got.bank, attr), getattr(ref.bank, attr),
                                   rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got.theta, ref.theta, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got.theta_se, ref.theta_se, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got.latent_variance, ref.latent_variance, rtol=1e-10)


def test_strict_kernels_reject_non_standard_calls(strict):
    """The namespace really is the strict one (a NumPy-only call would raise inside it)."""
    x = strict.asarray([0.0, 1.0])
    assert _xp.namespace(x) is strict
    assert not hasattr(x, "ravel")
    np.testing.assert_allclose(_xp.to_numpy(_xp.expit(x, strict)), [0.5, 1 / (1 + np.exp(-1))])


@pytest.mark.parametrize("prior", ["beta(5,17)", "logitnorm(-1.4,1)", "lognorm(0,0.5)",
                                   "norm(1,1)"])
def test_prior_terms_match_priors_module(rng, prior):
    target = "c" if prior.startswith(("beta", "logit")) else "a"
    p = parse_prior(prior, target)
    t = rng.uniform(-4, 4, 50)
    for got, want in zip(C._prior_terms(p, t, np), p.terms(t)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _mstep_case(rng, model, m, a_range, d_sd, c_range, n_nodes=31):
    """An item model, nodes, random internal parameters and node statistics (r, n) for m items."""
    im = C._ItemModel(model)
    x = normal_quadrature(n_nodes).nodes
    n = rng.uniform(5, 50, (m, x.size))
    r = rng.uniform(0, 1, (m, x.size)) * n
    th = im.internal(rng.uniform(*a_range, m), rng.normal(0, d_sd, m), rng.uniform(*c_range, m),
                     rng.uniform(0.7, 0.99, m))
    return im, x, np.where(np.isfinite(th), th, 0.0), r, n


@pytest.mark.parametrize("model", ["2pl", "3pl", "4pl"])
def test_masked_mstep_equals_host_mstep(rng, model):
    """sync=False (accelerators: fixed loop counts, masks, no reads) gives the same iterates."""
    im, x, th, r, n = _mstep_case(rng, model, 80, (-1, 4), 3, (0.01, 0.6))
    host = C._mstep(im, th, r, n - r, x, max_newton=6, sync=True)
    masked = C._mstep(im, th, r, n - r, x, max_newton=6, sync=False)
    np.testing.assert_allclose(masked, host, rtol=1e-12, atol=1e-12)
    assert np.any(np.abs(host - th) > 1e-3)  # it did move


def test_blocks_equal_one_block(rng):
    """A memory bound that forces blocks of subjects changes nothing but the summation order."""
    y = _sim(rng, n=250, m=10, missing=0.2)
    ref = calibrate(y, "2pl", max_iter=40)
    got = calibrate(y, "2pl", max_iter=40, memory_limit=20_000)   # ~blocks of a few rows
    rows, on_host = C._plan_blocks(y, np, None, "float64", 20_000, 61)
    assert rows is not None and rows < 250 and not on_host
    np.testing.assert_allclose(got.bank.b, ref.bank.b, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got.theta, ref.theta, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("missing,dtype", [(0.3, "float64"), (0.3, "float32"),
                                           (0.0, "float64"), (0.0, "float32")])
def test_scores_masked_on_the_device_equal_the_host_blocks(rng, strict, monkeypatch, missing,
                                                            dtype):
    """Scores copied to another library in chunks of rows (of columns when column-major),
    zero-filled and masked there, equal the blocks made on the host cell for cell (blocks of
    subjects, weights)."""
    from atlascat.irt.estep import DeviceData

    y = _sim(rng, n=230, m=9, missing=missing)
    w = rng.integers(1, 4, 230).astype(float)
    monkeypatch.setattr(DeviceData, "COPY_BYTES", 8 * 9 * 7)     # 7 rows per copy
    host = DeviceData.build(y, w, dtype, np, None, block_rows=50)
    dev = DeviceData.build(y, w, dtype, strict, None, block_rows=50)
    by_col = DeviceData.build(np.asfortranarray(y), w, dtype, strict, None, block_rows=50)
    for b, c in zip(dev.blocks, by_col.blocks):
        for d, e in zip(b, c):
            assert (d is None) == (e is None)
            assert d is None or np.array_equal(_xp.to_numpy(d), _xp.to_numpy(e))
    assert host.dense == dev.dense == (missing == 0)
    assert len(host.blocks) == len(dev.blocks) == 5
    for hb, db in zip(host.blocks, dev.blocks):
        assert (hb[1] is None) == (db[1] is None) == (missing == 0)
        assert hb[2] is not None and db[2] is not None
        for h, d in zip(hb, db):
            if h is not None:
                d = _xp.to_numpy(d)
                assert d.dtype == h.dtype and np.array_equal(d, h)
    got = np.concatenate([b[0] for b in host.blocks])
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.nan_to_num(y, nan=0.0).astype(dtype))
    if missing:
        mask = np.concatenate([b[1] for b in host.blocks])
        np.testing.assert_array_equal(mask, (~np.isnan(y)).astype(dtype))


def test_bad_device_and_memory_limit():
    y = np.array([[0, 1], [1, 0], [1, 1], [0, 0]], float)
    with pytest.raises(ConfigError, match="device"):
        Calibrator("2pl", device="tpu").fit(y)
    with pytest.raises(ConfigError, match="memory_limit"):
        Calibrator("2pl", memory_limit=-1).fit(y)


# ------------------------------------------------------------------------------ float32
@pytest.mark.slow
def test_float32_converges_to_the_float64_solution(rng):
    bank = ItemBank([str(j) for j in range(300)], rng.uniform(0.5, 2.5, 300),
                    rng.normal(0, 1.5, 300), rng.uniform(0.0, 0.3, 300))
    theta = rng.standard_normal(800)
    y = (rng.random((800, 300)) < bank.probability(theta)).astype(float)
    y = y[:, (y.min(axis=0) < y.max(axis=0))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r64 = calibrate(y, "3pl")
        r32 = calibrate(y, "3pl", dtype="float32")
    assert r64.converged and r32.converged
    assert r32.n_iter < 3 * r64.n_iter
    assert 1 <= r32.settings["float32_iterations"] <= r32.n_iter
    assert r32.settings["dtype"] == "float32"
    n = y.shape[0]
    assert abs(r32.loglik - r64.loglik) / n < 1e-3
    # the float32 bank scored in float64 on the data: as good as the float64 bank
    from atlascat.irt.calibrate import marginal_loglik
    assert abs(marginal_loglik(y, r32.bank) - r64.loglik) / n < 1e-3


# ------------------------------------------------------------------------------ torch (CPU)
@pytest.fixture(scope="module")
def torch_cpu():
    torch = pytest.importorskip("torch", reason="PyTorch not installed (optional 'gpu' extra)")
    pytest.importorskip("array_api_compat", reason="array_api_compat not installed")
    return torch


@pytest.mark.optional
@pytest.mark.parametrize("model,missing,dtype", [("3pl", 0.3, "float64"), ("rasch", 0.0, "float64"),
                                                 ("2pl", 0.2, "float32")])
def test_torch_cpu_equals_numpy(rng, torch_cpu, model, missing, dtype):
    y = _sim(rng, missing=missing, model=model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = calibrate(y, model, max_iter=200, dtype=dtype)
        got = calibrate(y, model, max_iter=200, dtype=dtype, device="torch:cpu")
    assert got.converged == ref.converged
    tol = 1e-7 if dtype == "float64" else 1e-3
    np.testing.assert_allclose(got.loglik, ref.loglik, rtol=tol)
    np.testing.assert_allclose(got.bank.b, ref.bank.b, rtol=tol * 10, atol=tol * 10)
    np.testing.assert_allclose(got.theta, ref.theta, rtol=tol * 10, atol=tol * 10)


@pytest.mark.optional
def test_torch_kernels_stay_on_torch(rng, torch_cpu):
    torch = torch_cpu
    xp = _xp.namespace(torch.zeros(1))
    im = C._ItemModel("3pl")
    x = torch.linspace(-6, 6, 21, dtype=torch.float64)
    th = torch.tensor([[1.0, 0.5, -2.0, 0.0], [2.0, -1.0, -1.0, 0.0]], dtype=torch.float64)
    lp, lq = im.node_logs(th, x)
    assert isinstance(lp, torch.Tensor) and lp.shape == (2, 21)
    r = torch.asarray(rng.uniform(0, 10, (2, 21)), dtype=torch.float64)
    out = C._mstep(im, th, r, 10 - r, x, sync=False)
    assert isinstance(out, torch.Tensor)
    ref = C._mstep(im, th.numpy(), r.numpy(), 10 - r.numpy(), x.numpy(), sync=True)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-7, atol=1e-7)   # rounding order only
    assert not np.allclose(ref, th.numpy())                               # it moved
    assert xp is _xp.namespace(out)


# ------------------------------------------------------------------------------ CLI
def test_cli_device_option(shared_data, tmp_path, capsys):
    import json

    from atlascat.cli import main

    src = str(shared_data / "classic" / "lsat7_patterns.csv")
    out, summary = tmp_path / "bank.csv", tmp_path / "s.json"
    code = main(["calibrate", src, "--freq-column", "freq", "--model", "2pl", "--no-filter",
                 "--device", "cpu", "-o", str(out), "--summary", str(summary), "--quiet"])
    assert code == 0
    assert json.loads(summary.read_text())["settings"]["device"] == "cpu"
    capsys.readouterr()
    code = main(["calibrate", src, "--freq-column", "freq", "--model", "2pl", "--no-filter",
                 "--device", "tpu", "-o", str(tmp_path / "b.csv"), "--quiet"])
    assert code == 2
    assert "unknown device 'tpu'" in capsys.readouterr().err


@pytest.mark.optional
def test_torch_streams_host_blocks_when_data_exceeds_memory_limit(rng, torch_cpu):
    """Data larger than the bound stays on the host and is moved one block per E-step."""
    y = _sim(rng, n=150, missing=0.2, model="2pl")
    xp, dev = _xp.backend_for("torch:cpu")
    rows, on_host = C._plan_blocks(y, xp, dev, "float64", 20_000, 61)
    assert on_host and rows < 150
    ref = calibrate(y, "2pl", max_iter=100)
    got = calibrate(y, "2pl", max_iter=100, device="torch:cpu", memory_limit=20_000)
    np.testing.assert_allclose(got.loglik, ref.loglik, rtol=1e-9)
    np.testing.assert_allclose(got.bank.b, ref.bank.b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("model", ["3pl", "4pl"])
def test_host_line_search_equals_sequential_backtracking(rng, model):
    """The host line search (t = 1, then every halving of the failures in one call) lands on
    the step length and point that trying t = 1, 1/2, 1/4, ... one after another gives."""
    m = 400
    im, x, th, r, n = _mstep_case(rng, model, m, (0.2, 3), 2, (0.01, 0.4))
    fa, g, _h = im._derivs(th, r, n - r, x, with_value=True)
    # gradient steps of random lengths: many overshoot and need halvings, some fail outright
    scale = 10.0 ** rng.uniform(-4, 1.5, m)
    step = [gi * scale / (1.0 + np.abs(gi)) for gi in g]
    pred = sum(s_ * g_ for s_, g_ in zip(step, g))
    go = rng.random(m) < 0.9
    base = [th[:, j] for j in im.free]
    host = C._line_search_host(im, th, r, n - r, x, base, step, fa, pred, go, 8)
    seq = C._line_search_masked(im, th, r, n - r, x, base, step, fa, pred, go, 8)
    for a_, b_ in zip(host[0], seq[0]):
        np.testing.assert_array_equal(a_, b_)
    np.testing.assert_array_equal(host[1], seq[1])
    np.testing.assert_array_equal(host[2], seq[2])
    np.testing.assert_array_equal(host[3], seq[3])
    t = host[3]
    assert np.any(host[2] & (t == 1.0)) and np.any(host[2] & (t < 1.0))  # both kinds occur
    assert not np.any(host[2] & ~go)


def test_start_values_equal_the_direct_formulas(rng):
    """Item-rest biserial start values, computed as a few matrix-vector products, equal the
    same formulas written cell by cell (missing cells, weights, partial credit)."""
    from scipy.stats import norm

    n, m = 120, 15
    y = (rng.random((n, m)) < rng.uniform(0.2, 0.8, m)).astype(float)
    y[:, 2] = rng.random(n)                                    # partial credit
    y[rng.random((n, m)) < 0.25] = np.nan
    w = rng.integers(1, 4, n).astype(float)
    got = C._start_values(y, w, C._ItemModel("2pl"))
    filled = np.where(np.isnan(y), 0.0, y)
    same = C._start_values(y, w, C._ItemModel("2pl"), filled=filled)   # the caller's copy
    assert np.array_equal(same, got) and np.array_equal(filled, np.nan_to_num(y, nan=0.0))
    obs = ~np.isnan(y)
    for j in range(m):
        rows = obs[:, j]
        k = obs[rows].sum(axis=1)
        rest = (np.nansum(y[rows], axis=1) - y[rows, j]) / np.maximum(k - 1, 1)
        ww, yj = w[rows], y[rows, j]
        p = np.average(yj, weights=ww)
        cov = np.average(yj * rest, weights=ww) - p * np.average(rest, weights=ww)
        r_pb = cov / np.sqrt(p * (1 - p) * (np.average(rest**2, weights=ww)
                                            - np.average(rest, weights=ww) ** 2))
        pc = np.clip(p, 0.01, 0.99)
        lam = np.clip(r_pb * np.sqrt(pc * (1 - pc)) / norm.pdf(norm.ppf(pc)), -0.9, 0.9)
        root = np.sqrt(1 - lam**2)
        assert got[j, 0] == pytest.approx(1.702 * lam / root, rel=1e-10)
        assert got[j, 1] == pytest.approx(1.702 * norm.ppf(np.clip(pc, 0.02, 0.98)) / root,
                                          rel=1e-10)


# ------------------------------------------------------------------------------ EAP scoring
def _eap_case(rng, missing=0.3):
    bank = ItemBank([f"i{j}" for j in range(25)], rng.uniform(0.5, 2.5, 25), rng.normal(0, 1, 25),
                    rng.uniform(0, 0.25, 25), rng.uniform(0.9, 1.0, 25))
    y = (rng.random((150, 25)) < bank.probability(rng.standard_normal(150))).astype(float)
    y[rng.random(y.shape) < missing] = np.nan
    y[:, 0] = np.where(np.isnan(y[:, 0]), 1.0, y[:, 0])     # every subject answered something
    y[:3, 1] = [0.25, 0.5, 0.75]                              # partial credit
    return bank, y


def test_eap_equals_the_grid_formula(rng):
    """ability.eap (the E-step kernel) equals the posterior written directly on the grid."""
    from atlascat.irt.ability import eap, grid_posterior

    bank, y = _eap_case(rng)
    for mean, sd in ((0.0, 1.0), (0.5, 1.3)):
        quad = normal_quadrature(41, (-5, 5), mean, sd)
        post = grid_posterior(y, bank, quad)
        theta, se = eap(y, bank, quadpts=41, theta_range=(-5, 5), prior_mean=mean, prior_sd=sd,
                        quadrature="fixed")   # the grid alone: the formula on that grid
        np.testing.assert_allclose(theta, post @ quad.nodes, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(se, np.sqrt(post @ quad.nodes**2 - (post @ quad.nodes)**2),
                                   rtol=1e-9, atol=1e-12)


def test_eap_under_array_api_strict_equals_numpy(rng, strict):
    from atlascat.irt.ability import eap

    bank, y = _eap_case(rng)
    ref = eap(y, bank)
    got = eap(y, bank, device=strict)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-12, atol=1e-12)
    blocks = eap(y, bank, memory_limit=20_000, device=strict)     # blocks of a few subjects
    np.testing.assert_allclose(blocks[0], ref[0], rtol=1e-12, atol=1e-12)
    f32 = eap(y, bank, dtype="float32")
    np.testing.assert_allclose(f32[0], ref[0], atol=1e-5)
    with pytest.raises(ConfigError, match="dtype"):
        eap(y, bank, dtype="float16")


@pytest.mark.parametrize("missing", [0.0, 0.3])
def test_float32_eap_of_strong_models_on_thousands_of_items_is_within_1e_3(missing, strict):
    """5,000 HellaSwag items (slopes up to 35, intercepts to -4670) and models up to theta 4:
    a float32 product of the raw log-probabilities is off by 2.5e-3 in theta (|L| ~ 1e5); the
    centred one stays within 5e-4 of float64, dense or with missing cells, also under the
    array API."""
    from atlascat import catalogue
    from atlascat.irt.ability import eap

    src = catalogue.load_paper_bank("hellaswag")
    a, b, c, u = (np.asarray(p, float)[:5000] for p in src.params)
    bank = ItemBank([str(i) for i in range(5000)], a, b, c, u)
    g = np.random.default_rng(2)
    th = np.concatenate([g.standard_normal(1500), g.uniform(2.0, 4.0, 1500)])
    y = (g.random((3000, 5000)) < c + (u - c) / (1 + np.exp(-a * (th[:, None] - b)))) * 1.0
    y[g.random(y.shape) < missing] = np.nan
    t64, s64 = eap(y, bank)
    t32, s32 = eap(y, bank, dtype="float32")
    assert np.abs(t32 - t64).max() < 5e-4 and np.abs(s32 - s64).max() < 5e-4
    rows = slice(1400, 1700)                                   # weak and strong models
    ts, ss = eap(y[rows], bank, dtype="float32", device=strict)
    np.testing.assert_allclose(ts, t32[rows], atol=1e-6)


def test_eap_of_scores_already_on_the_device_is_computed_there(rng, strict):
    """Scores that live on a device (here array_api_strict's) are scored there: the same EAP
    as the host path, in blocks too, dense or with missing cells; bad shapes and values are one
    line, checked where the scores lie."""
    from atlascat.errors import ResponseDataError
    from atlascat.irt.ability import eap

    bank, y = _eap_case(rng)
    for data in (y, np.where(np.isnan(y), 1.0, y)):
        ref = eap(data, bank)
        on = strict.asarray(data)
        for kwargs in ({}, {"memory_limit": 20_000}, {"dtype": "float32"}):
            got = eap(on, bank, **kwargs)
            assert isinstance(got[0], np.ndarray)
            tol = 1e-5 if kwargs.get("dtype") == "float32" else 1e-12
            np.testing.assert_allclose(got[0], ref[0], rtol=tol, atol=tol)
            np.testing.assert_allclose(got[1], ref[1], rtol=tol, atol=tol)
    with pytest.raises(ResponseDataError, match="shape"):
        eap(strict.asarray(y[:, :5]), bank)
    with pytest.raises(ResponseDataError, match="outside"):
        eap(strict.asarray(np.where(np.isnan(y), 2.0, y)), bank)


@pytest.mark.optional
def test_eap_on_torch_equals_numpy(rng, torch_cpu):
    from atlascat.irt.ability import eap

    bank, y = _eap_case(rng)
    ref = eap(y, bank)
    got = eap(y, bank, device="torch:cpu")
    assert isinstance(got[0], np.ndarray)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-10, atol=1e-12)


def test_estimate_ability_device(rng, tmp_path):
    from atlascat.cli import main
    from atlascat.irt.ability import estimate_ability

    bank, y = _eap_case(rng, missing=0.0)
    y = (y > 0.5).astype(float)
    ref = estimate_ability(y, bank)
    got = estimate_ability(y, bank, device="cpu")
    np.testing.assert_array_equal(got["theta"], ref["theta"])
    strict = pytest.importorskip("array_api_strict", reason="array_api_strict not installed")
    wle = estimate_ability(y, bank, "wle", device=strict)          # every method on a device
    np.testing.assert_allclose(wle["theta"], estimate_ability(y, bank, "wle")["theta"],
                               atol=1e-7)
    with pytest.raises(ConfigError, match="device"):
        estimate_ability(y, bank, device="tpu")
    resp, bk = tmp_path / "y.csv", tmp_path / "bank.csv"
    import pandas as pd
    pd.DataFrame(y, columns=bank.item_ids).to_csv(resp)
    bank.write(bk)
    assert main(["score", str(resp), "--bank", str(bk), "--device", "cpu",
                 "-o", str(tmp_path / "s.csv")]) == 0
    out = pd.read_csv(tmp_path / "s.csv")
    np.testing.assert_allclose(out["theta"], ref["theta"], atol=1e-6)   # CSV keeps 8 digits
    assert main(["score", str(resp), "--bank", str(bk), "--device", "tpu"]) == 2


@pytest.mark.parametrize("model", ["2pl", "3pl", "4pl"])
def test_masked_mstep_early_exit_changes_nothing(rng, model, monkeypatch):
    """The accelerator path's early exits (one flag read per Newton step and per halving) give
    exactly the iterates of running every loop its full count."""
    from atlascat.irt import mstep as mstep_mod

    im, x, th, r, n = _mstep_case(rng, model, 80, (-1, 4), 3, (0.01, 0.6))
    monkeypatch.setattr(mstep_mod, "EARLY_EXIT", False)
    full = C._mstep(im, th, r, n - r, x, max_newton=12, sync=False)
    monkeypatch.setattr(mstep_mod, "EARLY_EXIT", True)
    early = C._mstep(im, th, r, n - r, x, max_newton=12, sync=False)
    np.testing.assert_array_equal(early, full)
    assert np.any(np.abs(full - th) > 1e-3)  # it did move
    m = 300
    im, x, th, r, n = _mstep_case(rng, model, m, (0.2, 3), 2, (0.01, 0.4))
    fa, g, _h = im._derivs(th, r, n - r, x, with_value=True)
    step = [gi * 10.0 ** rng.uniform(-4, 1.5, m) / (1.0 + np.abs(gi)) for gi in g]
    pred = sum(s_ * g_ for s_, g_ in zip(step, g))
    base = [th[:, j] for j in im.free]
    for go in (rng.random(m) < 0.9, np.zeros(m, bool)):
        a = C._line_search_masked(im, th, r, n - r, x, base, step, fa, pred, go, 8)
        b = C._line_search_masked(im, th, r, n - r, x, base, step, fa, pred, go, 8,
                                  early_exit=True)
        for a_, b_ in zip(a[0], b[0]):
            np.testing.assert_array_equal(a_, b_)
        for a_, b_ in zip(a[1:], b[1:]):
            np.testing.assert_array_equal(a_, b_)


@pytest.mark.optional
@pytest.mark.filterwarnings("ignore:a 3PL on 200 subjects")
def test_torch_calibration_same_with_and_without_early_exit(rng, torch_cpu, monkeypatch):
    """A whole EM on torch (the accelerator path) ends at the same bank either way."""
    from atlascat.irt import mstep as mstep_mod

    y = _sim(rng, n=200, missing=0.3)
    monkeypatch.setattr(mstep_mod, "EARLY_EXIT", False)
    full = calibrate(y, "3pl", max_iter=60, device="torch:cpu")
    monkeypatch.setattr(mstep_mod, "EARLY_EXIT", True)
    early = calibrate(y, "3pl", max_iter=60, device="torch:cpu")
    assert early.n_iter == full.n_iter
    np.testing.assert_array_equal(early.loglik_trace, full.loglik_trace)
    for a_, b_ in zip(early.bank.params, full.bank.params):
        np.testing.assert_array_equal(a_, b_)
