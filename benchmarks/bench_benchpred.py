"""BenchPred's protocol (Zhang, Dorner, Hardt 2025) on every matrix of ../shared/data/benchpred
through the commands users run, ``atlas build-bank`` and ``atlas simulate`` (in process, via
``atlascat.cli.main``), beside BenchPred's own methods (benchmarks/results/benchpred/peers.csv,
run from their public code in a scratch environment; see the README there).

Protocol: budget 50 items; interpolation = a random 25% of the models are the targets (numpy
RandomState(seed).permutation, as their main.py), the rest the source; extrapolation = the
source is the weakest 50% of models by full accuracy, the targets the strongest 30%; seeds 0-4.
Per seed, in a temporary folder: SOURCE.csv and TARGETS.csv (rows m<row number>: a few model
names repeat in the v2 matrices), then

    atlas build-bank SOURCE.csv -o BANK --seed S --budget 50 --chance C   # bank, link, predictor
    atlas simulate --bank BANK TARGETS.csv --max-items 50 --seed S+1000 -o RUN
    atlas simulate --bank BANK TARGETS.csv --design adaptive --max-items 50 --seed S+1000 -o RUN_CAT
    atlas simulate --bank BANK TARGETS.csv --design adaptive --max-items 50 --min-items 50 ...

(the adaptive test scored by the folder's score link; its default stop, SE 0.1 after 30
items, and the whole budget). Each RUN/person_scores.csv gives the predicted score and its 95%
interval; the truth is each target's mean over all items. The build's cross-fit of the link's
interval keeps the library default (5 folds; ``atlas build-bank`` has no option for it). C is
the benchmark's chance level (:data:`CHANCE`: what a user of these benchmarks knows, their
answer options; a matrix does not carry it): the floor of the link's interval, and where the
weakest source models answer at chance, the predictor does not take a design estimate below
them for a weaker model. ``--no-chance`` builds without it (chance 0, a matrix's default).

``--check-library`` also runs the library with the same seeds: BenchmarkPredictor(50).fit(bank,
source, rng=S).replay(targets, seed=S+1000) on the built folder's bank (``library_diff``: the
largest difference from the CLI's scores, points; the seeds are handled alike, so 0) and on
Calibrator()'s bank of all the source's items (``library_mae``: the library path before the
CLI; it differs where build-bank's item filter drops items: the point-biserial rule applies
from 100 source models, so on the v2 matrices).

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/bench_benchpred.py [--seeds 5] [--write-docs]
        [--datasets v2_musr,helm_mmlu] [--check-library] [--no-chance]
        [--set NAME=VALUE ...]   # a BenchmarkPredictor setting: the library path alone (a study;
                                 # build-bank has no option for them), nothing written
        [--replays K]            # with --set: K replays of each seed's targets (pooled),
                                 # written to results/benchpred/replays_<settings>.csv
        [--splits weaker]        # our mirror image of extrapolation (source: the strongest
                                 # 50%; targets: the weakest 30%), beside a random sample's
                                 # mean; written to atlas_weaker.csv, not the docs
        [--splits family]        # another family: each family of FAMILIES with 10 models in a
                                 # v2 matrix the targets, every other model the source;
                                 # written to atlas_family.csv

writes benchmarks/results/benchpred/atlas.csv (one row per dataset, split, seed, design; a run
of some --datasets or --splits replaces only their rows) and,
with --write-docs, table.md and the first table of benchmarks/results/benchpred.md's section
"## BenchPred's protocol, beside BenchPred's own methods". About ten minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import re
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat.bankdir import load_bank_dir
from atlascat.bankdir.builder import predictor_bank
from atlascat.cli import main as cli_main
from atlascat.irt.calibrate import Calibrator
from atlascat.predict import BenchmarkPredictor
from atlascat.responses import ResponseMatrix

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "benchpred"
OUT = ROOT / "benchmarks" / "results" / "benchpred"
DOC = ROOT / "benchmarks" / "results" / "benchpred.md"
NAMES = ["v2_ifeval", "v2_musr", "v2_arc_challenge", "helm_mmlu", "helm_med_qa"]
SECTION = "## BenchPred's protocol, beside BenchPred's own methods"
# the score of a model answering at random: IFEval is generation (0); MuSR's three parts have 2,
# 5 and 3 options (250, 256 and 250 items: the v2 leaderboard's random baselines); ARC-Challenge,
# HELM MMLU and HELM MedQA ask 4 options
CHANCE = {"v2_ifeval": 0.0, "v2_musr": (250 / 2 + 256 / 5 + 250 / 3) / 756,
          "v2_arc_challenge": 0.25, "helm_mmlu": 0.25, "helm_med_qa": 0.25}
PEER_LABEL = {"random_sampling": "random", "random_sampling_and_learn": "random + ridge",
              "aipw": "AIPW", "anchor_points_weighted": "anchor points (weighted)",
              "anchor_points_predictor": "anchor points (predictor)", "pca": "PCA"}


def read_matrix(path) -> pd.DataFrame:
    """A models x items matrix without its all-zero models, as BenchPred's get_scores."""
    df = pd.read_csv(path, index_col=0)
    return df[df.mean(axis=1) > 1e-8]


def load(name: str) -> pd.DataFrame:
    return read_matrix(DATA / f"{name}.csv.gz")


SPLITS = ("interpolation", "extrapolation")   # BenchPred's; "weaker" is our mirror image
RANDOM_LABEL = "random sample, 12 draws per seed (this script)"   # where no peer was run
# model families of the v2 matrices (named models; HELM's are not), by a pattern on the
# lower-cased name: a family's fine-tunes and merges by other authors included
FAMILIES = {"qwen": r"qwen", "llama": r"llama", "mistral": r"mistral|mixtral",
            "gemma": r"gemma", "yi": r"(^|/)yi-", "phi": r"(^|/)phi-", "granite": r"granite"}
MIN_FAMILY = 10           # a family with fewer models in a matrix is left out there


def family_members(models, family: str) -> np.ndarray:
    """Row indices of the models whose lower-cased name matches :data:`FAMILIES` [family]."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}: one of {', '.join(FAMILIES)}")
    rx = re.compile(FAMILIES[family])
    return np.array([i for i, m in enumerate(models) if rx.search(str(m).lower())], dtype=int)


def families_of(df: pd.DataFrame) -> list:
    """The ``family:<name>`` splits of a matrix: every family with at least MIN_FAMILY models."""
    return [f"family:{f}" for f in FAMILIES if len(family_members(df.index, f)) >= MIN_FAMILY]


def split_models(full: np.ndarray, split: str, seed: int, models=None):
    """BenchPred's main.py: source and target row indices. ``weaker`` (not BenchPred's) mirrors
    extrapolation: the source is the strongest 50% of models, the targets the weakest 30%.
    ``family:<name>`` (not BenchPred's): the targets are a family's models (``models``, the
    rows' names, :data:`FAMILIES`), the source every other model (the same for every seed)."""
    n = len(full)
    if split.startswith("family:"):
        if models is None:
            raise ValueError("a family split needs the models' names")
        tgt = family_members(models, split.split(":", 1)[1])
        return np.setdiff1d(np.arange(n), tgt), tgt
    if split == "interpolation":
        tgt = np.random.RandomState(seed).permutation(n)[: int(0.25 * n)]
        return np.setdiff1d(np.arange(n), tgt), tgt
    order = np.argsort(full.mean(axis=1), kind="stable")
    if split == "weaker":
        return order[-int(0.5 * n):], order[: int(0.3 * n)]
    if split != "extrapolation":
        raise ValueError(f"unknown split {split!r}")
    return order[: int(0.5 * n)], order[-int(0.3 * n):]


def random_sample_mae(df: pd.DataFrame, split: str, budget: int, seeds: int,
                      replays: int = 12) -> float:
    """MAE (points) of a simple random sample's mean (``budget`` items without replacement per
    target; BenchPred's "random sampling"), over ``seeds`` x ``replays`` draws."""
    full = df.to_numpy(float)
    errs = []
    for seed in range(seeds):
        tgt = split_models(full, split, seed, df.index)[1]
        y = full[tgt]
        rng = np.random.default_rng([seed, 7])
        for _ in range(replays):
            pick = np.argsort(rng.random(y.shape), axis=1)[:, :budget]
            est = np.take_along_axis(y, pick, axis=1).mean(axis=1)
            errs.append(np.abs(est - y.mean(axis=1)).mean())
    return 100 * float(np.mean(errs))


def _write(df: pd.DataFrame, rows: np.ndarray, path: Path) -> Path:
    """A wide matrix file: first column the model (m<row number>), then the items."""
    frame = pd.DataFrame(df.to_numpy(float)[rows], columns=[str(c) for c in df.columns],
                         index=pd.Index([f"m{i}" for i in rows], name="model"))
    frame.to_csv(path)
    return path


def _cli(args: list) -> None:
    """``atlas ARGS`` in process; its console output is dropped, a failure raises."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as e:
        rc = cli_main([str(a) for a in args])
    if rc:
        raise SystemExit(f"atlas {' '.join(map(str, args))} failed ({rc}): {e.getvalue()}")


def replays_of(pred, targets, seed: int, replays: int):
    """``replays`` draws of the fitted predictor on ``targets``: the first as ``atlas
    simulate --seed seed+1000`` draws (each target its own Generator), the k-th from
    ``[seed + 1000, k]``; -> (the runs, their rows as person_scores.csv's columns)."""
    runs = [pred.replay(targets, seed=seed + 1000) if k == 0
            else pred.replay(targets, rng=[seed + 1000, k]) for k in range(int(replays))]
    p = pd.concat([pd.DataFrame({
        "subject_id": r.subject_id.astype(str), "n_items": r.n_items,
        "score": r.score, "score_lo": r.score_lo, "score_hi": r.score_hi,
        "design_score": r.design_score, "model_score": r.model_score, "method": r.method})
        for r in runs], ignore_index=True)
    return runs, p


def _metrics(p: pd.DataFrame, truth: pd.Series) -> dict:
    """Error, coverage, width and items of one run's person_scores.csv (scores 0-1)."""
    t = truth.reindex(p.subject_id.astype(str)).to_numpy()
    est, lo, hi = (p[c].to_numpy(float) for c in ("score", "score_lo",
                                                   "score_hi"))
    hit = (t >= lo) & (t <= hi)
    out = {"mae": 100 * np.abs(est - t).mean(), "coverage": hit.mean(),
           "width": 100 * (hi - lo).mean(), "items_max": int(p.n_items.max()),
           "items_mean": float(p.n_items.mean()), "n_targets": len(p), "n_hits": int(hit.sum())}
    if "design_score" in p:
        out.update(design_mae=100 * np.abs(p.design_score.to_numpy(float) - t).mean(),
                   model_mae=100 * np.abs(p.model_score.to_numpy(float) - t).mean(),
                   outside=float((p.method == "design").mean()))
    return out


def designs(bank: Path, budget: int) -> list:
    """(design, folder, extra simulate options): the folder's predictor; the adaptive test
    scored by the folder's link with its default stop (SE 0.1 after 30 items, at most the
    budget); the same adaptive test spending the whole budget (``--min-items budget``)."""
    cat = ["--design", "adaptive", "--no-selected"]
    return [("predictor", bank, []),
            ("adaptive + link", bank, cat),
            ("adaptive + link, whole budget", bank, [*cat, "--min-items", budget])]


def run_one(df: pd.DataFrame, split: str, seed: int, budget: int, tmp: Path,
            check: bool = False, chance: float = 0.0) -> list:
    """One seed through build-bank and simulate: a row per design of :func:`designs` (the
    folder's predictor, the adaptive test scored by the folder's link with its default stop and
    spending the whole budget). ``check``: the predictor row also gets
    ``library_diff`` (largest |CLI - library| score, points, the library fitting
    BenchmarkPredictor on the folder's own bank with the same seeds) and ``library_mae`` (the
    library path with Calibrator() defaults on all the source's items, :func:`run_library`)."""
    full = df.to_numpy(float)
    src, tgt = split_models(full, split, seed, df.index)
    truth = pd.Series(full[tgt].mean(axis=1), index=[f"m{i}" for i in tgt])
    source, targets = _write(df, src, tmp / "SOURCE.csv"), _write(df, tgt, tmp / "TARGETS.csv")
    bank = tmp / "BANK"
    _cli(["build-bank", source, "-o", bank, "--seed", seed, "--budget", budget,
          "--chance", chance])
    rows = []
    for design, folder, extra in designs(bank, budget):
        run = tmp / f"RUN_{len(rows)}"
        _cli(["simulate", "--bank", folder, targets, "--max-items", budget, "--seed", seed + 1000,
              "-o", run] + extra)
        p = pd.read_csv(run / "person_scores.csv")
        rows.append({"design": design, "n_source": len(src), **_metrics(p, truth)})
        if design == "predictor" and check:
            lib = same_bank_library(df, split, seed, budget, load_bank_dir(bank).bank, chance)
            rows[-1]["library_diff"] = library_diff(lib, p)
            rows[-1]["library_mae"] = run_library(df, split, seed, budget,
                                                  {"chance": chance})[0]["mae"]
    shutil.rmtree(bank)
    return rows


def run_library(df: pd.DataFrame, split: str, seed: int, budget: int, settings=None,
                replays: int = 1):
    """The library path with the same seeds: Calibrator() on the source,
    BenchmarkPredictor(budget, **settings).fit(bank, source, rng=seed), .replay(targets,
    seed=seed + 1000) (each target's own Generator, as ``atlas simulate``'s; ``replays`` > 1:
    also rng=[seed + 1000, r] for r = 1 .. replays - 1, the
    metrics pooled over the replays). Returns (metrics, predicted scores by target id, of the
    first replay)."""
    full = df.to_numpy(float)
    ids = [str(c) for c in df.columns]
    src, tgt = split_models(full, split, seed, df.index)
    source = ResponseMatrix(full[src], [f"m{i}" for i in src], ids)
    targets = ResponseMatrix(full[tgt], [f"m{i}" for i in tgt], ids)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bank = Calibrator().fit(source).bank_
    pred = BenchmarkPredictor(budget, **(settings or {})).fit(bank, source, rng=seed)
    runs, p = replays_of(pred, targets, seed, replays)
    truth = pd.Series(full[tgt].mean(axis=1), index=[f"m{i}" for i in tgt])
    first = runs[0]
    return ({"design": "predictor (library)", "n_source": len(src), **_metrics(p, truth)},
            pd.Series(first.score.to_numpy(), index=first.subject_id.astype(str)))


def same_bank_library(df: pd.DataFrame, split: str, seed: int, budget: int, bank,
                      chance: float = 0.0) -> pd.Series:
    """BenchmarkPredictor(budget, chance=chance).fit(bank, source, rng=seed).replay(targets,
    seed=seed + 1000)
    on the bank atlas build-bank fits the predictor on (the built folder's, or every
    non-constant item's: :func:`atlascat.bankdir.builder.predictor_bank`): predicted scores by
    target id."""
    full = df.to_numpy(float)
    ids = [str(c) for c in df.columns]
    src, tgt = split_models(full, split, seed, df.index)
    source = ResponseMatrix(full[src], [f"m{i}" for i in src], ids)
    targets = ResponseMatrix(full[tgt], [f"m{i}" for i in tgt], ids)
    bank = predictor_bank(source, bank, seed=seed)  # as atlas build-bank chooses it
    r = BenchmarkPredictor(budget, chance=chance).fit(bank, source, rng=seed).replay(
        targets, seed=seed + 1000)
    return pd.Series(r.score.to_numpy(), index=r.subject_id.astype(str))


def library_diff(lib: pd.Series, persons: pd.DataFrame) -> float:
    """Largest |library - CLI| predicted score over the targets, in points."""
    cli = persons.set_index(persons.subject_id.astype(str)).score
    return float(100 * np.abs(lib.reindex(cli.index).to_numpy() - cli.to_numpy()).max())


def _num(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x:.2f}"


def table(res: pd.DataFrame, peers: pd.DataFrame) -> str:
    best = peers.loc[peers.groupby(["dataset", "split"]).mae.idxmin()].set_index(["dataset", "split"])
    lines = ["| data | split | design (atlas simulate) | MAE | 95% coverage | width | items "
             "(mean / max) | design part only | IRT only | best BenchPred method | vs best |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for col in ("design_mae", "model_mae"):
        if col not in res:
            res = res.assign(**{col: np.nan})
    g = res.groupby(["dataset", "split", "design"], sort=False)
    agg = g.agg(mae=("mae", "mean"), hits=("n_hits", "sum"), n=("n_targets", "sum"),
                items=("items_max", "max"), items_mean=("items_mean", "mean"),
                width=("width", "mean"), design_mae=("design_mae", "mean"),
                model_mae=("model_mae", "mean"))
    for (name, split, design), row in agg.iterrows():
        cov = row.hits / row.n
        if (name, split) in best.index:
            b = best.loc[(name, split)]
            ratio = row.mae / b.mae
            bound = 1.0 if split == "interpolation" else 1.1
            verdict = ("meets" if ratio <= bound
                       else f"**loses** (x{ratio:.2f}; bound x{bound:.1f})")
            peer = f"{b.mae:.2f} ({PEER_LABEL.get(b.method, b.method)})"
        else:                                  # a split BenchPred's methods were not run on
            verdict, peer = "-", "-"
        if not 0.90 <= cov <= 0.99:
            verdict += "; **coverage outside 0.90-0.99**"
        lines.append(f"| {name} | {split} | {design} | {row.mae:.2f} | {cov:.3f} | "
                     f"{row.width:.1f} | {row.items_mean:.1f} / {int(row['items'])} | "
                     f"{_num(row.design_mae)} | {_num(row.model_mae)} | {peer} | {verdict} |")
    return "\n".join(lines)


def write_docs(text: str) -> None:
    """Replace the first table under the "## BenchPred's protocol" heading of
    benchmarks/results/benchpred.md (the prose around it is written by hand)."""
    body = DOC.read_text(encoding="utf-8")
    at = body.index(SECTION)
    lines = body[at:].split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith("| data |"))
    last = next(i for i in range(first, len(lines)) if not lines[i].startswith("|"))
    lines[first:last] = text.split("\n")
    DOC.write_text(body[:at] + "\n".join(lines), encoding="utf-8")


def write_rows(path: Path, res: pd.DataFrame, keys: list) -> pd.DataFrame:
    """Write ``res`` to ``path``, keeping the rows of an existing file that this run did not
    make (a run of some datasets or splits replaces only theirs); returns what was written."""
    if path.exists():
        old = pd.read_csv(path)
        if set(keys) <= set(old.columns) and len(res):
            made = pd.MultiIndex.from_frame(res[keys].astype(str))
            kept = old[~pd.MultiIndex.from_frame(old[keys].astype(str)).isin(made)]
            res = pd.concat([kept, res], ignore_index=True)
    res.to_csv(path, index=False)
    return res


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--datasets", default=",".join(NAMES))
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--check-library", action="store_true",
                    help="also run the library path with the same seeds and compare")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a BenchmarkPredictor setting (a study: `atlas build-bank` has no option "
                         "for them, so this runs the library path alone), e.g. --set mix=0.8")
    ap.add_argument("--no-chance", action="store_true",
                    help="build every bank without the benchmark's chance level (CHANCE)")
    ap.add_argument("--replays", type=int, default=1,
                    help="with --set: replay each seed's targets this many times (their own "
                         "draws; the extrapolation split is the same for every seed)")
    ap.add_argument("--splits", default=",".join(SPLITS),
                    help="interpolation, extrapolation (BenchPred's), weaker (the "
                         "strongest 50%% of models the source, the weakest 30%% the targets) "
                         "and/or family (each model family of a v2 matrix the targets); "
                         "other than BenchPred's two, writes atlas_<splits>.csv, not the docs")
    a = ap.parse_args(argv)
    splits = a.splits.split(",")
    for split in splits:
        if split not in SPLITS + ("weaker", "family"):
            ap.error(f"unknown split {split!r}: interpolation, extrapolation, weaker or family")
    protocol = tuple(splits) == SPLITS
    settings = {k: float(v) for k, v in (s.split("=", 1) for s in a.set)}
    if a.replays > 1 and not settings:
        ap.error("--replays is for a study of settings (--set): the commands replay once")
    rows, ours = [], []        # ours: a random sample's MAE where BenchPred's methods were not run
    with tempfile.TemporaryDirectory(prefix="benchpred_") as tmp:
        for name in a.datasets.split(","):
            df = load(name)
            chance = 0.0 if a.no_chance else CHANCE[name]
            # "family": one split per family with MIN_FAMILY models in the matrix (none in HELM's)
            named = [x for split in splits
                     for x in (families_of(df) if split == "family" else [split])]
            ours += [{"dataset": name, "split": split, "method": RANDOM_LABEL,
                      "mae": random_sample_mae(df, split, a.budget, a.seeds)}
                     for split in named if split not in SPLITS]
            for split in named:
                t0, new = time.time(), []
                for seed in range(a.seeds):
                    if settings:
                        out = [run_library(df, split, seed, a.budget,
                                           {"chance": chance, **settings}, a.replays)[0]]
                    else:
                        out = run_one(df, split, seed, a.budget, Path(tmp), a.check_library,
                                      chance)
                    new += [{"dataset": name, "split": split, "seed": seed, **r} for r in out]
                rows += new
                last = pd.DataFrame(new)
                for design, d in last.groupby("design", sort=False):
                    extra = (f"  same-bank library diff <= {d.library_diff.max():.4f}; "
                             f"library (Calibrator()) MAE {d.library_mae.mean():.2f}"
                             if "library_diff" in d and d.library_diff.notna().any() else "")
                    print(f"{name:17s} {split:13s} {design:16s} MAE {d.mae.mean():5.2f}  coverage "
                          f"{d.n_hits.sum() / d.n_targets.sum():.3f}  items <= "
                          f"{d.items_max.max()}{extra}", flush=True)
                print(f"  ({time.time() - t0:.0f}s)", flush=True)
    res = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    suffix = "" if protocol else "_" + "_".join(splits)
    if not settings:  # a study of settings writes nothing but its replays
        write_rows(OUT / f"atlas{suffix}.csv", res.round(4), ["dataset", "split", "seed", "design"])
    elif a.replays > 1:
        tag = ",".join(f"{k}={v:g}" for k, v in sorted(settings.items()))
        res.round(4).to_csv(OUT / f"replays_{tag}{suffix}.csv", index=False)
    peers = pd.read_csv(OUT / "peers.csv")
    text = table(res, pd.concat([peers, pd.DataFrame(ours)], ignore_index=True))
    print(text)
    if a.write_docs and not settings and protocol:
        (OUT / "table.md").write_text(text + "\n", encoding="utf-8")
        write_docs(text)


if __name__ == "__main__":
    main()
