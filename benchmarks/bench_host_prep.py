"""Host-side phases of a joint 3PL calibration: what ``calibrate()`` does around the EM.

Times, per phase (medians of ``--repeat`` fits with ``max_iter=1``): the input checks before
the EM (the answer counts of 0/1 data, constant items, identification, the automatic defaults), ``plan_blocks``, the data put
where the EM runs (``DeviceData.build``), the start values, one E-step + M-step, and the data
fingerprint written into the result (on a GPU hashed in a thread beside the rest:
its own time, and the time the fit waits for it). Cases: ``hs``, answers of 3467 subjects to the first 5600
HellaSwag items (``bench_calibrate.simulate``); ``big``, a leaderboard of resampled HellaSwag
items with 60% of the cells missing (``--big 10000x50000`` is issue 44's; the default
5000x25000 keeps the peak memory of a 2-core shared machine low).

    OPENBLAS_NUM_THREADS=1 nice .venv/bin/python benchmarks/bench_host_prep.py [--case hs|big]
        [--big 5000x25000] [--repeat 3] [--device cpu|cuda] [--dtype float64|float32]
        [--cache big.npy]

The last lines print the fit's log-likelihood and hashes of its parameters, thetas and data
fingerprint (to compare two sources of the host code, which must give the same results).
"""
from __future__ import annotations

import argparse
import hashlib
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def hellaswag(n_subjects=3467, n_items=5600, seed=0):
    from bench_calibrate import simulate

    from atlascat import catalogue

    bank = catalogue.load_paper_bank("hellaswag")
    bank = bank.subset(np.arange(min(n_items, len(bank))))
    y, _ = simulate(bank, n_subjects, np.random.default_rng(seed))
    return y


def leaderboard(n_subjects, n_items, missing=0.6, seed=0):
    """Items resampled from the HellaSwag bank, N(0, 1) subjects, ``missing`` of the cells NaN
    (drawn in row blocks: no full-size temporaries beyond the matrix)."""
    from atlascat import catalogue
    from scipy.special import expit

    src = catalogue.load_paper_bank("hellaswag")
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(src), n_items)
    a, b, c, u = (np.asarray(p, float)[pick] for p in src.params)
    theta = rng.standard_normal(n_subjects)
    out = np.empty((n_subjects, n_items))
    step = max(1, int(2e7 // n_items))
    for s in range(0, n_subjects, step):
        th = theta[s:s + step, None]
        p = c + (u - c) * expit(a * (th - b))
        blk = (rng.random(p.shape) < p).astype(float)
        blk[rng.random(p.shape) < missing] = np.nan
        out[s:s + step] = blk
    return out


PHASES = [("before the EM: answer counts of 0/1 data (colstats.binary_counts)", "cal",
           "binary_counts"),
          ("before the EM: resolve_defaults (identification, defaults)", "cal", "resolve_defaults"),
          ("plan_blocks", "em", "plan_blocks"),
          ("data to the device (DeviceData.build)", "DeviceData", "build"),
          ("start values", "em", "start_values"),
          ("E-steps (one EM iteration + the final scoring pass)", "em", "estep"),
          ("M-step (one)", "em", "mstep"),
          ("data fingerprint", "cal", "_fingerprint"),
          ("waiting for the fingerprint's thread (GPU)", "Background", "result")]
#: the phase that runs beside the others (the fingerprint's thread on a GPU)
BESIDE = "data fingerprint"


def timed_fit(values, device, dtype, sync):
    """One ``calibrate(..., max_iter=1)`` with every phase of :data:`PHASES` timed."""
    from atlascat.irt import calibrate as cal, em
    from atlascat.irt.estep import DeviceData

    owners = {"cal": cal, "em": em, "DeviceData": DeviceData,
              "Background": getattr(cal, "_Background", None)}
    acc, saved = {}, []
    for label, owner_key, name in PHASES:
        owner = owners[owner_key]
        if owner is None or name not in owner.__dict__:   # (a source without this phase)
            continue
        orig = owner.__dict__[name]
        is_class = isinstance(orig, classmethod)
        fn = orig.__func__ if is_class else orig

        def timed(*a, _fn=fn, _label=label, **k):
            on_host = _label == BESIDE      # (no device synchronize from its thread)
            None if on_host else sync()
            t = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                None if on_host else sync()
                acc[_label] = acc.get(_label, 0.0) + time.perf_counter() - t

        saved.append((owner, name, orig))
        setattr(owner, name, classmethod(timed) if is_class else timed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            res = cal.calibrate(values, "3pl", max_iter=1, device=device, dtype=dtype)
            total = time.perf_counter() - t
    finally:
        for owner, name, orig in reversed(saved):
            setattr(owner, name, orig)
    acc["calibrate() total"] = total
    beside = hasattr(cal, "_Background") and device.startswith("cuda")
    acc["rest (constant items, checks, bank, result)"] = total - sum(
        v for k, v in acc.items() if k != "calibrate() total" and not (beside and k == BESIDE))
    return acc, res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=("hs", "big"), default="hs")
    ap.add_argument("--big", default="5000x25000", help="subjects x items of the big case")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--cache", default=None,
                    help="a .npy file: the big matrix read from it, or drawn and written there")
    args = ap.parse_args(argv)
    sync = lambda: None  # noqa: E731
    if args.device.startswith("cuda"):
        import torch

        sync = torch.cuda.synchronize
    t = time.perf_counter()
    if args.case == "hs":
        values = hellaswag()
    else:
        n, m = (int(v) for v in args.big.lower().split("x"))
        if args.cache and Path(args.cache).exists():
            values = np.load(args.cache)
        else:
            values = leaderboard(n, m)
            if args.cache:
                np.save(args.cache, values)
    made = time.perf_counter() - t
    print(f"# {args.case}: {values.shape[0]} x {values.shape[1]}, "
          f"{100 * np.isnan(values).mean():.0f}% missing, simulated in {made:.1f} s; "
          f"device {args.device}, {args.dtype}")
    if args.device.startswith("cuda"):   # context and kernels loaded before anything is timed
        timed_fit(values[:200, :100], args.device, args.dtype, sync)
    runs, res = [], None
    for _ in range(args.repeat):
        acc, res = timed_fit(values, args.device, args.dtype, sync)
        runs.append(acc)
    print("| phase | median s | runs |")
    print("|---|---|---|")
    for label in [p[0] for p in PHASES] + ["rest (constant items, checks, bank, result)",
                                            "calibrate() total"]:
        v = [r.get(label, 0.0) for r in runs]
        print(f"| {label} | {np.median(v):.3f} | {' '.join(f'{x:.3f}' for x in v)} |")
    th = np.stack([np.asarray(p, float) for p in res.bank.params], axis=1)
    print(f"loglik {res.loglik!r}; params sha1 {hashlib.sha1(th.tobytes()).hexdigest()[:16]}; "
          f"theta sha1 {hashlib.sha1(np.asarray(res.theta).tobytes()).hexdigest()[:16]}; "
          f"fingerprint {res.settings['data_fingerprint']}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB "
          f"(the matrix: {values.nbytes / 2**30:.2f} GiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
