"""Calibration speed and accuracy figures (run as a script; prints a table).

    .venv/bin/python benchmarks/bench_calibrate.py            # everything
    .venv/bin/python benchmarks/bench_calibrate.py --quick    # skip the 3467 x 5600 run

Figures:
1. tiny_arc (3747 x 99, real data), 3PL, 61 nodes, no prior (``mirt_defaults=True``): seconds (median of --repeat runs),
   EM iterations, marginal log-likelihood, and mirt's bank's log-likelihood on the same data.
2. girth's ``threepl_mml`` on tiny_arc (the peer figure), run with the interpreter of a scratch
   virtual environment (``--peer-python``, default /tmp/peers/bin/python) in a subprocess
   (girth 0.8 fails under NumPy 2: ``python -m venv /tmp/peers && /tmp/peers/bin/pip install
   girth "numpy<2" "scipy<1.14"``):
   seconds and the marginal log-likelihood of its estimates in our parameterization. girth
   orients data items x subjects and uses no 1.702 scaling in ``threepl_mml`` (its IRF is
   c + (1 - c) / (1 + exp(-a (theta - b)))), so its (a, b, c) are ours as they are.
3. Recovery: 3000 N(0, 1) subjects simulated from the first 1000 items of the published HellaSwag
   bank, joint 3PL: ICC RMSD (median over items), corr(b) over items with true a > 0.5 (all, and
   with |b| <= 3), and partitioned calibration (partitions of 250, mean-sigma) vs the joint bank.
4. Missing data: the full union_arc matrix, 3PL: seconds, iterations, convergence, the smallest
   log-likelihood change between recorded iterations (never negative), finite bank.
5. Speed at scale: 3467 subjects x all 5600 HellaSwag items simulated from the published bank,
   joint 3PL on the CPU with 2 BLAS threads (a subprocess per fit, so the thread count holds):
   seconds, iterations, seconds per iteration, log-likelihood, for float64 and float32 E-steps,
   with mirt's settings (``mirt``: no priors, the issue's figure) and with the 3PL's default
   priors (``auto``); float32 minus float64 log-likelihood per subject. With
   ``--baseline-src OLD/src`` the same fits with an older checkout's code, alternating with
   ours (before/after figures under the same load); ``--big-repeat N`` runs each fit N times
   and reports the median seconds.
6. mirt on tiny_arc (``Rscript ../shared/tools/mirt_fit.R``) when R and mirt are installed.
7. GPU (only when ``torch.cuda.is_available()``): the 3467 x 5600 fit with ``device="cuda"``
   (float64 and float32) and a simulated leaderboard of 8,577 subjects x 50,265 items (items
   resampled from the published HellaSwag bank) with 60% of the cells missing.

    .venv/bin/python benchmarks/bench_calibrate.py --skip-recovery --baseline-src /tmp/old/src

Timings on a shared 2-core machine are inflated by whatever else runs; report medians, and
per-iteration seconds and iteration counts, which do not depend on the load.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"

_GIRTH_SCRIPT = r"""
import json, sys, time
import numpy as np
from girth import threepl_mml
y = np.load(sys.argv[1])              # subjects x items, 0/1
t = time.perf_counter()
est = threepl_mml(y.T.astype(int))    # girth wants items x subjects
secs = time.perf_counter() - t
print(json.dumps({"seconds": secs, "a": np.asarray(est["Discrimination"]).tolist(),
                  "b": np.asarray(est["Difficulty"]).tolist(),
                  "c": np.asarray(est["Guessing"]).tolist()}))
"""


def simulate(bank, n_subjects, rng):
    """0/1 responses of N(0, 1) subjects drawn from the bank's 3PL."""
    theta = rng.standard_normal(n_subjects)
    return (rng.random((n_subjects, len(bank))) < bank.probability(theta)).astype(float), theta


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), out


def bench_tiny(repeat):
    from atlascat.irt.bank import ItemBank
    from atlascat.irt.calibrate import calibrate, marginal_loglik
    from atlascat.responses import ResponseMatrix

    rm = ResponseMatrix.read(SHARED / "openllm" / "tiny_arc.csv.gz")
    mirt = ItemBank.read(SHARED / "reference" / "mirt_tiny" / "arc_items.csv")
    # mirt's settings (3PL, no priors), as girth and mirt itself are run
    secs, res = timed(lambda: calibrate(rm, "3pl", mirt_defaults=True), repeat)
    return rm, {
        "tiny_arc_3pl_seconds": round(secs, 3),
        "tiny_arc_iterations": res.n_iter,
        "tiny_arc_converged": res.converged,
        "tiny_arc_loglik_ours": round(res.loglik, 3),
        "tiny_arc_loglik_mirt": round(marginal_loglik(rm, mirt), 3),
    }


def bench_girth(rm, peer_python):
    from atlascat.irt.bank import ItemBank
    from atlascat.irt.calibrate import marginal_loglik

    if not Path(peer_python).exists():
        return {"girth": "girth not installed"}
    check = subprocess.run([peer_python, "-c", "import girth"], capture_output=True)
    if check.returncode != 0:
        return {"girth": "girth not installed"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "y.npy"
        np.save(path, rm.values)
        proc = subprocess.run([peer_python, "-c", _GIRTH_SCRIPT, str(path)], capture_output=True,
                              text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if proc.returncode != 0:
        return {"girth": f"girth failed: {proc.stderr.strip()[-300:]}"}
    est = json.loads(proc.stdout.strip().splitlines()[-1])
    a, b, c = (np.asarray(est[k], float) for k in ("a", "b", "c"))
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    bank = ItemBank(rm.item_ids[ok], a[ok], b[ok], np.clip(c[ok], 0, 0.999))
    ll = marginal_loglik(rm.subset(items=rm.item_ids[ok]), bank)
    return {"girth_threepl_mml_seconds": round(est["seconds"], 3),
            "girth_loglik": round(ll, 3), "girth_items_finite": int(ok.sum())}


def bench_recovery(seed):
    from atlascat import catalogue
    from atlascat.irt.bank import ItemBank
    from atlascat.irt.calibrate import calibrate
    from atlascat.irt.linking import icc_rmsd

    true = catalogue.load_paper_bank("hellaswag").subset(np.arange(1000))
    rng = np.random.default_rng(seed)
    y, _ = simulate(true, 3000, rng)
    true = ItemBank([str(i) for i in range(len(true))], *true.params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        joint = calibrate(y, "3pl")
        t_joint = time.perf_counter() - t
        t = time.perf_counter()
        part = calibrate(y, "3pl", partition_size=250, random_state=seed)
        t_part = time.perf_counter() - t
    tb = true.subset(joint.bank.item_ids)
    rmsd = icc_rmsd(joint.bank, tb)
    sel = tb.a > 0.5
    mid = sel & (np.abs(tb.b) <= 3)
    return {
        "recovery_items_kept": len(joint.bank),
        "recovery_joint_seconds": round(t_joint, 2),
        "recovery_joint_iterations": joint.n_iter,
        "recovery_icc_rmsd_median": round(float(rmsd.median()), 4),
        "recovery_corr_b_a>0.5": round(float(np.corrcoef(joint.bank.b[sel], tb.b[sel])[0, 1]), 4),
        "recovery_corr_b_a>0.5_|b|<=3": round(float(np.corrcoef(joint.bank.b[mid], tb.b[mid])[0, 1]), 4),
        "partition_seconds": round(t_part, 2),
        "partition_vs_joint_icc_rmsd_median": round(float(icc_rmsd(part.bank, joint.bank).median()), 4),
        "partition_vs_true_icc_rmsd_median": round(float(icc_rmsd(part.bank, tb).median()), 4),
    }


def bench_union():
    """The full union_arc.csv.gz (61% missing in the file), 3PL, no filtering."""
    from atlascat.irt.calibrate import calibrate
    from atlascat.responses import ResponseMatrix

    rm = ResponseMatrix.read(SHARED / "openllm" / "union_arc.csv.gz", on_empty="drop")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = calibrate(rm, "3pl")
    tr = res.loglik_trace
    finite = all(np.all(np.isfinite(arr)) for arr in res.bank.params)
    return {"union_arc_shape": list(rm.shape), "union_arc_missing": round(rm.missing_fraction, 3),
            "union_arc_seconds": round(res.seconds, 1), "union_arc_iterations": res.n_iter,
            "union_arc_converged": res.converged,
            "union_arc_min_loglik_step": float(np.diff(tr).min()),
            "union_arc_bank_finite": finite, "union_arc_items_left_out": len(res.dropped_items)}


_BIG_SCRIPT = r"""
import json, sys, time, warnings
import numpy as np
from atlascat import catalogue
from atlascat.irt.calibrate import calibrate
seed, dtype, device, priors = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
bank = catalogue.load_paper_bank("hellaswag")
rng = np.random.default_rng(seed)
theta = rng.standard_normal(3467)
y = (rng.random((3467, len(bank))) < bank.probability(theta)).astype(float)
kw = {} if device == "cpu" else {"device": device}
if priors == "mirt":   # mirt's defaults: no priors (the issue's 3PL)
    kw.update(prior_a=None, prior_c=None)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    t = time.perf_counter()
    res = calibrate(y, "3pl", dtype=dtype, **kw)
    secs = time.perf_counter() - t
print(json.dumps({"seconds": secs, "n_iter": int(res.n_iter), "converged": bool(res.converged),
                  "loglik": float(res.loglik), "n_subjects": int(y.shape[0]),
                  "n_items": int(len(res.bank)),
                  "float32_iterations": res.settings.get("float32_iterations")}))
"""


def _run_big(src, seed, dtype, device="cpu", threads=2, priors="mirt"):
    """One 3467 x 5600 fit in a subprocess importing atlascat from ``src`` (2 BLAS threads)."""
    env = {**os.environ, "PYTHONPATH": str(src), "OPENBLAS_NUM_THREADS": str(threads),
           "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-c", _BIG_SCRIPT, str(seed), dtype, device, priors],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-300:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_big(seed, dtypes, baseline_src=None, device="cpu", threads=2, repeat=1,
              priors=("mirt", "auto")):
    """3467 x 5600 joint 3PL: ours (this checkout) and, optionally, an older checkout, run in
    turn (ours, old, ours, old, ...) ``repeat`` times; seconds are the median of the runs.

    ``priors``: "mirt" = mirt's defaults (no priors; the issue's figure), "auto" = the 3PL's
    default priors (a ~ lognorm(0, 0.3), c ~ beta(10, 40)).
    """
    out = {}
    runs = [("", ROOT / "src")]
    if baseline_src:
        runs.append(("baseline_", Path(baseline_src)))
    tag = "big" if device == "cpu" else f"big_{device.replace(':', '')}"
    for pr in priors:
        for dt in dtypes:
            results = {}
            for _ in range(max(1, repeat)):
                for prefix, src in runs:
                    if device != "cpu" and prefix:
                        continue
                    results.setdefault(prefix, []).append(
                        _run_big(src, seed, dt, device, threads, pr))
            for prefix, got in results.items():
                key = f"{prefix}{tag}_{pr}_{dt}"
                errs = [g["error"] for g in got if "error" in g]
                if errs:
                    out[f"{key}_error"] = errs[0]
                    continue
                res = got[0]
                secs = [g["seconds"] for g in got]
                out.update({f"{key}_seconds": round(float(np.median(secs)), 1),
                            f"{key}_seconds_runs": [round(v, 1) for v in secs],
                            f"{key}_iterations": res["n_iter"],
                            f"{key}_converged": res["converged"],
                            f"{key}_seconds_per_iteration": round(float(np.median(secs)) / max(res["n_iter"], 1), 3),
                            f"{key}_loglik": round(res["loglik"], 3)})
                if res.get("float32_iterations") is not None:
                    out[f"{key}_float32_iterations"] = res["float32_iterations"]
                out["big_shape"] = [res["n_subjects"], res["n_items"]]
    for pr in priors:  # float32 against float64, per subject
        a, b = out.get(f"{tag}_{pr}_float32_loglik"), out.get(f"{tag}_{pr}_float64_loglik")
        if a is not None and b is not None:
            out[f"{tag}_{pr}_float32_minus_float64_loglik_per_subject"] = float(f"{(a - b) / 3467:.2e}")
    return out


def bench_mirt_tiny():
    """mirt 1.45 on tiny_arc (3PL, EM, 61 nodes, its defaults) through ../shared/tools/mirt_fit.R."""
    import shutil

    script = SHARED.parent / "tools" / "mirt_fit.R"
    if shutil.which("Rscript") is None or not script.exists():
        return {"mirt": "R / mirt not installed"}
    check = subprocess.run(["Rscript", "-e", "library(mirt)"], capture_output=True)
    if check.returncode != 0:
        return {"mirt": "mirt not installed"}
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(["Rscript", str(script), str(SHARED / "openllm" / "tiny_arc.csv.gz"),
                               "3PL", str(Path(tmp) / "arc")], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"mirt": f"mirt failed: {proc.stderr.strip()[-300:]}"}
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"mirt_tiny_arc_3pl_seconds": round(float(info["seconds"]), 2),
            "mirt_tiny_arc_iterations": info.get("iterations"),
            "mirt_tiny_arc_loglik": round(float(info["loglik"]), 3)}


def bench_gpu_large(seed, dtype="float32", n_subjects=8577, n_items=50265, missing=0.6):
    """Simulated leaderboard: items resampled from the HellaSwag bank, 60% of cells missing."""
    from atlascat import catalogue
    from atlascat.irt.bank import ItemBank
    from atlascat.irt.calibrate import calibrate

    src = catalogue.load_paper_bank("hellaswag")
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(src), n_items)
    bank = ItemBank([str(i) for i in range(n_items)], src.a[pick], src.b[pick], src.c[pick])
    theta = rng.standard_normal(n_subjects)
    y = np.empty((n_subjects, n_items))
    for s in range(0, n_subjects, 1000):  # in blocks: bounded memory while simulating
        sl = slice(s, min(n_subjects, s + 1000))
        blk = (rng.random((sl.stop - sl.start, n_items)) < bank.probability(theta[sl])).astype(float)
        blk[rng.random(blk.shape) < missing] = np.nan
        y[sl] = blk
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        res = calibrate(y, "3pl", device="cuda", dtype=dtype)
        secs = time.perf_counter() - t
    key = f"gpu_{n_subjects}x{n_items}_{dtype}"
    return {f"{key}_seconds": round(secs, 1), f"{key}_iterations": res.n_iter,
            f"{key}_converged": res.converged,
            f"{key}_seconds_per_iteration": round(secs / max(res.n_iter, 1), 3),
            f"{key}_missing": round(float(np.isnan(y).mean()), 3)}


def _gpu_available():
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 3467 x 5600 run")
    parser.add_argument("--repeat", type=int, default=3, help="repeats of the tiny_arc timing")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--peer-python", default="/tmp/peers/bin/python")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--skip-recovery", action="store_true")
    parser.add_argument("--skip-mirt", action="store_true", help="do not run R's mirt")
    parser.add_argument("--baseline-src", default=None,
                        help="src/ folder of an older checkout: also time its 3467 x 5600 fit")
    parser.add_argument("--threads", type=int, default=2, help="BLAS threads of the CPU fits")
    parser.add_argument("--big-repeat", type=int, default=1,
                        help="runs of each 3467 x 5600 fit (seconds: their median)")
    parser.add_argument("--priors", default="mirt,auto",
                        help="3467 x 5600 settings: mirt (no priors), auto (default priors)")
    args = parser.parse_args(argv)
    figures = {}
    rm, tiny = bench_tiny(args.repeat)
    figures.update(tiny)
    figures.update(bench_girth(rm, args.peer_python))
    if not args.skip_mirt:
        figures.update(bench_mirt_tiny())
    if not args.skip_recovery:
        figures.update(bench_recovery(args.seed))
        figures.update(bench_union())
    dtypes = args.dtypes.split(",")
    if not args.quick:
        figures.update(bench_big(args.seed, dtypes, args.baseline_src, "cpu", args.threads,
                                 args.big_repeat, tuple(args.priors.split(","))))
    if _gpu_available():
        if not args.quick:
            figures.update(bench_big(args.seed, dtypes, None, "cuda",
                                     priors=tuple(args.priors.split(","))))
        figures.update(bench_gpu_large(args.seed))
    else:
        figures["gpu"] = "no CUDA device (torch absent or no GPU): GPU figures not measured"
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
