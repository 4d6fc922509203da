"""Is a fixed form's predicted precision honest on held-out models? (benchmarks/results/fixed_forms.md)

`atlas design --bank DIR -k 50` prints the form's "expected SE over the abilities" (the root mean
of 1 / (prior precision + test information) over the abilities it is designed for), and `atlas
score` gives each model's theta with its SE and the predicted score with a 95% interval. Both
come from the bank's item parameters, estimated on the source models; a D-optimal form picks the
items whose *estimated* information is highest, so an overestimated slope is more likely to be
picked (capitalization on chance). Measured here with the commands a user runs, on a seeded
75 / 25 split of each BenchPred matrix (``np.random.default_rng(seed).permutation``; not
BenchPred's own RNG, an independent replication of study_fixed_forms.py's interpolation rows):

    atlas build-bank SOURCE.csv -o BANK --seed S --chance C
    atlas design --bank BANK -k 50 -o FORM.csv --json
    atlas score TARGETS_ON_FORM.csv --bank BANK        (the form; also 50 random bank items)
    atlas score TARGETS.csv --bank BANK                (every bank item: the reference theta)

Per matrix and design: the claimed expected SE; the RMS of the SEs `atlas score` reports; the
realized RMS of (form theta - whole-bank theta) beside what the model expects of it (the form's
items are among the bank's, so Var(form - bank) = SE_form^2 - SE_bank^2 under the model), and
how often |form - bank| <= 1.96 times that (0.95 if the SEs are honest); the predicted score's
MAE in points against the target's mean over all items, its 95% coverage and width.

    OPENBLAS_NUM_THREADS=1 python benchmarks/study_form_precision.py [--datasets v2_musr] [--seeds 5]
        [--variant base,shrink,base+calse,shrink+calse,base+crossfit,base+library]

(about 12 minutes on 2 shared cores for the base, 15 with the four calibration-error variants,
about 25 with base+crossfit, 16 with base+library; prints the table). --variant: remedies
measured (VARIANTS); base+library is the path atlascat ships (`atlas design`'s factors,
`atlas score --form`).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "benchpred"
CHANCE = {"v2_ifeval": 0.0, "v2_musr": 0.33, "v2_arc_challenge": 0.25, "helm_mmlu": 0.25,
          "helm_med_qa": 0.25}
K = 50
#: --variant: how the form is chosen (base: the bank's slopes; shrink: slopes shrunk for their
#: calibration error, shrunk_slopes below) and scored (+calse: the SE with the
#: items' calibration error added, calibration_variance); random items get the same scoring
#: base+crossfit: factors cross-fitted on the source models (3 folds: build the bank without a
#: fold, design, score the fold on the form and on the whole bank; crossfit_factor): the part of
#: the SE^2 beyond the whole bank's times the theta factor^2, each side of the interval times
#: the score factor; base+library: the same factors as atlascat computes them (`atlas design`'s
#: default on a folder that keeps its source answers, bankdir.formfactor.form_factors) and
#: applies them (`atlas score --form FORM.csv`)
VARIANTS = ("base", "shrink", "base+calse", "shrink+calse", "base+crossfit", "base+library")
FOLDS = 3


def _cli(*args) -> str:
    r = subprocess.run([sys.executable, "-m", "atlascat", *map(str, args)], capture_output=True,
                       text=True)
    if r.returncode:
        raise SystemExit(f"atlas {' '.join(map(str, args))}: {r.stderr.strip()}")
    return r.stdout


# --- the remedies measured by --variant: slopes shrunk for their calibration error (shrink) and
# the SE with the items' calibration error (calse). A D-optimal form takes the items whose
# *estimated* information is highest, so a slope overestimated by chance is likelier to be taken
# (van der Linden & Glas, 2000). shrunk_slopes: an empirical-Bayes posterior mean of log a,
# its error variance s_j^2 from the item's Fisher information for (log a, d) on the source
# models' abilities plus the calibration's lognormal prior, the true log slopes N(m, tau^2)
# over the bank (method of moments, tau^2 >= a tenth of var(log a)): exp(m + w_j (log a_j - m)),
# w_j = tau^2 / (tau^2 + s_j^2). calibration_variance: the delta method on the same covariance.
# Neither met the adoption rule (benchmarks/results/fixed_forms.md), so neither is in atlascat.

#: the slope prior of the calibration (a ~ lognorm(0, 1): docs/calibration.md), as the precision
#: it adds to the log slope
_PRIOR_PRECISION = 1.0
#: the least share of the log slopes' variance credited to the items (tau^2 floor)
_MIN_SIGNAL = 0.1


def log_slope_variance(bank, thetas, weights=None, n_models=None) -> np.ndarray:
    """Asymptotic variance of each item's log slope when calibrated on models of abilities
    ``thetas`` (counted by ``weights``, default one each; rescaled to sum to ``n_models`` when
    given): the (log a, log a) element of the inverse of the item's Fisher information for
    (log a, d) plus the slope prior's precision."""
    return parameter_covariance(bank, thetas, weights, n_models)[:, 0, 0]


def shrunk_slopes(bank, thetas, weights=None, n_models=None) -> np.ndarray:
    """Each slope's empirical-Bayes posterior mean on the log scale (the comment above)."""
    x = np.log(np.maximum(np.asarray(bank.a, float), 1e-6))
    s2 = log_slope_variance(bank, thetas, weights, n_models)
    m, total = float(np.mean(x)), float(np.var(x))
    if not total > 0:
        return np.exp(x)
    tau2 = max(total - float(np.mean(s2)), _MIN_SIGNAL * total)
    return np.exp(m + tau2 / (tau2 + s2) * (x - m))


def shrunk_bank(bank, thetas, weights=None, n_models=None):
    """``bank`` with :func:`shrunk_slopes` (a copy; for choosing items, not for scoring)."""
    from atlascat.irt.bank import ItemBank

    return ItemBank(bank.item_ids, shrunk_slopes(bank, thetas, weights, n_models), bank.b,
                    bank.c, bank.u, metadata=bank.metadata, model=bank.model)


def _item_terms(bank, th, w):
    """(iw, g): each item's information weight of its logit at the abilities (J, Q) and the
    logit's gradient in (log a) at them (dz / d log a; dz / dd = 1)."""
    a, b = np.asarray(bank.a, float), np.asarray(bank.b, float)
    c, u = np.asarray(bank.c, float), np.asarray(bank.u, float)
    s = 1.0 / (1.0 + np.exp(-a[:, None] * (th[None, :] - b[:, None])))
    p = np.clip(c[:, None] + (u - c)[:, None] * s, 1e-9, 1 - 1e-9)
    dp = (u - c)[:, None] * s * (1.0 - s)
    return w[None, :] * dp ** 2 / (p * (1.0 - p)), a[:, None] * th[None, :]


def parameter_covariance(bank, thetas, weights=None, n_models=None) -> np.ndarray:
    """(J, 2, 2): each item's asymptotic covariance of (log a, d), d = -a b, when calibrated on
    models of abilities ``thetas`` (see :func:`log_slope_variance`)."""
    th = np.asarray(thetas, dtype=float).ravel()
    w = np.ones_like(th) if weights is None else np.asarray(weights, dtype=float).ravel()
    if th.size == 0 or w.shape != th.shape or not (np.isfinite(th).all() and np.isfinite(w).all()
                                                   and w.min() >= 0 and w.sum() > 0):
        raise ValueError("the calibration's abilities must be finite, with one weight >= 0 each")
    if n_models is not None:
        if not float(n_models) > 0:
            raise ValueError(f"n_models must be > 0, got {n_models!r}")
        w = w * (float(n_models) / w.sum())
    iw, g = _item_terms(bank, th, w)
    i_aa = (iw * g ** 2).sum(axis=1) + _PRIOR_PRECISION
    i_ad = (iw * g).sum(axis=1)
    i_dd = iw.sum(axis=1) + 1e-6
    det = np.maximum(i_aa * i_dd - i_ad ** 2, 1e-12)
    inv = np.stack([np.stack([i_dd, -i_ad], -1), np.stack([-i_ad, i_aa], -1)], -2)
    return inv / det[:, None, None]


def calibration_variance(bank, cov, theta, se, answered) -> np.ndarray:
    """Each examinee's variance of theta from the item parameters' calibration error (delta
    method: a shift dz_j of item j's logit moves the estimate by se^2 a_j w_j dz_j, w_j the
    information weight of the logit; Var dz_j = g' cov_j g, g = (a_j theta, 1)).

    ``cov``: :func:`parameter_covariance`; ``theta``, ``se``: (N,) estimates and their SEs;
    ``answered``: (N, J) boolean, the items each examinee answered."""
    theta = np.asarray(theta, float)
    a = np.asarray(bank.a, float)
    iw, g = _item_terms(bank, theta, np.ones_like(theta))      # (J, N)
    vz = (cov[:, 0, 0, None] * g ** 2 + 2 * cov[:, 0, 1, None] * g + cov[:, 1, 1, None])
    terms = (a[:, None] * iw) ** 2 * vz * np.asarray(answered, bool).T
    return np.asarray(se, float) ** 4 * terms.sum(axis=0)


def _folder_terms(bank: Path):
    """(ItemBank, its parameters' covariance on the source models, the folder) of a bank folder."""
    from atlascat.catalogue import BankRef

    ref = BankRef.from_option(str(bank))
    b = ref.load()
    (nodes, weights), _ = ref.design_abilities()
    return b, parameter_covariance(b, nodes, weights, ref.link.info.get("n_models")), ref.folder()


def _shrunk_form(bank: Path) -> list:
    from atlascat.catalogue import BankRef
    from atlascat.design.optimal import optimal_form

    ref = BankRef.from_option(str(bank))
    b = ref.load()
    (nodes, weights), _ = ref.design_abilities()
    res = optimal_form(shrunk_bank(b, nodes, weights, ref.link.info.get("n_models")), K, "D",
                       (nodes, weights))
    return [str(i) for i in np.asarray(b.item_ids)[res.indices]]


def _calse(f: pd.DataFrame, items, tgt, terms) -> pd.DataFrame:
    """``f`` (atlas score's rows) with the SE including calibration error and the score
    interval of the folder's predictor for it."""
    from atlascat.bankdir import predict_scores

    b, cov, folder = terms
    answered = np.zeros((len(f), len(b)), bool)
    answered[:, [b.index_of(i) for i in items]] = tgt.loc[f.index, items].notna().to_numpy()
    f = f.copy()
    f["se"] = np.sqrt(f["se"] ** 2 + calibration_variance(b, cov, f["theta"], f["se"], answered))
    sub = tgt.loc[f.index, items]
    adm = sub.stack().rename("score").reset_index()
    adm.columns = ["subject_id", "item_id", "score"]
    persons = pd.DataFrame({"subject_id": f.index, "theta": f["theta"], "se": f["se"]})
    pred = predict_scores(folder, persons.reset_index(drop=True), adm)
    for col in ("score", "score_lo", "score_hi"):
        f[col] = pred[col].to_numpy()
    return f


def crossfit_factor(src: pd.DataFrame, name: str, seed: int, d: Path) -> tuple:
    """(theta factor, score factor) over the source models, each scored by a bank and a form
    built without its fold: RMS(form - bank) / RMS(the model's SD of it), at least 1; the RMS of
    (predicted score - mean over all items) over the half-width of its interval's side / 1.96."""
    fold = np.random.default_rng([seed, 7]).permutation(len(src)) % FOLDS
    diffs, models, errs = [], [], []
    for k in range(FOLDS):
        dk = d / f"fold{k}"
        dk.mkdir()
        src[fold != k].to_csv(dk / "src.csv")
        src[fold == k].to_csv(dk / "held.csv")
        _cli("build-bank", dk / "src.csv", "-o", dk / "bank", "--seed", seed, "--chance",
             CHANCE[name], "-q")
        _cli("design", "--bank", dk / "bank", "-k", K, "-o", dk / "form.csv", "--random-forms", 0,
             "--no-cross-fit")
        items = pd.read_csv(dk / "form.csv")["item_id"].astype(str).tolist()
        src[fold == k][items].to_csv(dk / "on_form.csv")
        _cli("score", dk / "held.csv", "--bank", dk / "bank", "-o", dk / "full.csv")
        _cli("score", dk / "on_form.csv", "--bank", dk / "bank", "-o", dk / "scored.csv")
        f = pd.read_csv(dk / "scored.csv", index_col=0)
        g = pd.read_csv(dk / "full.csv", index_col=0).reindex(f.index)
        diffs.append((f["theta"] - g["theta"]).to_numpy())
        models.append(np.maximum(f["se"] ** 2 - g["se"] ** 2, 1e-12).to_numpy())
        err = f["score"] - src[fold == k].mean(axis=1).reindex(f.index)
        side = np.where(err > 0, f["score"] - f["score_lo"], f["score_hi"] - f["score"])
        errs.append((1.959964 * err / np.maximum(side, 1e-9)).to_numpy())
    theta = max(1.0, float(np.sqrt(np.mean(np.concatenate(diffs) ** 2)
                                   / np.mean(np.concatenate(models)))))
    score = float(np.sqrt(np.mean(np.concatenate(errs) ** 2)))
    print(f"{name} seed {seed}: cross-fitted factors theta {theta:.2f}, score {score:.2f}",
          file=sys.stderr, flush=True)
    return theta, score


def _inflated(f: pd.DataFrame, factors: tuple, se_bank) -> pd.DataFrame:
    """``f`` with the part of its variance beyond the whole bank's (``se_bank``) times the
    theta factor squared, and each side of the score interval times the score factor."""
    f = f.copy()
    nested = np.maximum(f["se"] ** 2 - se_bank ** 2, 0.0)
    f["se"] = np.sqrt(se_bank ** 2 + factors[0] ** 2 * nested)
    f["score_lo"] = f["score"] - factors[1] * (f["score"] - f["score_lo"])
    f["score_hi"] = f["score"] + factors[1] * (f["score_hi"] - f["score"])
    return f


def one_seed(df: pd.DataFrame, name: str, seed: int, d: Path, variants) -> pd.DataFrame:
    perm = np.random.default_rng(seed).permutation(len(df))
    nt = len(df) // 4
    src, tgt = df.iloc[perm[nt:]], df.iloc[perm[:nt]].copy()
    tgt.index = pd.Index([f"t{i}" for i in range(len(tgt))], name="model")
    src.to_csv(d / "src.csv")
    tgt.to_csv(d / "tgt.csv")
    bank = d / "bank"
    _cli("build-bank", d / "src.csv", "-o", bank, "--seed", seed, "--chance", CHANCE[name], "-q")
    out = json.loads(_cli("design", "--bank", bank, "-k", K, "-o", d / "form.csv", "--json",
                          "--random-forms", 0, "--no-cross-fit"))
    forms = {"base": pd.read_csv(d / "form.csv")["item_id"].astype(str).tolist()}
    if "base+library" in variants:   # the form with its factors, as atlas design writes it
        lib = json.loads(_cli("design", "--bank", bank, "-k", K, "-o", d / "form_lib.csv",
                              "--json", "--random-forms", 0))
        assert lib["item_ids"] == forms["base"], "the factors changed the form's items"
        print(f"{name} seed {seed}: library factors se {lib['cross_fit']['se']:.2f}, interval "
              f"{lib['cross_fit']['interval']:.2f}", file=sys.stderr, flush=True)
    if any(v.startswith("shrink") for v in variants):
        forms["shrink"] = _shrunk_form(bank)
    terms = _folder_terms(bank) if any(v.endswith("calse") for v in variants) else None
    factor = crossfit_factor(src, name, seed, d) if "base+crossfit" in variants else None
    bank_items = pd.read_parquet(bank / "bank.parquet")["item_id"].astype(str).to_numpy()
    rand = list(np.random.default_rng([seed, 11]).choice(bank_items, K, replace=False))
    _cli("score", d / "tgt.csv", "--bank", bank, "-o", d / "full.csv")
    full = pd.read_csv(d / "full.csv", index_col=0)
    designs = [(f"D-optimal form [{v}]", forms[v.split("+")[0]], v) for v in variants]
    designs += [(f"random 50 items{'' if v == 'base' else ' [calse]'}", rand, v) for v in
                dict.fromkeys("base+calse" if v.endswith("calse") else "base" for v in variants)]
    # (the cross-fitted factor is the D-optimal form's; random items keep their SEs)
    scored: dict = {}
    rows = []
    for design, items, v in designs:
        lib = v == "base+library" and items is forms["base"]
        key = (tuple(items), lib)
        if key not in scored:
            tgt[items].to_csv(d / "on_form.csv")
            _cli("score", d / "on_form.csv", "--bank", bank, "-o", d / "scored.csv",
                 *(["--form", d / "form_lib.csv"] if lib else []))
            scored[key] = pd.read_csv(d / "scored.csv", index_col=0)
        f = scored[key]
        if v.endswith("calse"):
            f = _calse(f, items, tgt, terms)
        elif v.endswith("crossfit"):
            f = _inflated(f, factor, full["se"].reindex(f.index))
        g = full.reindex(f.index)
        rows.append(pd.DataFrame({
            "data": name, "design": design, "seed": seed,
            "claimed": out["expected_se"] if items is forms["base"] else np.nan,
            "theta": f["theta"], "se": f["se"], "theta_bank": g["theta"], "se_bank": g["se"],
            "score": f["score"], "lo": f["score_lo"], "hi": f["score_hi"],
            "truth": tgt.mean(axis=1).reindex(f.index)}))
    return pd.concat(rows)


def summarize(x: pd.DataFrame) -> pd.Series:
    diff = x["theta"] - x["theta_bank"]
    nested = np.sqrt(np.maximum(x["se"] ** 2 - x["se_bank"] ** 2, 1e-12))
    return pd.Series({
        "targets (x seeds)": len(x), "claimed SE": x["claimed"].mean(),
        "reported SE (RMS)": np.sqrt((x["se"] ** 2).mean()),
        "form - bank: model": np.sqrt((nested ** 2).mean()),
        "form - bank: realized": np.sqrt((diff ** 2).mean()),
        "within 1.96 model SD": (diff.abs() <= 1.959964 * nested).mean(),
        "score MAE": 100 * (x["score"] - x["truth"]).abs().mean(),
        "95% coverage": ((x["lo"] <= x["truth"]) & (x["truth"] <= x["hi"])).mean(),
        "width": 100 * (x["hi"] - x["lo"]).mean()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=",".join(CHANCE))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--variant", default="base",
                    help=f"comma-separated, of {', '.join(VARIANTS)} (module docstring)")
    ap.add_argument("--out", type=Path, default=None, help="CSV of every target's row")
    args = ap.parse_args()
    variants = args.variant.split(",")
    if not set(variants) <= set(VARIANTS):
        raise SystemExit(f"--variant: choose among {', '.join(VARIANTS)}")
    parts = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            df = pd.read_csv(DATA / f"{name}.csv.gz", index_col=0)
            df = df[~df.index.duplicated()]
            for seed in range(args.seeds):
                d = Path(tmp) / f"{name}_{seed}"
                d.mkdir()
                parts.append(one_seed(df, name, seed, d, variants))
                print(f"{name} seed {seed} done", file=sys.stderr, flush=True)
    rows = pd.concat(parts)
    if args.out is not None:
        rows.to_csv(args.out)
    table = rows.groupby(["data", "design"], sort=False).apply(summarize).reset_index()
    print("| " + " | ".join(table.columns) + " |")
    print("|" + "---|" * len(table.columns))
    for r in table.itertuples(index=False):
        print("| " + " | ".join(_cell(v) for v in r) + " |")


def _cell(v) -> str:
    if not isinstance(v, float):
        return str(v)
    if np.isnan(v):
        return ""
    return str(int(v)) if v == int(v) and v > 1 else f"{v:.3f}"


if __name__ == "__main__":
    main()
