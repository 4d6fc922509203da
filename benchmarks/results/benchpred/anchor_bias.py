"""Where anchor points' extrapolation error comes from: BenchPred's AnchorPointsWeightedPred
(their module, unmodified) fitted on the weakest 50% of models with 50 anchors (their fit
seeds 0-4), predicting the strongest 30%; per matrix its MAE, mean signed error (bias), the
correlation of its predictions with the targets' scores, and the MAE of predicting every target
the targets' own mean score (their spread). Then the same split inside the source models alone
(fitted on the weakest 50% of the source, predicting its strongest 30%): whether a user, who has
only the source models, could tell from them on which benchmark anchor points extrapolates
without bias. Run in the scratch environment of run_peers.py:

    cd /work/scratch-benchpred && OPENBLAS_NUM_THREADS=1 venv/bin/python anchor_bias.py
"""
import importlib, os, sys, types
import numpy as np, pandas as pd
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "shim"), HERE]
pkg = types.ModuleType("benchpred"); pkg.__path__ = [os.path.join(HERE, "benchpred")]
sys.modules["benchpred"] = pkg          # skip __init__ (it imports torch for p-IRT)
Anchor = importlib.import_module("benchpred.anchor_points").AnchorPointsWeightedPred


def extrapolate(full, rows):
    """(weakest 50%, strongest 30%) of ``rows`` by their mean score."""
    order = rows[np.argsort(full[rows].mean(1), kind="stable")]
    return order[: int(0.5 * len(rows))], order[-int(0.3 * len(rows)):]


def errors(full, src, tgt):
    truth = full[tgt].mean(1)
    pred = np.array([m.predict(full[tgt][:, m.get_coreset()]) for m in
                     (Anchor().fit(full[src], 50, seed=s) for s in range(5))])
    return 100 * (pred - truth), pred, truth


for name in ["v2_ifeval", "v2_musr", "v2_arc_challenge", "helm_mmlu", "helm_med_qa"]:
    full = pd.read_csv(f"/work/shared/data/benchpred/{name}.csv.gz", index_col=0).to_numpy(float)
    full = full[full.mean(1) > 1e-8]
    src, tgt = extrapolate(full, np.arange(len(full)))
    err, pred, truth = errors(full, src, tgt)
    inner = errors(full, *extrapolate(full, src))[0]
    print(f"{name:17s} MAE {np.abs(err).mean():5.2f}  bias {err.mean():+5.2f}  corr "
          f"{np.mean([np.corrcoef(p, truth)[0, 1] for p in pred]):.2f}  targets' spread "
          f"(MAE of their mean) {100 * np.abs(truth - truth.mean()).mean():5.2f} | inside the "
          f"source: MAE {np.abs(inner).mean():5.2f}  bias {inner.mean():+5.2f}")
