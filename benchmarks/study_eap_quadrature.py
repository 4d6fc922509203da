"""How far is the 121-node EAP (mirt's fscores grid, ``atlas score``'s) from the integral on the
shipped banks' short answer sets, and does ``quadrature="adaptive"`` close the gap, at what cost?
(benchmarks/results/eap_quadrature.md)

Per shipped bank (arc, gsm8k, hellaswag, mmlu, truthfulqa, winogrande), answer sets of
``--subjects`` simulated examinees, theta uniform on [-3, 3], answers drawn from the bank's
model:

- ``cat k``: the first k items (k = 5, 10, 20, 30) of the default adaptive test
  (``simulate_adaptive(bench, thetas=..., max_items=30)``, what ``atlas simulate`` runs): the
  steepest items near each theta, narrow posteriors;
- ``random``: 5-30 items drawn at random per examinee;
- ``recorded``: 5-30 random items of ``--subjects`` recorded models' real answers
  (``load_responses(bench)``).

Each set is scored N(0, 1) on [-6, 6] by: ``fixed`` (121 nodes, ``eap(quadrature="fixed")``),
``adaptive`` (``eap(quadrature="adaptive")``: the grid where the 61-node half grid agrees to
1e-4 SD, 961 nodes for the others), ``adaptive, SD<0.3`` (the same, refined only where the
grid's SD is under 3 node spacings: what a parity-keeping default could do), ``GH 41``
(Naylor-Smith adaptive Gauss-Hermite, 41 nodes centred at each subject's posterior mean and
scaled by its SD, iterated to a fixed point; tried first, kept here as the evidence against
it) and the reference: 20,001 nodes (0.0006 apart). Reported: median / p99 / max of
|SD / SD_ref - 1| and of |EAP - EAP_ref|, the share refined, and seconds.

Cost, separately: ``eap`` fixed vs adaptive on the recorded dense matrices (every model, every
item of the bank's benchmark) and on a synthetic 2PL bank of 2,000 items x 5,000 subjects
(a user's own large dense calibration set), with each one's largest SD error.

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/study_eap_quadrature.py [--subjects 400]
        [--bench mmlu ...] [--seed 0]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from atlascat.bankdir.adaptive import simulate_adaptive
from atlascat.catalogue import BankRef, load_responses
from atlascat.irt.ability import _loglik_at, eap
from atlascat.irt.bank import ItemBank
from atlascat.irt.estep import bank_estep
from atlascat.irt.quadrature import Quadrature
from atlascat.irt.special import logsumexp

BENCHES = ["arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande"]
CAT_K = (5, 10, 20, 30)
REF_NODES = 20001


def reference(y, bank):
    """EAP and SD on 20,001 equally spaced nodes over [-6, 6], N(0, 1) (the same integral as
    the 121-node grid, 166 times finer)."""
    x = np.linspace(-6.0, 6.0, REF_NODES)
    lw = -0.5 * x * x
    es = bank_estep(y, None, bank, Quadrature(x, lw - logsumexp(lw)), memory_limit=1 << 28)
    return np.asarray(es.theta), np.asarray(es.se)


def gauss_hermite(y, bank, theta, se, k=41, floor=0.1, passes=10):
    """Naylor-Smith adaptive Gauss-Hermite from the grid's (theta, se), iterated."""
    off = np.sqrt(np.arange(1, k, dtype=float))
    z, vec = np.linalg.eigh(np.diag(off, 1) + np.diag(off, -1))
    lom = np.log(vec[0] ** 2) + 0.5 * z * z
    obs = ~np.isnan(y)
    y1, obs_f = np.where(obs, y, 0.0), obs.astype(float)
    m, s = theta.copy(), np.maximum(se, floor)
    rows = np.arange(m.size)
    for _ in range(passes):
        x = m[:, None] + s[:, None] * z[None, :]
        ll = np.stack([_loglik_at(x[:, j], y1, obs_f, bank.params, rows) for j in range(k)], 1)
        lw = ll - 0.5 * x * x + lom
        lw = np.where(np.abs(x) <= 6.0, lw, -np.inf)
        w = np.exp(lw - lw.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        m = (w * x).sum(1)
        s = np.sqrt((w * (x - m[:, None]) ** 2).sum(1))
    return m, s


def draw(bank, theta, rng):
    p = np.asarray(bank.probability(theta))
    p = p if p.shape == (theta.size, len(bank)) else p.T
    return (rng.random(p.shape) < p).astype(float)


def random_sets(y, rng, lo=5, hi=30):
    """Keep lo..hi random answers per row."""
    n, m = y.shape
    k = rng.integers(lo, min(hi, m) + 1, n)
    keep = np.argsort(rng.random((n, m)), axis=1) < k[:, None]
    return np.where(keep, y, np.nan)


def cat_sets(bench, ref, bank, n, seed):
    """{k: answers to the first k items of the default adaptive test}."""
    theta = np.random.default_rng(seed).uniform(-3, 3, n)
    ids = [f"s{i}" for i in range(n)]
    adm = simulate_adaptive(ref, thetas=theta, subject_ids=ids, seed=seed,
                            max_items=max(CAT_K)).administered
    row = adm["subject_id"].map({s: i for i, s in enumerate(ids)}).to_numpy()
    col = adm["item_id"].astype(str).map({str(j): c for c, j in enumerate(bank.item_ids)})
    col, order, score = col.to_numpy(), adm["order"].to_numpy(), adm["score"].to_numpy(float)
    out = {}
    for k in CAT_K:
        y = np.full((n, len(bank)), np.nan)
        on = order <= k
        y[row[on], col[on]] = score[on]
        out[f"cat {k}"] = y
    return out


def q(x):
    x = np.abs(np.asarray(x, float))
    return np.median(x), np.quantile(x, 0.99), x.max()


def compare(y, bank):
    t0 = time.perf_counter()
    fixed = eap(y, bank, quadrature="fixed")
    t1 = time.perf_counter()
    adapt = eap(y, bank, quadrature="adaptive")
    t2 = time.perf_counter()
    gh = gauss_hermite(y, bank, *fixed)
    t_ref, s_ref = reference(y, bank)
    refined = (adapt[0] != fixed[0]) | (adapt[1] != fixed[1])
    narrow = refined & (fixed[1] < 0.3)
    nar = (np.where(narrow, adapt[0], fixed[0]), np.where(narrow, adapt[1], fixed[1]))
    out = {}
    for name, (t, s) in (("fixed", fixed), ("adaptive", adapt), ("adaptive, SD<0.3", nar),
                         ("GH 41", gh)):
        out[name] = dict(psd=q(s / s_ref - 1), eap=q(t - t_ref))
    out["fixed"]["sec"], out["adaptive"]["sec"] = t1 - t0, t2 - t1
    out["adaptive"]["share"] = refined.mean()
    out["adaptive, SD<0.3"]["share"] = narrow.mean()
    out["sd"] = np.median(s_ref)
    return out


def fmt(v):
    return " / ".join(f"{x:.1e}" if 0 < x < 1e-3 else f"{x:.4f}" for x in v)


def cost_rows(seed):
    rows = []
    for bench in BENCHES:
        bank = BankRef.from_option(bench).load()
        rm = load_responses(bench)
        known = [str(i) for i in bank.item_ids]
        y = rm.aligned_values(known, extra="ignore")
        rows.append((f"{bench} recorded, every item", y, bank))
    rng = np.random.default_rng(seed)
    m = 2000
    bank = ItemBank(np.array([f"i{j}" for j in range(m)]), rng.lognormal(0.0, 0.3, m),
                    rng.normal(0.0, 1.0, m))
    rows.append(("synthetic 2PL 2000 items", draw(bank, rng.normal(0, 1, 5000), rng), bank))
    out = []
    for name, y, bank in rows:
        secs = {}
        for quad in ("fixed", "adaptive"):
            t0 = time.perf_counter()
            res = eap(y, bank, quadrature=quad)
            secs[quad] = time.perf_counter() - t0
            secs[quad + "_res"] = res
        refined = np.mean((secs["adaptive_res"][0] != secs["fixed_res"][0])
                          | (secs["adaptive_res"][1] != secs["fixed_res"][1]))
        t_ref, s_ref = reference(y, bank)
        err = [np.max(np.abs(secs[f"{k}_res"][1] / s_ref - 1)) for k in ("fixed", "adaptive")]
        out.append((name, y.shape, secs["fixed"], secs["adaptive"], refined,
                    float(np.median(secs["fixed_res"][1])), err))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", nargs="*", default=BENCHES)
    ap.add_argument("--subjects", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-cost", action="store_true")
    ap.add_argument("--cost-only", action="store_true")
    args = ap.parse_args()
    print("| bank | answers | median ref SD | method | SD rel. error median / p99 / max "
          "| EAP abs. error median / p99 / max | refined | s |")
    print("|---|---|---|---|---|---|---|---|")
    for bench in [] if args.cost_only else args.bench:
        ref = BankRef.from_option(bench)
        bank = ref.load()
        rng = np.random.default_rng(args.seed)
        sets = cat_sets(bench, ref, bank, args.subjects, args.seed)
        sets["random"] = random_sets(draw(bank, rng.uniform(-3, 3, args.subjects), rng), rng)
        rm = load_responses(bench)
        pick = rng.choice(rm.n_subjects, min(args.subjects, rm.n_subjects), replace=False)
        sets["recorded"] = random_sets(rm.aligned_values([str(i) for i in bank.item_ids], extra="ignore")[pick],
                                       rng)
        for label, y in sets.items():
            res = compare(y, bank)
            for name in ("fixed", "adaptive", "adaptive, SD<0.3", "GH 41"):
                r = res[name]
                share = f"{100 * r['share']:.0f}%" if "share" in r else ""
                sec = f"{r['sec']:.3f}" if "sec" in r else ""
                print(f"| {bench} | {label} | {res['sd']:.3f} | {name} | {fmt(r['psd'])} | "
                      f"{fmt(r['eap'])} | {share} | {sec} |", flush=True)
    if args.no_cost:
        return
    print("\n| answers | subjects x items | median SD | fixed s | adaptive s | refined "
          "| SD max rel. error fixed / adaptive |")
    print("|---|---|---|---|---|---|---|")
    for name, shape, tf, ta, share, sd, err in cost_rows(args.seed):
        print(f"| {name} | {shape[0]} x {shape[1]} | {sd:.3f} | {tf:.3f} | {ta:.3f} | "
              f"{100 * share:.0f}% | {fmt(err)} |", flush=True)


if __name__ == "__main__":
    main()
