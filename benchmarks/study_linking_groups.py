"""Linking banks calibrated on non-equivalent groups: is `atlas link` right when one bank was
calibrated on weak models and the other on strong ones (the main use of linking)?

(1) Simulation with known truth. A reference group ~ N(0, 1) and a new group ~ N(mu, sigma)
(mu 0-2.5, sigma 0.6-1.5) answer K common anchors (b ~ N(mu/2, 1)) plus 30 unique items each
(b ~ N(group mean, group SD)); a ~ lognormal(0, 0.3), 3PL c ~ beta(5, 17). Each group is
calibrated alone (same model, the model's automatic priors); the new bank is linked to the
reference bank by each method (true constants A = sigma, B = mu). "concurrent" calibrates the
stacked matrix (each group's unique items missing for the other group) and puts it on the
reference scale by the reference group's latent mean and SD (EAP mean, sqrt(var EAP + mean
PSD^2)); "multiple-group" is one calibration of the same matrix with the groups given
(``calibrate(..., groups=...)``: the new group's mean and SD estimated in the EM, its bank on
the reference scale as it comes); "true A,B" maps the separate calibration with the true constants (the floor of what
linking can do). Errors: A, B; the new bank's items on the reference scale against the truth
(RMSE of b, of log a, ICC RMSD weighted by the new group's true distribution); the new group's
linked EAPs against the true thetas (mean gap, SD ratio, RMSE).

(2) Real data (../shared/data/openllm/dense_{arc,gsm8k}): all models on all items calibrated
concurrently is the reference. The models are split by that calibration's EAP into a weaker
(reference) and a stronger (new) group: "hard" at the median (no overlap), or "soft" (P(strong)
= logistic(1.5 z): overlapping groups). K anchors are drawn at random; the other items are
split at random between the groups. Each group is calibrated alone on its items and the strong
bank linked to the weak one. The concurrent scale is put on the weak scale through the weak
models (common persons, mean-sigma of their EAPs in the two calibrations); the strong models'
linked EAPs (A theta_strong + B) are compared with their concurrent EAPs on that scale (mean
gap, SD ratio; the correlation is the same for every method), and the anchors' linked
parameters with the concurrent ones. "ref A,B" are the common-person constants from the strong
models' own EAPs to the concurrent ones (the best a linear link can do); "stacked" is the
concurrent calibration of the two groups' own items only (what a user holding both groups'
raw answers can run with `atlas calibrate`). ``--export DIR`` writes the ARC K=20 stacked
matrices (per model and split) for benchmarks/linking_groups_mirt.R (mirt multipleGroup).

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/study_linking_groups.py [--reps 2] [--seed 0]
        [--part sim|real|all] [--export DIR]
"""
from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

from atlascat import calibrate
from atlascat.irt.linking import LINK_METHODS, link_banks, transform_bank

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "openllm"
N_UNIQUE = 30


def _fit(df: pd.DataFrame, model: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate(df, model, random_state=0)


def _moments(res, rows=None):
    """Latent mean and SD of a group from its EAPs and posterior SDs."""
    th, se = res.theta, res.theta_se
    if rows is not None:
        th, se = th[rows], se[rows]
    return float(th.mean()), float(np.sqrt(th.var() + np.mean(se**2)))


def _link(ref, new, method):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lk = link_banks(ref, new, method)
    text = " ".join(str(w.message) for w in caught)
    return lk, ("moment methods" in text) + 2 * ("disagree:" in text), len(lk.drifted)


def symmetric(ref, new, kind):
    """Prototype: the characteristic-curve criterion summed over both groups' grids (N(0, 1) on
    the reference scale and N(0, 1) on the new scale, mapped: nodes A x + B), Nelder-Mead from
    the library's constants."""
    from scipy.optimize import minimize

    anchors = [i for i in ref.item_ids if i in new]
    r, n = ref.subset(anchors), new.subset(anchors)
    x = np.linspace(-4, 4, 61)
    w = np.exp(-0.5 * x**2)
    w /= w.sum()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = link_banks(ref, new, kind)

    def crit(v):
        A, B = np.exp(v[0]), v[1]
        moved = transform_bank(n, A, B)
        f = 0.0
        for nodes in (x, A * x + B):
            d = r.probability(nodes) - moved.probability(nodes)
            f += float(w @ (d.sum(axis=1) ** 2 if kind == "stocking-lord" else (d**2).sum(axis=1)))
        return f

    res = minimize(crit, [np.log(start.A), start.B], method="Nelder-Mead",
                   options={"xatol": 1e-6, "fatol": 1e-12, "maxiter": 2000})
    return float(np.exp(res.x[0])), float(res.x[1])


def _icc_err(bank, a, b, c, nodes, w):
    """RMS gap between a bank's curves and the true ones, weighted by w on the nodes."""
    p_true = c + (1 - c) * expit(a * (nodes[:, None] - b))
    gap = bank.probability(nodes) - p_true
    return float(np.mean(np.sqrt(w @ gap**2)))


def sim_cell(model, mu, sigma, k, n, rng):
    """Rows of errors per method for one simulated data set."""
    m = k + 2 * N_UNIQUE
    a = rng.lognormal(0, 0.3, m)
    b = np.concatenate([rng.normal(mu / 2, 1, k), rng.normal(0, 1, N_UNIQUE),
                        rng.normal(mu, sigma, N_UNIQUE)])
    c = rng.beta(5, 17, m) if model == "3pl" else np.zeros(m)
    ids = [f"i{j}" for j in range(m)]
    anchors, u_ref, u_new = ids[:k], ids[k:k + N_UNIQUE], ids[k + N_UNIQUE:]
    th_ref, th_new = rng.normal(0, 1, n), rng.normal(mu, sigma, n)

    def answers(th):
        p = c + (1 - c) * expit(a * (th[:, None] - b))
        return (rng.random(p.shape) < p).astype(float)

    full = pd.DataFrame(np.vstack([answers(th_ref), answers(th_new)]), columns=ids)
    full.loc[: n - 1, u_new] = np.nan
    full.loc[n:, u_ref] = np.nan
    ref_res = _fit(full.iloc[:n][anchors + u_ref], model)
    new_res = _fit(full.iloc[n:][anchors + u_new], model)
    new_items = anchors + u_new
    sel = np.array([ids.index(i) for i in new_items])
    nodes = np.linspace(-4, 4, 61) * sigma + mu
    w = np.exp(-0.5 * ((nodes - mu) / sigma) ** 2)
    w /= w.sum()

    def row(method, A, B, bank_on_ref, th_linked, warned=0, drift=0):
        bk = bank_on_ref.subset(new_items)
        return {"method": method, "A": A, "B": B, "err_A": A - sigma, "err_B": B - mu,
                "rmse_b": float(np.sqrt(np.mean((bk.b - b[sel]) ** 2))),
                "rmse_loga": float(np.sqrt(np.mean((np.log(np.maximum(bk.a, 1e-3))
                                                    - np.log(a[sel])) ** 2))),
                "icc": _icc_err(bk, a[sel], b[sel], c[sel], nodes, w),
                "theta_gap": float(th_linked.mean() - th_new.mean()),
                "theta_sd_ratio": float(th_linked.std() / th_new.std()),
                "theta_rmse": float(np.sqrt(np.mean((th_linked - th_new) ** 2))),
                "warned": warned, "drift": drift}

    rows = [row("true A,B", sigma, mu, transform_bank(new_res.bank, sigma, mu),
                sigma * new_res.theta + mu)]
    for method in LINK_METHODS:
        lk, warned, drift = _link(ref_res.bank, new_res.bank, method)
        rows.append(row(method, lk.A, lk.B, lk.transform(new_res.bank), lk.theta(new_res.theta),
                        warned, drift))
    for kind in ("stocking-lord", "haebara"):
        A, B = symmetric(ref_res.bank, new_res.bank, kind)
        rows.append(row(kind + " sym", A, B, transform_bank(new_res.bank, A, B),
                        A * new_res.theta + B))
    conc = _fit(full, model)
    m_r, s_r = _moments(conc, slice(0, n))
    m_n, s_n = _moments(conc, slice(n, 2 * n))
    rows.append(row("concurrent", s_n / s_r, (m_n - m_r) / s_r,
                    transform_bank(conc.bank, 1 / s_r, -m_r / s_r), (conc.theta[n:] - m_r) / s_r))
    with warnings.catch_warnings():   # one calibration, the groups' means and SDs in its EM
        warnings.simplefilter("ignore")
        mg = calibrate(full, model, random_state=0, groups=["ref"] * n + ["new"] * n,
                       reference_group="ref")
    g_new = mg.groups["groups"][1]
    rows.append(row("multiple-group", g_new["sd"], g_new["mean"], mg.bank, mg.theta[n:]))
    for r in rows:
        r.update(model=model, mu=mu, sigma=sigma, K=k, N=n)
    return rows


def run_sim(reps, seed):
    rows = []
    rng = np.random.default_rng(seed)
    for model in ("2pl", "3pl"):
        for mu in (0.0, 1.0, 2.0, 2.5):
            for sigma in (0.6, 1.0, 1.5):
                for k in (10, 40):
                    for n in (200, 2000):
                        for rep in range(reps):
                            for r in sim_cell(model, mu, sigma, k, n, rng):
                                rows.append({**r, "rep": rep})
    return pd.DataFrame(rows)


def _ms(x_ref, x_new):
    A = x_ref.std() / x_new.std()
    return float(A), float(x_ref.mean() - A * x_new.mean())


def real_split(df, conc, bench, model, k, split, rng, export=None, keep=None):
    """Rows per method for one split of a real matrix (weak = reference, strong = new);
    ``keep``: a dict that receives the two banks (tests/data/walk_link/make_groups_arc.py)."""
    z = (conc.theta - conc.theta.mean()) / conc.theta.std()
    strong = z > np.median(z) if split == "hard" else rng.random(len(z)) < expit(1.5 * z)
    items = list(df.columns)
    perm = rng.permutation(len(items))
    anchors = [items[i] for i in perm[:k]]
    rest = [items[i] for i in perm[k:]]
    u_weak, u_strong = rest[: len(rest) // 2], rest[len(rest) // 2:]
    weak_df, strong_df = df.loc[~strong, anchors + u_weak], df.loc[strong, anchors + u_strong]
    w_res, s_res = _fit(weak_df, model), _fit(strong_df, model)
    assert len(w_res.theta) == len(weak_df) and len(s_res.theta) == len(strong_df)
    anchors = [i for i in anchors if i in w_res.bank and i in s_res.bank]   # constant: dropped
    if keep is not None:
        keep.update(weak=w_res.bank, strong=s_res.bank, anchors=anchors)
    # the concurrent scale on the weak scale through the weak models (common persons)
    Am, Bm = _ms(w_res.theta, conc.theta[~strong])
    ref_theta = Am * conc.theta[strong] + Bm
    ref_bank = transform_bank(conc.bank, Am, Bm).subset(anchors)
    A0, B0 = _ms(ref_theta, s_res.theta)
    x = np.sort(ref_theta)
    wq = np.full(len(x), 1 / len(x))
    near0 = int(np.sum(w_res.bank.subset(anchors).a < 0.2) + np.sum(s_res.bank.subset(anchors).a < 0.2))
    base = {"bench": bench, "K_used": len(anchors), "model": model, "K": k, "split": split,
            "n_weak": int((~strong).sum()), "n_strong": int(strong.sum()),
            "overlap": float(np.mean(ref_theta < np.quantile(Am * conc.theta[~strong] + Bm, 0.95))),
            "near0_anchors": near0, "corr": float(np.corrcoef(s_res.theta, ref_theta)[0, 1])}

    def row(method, A, B, th, bank, warned=0, drift=0):
        anc = bank.subset(anchors)
        gap = anc.probability(x) - ref_bank.probability(x)
        return {**base, "method": method, "A": A, "B": B, "ref_A": A0, "ref_B": B0,
                "theta_gap": float(th.mean() - ref_theta.mean()),
                "theta_sd_ratio": float(th.std() / ref_theta.std()),
                "theta_rmse": float(np.sqrt(np.mean((th - ref_theta) ** 2))),
                "anchor_mad_b": float(np.median(np.abs(anc.b - ref_bank.b))),
                "anchor_icc": float(np.mean(np.sqrt(wq @ gap**2))),
                "warned": warned, "drift": drift}

    rows = [row("ref A,B", A0, B0, A0 * s_res.theta + B0, transform_bank(s_res.bank, A0, B0))]
    for method in LINK_METHODS:
        lk, warned, drift = _link(w_res.bank, s_res.bank, method)
        rows.append(row(method, lk.A, lk.B, lk.theta(s_res.theta), lk.transform(s_res.bank),
                        warned, drift))
    for kind in ("stocking-lord", "haebara"):
        A, B = symmetric(w_res.bank.subset(anchors), s_res.bank.subset(anchors), kind)
        rows.append(row(kind + " sym", A, B, A * s_res.theta + B, transform_bank(s_res.bank, A, B)))
    stacked = pd.concat([weak_df, strong_df])[anchors + u_weak + u_strong]
    if export is not None:
        export.mkdir(parents=True, exist_ok=True)
        stacked.assign(group=np.r_[np.zeros(len(weak_df), int), np.ones(len(strong_df), int)]) \
            .to_csv(export / f"{bench}_{model}_{split}_K{k}.csv", index_label="model")
        pd.Series(anchors, name="item_id").to_csv(
            export / f"{bench}_{model}_{split}_K{k}_anchors.csv", index=False)
    st = _fit(stacked, model)
    nw = len(weak_df)
    As, Bs = _ms(w_res.theta, st.theta[:nw])
    th = As * st.theta[nw:] + Bs
    A_st, B_st = _ms(th, s_res.theta)
    rows.append(row("stacked", A_st, B_st, th, transform_bank(st.bank, As, Bs)))
    return rows


def run_real(seed, export=None):
    rows = []
    for bench in ("arc", "gsm8k"):
        df = pd.read_csv(DATA / f"dense_{bench}.csv.gz", index_col=0)
        df.columns = [str(c) for c in df.columns]
        for model in ("3pl", "2pl"):
            conc = _fit(df, model)
            for split in ("hard", "soft"):
                for k in ((10, 20, 40) if model == "3pl" else (20,)):
                    rng = np.random.default_rng([seed, k, split == "hard"])
                    exp = export if (bench == "arc" and k == 20) else None
                    rows += real_split(df, conc, bench, model, k, split, rng, exp)
    return pd.DataFrame(rows)


def _summarise_sim(sim):
    keys = ["method"]
    agg = {"err_A": lambda v: float(np.sqrt(np.mean(v**2))), "err_B": lambda v: float(np.sqrt(np.mean(v**2)))}
    out = {}
    out["overall"] = sim.groupby(["model", "method"]).agg(
        rmse_A=("err_A", agg["err_A"]), rmse_B=("err_B", agg["err_B"]),
        bias_A=("err_A", "mean"), bias_B=("err_B", "mean"), rmse_b=("rmse_b", "median"),
        icc=("icc", "mean"), theta_gap=("theta_gap", "mean"),
        theta_sd=("theta_sd_ratio", "mean"), theta_rmse=("theta_rmse", "mean"),
        warned_moments=("warned", lambda v: float(np.mean(v % 2 == 1))),
        warned_disagree=("warned", lambda v: float(np.mean(v >= 2))),
        drift=("drift", "mean")).round(3)
    for f in ("mu", "sigma", "K", "N"):
        out[f] = sim.pivot_table(index=keys, columns=f, values="err_B",
                                 aggfunc=agg["err_B"]).round(3)
        out[f + "_A"] = sim.pivot_table(index=keys, columns=f, values="err_A",
                                        aggfunc=agg["err_A"]).round(3)
        out[f + "_theta"] = sim.pivot_table(index=keys, columns=f, values="theta_rmse",
                                            aggfunc="mean").round(3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--part", choices=("sim", "real", "all"), default="all")
    ap.add_argument("--export", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "linking_groups")
    o = ap.parse_args()
    o.out.mkdir(parents=True, exist_ok=True)
    pd.set_option("display.width", 200, "display.max_columns", 30)
    if o.part in ("sim", "all"):
        t = time.time()
        sim = run_sim(o.reps, o.seed)
        sim.to_csv(o.out / "sim.csv", index=False)
        for name, tab in _summarise_sim(sim).items():
            print(f"\n== sim {name}\n{tab}")
        print(f"sim: {time.time() - t:.0f} s")
    if o.part in ("real", "all"):
        t = time.time()
        real = run_real(o.seed, o.export)
        real.to_csv(o.out / "real.csv", index=False)
        cols = ["bench", "model", "split", "K", "method", "A", "B", "ref_A", "ref_B", "theta_gap",
                "theta_sd_ratio", "theta_rmse", "anchor_mad_b", "anchor_icc", "warned", "drift",
                "near0_anchors", "corr", "overlap"]
        print(real[cols].round(3).to_string(index=False))
        print(f"real: {time.time() - t:.0f} s")


if __name__ == "__main__":
    main()
