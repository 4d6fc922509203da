"""The accelerator M-step as one CUDA kernel (``kernels/mstep.cu``): one warp per item.

:func:`atlascat.irt.mstep.mstep` on a CUDA device runs, per EM iteration, one launch of this
kernel instead of a few thousand small array operations: every item's Newton iterations,
Fisher fallbacks and line searches run inside it, step for step as the array-API code does
them (the same formulas and rules; sums over the nodes in another order, so iterates agree to
rounding). The source is compiled once per process by NVRTC through CuPy (CuPy keeps the
binary in its on-disk cache) and launched on the arrays where they lie: PyTorch tensors are
viewed through ``__cuda_array_interface__`` on PyTorch's current stream, nothing is copied.

Used when CuPy is importable, the arrays are float64 on a CUDA device and every prior has a
form the kernel knows (normal / logit-normal, log-normal, beta); otherwise, or with
:data:`ENABLED` False, the M-step runs its array-API code. :data:`STATUS` says which and why.
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np

__all__ = ["config", "cuda_mstep", "source", "ENABLED", "STATUS", "PRIOR_KINDS"]

#: set False to run the array-API M-step on the device (benchmarks/gpu compares both)
ENABLED = True
#: what the last accelerator M-step ran: "kernel", or why not (the loader's error, once)
STATUS = {"last": None, "error": None}
#: prior class -> the kernel's code (0: none)
PRIOR_KINDS = {"NormalPrior": 1, "LogitNormalPrior": 1, "LogNormalPrior": 2, "BetaPrior": 3}
_THREADS = 128                     # 4 items (warps) per block
_KERNEL = {}                       # device index -> compiled kernel
_CONFIGS = {}                      # the last configuration, on its device


def source() -> str:
    """The kernel's CUDA C source (it also compiles as plain C: ``atlas_mstep_host``)."""
    return (Path(__file__).with_name("kernels") / "mstep.cu").read_text()


def _prior_row(prior) -> tuple[int, list[float]]:
    if prior is None:
        return 0, [0.0, 0.0, 0.0]
    name = type(prior).__name__
    kind = PRIOR_KINDS.get(name)
    if kind is None:
        return -1, [0.0, 0.0, 0.0]
    if kind == 3:
        from scipy.special import betaln

        al, be = float(prior.alpha), float(prior.beta)
        return 3, [al, be, float(betaln(al, be))]
    mu, sd = float(prior.mu), float(prior.sigma)
    return kind, [mu, sd, -np.log(sd) - 0.5 * np.log(2.0 * np.pi)]


def config(model, n_items: int, n_nodes: int, dense_n: bool, max_newton: int,
           max_halvings: int, step_tol: float, pred_rel: float):
    """The kernel's (int32, float64) configuration arrays for ``model`` (an
    :class:`~atlascat.irt.itemmodel.ItemModel`), in the layout ``kernels/mstep.cu`` documents;
    None when a prior has no kernel form."""
    priors = [model.prior_a, model.prior_c if model.has_c else None, model.prior_u]
    rows = [_prior_row(p) for p in priors]
    if any(kind < 0 for kind, _ in rows):
        return None
    f = list(model.free)
    free4 = f + [0] * (4 - len(f))
    ic = np.array([n_items, n_nodes, int(dense_n), int(model.has_c), int(model.has_u),
                   int(model.log_slope), len(f), *free4, int(max_newton), int(max_halvings),
                   *[kind for kind, _ in rows]], dtype=np.int32)
    lo = [float(model.lo[j]) for j in f] + [0.0] * (4 - len(f))
    hi = [float(model.hi[j]) for j in f] + [0.0] * (4 - len(f))
    dc = np.array(lo + hi + [v for _, vals in rows for v in vals] + [step_tol, pred_rel],
                  dtype=np.float64)
    return ic, dc


def _kernel(cp, device: int):
    """The compiled kernel for ``device`` (NVRTC, else nvcc), once per process."""
    if device not in _KERNEL:
        err, t0 = None, time.perf_counter()
        for backend in ("nvrtc", "nvcc"):
            try:
                with cp.cuda.Device(device):
                    mod = cp.RawModule(code=source(), options=("--std=c++14",), backend=backend)
                    _KERNEL[device] = mod.get_function("atlas_mstep")
                STATUS["compile_s"] = round(time.perf_counter() - t0, 3)
                STATUS["backend"] = backend
                break
            except Exception as exc:  # noqa: BLE001 - reported in STATUS, array-API path runs
                err = f"{backend}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        if device not in _KERNEL:
            _KERNEL[device] = None
            STATUS["error"] = err
    return _KERNEL[device]


def _cuda_view(a, cp):
    """A float64 CuPy view of a CUDA array (CuPy itself, or PyTorch through DLPack on the
    current stream); float32 data is widened first (as NumPy's promotion does in the
    array-API M-step); None for arrays elsewhere."""
    mod = type(a).__module__.split(".")[0]
    if mod == "cupy":
        return cp.ascontiguousarray(a, dtype=cp.float64)
    if mod == "torch" and a.is_cuda:
        import torch

        return cp.from_dlpack(a.detach().to(torch.float64).contiguous())
    return None


def cuda_mstep(model, th, r, nr, x, max_newton: int, step_tol: float, max_halvings: int,
               pred_rel: float):
    """:func:`atlascat.irt.mstep.mstep` as one kernel launch; None when it cannot run here
    (then the caller runs the array-API code)."""
    if not ENABLED:
        STATUS["last"] = "disabled"
        return None
    mod = type(th).__module__.split(".")[0]
    if mod not in ("torch", "cupy"):
        return None
    try:
        import cupy as cp
    except ImportError:
        STATUS["last"] = "no cupy"
        return None
    if mod == "torch" and not th.is_cuda:
        return None
    n_items, n_nodes = int(r.shape[0]), int(x.shape[0])
    cfg = config(model, n_items, n_nodes, nr.ndim == 1, max_newton, max_halvings, step_tol,
                 pred_rel)
    if cfg is None:
        STATUS["last"] = "a prior without a kernel form"
        return None
    if mod == "torch":
        import torch

        device = th.device.index if th.device.index is not None else torch.cuda.current_device()
        with warnings.catch_warnings():   # CuPy 14 deprecates it for Stream.from_external
            warnings.simplefilter("ignore", DeprecationWarning)
            stream = cp.cuda.ExternalStream(torch.cuda.current_stream(th.device).cuda_stream)
    else:
        device = int(th.device.id)
        stream = cp.cuda.get_current_stream()
    kernel = _kernel(cp, device)
    if kernel is None:
        STATUS["last"] = "compile failed"
        return None
    with cp.cuda.Device(device), stream:
        thv, rv, nrv, xv = [_cuda_view(a, cp) for a in (th, r, nr, x)]
        key = (device, cfg[0].tobytes(), cfg[1].tobytes())
        if key not in _CONFIGS:     # copied once per fit, not once per EM iteration
            _CONFIGS.clear()
            _CONFIGS[key] = (cp.asarray(cfg[0]), cp.asarray(cfg[1]))
        ic, dc = _CONFIGS[key]
        out = cp.empty_like(thv)
        blocks = (n_items * 32 + _THREADS - 1) // _THREADS
        kernel((blocks,), (_THREADS,), (thv, out, rv, nrv, xv, ic, dc))
    STATUS["last"] = "kernel"
    if mod == "torch":
        import torch

        return torch.from_dlpack(out)
    return out
