"""The fused M-step kernel (``irt/kernels/mstep.cu``) does what the array-API M-step does.

The kernel's source also compiles as plain C (one lane per item, ``atlas_mstep_host``); that
build runs here with the configuration arrays the CUDA launcher passes
(:func:`atlascat.irt.fused.config`) and is compared with :func:`atlascat.irt.mstep.mstep`:
- one M-step from far-off starts (Fisher fallbacks, steps cut at the bounds, line searches),
  every model and prior form, dense node masses and per-item ones;
- whole EM fits with the kernel as the M-step: the same iterations, parameters and
  log-likelihood as the NumPy fit.
The CUDA build itself runs on a GPU only (benchmarks/gpu: the calibration rows compare it with
the CPU). A machine without a C compiler skips these with the reason.
"""
import ctypes
import shutil
import subprocess
import warnings

import numpy as np
import pytest

from atlascat.irt import em as em_module
from atlascat.irt import fused
from atlascat.irt.bank import ItemBank
from atlascat.irt.calibrate import calibrate
from atlascat.irt.itemmodel import ItemModel
from atlascat.irt.mstep import PRED_REL, mstep
from atlascat.irt.priors import parse_prior
from atlascat.irt.quadrature import normal_quadrature


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the kernel's host form")
    src = tmp_path_factory.mktemp("kernel") / "mstep.c"
    src.write_text(fused.source())
    lib = src.with_suffix(".so")
    subprocess.run([cc, "-O2", "-std=c99", "-shared", "-fPIC", "-o", str(lib), str(src), "-lm"],
                   check=True)
    fn = ctypes.CDLL(str(lib)).atlas_mstep_host
    fn.restype = None
    ptr = np.ctypeslib.ndpointer

    def run(model, th, r, nr, x, max_newton=8, step_tol=1e-9, max_halvings=8):
        ic, dc = fused.config(model, r.shape[0], x.shape[0], nr.ndim == 1, max_newton,
                              max_halvings, step_tol, PRED_REL)
        out = np.empty_like(th)
        args = [np.ascontiguousarray(a, dtype=np.float64) for a in (th, r, nr, x)]
        fn.argtypes = [ptr(np.float64, flags="C")] * 5 + [ptr(np.int32, flags="C"),
                                                          ptr(np.float64, flags="C")]
        fn(args[0], out, args[1], args[2], args[3], ic, dc)
        return out

    return run


CASES = [("rasch", None, None, None), ("2pl", None, None, None),
         ("2pl", "lognorm(0,0.5)", None, None), ("2pl", "norm(1,1)", None, None),
         ("3pl", None, None, None), ("3pl", "lognorm(0,0.5)", "beta(5,17)", None),
         ("3pl", "norm(1,1)", "logitnorm(-1.4,1)", None),
         ("4pl", "lognorm(0,0.5)", "beta(5,17)", "beta(10,2)"), ("4pl", None, None, None)]


def _model(name, pa, pc, pu):
    return ItemModel(name, parse_prior(pa, "a") if pa else None,
                     parse_prior(pc, "c") if pc else None, parse_prior(pu, "c") if pu else None)


def _problem(rng, model, m=60, dense=False):
    """Complete-data statistics of m items on 21 nodes and starting points, some far off."""
    quad = normal_quadrature(21, (-6, 6))
    x = quad.nodes
    n_q = 300 * np.exp(quad.log_weights)
    a = rng.uniform(0.3, 2.5, m)
    b = rng.normal(0, 1.2, m)
    c = rng.uniform(0.0, 0.3, m) if model.has_c else np.zeros(m)
    u = rng.uniform(0.85, 1.0, m) if model.has_u else np.ones(m)
    p = c[:, None] + (u - c)[:, None] / (1 + np.exp(-(a[:, None] * x[None, :] - a[:, None] * b[:, None])))
    n = np.tile(n_q, (m, 1)) if dense else n_q[None, :] * rng.uniform(0.3, 1.0, (m, 1))
    r = rng.binomial(np.round(n).astype(int), np.clip(p, 0, 1)).astype(float)
    r = np.minimum(r, n)
    th = model.internal(rng.uniform(0.2, 3.0, m), rng.normal(0, 3, m),
                        rng.uniform(0.02, 0.4, m) if model.has_c else np.zeros(m),
                        rng.uniform(0.6, 0.99, m) if model.has_u else np.ones(m))
    th = np.where(np.isfinite(th), th, 0.0)
    th[:5, 1] = [40.0, -40.0, 140.0, -149.0, 0.0]    # far off, one near the bound
    if 0 in model.free:
        th[5:8, 0] = model.lo[0] + 1e-3                 # slopes at their lower bound
    nr = n_q if dense else n - r
    return th, r, nr, x


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("case", CASES, ids=["-".join(str(v) for v in c) for c in CASES])
def test_one_mstep_equals_the_array_api_mstep(rng, host_kernel, case, dense):
    model = _model(*case)
    th, r, nr, x = _problem(rng, model, dense=dense)
    if dense:
        r = np.minimum(r, nr[None, :])
    want = mstep(model, th, r, nr, x, sync=True)
    masked = mstep(model, th, r, nr, x, sync=False)
    got = host_kernel(model, th, r, nr, x)
    f = model.free
    assert np.all(np.isfinite(got[:, f]))
    np.testing.assert_allclose(masked[:, f], want[:, f], rtol=0, atol=1e-9)
    # rounding of the sums (another order) grows over an unconverged 4PL's ill-conditioned steps
    np.testing.assert_allclose(got[:, f], want[:, f], rtol=1e-7, atol=1e-7)
    # the items moved: the comparison is not of the starting points
    assert np.mean(np.abs(got[:, f] - th[:, f]).max(axis=1) > 1e-3) > 0.5


def _sim(rng, model, n=400, m=25, missing=0.2):
    a = rng.uniform(0.6, 2.2, m)
    b = rng.normal(0, 1, m)
    c = rng.uniform(0.05, 0.25, m) if model in ("3pl", "4pl") else np.zeros(m)
    bank = ItemBank([f"i{j}" for j in range(m)], a, b, c)
    y = (rng.random((n, m)) < bank.probability(rng.standard_normal(n))).astype(float)
    drop = rng.random((n, m)) < missing
    drop[:, 0] = False
    y[drop] = np.nan
    return y


@pytest.mark.parametrize("model,prior_a,prior_c", [
    ("2pl", None, None), ("3pl", "lognorm(0,0.5)", "beta(5,17)"), ("rasch", None, None),
    ("3pl", None, None)])
def test_em_with_the_kernel_as_its_mstep_equals_the_numpy_fit(rng, host_kernel, monkeypatch,
                                                              model, prior_a, prior_c):
    y = _sim(rng, model)
    kw = dict(prior_a=prior_a, prior_c=prior_c, max_iter=500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calls = {"numpy": 0, "kernel": 0}

        def numpy_mstep(*a, **k):
            calls["numpy"] += 1
            return mstep(*a, **k)

        def kernel_mstep(item_model, th, r, nr, x, max_newton=8, **_):
            calls["kernel"] += 1
            return host_kernel(item_model, th, r, nr, x, max_newton)

        monkeypatch.setattr(em_module, "mstep", numpy_mstep)
        ref = calibrate(y, model, **kw)
        monkeypatch.setattr(em_module, "mstep", kernel_mstep)
        got = calibrate(y, model, **kw)
    assert calls["kernel"] == calls["numpy"] > 5
    assert got.n_iter == ref.n_iter and got.converged == ref.converged
    assert abs(got.loglik - ref.loglik) < 1e-8 * abs(ref.loglik)
    for col in ("a", "b", "c"):
        np.testing.assert_allclose(getattr(got.bank, col), getattr(ref.bank, col), atol=1e-6)


def test_config_refuses_a_prior_without_a_kernel_form():
    class Odd:
        internal = "log"
        target = "a"

    model = ItemModel("2pl", parse_prior("lognorm(0,0.5)", "a"))
    assert fused.config(model, 3, 5, False, 8, 8, 1e-9, PRED_REL) is not None
    model.prior_a = Odd()
    assert fused.config(model, 3, 5, False, 8, 8, 1e-9, PRED_REL) is None


def test_numpy_arrays_never_take_the_kernel(rng):
    model = _model("2pl", None, None, None)
    th, r, nr, x = _problem(rng, model)
    assert fused.cuda_mstep(model, th, r, nr, x, 8, 1e-9, 8, PRED_REL) is None


def test_the_cuda_kernel_equals_the_array_api_mstep(rng):
    """On a GPU (skipped elsewhere): the kernel launched on torch tensors, as the EM does,
    every model and prior form, dense and per-item node masses."""
    torch = pytest.importorskip("torch", reason="PyTorch not installed (optional 'gpu' extra)")
    pytest.importorskip("cupy", reason="CuPy not installed (the fused M-step launches through it)")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    for case in CASES:
        for dense in (False, True):
            model = _model(*case)
            th, r, nr, x = _problem(rng, model, dense=dense)
            if dense:
                r = np.minimum(r, nr[None, :])
            want = mstep(model, th, r, nr, x, sync=True)
            dev = [torch.as_tensor(a, dtype=torch.float64, device="cuda") for a in (th, r, nr, x)]
            got = fused.cuda_mstep(model, *dev, 8, 1e-9, 8, PRED_REL)
            assert fused.STATUS["last"] == "kernel", fused.STATUS
            f = model.free
            np.testing.assert_allclose(got.cpu().numpy()[:, f], want[:, f], rtol=1e-7, atol=1e-7,
                                       err_msg=f"{case} dense={dense}")
