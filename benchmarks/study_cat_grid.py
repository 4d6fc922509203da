"""How large is the grid error of the adaptive test's EAP, and does it matter for the predicted
leaderboard score? (benchmarks/results/cat_grid.md)

The CAT (``CATConfig().estimation``) keeps its posterior on mirt's fitting grid, 61 equally
spaced nodes on [-6, 6] (spacing 0.2); ``atlas score`` / ``eap`` use fscores' 121 (0.1). The
shipped banks are 4PL with slopes above 5, so the posterior can be kinked and a 0.2 grid coarse.

Per shipped bank (arc, gsm8k, hellaswag, mmlu, truthfulqa, winogrande):

1. a seeded sample of ``--models`` recorded models (``load_responses(bench)``) replays the
   default adaptive test as ``atlas simulate BENCH --bank BENCH`` does
   (``atlascat.bankdir.adaptive.simulate_adaptive``: the bank's default CATConfig with its score
   link's stops, each model's own selection generator from ``--seed``);
2. each model's final answers are scored by ``atlascat.irt.ability.eap(y, bank, quadpts=K)`` for
   K = 61, 121, 241, 481 (481 = reference). Reported: |theta_K - theta_481| and the relative error
   of the posterior SD, and of the SE the CAT reports (``se_method="information"``:
   1 / sqrt(I(theta_K) + 1), which moves only through theta);
3. the predicted leaderboard score: ``atlascat.scorelink.predict_frame(link, persons,
   administered)`` (what ``atlas simulate`` / ``atlas evaluate`` write) with theta_K and its
   information SE, against the same with K = 481; in points, beside the 95% interval's
   half-width;
4. end to end: the whole test rerun with ``CATConfig(quadpts=K)`` (the grid also steers the
   item choice and the stop), final theta / score / length against the 481-node run's; as
   a yardstick, the 481-node run with seed + 1 (other randomesque draws, the test-retest
   variation of the CAT itself);
5. cost: seconds per step of the posterior update + EAP for one examinee (what CATSession does
   per answer, ``log_post += y lp_j + (1 - y) lq_j`` then mean / SD on the grid), for a batch of
   all sampled models (``simulate_cat``'s), and a CATSession's whole next_item + record step.

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/study_cat_grid.py [--bench arc ...]
        [--models 200] [--seed 0]

prints the markdown tables.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from atlascat.bankdir.adaptive import simulate_adaptive
from atlascat.cat.config import CATConfig
from atlascat.cat.session import CATSession
from atlascat.catalogue import BankRef, load_responses
from atlascat.irt.ability import eap
from atlascat.scorelink import predict_frame

BENCHES = ["arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande"]
GRIDS = [61, 121, 241]
REF = 481


def answers(bank, administered, subject_ids):
    """(n, J) scores in the bank's item order, NaN where not asked."""
    rows = {s: i for i, s in enumerate(subject_ids)}
    cols = {str(j): k for k, j in enumerate(bank.item_ids)}
    y = np.full((len(subject_ids), len(bank)), np.nan)
    r = administered["subject_id"].map(rows).to_numpy()
    c = administered["item_id"].astype(str).map(cols).to_numpy()
    y[r, c] = administered["score"].to_numpy(float)
    return y


def info_se(bank, theta, asked):
    """The CAT's reported SE (se_method="information", N(0, 1) prior): 1/sqrt(I + 1)."""
    info = np.where(asked, bank.information(theta), 0.0).sum(1)
    return 1.0 / np.sqrt(info + 1.0)


def q(x):
    x = np.abs(np.asarray(x, float))
    return np.median(x), np.quantile(x, 0.99), x.max()


def one_bank(bench, n_models, seed):
    ref = BankRef.from_option(bench)
    bank, link = ref.load(), ref.score_link()
    rm = load_responses(bench)
    ids = np.asarray(rm.subject_ids)
    pick = np.random.default_rng(seed).choice(ids.size, min(n_models, ids.size), replace=False)
    sub = rm.subset(subjects=list(ids[np.sort(pick)]))
    res = simulate_adaptive(ref, responses=sub, seed=seed)
    persons, adm = res.persons, res.administered
    y = answers(bank, adm, persons["subject_id"].tolist())
    asked = ~np.isnan(y)
    est = {k: eap(y, bank, quadpts=k) for k in GRIDS + [REF]}
    check = np.abs(est[61][0] - persons["theta"].to_numpy()).max()   # eap(61) is the CAT's
    preds = {}
    for k in GRIDS + [REF]:
        p = persons[["subject_id", "stop_reason"]].copy()
        p["theta"], p["se"] = est[k][0], info_se(bank, est[k][0], asked)
        preds[k] = predict_frame(link, p, adm)
    t_ref, sd_ref = est[REF]
    se_ref = info_se(bank, t_ref, asked)
    s_ref = preds[REF]["score"].to_numpy()
    half = (preds[REF]["score_hi"] - preds[REF]["score_lo"]).to_numpy() / 2
    rows = []
    for k in GRIDS:
        t, sd = est[k]
        se = info_se(bank, t, asked)
        ds = 100 * np.abs(preds[k]["score"].to_numpy() - s_ref)
        dh = 100 * np.abs((preds[k]["score_hi"] - preds[k]["score_lo"]).to_numpy() / 2 - half)
        rows.append(dict(bench=bench, K=k, n=len(t), items=float(persons["n_items"].mean()),
                         th=q(t - t_ref), psd=q((sd - sd_ref) / sd_ref),
                         ise=q((se - se_ref) / se_ref), ds=q(ds), dhalf=q(dh),
                         half=(100 * np.median(half), 100 * half.min()),
                         ratio=np.nanmax(ds / (100 * half)), check=check))
    return rows, (ref, sub, y)


def end_to_end(bench, ref, sub, seed):
    """The whole test rerun on K nodes (the grid also steers the item choice and the stop):
    final theta, score and length against the 481-node run's, and the share of models asked a
    different sequence of items."""
    runs, secs = {}, {}
    for k in GRIDS + [REF]:
        t0 = time.perf_counter()
        runs[k] = simulate_adaptive(ref, responses=sub, seed=seed, config=CATConfig(quadpts=k))
        secs[k] = time.perf_counter() - t0
    # the yardstick: the same 481-node test with another seed (other randomesque draws)
    other = f"{REF}, seed+1"
    t0 = time.perf_counter()
    runs[other] = simulate_adaptive(ref, responses=sub, seed=seed + 1,
                                    config=CATConfig(quadpts=REF))
    secs[other] = time.perf_counter() - t0
    base = runs[REF].persons
    seq = runs[REF].administered.groupby("subject_id", sort=False)["item_id"].agg(tuple)
    half = 100 * (base["score_hi"] - base["score_lo"]).to_numpy() / 2
    out = []
    for k in GRIDS + [other]:
        p = runs[k].persons
        assert (p["subject_id"].to_numpy() == base["subject_id"].to_numpy()).all()
        s = runs[k].administered.groupby("subject_id", sort=False)["item_id"].agg(tuple)
        ds = 100 * (p["score"].to_numpy() - base["score"].to_numpy())
        out.append(dict(bench=bench, K=k, sec=secs[k], items=float(p["n_items"].mean()),
                        dth=q(p["theta"].to_numpy() - base["theta"].to_numpy()), ds=q(ds),
                        dn=q(p["n_items"].to_numpy() - base["n_items"].to_numpy()),
                        paths=float((s.reindex(seq.index) != seq).mean()),
                        ratio=np.nanmax(np.abs(ds) / half)))
    return out


def step_costs(bench, y, reps=2000):
    """Seconds per answer: (a) one examinee's update + EAP on K nodes (NumPy, as the engine's
    _estimate), (b) the same for a batch of all rows, (c) a CATSession's next_item + record."""
    bank = BankRef.from_option(bench).load()
    out = []
    for k in GRIDS:
        nodes = np.linspace(-6, 6, k)
        lp, lq = bank.log_probability(nodes)          # (K, J) each
        lp, lq = np.ascontiguousarray(lp.T), np.ascontiguousarray(lq.T)
        logpost = -0.5 * nodes ** 2

        def update(lpost, j, yy):
            lpost += yy * lp[j] + (1.0 - yy) * lq[j]
            w = np.exp(lpost - lpost.max(axis=-1, keepdims=True))
            s = w.sum(axis=-1)
            th = (w * nodes).sum(axis=-1) / s
            dev = nodes - th[..., None]
            return th, np.sqrt((w * dev * dev).sum(axis=-1) / s)

        lpost = logpost.copy()
        t0 = time.perf_counter()
        for i in range(reps):
            update(lpost, i % lp.shape[0], float(i % 2))
        one = (time.perf_counter() - t0) / reps
        n = y.shape[0]
        lb = np.tile(logpost, (n, 1))
        js = np.arange(n) % lp.shape[0]
        yy = (np.arange(n) % 2).astype(float)[:, None]
        t0 = time.perf_counter()
        for i in range(reps // 10):
            update(lb, js, yy)
        batch = (time.perf_counter() - t0) / (reps // 10)
        t0 = time.perf_counter()
        sess = CATSession(bank, CATConfig(quadpts=k, min_items=10 ** 6, max_items=10 ** 6), 0)
        setup = time.perf_counter() - t0
        steps, t0 = 60, time.perf_counter()
        for i in range(steps):
            sess.record(sess.next_item(), float(i % 2))
        sess_step = (time.perf_counter() - t0) / steps
        out.append(dict(bench=bench, K=k, one=one, batch=batch, n=n, setup=setup,
                        sess=sess_step))
    return out


def fmt3(t, f="{:.4f}"):
    return " / ".join(f.format(v) for v in t)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", nargs="+", default=BENCHES)
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    t_all = time.perf_counter()
    rows, e2e, costs = [], [], []
    for b in a.bench:
        r, (ref, sub, y) = one_bank(b, a.models, a.seed)
        rows += r
        e2e += end_to_end(b, ref, sub, a.seed)
        if b in ("arc", "mmlu"):
            costs += step_costs(b, y)
    print("## Grid error on the same answers (reference: 481 nodes)\n")
    print("median / p99 / max. theta: |theta_K - theta_481|; post SD, info SE: relative error "
          "|x_K - x_481| / x_481; score: |score_K - score_481| in points (score link, "
          "predict_frame, SE = the CAT's information SE at theta_K); half: median / min 95% "
          "half-width of the reference prediction in points; ratio: max |d score| / half-width.\n")
    print("| bank | n | items | K | theta | post SD | info SE | score (pts) | half-width (pts) "
          "| max d half-width (pts) | max ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['bench']} | {r['n']} | {r['items']:.1f} | {r['K']} | {fmt3(r['th'])} | "
              f"{fmt3(r['psd'])} | {fmt3(r['ise'])} | {fmt3(r['ds'], '{:.3f}')} | "
              f"{fmt3(r['half'], '{:.2f}')} | {r['dhalf'][2]:.3f} | {r['ratio']:.3f} |")
    print(f"\nsanity: max |eap(61) - CAT theta| = {max(r['check'] for r in rows):.2e}\n")
    print("## End to end: the whole test rerun on K nodes, against the 481-node run\n")
    print("median / p99 / max of |d theta|, |d score| (points), |d items|; other path: share "
          "of models asked a different item sequence; max ratio: max |d score| / the 481 "
          "run's half-width; seconds for the run.\n")
    print("| bank | K | theta | score (pts) | items | other path | max ratio | mean items "
          "| seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in e2e:
        print(f"| {r['bench']} | {r['K']} | {fmt3(r['dth'])} | {fmt3(r['ds'], '{:.3f}')} | "
              f"{fmt3(r['dn'], '{:.0f}')} | {r['paths']:.2f} | {r['ratio']:.3f} | "
              f"{r['items']:.1f} | {r['sec']:.2f} |")
    print("\n## Cost per answer\n")
    print("one: one examinee's update + EAP (NumPy); batch: all sampled models at once "
          "(per step); session: CATSession next_item + record; setup: CATSession construction.\n")
    print("| bank | K | one (us) | batch of n (us) | session step (us) | session setup (ms) |")
    print("|---|---|---|---|---|---|")
    for c in costs:
        print(f"| {c['bench']} | {c['K']} | {1e6 * c['one']:.1f} | {1e6 * c['batch']:.0f} "
              f"(n={c['n']}) | {1e6 * c['sess']:.0f} | {1e3 * c['setup']:.1f} |")
    print(f"\ntotal {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
