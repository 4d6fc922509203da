"""Run BenchPred's own methods (socialfoundations/benchmark-prediction, unmodified modules) with
their main.py protocol on the matrices in /work/shared/data/benchpred. Writes peers.csv.

    python run_peers.py DATASETS METHODS OUT.csv [REPLAYS]

REPLAYS (default 1: their protocol exactly) > 1 repeats each split seed s = 0-4 with method
seeds s + 1000 r, r = 1 .. REPLAYS - 1 (the split still drawn with seed s): the methods' own
randomness (which items, k-medoids' start) replayed, for a mean that is not one draw's."""
import importlib, sys, time, types, os
import numpy as np, pandas as pd
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "shim"), HERE]
pkg = types.ModuleType("benchpred"); pkg.__path__ = [os.path.join(HERE, "benchpred")]
sys.modules["benchpred"] = pkg          # skip __init__ (it imports py_irt/pyro/torch for p-IRT)
base = importlib.import_module("benchpred.base")
rnd = importlib.import_module("benchpred.random")
aipw = importlib.import_module("benchpred.aipw")
anc = importlib.import_module("benchpred.anchor_points")
pca = importlib.import_module("benchpred.pca")
METHODS = {"random_sampling": rnd.RandomSampling, "random_sampling_and_learn": rnd.RandomSamplingAndLearn,
           "aipw": aipw.AIPWPred, "anchor_points_weighted": anc.AnchorPointsWeightedPred,
           "anchor_points_predictor": anc.AnchorPointPredictorPred, "pca": pca.PCAPred}
DATA = "/work/shared/data/benchpred"
names = sys.argv[1].split(",") if len(sys.argv) > 1 else ["v2_ifeval", "v2_musr", "v2_arc_challenge", "helm_mmlu", "helm_med_qa"]
methods = sys.argv[2].split(",") if len(sys.argv) > 2 else list(METHODS)
rows = []
replays = int(sys.argv[4]) if len(sys.argv) > 4 else 1
for name in names:
    full = pd.read_csv(f"{DATA}/{name}.csv.gz", index_col=0).to_numpy(np.float32)
    full = full[full.mean(-1) > 1e-8]            # as their get_scores
    nm = full.shape[0]
    for split in ("interpolation", "extrapolation"):
        for seed in [s + 1000 * r for r in range(replays) for s in range(5)]:
            base.set_random_seed(seed % 1000)    # as their process_run (the split's seed)
            if split == "interpolation":
                tgt = list(np.random.permutation(nm)[: int(0.25 * nm)])
                src = [i for i in range(nm) if i not in tgt]
            else:
                order = np.argsort(full.mean(-1)); src = order[: int(0.5 * nm)]; tgt = order[-int(0.3 * nm):]
            real = full[tgt].mean(-1)
            for m in methods:
                t = time.time()
                meth = METHODS[m](); meth.fit(source_full_scores=full[src], coreset_size=50, seed=seed)
                comp = full[:, meth.get_coreset()]
                pred = meth.predict(comp[tgt])
                gap = float(np.fabs(pred - real).mean())
                rows.append(dict(dataset=name, split=split, method=m, seed=seed,
                                 split_seed=seed % 1000, mae=100 * gap, n_items=len(meth.get_coreset()), seconds=round(time.time() - t, 2)))
                print(rows[-1], flush=True)
out = sys.argv[3] if len(sys.argv) > 3 else os.path.join(HERE, "peers_seeds.csv")
pd.DataFrame(rows).to_csv(out, index=False)
