"""BenchPred's own methods on LongBench with the item draw repeated: each peer's expected error.

``../shared/data/longbench/peers_per_seed.csv`` holds one run of each BenchPred method per seed
(0-4): the seed fixes both the split of the models and the method's draw of 50 items, so each
figure is one draw of the items, and the best of six methods per row is the luckiest of six
draws. This script runs BenchPred's code (a checkout of
github.com/socialfoundations/benchmark-prediction, given by ``--benchpred``; nothing of it is
copied here) on the same matrices and splits, with the method's seed s for draw 0 (BenchPred's
protocol: it must reproduce peers_per_seed.csv, and it does to 2e-14) and 100000 + 1000 k + s
for draws k = 1..K, the split unchanged. Lasso chooses its items by its path on the source
models (no draw), so it runs once; PCA needs more than 20 source models and does not run in
extrapolation (as in peers_per_seed.csv). Needs the peers' own dependencies (numpy, pandas,
scikit-learn, torch, kmedoids): a scratch environment, never the project's. Writes one row per
task, split, seed, method and draw (``results/longbench/peers_draws.csv``):

    OPENBLAS_NUM_THREADS=1 SCRATCH_PYTHON benchmarks/peers_longbench_draws.py \\
        --benchpred /path/to/benchmark-prediction --draws 20      # ~6 min on one core

``bench_longbench.py --library --replays 20`` gives ATLAS's error over the same number of draws;
the comparison is in results/longbench.md ("The peers' expected error").
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "longbench"
OUT = ROOT / "benchmarks" / "results" / "longbench" / "peers_draws.csv"
TASKS = ["narrativeqa", "qasper", "hotpotqa", "gov_report", "qmsum", "triviaqa", "lcc",
         "passage_retrieval_en"]
#: BenchPred's methods of peers_per_seed.csv: (module, class)
METHODS = {"random_sampling": ("random", "RandomSampling"),
           "random_sampling_and_learn": ("random", "RandomSamplingAndLearn"),
           "aipw": ("aipw", "AIPWPred"), "pca": ("pca", "PCAPred"),
           "anchor_points_weighted": ("anchor_points", "AnchorPointsWeightedPred"),
           "lasso": ("lasso", "LassoPred")}
NO_DRAW = ("lasso",)


def load_methods(checkout: Path) -> dict:
    """The method classes, imported module by module from the checkout (its package __init__
    imports tinyBenchmarks' py_irt, which these six do not need)."""
    import types

    pkg = types.ModuleType("benchpred")
    pkg.__path__ = [str(checkout / "benchpred")]
    sys.modules["benchpred"] = pkg
    sys.path.insert(0, str(checkout))
    return {name: getattr(importlib.import_module(f"benchpred.{mod}"), cls)
            for name, (mod, cls) in METHODS.items()}


def split(full: np.ndarray, how: str, seed: int):
    """BenchPred's main.py split: interpolation a seeded 25% of the models as targets,
    extrapolation the weakest 50% as source and the strongest 30% as targets."""
    n = len(full)
    if how == "interpolation":
        tgt = np.random.RandomState(seed).permutation(n)[: int(0.25 * n)].tolist()
        return [i for i in range(n) if i not in tgt], tgt
    order = np.argsort(full.mean(-1))
    return order[: int(0.5 * n)], order[-int(0.3 * n):]


def run(methods: dict, tasks, draws: int, budget: int = 50) -> pd.DataFrame:
    rows = []
    for task in tasks:
        df = pd.read_csv(DATA / f"longbench_{task}.csv.gz", index_col=0)
        full = df[df.mean(axis=1) > 1e-8].to_numpy(float)   # as BenchPred's get_scores
        for how in ("interpolation", "extrapolation"):
            t0 = time.time()
            for s in range(5):
                src, tgt = split(full, how, s)
                real = full[tgt].mean(-1)
                for name, cls in methods.items():
                    for k in range(1 if name in NO_DRAW else draws + 1):
                        seed = s if k == 0 else 100000 + 1000 * k + s
                        try:
                            m = cls().fit(source_full_scores=full[src], coreset_size=budget,
                                          seed=seed)
                        except AssertionError:      # PCA: more than 20 source models
                            break
                        pred = m.predict(full[:, m.get_coreset()][tgt])
                        rows.append({"task": task, "split": how, "seed": s, "method": name,
                                     "draw": k,
                                     "mae_points": 100 * float(np.abs(pred - real).mean())})
            print(f"{task:21s} {how:13s} {time.time() - t0:5.1f}s", flush=True)
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--benchpred", type=Path, required=True,
                    help="a checkout of socialfoundations/benchmark-prediction")
    ap.add_argument("--draws", type=int, default=20, help="item draws per seed beyond draw 0")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    res = run(load_methods(a.benchpred), a.tasks.split(","), a.draws)
    ref = pd.read_csv(DATA / "peers_per_seed.csv").dropna()
    ref["task"] = ref.dataset.str.replace("longbench_", "", regex=False)
    check = res[res.draw == 0].merge(ref, on=["task", "split", "seed", "method"])
    print(f"draw 0 against peers_per_seed.csv: {len(check)} rows, largest difference "
          f"{(check.mae_points_x - check.mae_points_y).abs().max():.1e} points")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    res.round(6).to_csv(a.out, index=False)
    print(res.groupby(["task", "split", "method"]).mae_points.mean().unstack().round(2)
          .to_string())


if __name__ == "__main__":
    main()
