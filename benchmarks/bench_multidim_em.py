"""Per-iteration time and peak memory of the exploratory multidimensional 2PL's EM, before/after.

"before": the EM loop as it was (the full subjects x nodes matrices every iteration, kept here as
the reference); "after": MultidimIRT's (blocked E-step on unique patterns, irt/multidimem.py).
Each run is a fresh process (peak RSS) fitting a fixed number of EM iterations (tol tiny; time
per iteration between the first and the last iteration's callback; medians of --reps runs), on
a seeded two-factor 2PL of 5000 x 30 (10% missing cells with --missing).

  OPENBLAS_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_multidim_em.py --iters 10 --reps 3
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def data(n=5000, j=30, missing=0.0, seed=1):
    from atlascat.irt.multidim import MultidimBank, simulate_responses

    rng = np.random.default_rng(seed)
    A = np.zeros((j, 2))
    A[: j // 2, 0], A[j // 2:, 1] = rng.uniform(1.2, 2, j // 2), rng.uniform(1.2, 2, j - j // 2)
    bank = MultidimBank([f"i{i}" for i in range(j)], A, np.linspace(-1, 1, j))
    y = simulate_responses(bank, rng.standard_normal((n, 2)), rng).astype(float)
    y[rng.random(y.shape) < missing] = np.nan
    return y


def reference_model(**kw):
    """MultidimIRT with the EM loop as before this change (the reference)."""
    from scipy.special import expit, log_expit

    from atlascat.irt import multidim as md

    class Reference(md.MultidimIRT):
        def _fit_em(self, y, obs, weights, A, d, prior):
            k = A.shape[1]
            nodes, logw = md.product_grid(k, self.quadpts)
            X = np.hstack([nodes, np.ones((nodes.shape[0], 1))])
            obs_f = obs.astype(float)
            y1 = np.where(obs, y, 0.0)
            y0 = obs_f - y1
            w = np.ones(y.shape[0]) if weights is None else weights
            beta = np.hstack([A, d[:, None]])
            history, converged, loglik = [], False, -np.inf
            for it in range(1, int(self.max_iter or 500) + 1):
                z = X @ beta.T
                ll = y1 @ log_expit(z).T + y0 @ log_expit(-z).T + logw
                post, norm_ = md._normalize_rows(ll)
                loglik = float(w @ norm_)
                post *= w[:, None]
                r, n = post.T @ y1, post.T @ obs_f
                p = expit(z)
                G = (r - n * p).T @ X - beta * prior
                H = md._weighted_gram(n * p * (1 - p), X) + np.diag(prior)
                new_beta = beta + md._newton_step(G, H + 1e-10 * np.eye(k + 1), max_step=2.0)
                change = md._invariant_change(beta, new_beta, k)
                beta = new_beta
                history.append(change)
                if self.callback is not None:
                    self.callback({"iteration": it, "change": change})
                if change < self.tol:
                    converged = True
                    break
            self.n_iter_, self.converged_, self.history_, self.loglik_ = it, converged, history, loglik
            return beta[:, :k], beta[:, k]

    return Reference(**kw)


def one(variant, k, iters, missing):
    import warnings

    from atlascat.irt.multidim import MultidimIRT

    y = data(missing=missing)
    stamps = []
    kw = dict(method="em", max_iter=iters, tol=1e-300, rotation="none",
              callback=lambda info: stamps.append(time.perf_counter()))
    model = reference_model(n_dims=k, **kw) if variant == "before" else MultidimIRT(k, **kw)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(y)
    sec = time.perf_counter() - t
    per_iter = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"sec": sec, "per_iter": per_iter, "sys": ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024,
                      "loglik": model.loglik_, "n_iter": model.n_iter_,
                      "A": model.bank_.loadings.tolist(), "d": model.bank_.intercepts.tolist()}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dims", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--missing", type=float, default=0.0)
    ap.add_argument("--one", nargs=2)
    a = ap.parse_args()
    if a.one:
        return one(a.one[0], int(a.one[1]), a.iters, a.missing)
    print(f"| K | missing | variant | s / iteration | fit s ({a.iters} iterations) | sys s | peak RSS MB | loglik |")
    print("|---|---|---|---|---|---|---|---|")
    for k in a.dims:
        out = {}
        for rep in range(a.reps):
            for variant in ("before", "after"):
                cmd = [sys.executable, __file__, "--one", variant, str(k), "--iters", str(a.iters),
                       "--missing", str(a.missing)]
                out.setdefault(variant, []).append(json.loads(subprocess.check_output(cmd)))
        for variant, runs in out.items():
            med = lambda key: float(np.median([r[key] for r in runs]))  # noqa: E731
            print(f"| {k} | {a.missing:g} | {variant} | {med('per_iter'):.3f} | {med('sec'):.2f} | {med('sys'):.2f} | "
                  f"{med('rss_mb'):.0f} | {runs[0]['loglik']:.6f} |")
        b, f = out["before"][0], out["after"][0]
        rel = max(abs(f["loglik"] - b["loglik"]) / abs(b["loglik"]),
                  float(np.max(np.abs(np.subtract(f["A"], b["A"])))),
                  float(np.max(np.abs(np.subtract(f["d"], b["d"])))))
        print(f"<!-- K={k}: largest difference after {a.iters} iterations {rel:.2e}, "
              f"iterations {b['n_iter']} / {f['n_iter']} -->")


if __name__ == "__main__":
    main()
