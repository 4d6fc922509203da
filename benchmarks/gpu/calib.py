"""Calibration and EAP scoring on the accelerator against the same code on the CPU (issue 29).

a. Joint 3PL on 3467 x 5600 answers simulated from the paper's HellaSwag bank
   (``bench_calibrate.simulate``), mirt's settings (no priors) and the default priors, float64
   and float32: accelerator vs NumPy on the CPU, both to convergence; log-likelihoods equal
   within 1e-6 per response. Goal: <= 1 s on the GPU. The accelerator's M-step is the fused
   kernel (``atlascat.irt.fused``, column "M-step"); the rows "before" run the array-API M-step.
b. Joint 3PL (default priors) on a simulated leaderboard, 10,000 x 50,000 with 60% of the cells
   missing (items resampled from the HellaSwag bank, as ``bench_calibrate.bench_gpu_large``),
   float64 and float32: the accelerator runs to convergence; the CPU runs the first
   ``big_cpu_iters`` EM iterations from the same start, and the two traces of the objective
   (log-likelihood + log prior, read at every recorded iterate) must agree within 1e-6 per
   response. Goal: <= 10 s on the GPU.
c. EAP scores of 100,000 x 5,000 (dense, first 5,000 HellaSwag items): accelerator vs CPU, from
   the host array and from the matrix already on the device (its copy there timed apart); MAP
   (the root search of ML / MAP / WLE, ``atlascat.irt.devicesolve``) of its first 20,000 rows
   the same ways, thetas within 1e-7 and the same flags.

Where a goal is missed, the fastest configuration that missed it is profiled: every EM phase
timed with a device synchronize around it (``phase_timers``), and ``torch.profiler`` over a few
iterations (the top operators by device time, kernel launches per iteration).
"""
from __future__ import annotations

import time
import warnings
from contextlib import contextmanager

import numpy as np

from common import GOALS, LL_TOL, MAP_TOL, THETA_TOL, accelerator, free_memory, log, sync


# ----------------------------------------------------------------------------- data
def hellaswag_matrix(n_subjects: int, n_items: int, seed: int):
    """Answers of N(0, 1) subjects to the first ``n_items`` items of the paper's HellaSwag bank
    (benchmarks/bench_calibrate.py's ``simulate``)."""
    from bench_calibrate import simulate

    from atlascat import catalogue
    from atlascat.responses import ResponseMatrix

    bank = catalogue.load_paper_bank("hellaswag")
    if n_items < len(bank):
        bank = bank.subset(np.arange(n_items))
    y, _ = simulate(bank, n_subjects, np.random.default_rng(seed))
    return ResponseMatrix(y)


def leaderboard_matrix(n_subjects: int, n_items: int, missing: float, seed: int, device: str,
                       dense: bool = False):
    """A simulated leaderboard: items resampled from the HellaSwag bank, N(0, 1) subjects,
    ``missing`` of the cells missing at random; drawn with torch on ``device`` in blocks of
    rows (a 10,000 x 50,000 matrix in seconds), returned as a host float64 array (NaN =
    missing) and the generating bank."""
    import torch

    from atlascat import catalogue
    from atlascat.irt.bank import ItemBank

    src = catalogue.load_paper_bank("hellaswag")
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(src), n_items) if n_items > len(src) else np.arange(n_items)
    a, b, c, u = (np.asarray(p, float)[pick] for p in src.params)
    bank = ItemBank([str(i) for i in range(n_items)], a, b, c, u)
    theta = rng.standard_normal(n_subjects)
    dev = torch.device("cuda" if device == "cuda" else "cpu")
    gen = torch.Generator(device=dev).manual_seed(seed)
    A, B, C, U = (torch.as_tensor(v, device=dev) for v in (a, b, c, u))
    out = np.empty((n_subjects, n_items))
    step = max(1, int(2e8 // n_items))
    for s in range(0, n_subjects, step):
        th = torch.as_tensor(theta[s:s + step], device=dev)[:, None]
        p = C + (U - C) * torch.sigmoid(A * (th - B))
        y = (torch.rand(p.shape, generator=gen, device=dev, dtype=torch.float64) < p).double()
        if not dense:
            y[torch.rand(p.shape, generator=gen, device=dev, dtype=torch.float64) < missing] \
                = float("nan")
        out[s:s + step] = y.cpu().numpy()
        del p, y
    return out, bank


# ----------------------------------------------------------------------------- fits
_OBSERVED: dict = {}


def observed_per_item(rm) -> np.ndarray:
    """Responses per item (computed once per matrix)."""
    key = id(rm)
    if key not in _OBSERVED:
        _OBSERVED[key] = np.count_nonzero(~np.isnan(rm.values), axis=0)
    return _OBSERVED[key]


def fit(rm, device: str, dtype: str, priors: str, max_iter: int | None = None) -> dict:
    """One joint 3PL fit; the trace of the objective and the time of every recorded iterate."""
    from atlascat.irt import fused
    from atlascat.irt.calibrate import calibrate

    fused.STATUS["last"] = None
    kw = {"dtype": dtype, "device": device}
    if priors == "mirt":
        kw.update(prior_a=None, prior_c=None)
    if max_iter:
        kw["max_iter"] = int(max_iter)
    stamps, trace = [], []

    def cb(info):
        stamps.append(time.perf_counter())
        trace.append(float(info["loglik"]))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        res = calibrate(rm, "3pl", callback=cb, **kw)
        secs = time.perf_counter() - t0
    kept_ids = set(res.bank.item_ids)   # (np.isin on string ids is slow at 50,000 items)
    kept = np.fromiter((i in kept_ids for i in rm.item_ids), bool, len(rm.item_ids))
    n_resp = int(observed_per_item(rm)[kept].sum())
    return {"seconds": secs, "iterations": int(res.n_iter), "converged": bool(res.converged),
            "loglik": float(res.loglik), "n_subjects": int(rm.n_subjects),
            "n_items": int(kept.sum()), "n_responses": n_resp,
            "s_per_iter": secs / max(res.n_iter, 1),
            "first_iterate_s": (stamps[0] - t0) if stamps else None,
            "float32_iterations": res.settings.get("float32_iterations"),
            "mstep_path": "cpu" if device == "cpu" else (fused.STATUS["last"] or "array-API"),
            "trace": np.asarray(trace)}


def _row(case, side, dev, dtype, priors, r, **extra):
    keep = ("n_subjects", "n_items", "n_responses", "iterations", "converged", "seconds",
            "s_per_iter", "first_iterate_s", "loglik", "float32_iterations", "mstep_path")
    return {"case": case, "side": side, "device": dev, "dtype": dtype, "priors": priors,
            **{k: r.get(k) for k in keep}, **extra}


def warm_up(acc: str) -> None:
    """CUDA context, cuBLAS handles and kernels loaded before anything is timed."""
    from atlascat.irt.ability import eap

    from atlascat.irt import fused

    rm = hellaswag_matrix(300, 60, 1)
    for dt in ("float64", "float32"):
        fit(rm, acc, dt, "auto", max_iter=4)
    log(f"fused M-step: {fused.STATUS}")
    from atlascat import catalogue

    eap(rm.values, catalogue.load_paper_bank("hellaswag").subset(np.arange(60)), device=acc)


def run_hellaswag(sz: dict, device: str, seed: int, rows: list, misses: list) -> None:
    acc = accelerator(device)
    rm = hellaswag_matrix(sz["hs_subjects"], sz["hs_items"], seed)
    case = f"hellaswag {rm.n_subjects} x {rm.n_items}"
    for priors in ("mirt", "auto"):
        for dt in ("float64", "float32"):
            log(f"{case}: {priors} {dt} on the CPU")
            cpu = fit(rm, "cpu", dt, priors)
            log(f"  {cpu['seconds']:.2f} s, {cpu['iterations']} it; on {acc}")
            free_memory(device)
            gpu = fit(rm, acc, dt, priors)
            log(f"  {gpu['seconds']:.2f} s, {gpu['iterations']} it")
            diff = abs(gpu["loglik"] - cpu["loglik"]) / gpu["n_responses"]
            k = min(20, len(cpu["trace"]), len(gpu["trace"]))
            early = float(np.max(np.abs(cpu["trace"][:k] - gpu["trace"][:k]))) / gpu["n_responses"]
            rows.append(_row(case, "cpu", "cpu", dt, priors, cpu))
            rows.append(_row(case, "accelerator", acc, dt, priors, gpu,
                             loglik_diff_per_response=diff, tol=LL_TOL, equal=diff <= LL_TOL,
                             first_iterates_diff_per_response=early, compared_iterates=k,
                             speedup=cpu["seconds"] / gpu["seconds"], goal_s=GOALS["hs"],
                             goal_met=gpu["seconds"] <= GOALS["hs"]))
            if gpu["seconds"] > GOALS["hs"]:
                misses.append(("hs", gpu["seconds"], rm, dt, priors, None))
            if dt == "float64":
                old = array_api_mstep(rm, acc, dt, priors, gpu, case)
                rows.append(old)
                log(f"  array-API M-step (before): {old['seconds']:.2f} s")


def array_api_mstep(rm, acc, dt, priors, ref, case) -> dict:
    """The same fit with the M-step as array-API operations (``fused.ENABLED = False``: a few
    thousand small kernels per EM iteration, the accelerator path before the fused kernel):
    time, and its log-likelihood against the kernel's."""
    from atlascat.irt import fused

    fused.ENABLED = False
    try:
        r = fit(rm, acc, dt, priors)
    finally:
        fused.ENABLED = True
    diff = abs(r["loglik"] - ref["loglik"]) / max(ref["n_responses"], 1)
    return _row(case, "accelerator, array-API M-step (before)", acc, dt, priors, r,
                speedup=r["seconds"] / ref["seconds"], loglik_diff_per_response=diff,
                tol=LL_TOL, equal=diff <= LL_TOL, mstep_path=r.get("mstep_path"))


def run_leaderboard(sz: dict, device: str, seed: int, rows: list, misses: list,
                    skip_cpu=lambda dtype: False, profiles: list | None = None) -> None:
    """The 10k x 50k fits (see the module docstring); the float32 fit on the accelerator is
    timed by phases, its table appended to ``profiles``."""
    profiles = [] if profiles is None else profiles
    from atlascat.responses import ResponseMatrix

    acc = accelerator(device)
    t = time.perf_counter()
    y, _ = leaderboard_matrix(sz["big_subjects"], sz["big_items"], sz["big_missing"], seed,
                              device)
    rm = ResponseMatrix(y)
    del y
    case = f"leaderboard {rm.n_subjects} x {rm.n_items}, {100 * rm.missing_fraction:.0f}% missing"
    log(f"{case}: simulated in {time.perf_counter() - t:.1f} s")
    n_cpu = sz["big_cpu_iters"]
    for dt in ("float64", "float32"):
        free_memory(device)
        log(f"{case}: {dt} on {acc} to convergence")
        if dt == "float32":   # timed by phases (a few device synchronizes per iteration more)
            with phase_timers(device) as ph:
                gpu = fit(rm, acc, dt, "auto")
            profiles.append(phase_report(
                f"leaderboard {rm.n_subjects} x {rm.n_items}, {dt}, default priors, on {acc}, "
                "the timed fit itself", ph, gpu))
        else:
            gpu = fit(rm, acc, dt, "auto")
        log(f"  {gpu['seconds']:.2f} s, {gpu['iterations']} it")
        if gpu["seconds"] > GOALS["big"]:
            misses.append(("big", gpu["seconds"], rm, dt, "auto", None))
        if dt == "float64" and not skip_cpu("full-count"):
            old = array_api_mstep(rm, acc, dt, "auto", gpu, case)
            rows.append(old)
            log(f"  array-API M-step (before): {old['seconds']:.2f} s")
        if skip_cpu(dt):
            log(f"  CPU side of {dt} skipped (phase time budget)")
            rows.append(_row(case, "accelerator", acc, dt, "auto", gpu, goal_s=GOALS["big"],
                             goal_met=gpu["seconds"] <= GOALS["big"]))
            continue
        log(f"  CPU, {n_cpu} iterations")
        free_memory(device)
        cpu = fit(rm, "cpu", dt, "auto", max_iter=n_cpu)
        log(f"  {cpu['seconds']:.2f} s")
        k = min(len(cpu["trace"]), len(gpu["trace"]))
        diff = float(np.max(np.abs(cpu["trace"][:k] - gpu["trace"][:k]))) / gpu["n_responses"]
        rows.append(_row(case, f"cpu, first {cpu['iterations']} iterations", "cpu", dt, "auto",
                         cpu, compared_iterates=k))
        rows.append(_row(case, "accelerator", acc, dt, "auto", gpu,
                         loglik_diff_per_response=diff, compared_iterates=k, tol=LL_TOL,
                         equal=diff <= LL_TOL,
                         speedup=cpu["s_per_iter"] / gpu["s_per_iter"],
                         goal_s=GOALS["big"], goal_met=gpu["seconds"] <= GOALS["big"]))


def run_eap(sz: dict, device: str, seed: int, rows: list) -> None:
    """EAP (61 nodes, N(0, 1)) of a dense simulated matrix on the CPU and the accelerator."""
    from atlascat.irt.ability import eap

    acc = accelerator(device)
    y, bank = leaderboard_matrix(sz["eap_subjects"], sz["eap_items"], 0.0, seed + 1, device,
                                 dense=True)
    case = f"EAP {y.shape[0]} x {y.shape[1]}"
    t = time.perf_counter()
    th_c, se_c = eap(y, bank, device="cpu")
    t_cpu = time.perf_counter() - t
    rows.append({"case": case, "side": "cpu", "device": "cpu", "dtype": "float64",
                 "n_subjects": y.shape[0], "n_items": y.shape[1], "seconds": t_cpu})
    log(f"{case}: CPU {t_cpu:.2f} s")
    for dt in ("float64", "float32"):
        free_memory(device)
        sync(device)
        t = time.perf_counter()
        th_g, se_g = eap(y, bank, device=acc, dtype=dt)
        secs = time.perf_counter() - t
        d_th = float(np.max(np.abs(th_g - th_c)))
        d_se = float(np.max(np.abs(se_g - se_c)))
        log(f"  {acc} {dt}: {secs:.2f} s, max |theta diff| {d_th:.2e}")
        rows.append({"case": case, "side": "accelerator", "device": acc, "dtype": dt,
                     "n_subjects": y.shape[0], "n_items": y.shape[1], "seconds": secs,
                     "speedup": t_cpu / secs, "theta_max_abs_diff": d_th, "se_max_abs_diff": d_se,
                     "tol": THETA_TOL[dt], "equal": d_th <= THETA_TOL[dt]})
    # the matrix already on the device (a tensor): scored where it lies; the copy timed apart
    import torch

    dev = torch.device("cuda" if device == "cuda" else "cpu")
    for dt in ("float64", "float32"):
        free_memory(device)
        sync(device)
        t = time.perf_counter()
        y_dev = torch.as_tensor(y, dtype=getattr(torch, dt), device=dev)
        sync(device)
        t_copy = time.perf_counter() - t
        eap(y_dev[:8], bank, dtype=dt)                      # first-call set-up, not timed
        sync(device)
        t = time.perf_counter()
        th_g, se_g = eap(y_dev, bank, dtype=dt)
        secs = time.perf_counter() - t
        d_th = float(np.max(np.abs(th_g - th_c)))
        d_se = float(np.max(np.abs(se_g - se_c)))
        log(f"  resident {dt}: {secs:.2f} s (+ {t_copy:.2f} s to copy the matrix there), "
            f"max |theta diff| {d_th:.2e}")
        rows.append({"case": case, "side": "accelerator, data resident", "device": acc,
                     "dtype": dt, "n_subjects": y.shape[0], "n_items": y.shape[1],
                     "seconds": secs, "transfer_s": t_copy, "speedup": t_cpu / secs,
                     "theta_max_abs_diff": d_th, "se_max_abs_diff": d_se,
                     "tol": THETA_TOL[dt], "equal": d_th <= THETA_TOL[dt]})
        del y_dev
    run_map(y[:sz["map_subjects"]], bank, device, rows)


def run_map(y, bank, device: str, rows: list) -> None:
    """MAP (the root search of ML / MAP / WLE) on the CPU, on the accelerator from host scores,
    and on scores already there (the copy timed apart)."""
    import torch

    from atlascat.irt.ability import map_estimate

    acc = accelerator(device)
    case = f"MAP {y.shape[0]} x {y.shape[1]}"
    t = time.perf_counter()
    ref = map_estimate(y, bank)
    t_cpu = time.perf_counter() - t
    rows.append({"case": case, "side": "cpu", "device": "cpu", "dtype": "float64",
                 "n_subjects": y.shape[0], "n_items": y.shape[1], "seconds": t_cpu})
    log(f"{case}: CPU {t_cpu:.2f} s")
    map_estimate(y[:8], bank, device=acc)                      # first-call set-up, not timed
    for side in ("accelerator", "accelerator, data resident"):
        free_memory(device)
        sync(device)
        t_copy = None
        src = y
        if side.endswith("resident"):
            t = time.perf_counter()
            src = torch.as_tensor(y, dtype=torch.float64,
                                  device=torch.device("cuda" if device == "cuda" else "cpu"))
            sync(device)
            t_copy = time.perf_counter() - t
        t = time.perf_counter()
        got = map_estimate(src, bank, device=acc)
        secs = time.perf_counter() - t
        d_th = float(np.max(np.abs(got.theta - ref.theta)))
        d_se = float(np.max(np.abs(got.se - ref.se)))
        same = bool(np.array_equal(got.flag, ref.flag))
        log(f"  {side}: {secs:.2f} s, max |theta diff| {d_th:.2e}, same flags {same}")
        rows.append({"case": case, "side": side, "device": acc, "dtype": "float64",
                     "n_subjects": y.shape[0], "n_items": y.shape[1], "seconds": secs,
                     "transfer_s": t_copy, "speedup": t_cpu / secs, "theta_max_abs_diff": d_th,
                     "se_max_abs_diff": d_se, "tol": MAP_TOL, "equal": d_th <= MAP_TOL and same})


# ----------------------------------------------------------------------------- profiles
@contextmanager
def phase_timers(device: str):
    """Time the EM's phases (device synchronized around each call); yields {phase: [s, calls]}."""
    from atlascat.irt import calibrate as cal_mod, em, itemmodel, squarem

    acc: dict = {}
    saved = []

    def wrap(owner, name, label, is_class=False):
        # the attribute as stored (a classmethod object for DeviceData.build), put back after
        orig = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        fn = orig.__func__ if is_class else orig

        def timed(*a, **k):
            sync(device)
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                sync(device)
                slot = acc.setdefault(label, [0.0, 0])
                slot[0] += time.perf_counter() - t
                slot[1] += 1

        saved.append((owner, name, orig))
        setattr(owner, name, classmethod(timed) if is_class else timed)

    wrap(cal_mod, "fit_joint", "fit_joint (the EM, after the input checks)")
    wrap(em, "plan_blocks", "plan_blocks")
    wrap(em.DeviceData, "build", "data to the device (DeviceData.build)", is_class=True)
    wrap(em, "start_values", "start values")
    wrap(em, "estep", "E-step (incl. the final scoring pass)")
    wrap(em, "mstep", "M-step")
    wrap(itemmodel.ItemModel, "node_logs", "node log-probabilities")
    wrap(itemmodel.ItemModel, "derivative_terms", "  M-step: derivatives")
    wrap(itemmodel.ItemModel, "objective", "  M-step: line-search objective")
    wrap(squarem, "step_lengths", "SQUAREM step lengths")
    wrap(squarem, "extrapolate", "SQUAREM extrapolation")
    try:
        yield acc
    finally:
        for owner, name, orig in reversed(saved):
            setattr(owner, name, orig)


def phase_report(title: str, ph: dict, r: dict) -> str:
    """A markdown table of :func:`phase_timers`' phases for the fit ``r``."""
    total = r["seconds"]
    inner = sum(v[0] for k, v in ph.items() if not k.startswith(("fit_joint", " ")))
    fj = ph.get("fit_joint (the EM, after the input checks)", [0.0, 1])[0]
    nested = ph.get("node log-probabilities", [0.0])[0]   # also inside the E- and M-step
    lines = [f"## Profile: {title}", "",
             f"{r['iterations']} EM iterations, {total:.2f} s in calibrate(), with the device "
             "synchronized around every phase", "",
             "| phase | calls | seconds | ms per call |", "|---|---|---|---|",
             f"| calibrate() total | 1 | {total:.3f} | |",
             f"| before the EM (ResponseMatrix checks, constant items, identification, "
             f"defaults) | 1 | {total - fj:.3f} | |"]
    for k, (sec, n) in ph.items():
        lines.append(f"| {k} | {n} | {sec:.3f} | {1e3 * sec / max(n, 1):.2f} |")
    lines += [f"| EM loop bookkeeping (convergence, reads back, packing; fit_joint minus its "
              f"timed phases) | | {fj - inner + nested:.3f} | |", "",
              "(node log-probabilities are timed inside the E-step and M-step rows too; indented "
              "rows are parts of the M-step.)", ""]
    return "\n".join(lines)


def profile(kind: str, rm, dt: str, priors: str, sz: dict, device: str,
            with_torch_profile: bool = True, phases: bool = True) -> str:
    """Where a fit's time goes: timed phases over ``profile_iters`` iterations, then
    torch.profiler's top operators over ``torch_profile_iters``."""
    acc = accelerator(device)
    title = f"{kind} {rm.n_subjects} x {rm.n_items}, {dt}, priors {priors}, on {acc}"
    out = []
    free_memory(device)
    if phases:
        with phase_timers(device) as ph:
            r = fit(rm, acc, dt, priors, max_iter=sz["profile_iters"])
        out.append(phase_report(title + f", first {sz['profile_iters']} iterations", ph, r))
    if with_torch_profile:
        out.append(f"## torch.profiler: {title}\n\n"
                   + torch_profile(rm, acc, dt, priors, sz["torch_profile_iters"]))
    else:
        out.append("(torch.profiler skipped: phase time budget)")
    return "\n\n".join(out)


def torch_profile(rm, acc: str, dt: str, priors: str, n_iter: int) -> str:
    import torch
    from torch.profiler import ProfilerActivity, profile as tprofile

    acts = [ProfilerActivity.CPU]
    if acc == "cuda":
        acts.append(ProfilerActivity.CUDA)
    with tprofile(activities=acts) as prof:
        r = fit(rm, acc, dt, priors, max_iter=n_iter)
    ka = prof.key_averages()
    table = None
    for key in (("self_cuda_time_total", "self_device_time_total") if acc == "cuda" else ())\
            + ("self_cpu_time_total",):
        try:
            table = ka.table(sort_by=key, row_limit=25, max_name_column_width=60)
            break
        except Exception:  # noqa: BLE001 - sort keys renamed across torch versions
            continue
    n_ops = sum(int(e.count) for e in ka)
    kernels = 0
    if acc == "cuda":
        for e in prof.events():
            if str(getattr(e, "device_type", "")).endswith("CUDA"):
                kernels += 1
    head = (f"torch.profiler, {r['iterations']} EM iterations ({r['seconds']:.2f} s under the "
            f"profiler): {n_ops} operator calls"
            + (f", {kernels} device kernels ({kernels / max(r['iterations'], 1):.0f} per "
               "iteration)" if acc == "cuda" else "") + f"; torch {torch.__version__}")
    return head + "\n\n```\n" + (table or "(no table)") + "\n```"
