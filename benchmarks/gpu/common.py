"""Shared pieces of the GPU figures (benchmarks/gpu): sizes, devices, timing, tables.

The accelerator side is ``device="cuda"`` on a GPU; with ``--device cpu`` (a machine without
one, to test the script) it is PyTorch on the CPU (``"torch:cpu"``): the same torch code path,
so the script is exercised end to end before it meets the GPU.
"""
from __future__ import annotations

import csv
import json
import os
import platform
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

#: problem sizes: the issue's (full) and a small mode that tests the script on 2 CPU cores
SIZES = {
    "full": {"hs_subjects": 3467, "hs_items": 5600, "big_subjects": 10_000,
             "big_items": 50_000, "big_missing": 0.6, "big_cpu_iters": 4,
             "eap_subjects": 100_000, "eap_items": 5000, "map_subjects": 20_000,
             "profile_iters": 5,
             "torch_profile_iters": 2},
    "small": {"hs_subjects": 400, "hs_items": 600, "big_subjects": 600,
              "big_items": 2000, "big_missing": 0.6, "big_cpu_iters": 4,
              "eap_subjects": 4000, "eap_items": 400, "map_subjects": 1000,
              "profile_iters": 4,
              "torch_profile_iters": 2},
}

GOALS = {"hs": 1.0, "big": 10.0}   # seconds (issue 29)
LL_TOL = 1e-6                      # |log-likelihood difference| per response, GPU vs CPU
THETA_TOL = {"float64": 1e-8, "float32": 1e-3}   # max |EAP theta difference|, GPU vs CPU
MAP_TOL = 1e-7                     # max |MAP theta difference| (the root search's xtol is 1e-9)


def sizes(small: bool) -> dict:
    return SIZES["small" if small else "full"]


def accelerator(device: str) -> str:
    """The accelerator side's device string: "cuda", or PyTorch on the CPU to test the script."""
    return "cuda" if device == "cuda" else "torch:cpu"


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def free_memory(device: str) -> None:
    import gc

    gc.collect()
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()


@contextmanager
def stopwatch(out: dict, key: str, device: str = "cpu"):
    """``out[key]`` = seconds spent in the block (the device synchronized at both ends)."""
    sync(device)
    t = time.perf_counter()
    try:
        yield
    finally:
        sync(device)
        out[key] = out.get(key, 0.0) + time.perf_counter() - t


def machine(device: str) -> dict:
    """What ran the figures: GPU name, CPU cores, BLAS threads, library versions."""
    from importlib.metadata import PackageNotFoundError, version

    info = {"python": platform.python_version(), "cpu_cores": os.cpu_count(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
            "device": device, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    for pkg in ("numpy", "scipy", "torch", "transformers", "gguf", "lm_eval", "array_api_compat"):
        try:
            info[pkg] = version(pkg)
        except PackageNotFoundError:
            info[pkg] = None
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    try:
        from atlascat import __version__

        info["atlascat"] = __version__
    except ImportError:
        pass
    return info


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write_csv(rows: list[dict], path: Path) -> None:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: _fmt(r.get(k)) for k in keys})


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.10g}"
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return "" if v is None else v


def md_table(rows: list[dict], cols: list[tuple[str, str]]) -> str:
    """A markdown table of ``rows`` with ``cols`` = [(key, header)], numbers rounded for reading."""
    head = "| " + " | ".join(h for _, h in cols) + " |"
    sep = "|" + "---|" * len(cols)
    body = []
    for r in rows:
        cells = []
        for k, _ in cols:
            v = r.get(k)
            if isinstance(v, bool):
                cells.append("yes" if v else "no")
            elif isinstance(v, float):
                cells.append(f"{v:.3g}" if abs(v) < 1e-2 and v != 0 else
                             (f"{v:.3f}" if abs(v) < 1e5 else f"{v:.1f}"))
            else:
                cells.append("" if v is None else str(v))
        body.append("| " + " | ".join(cells) + " |")
    return "\n".join([head, sep] + body)
