"""Study (2026-11-29): one more attempt at LongBench's interpolation rows (issue 43), the
library path of ``bench_longbench.py --library`` with variants of the predictor that are not
in benchmarks/results/longbench.md's history. Nothing in src/ changes; each variant is a
subclass of BenchmarkPredictor here.

Variants (``--variant NAME``, several allowed; ``base`` is the shipped predictor):

- ``fixed<k>``: a certainty stratum. k items chosen on the source models (greedy forward
  selection of the items whose answers best predict the score, by the ridge regression's
  leave-one-out error, penalty chosen from regression.PENALTIES at every step) are asked of
  every target first, with inclusion probability 1; the other budget - k are drawn by the
  shipped sequential design from the remaining items. Des Raj's estimator then estimates the
  remaining items' total only (the stratum's total is known), so the design-based interval
  keeps its validity (known inclusion probabilities, t_k conditionally unbiased given the
  stratum and the earlier draws). The IRT posterior, M and the ridge part R use the stratum's
  answers as well: R becomes lasso-like, a regression on items chosen on the source models.
- ``cvw``: the model part's weight between the calibrated IRT prediction G_M and the
  calibrated ridge prediction G_R chosen per bank by the replays' squared error over the
  grid w in {0, .25, .5, .75, 1} (G = w G_M + (1 - w) G_R), with M's replays honest: each
  source model's M from a bank calibrated without it (5-fold cross-fitting).
- ``fixed<k>+cvw``: both.
- ``gated<k>_<k0>``: the stratum for targets that look like the source models only: the
  shipped design for k0 draws, then the predictor's outside test (a calibration fitted at
  budget k0) sends a target to the stratum (its k items not asked yet, asked at once, no Des
  Raj term), the rest of the budget drawn as before; D weights the first k0 terms k0 / budget
  in all, the later ones the rest (fixed in advance: unbiased whatever the gate).
- ``slope<g>``: the draws' uncertainty part by a_j ** g sqrt(phi_j f (1 - f)) (leaning to the
  items with large slopes, the informative ones for theta; q known, Des Raj unchanged).
- ``pcr`` (the brief's (b)): a third member of the model part, the principal-component
  regression of the score on the asked items' answers among the source models (r components,
  1-10, chosen per target by leave-one-out), G the mean of the three calibrated predictions.
- ``boost<k>_<beta>_<k0>_<margin>``: from draw k0 on, a target whose theta lies within the
  source models' (after k0 draws, widened by margin) draws with q = (1 - beta) q_design + beta
  uniform over its unasked stratum items (q known and positive: Des Raj unchanged).

Outcome (benchmarks/results/longbench.md, "2026-11-29"): no variant wins by the rule below
(pcr meets it on draws 0-19 by 0.003 on lcc's interpolation and misses on draws 20-39;
slope0.5 fails rule 3 by 0.05 on two extrapolation rows); rows in
results/longbench/study_interp.csv (``--draw-offset 20``: draws 20-39, the noise of 20 draws).
The pre-registered test below (fresh draws 60-79 and the binary BenchPred matrices): neither
wins (pcr fails clause 1 on B, 33.48 against 33.46; slope0.5 fails clauses 1, 2 and 4, its
extrapolation rows 4.7-12.6% worse on B); longbench.md, "Pre-registered test of slope0.5 and
pcr".
The second pre-registered test (gslope, below; draws 80-99 and 12-23): neither wins, each
fails clause 2 on one row (gslope1_20: HELM MMLU's extrapolation 3.38 -> 3.51, +4.0%, with
A 27.86 -> 27.34 and B 33.55 -> 32.94; gslope0.5_20: triviaqa's interpolation 2.07 -> 2.13);
longbench.md, "Pre-registered test of gated slope draws".
The third pre-registered test (rgslope1_20, gslope1_30, below; draws 100-119 and 24-35):
rgslope1_20 wins (A 27.71 -> 27.17, B 33.25 -> 32.64, every clause met; HELM MMLU's
extrapolation 3.42 -> 3.44); gslope1_30 fails clauses 2 (HELM MMLU's extrapolation 3.42 ->
3.53) and 3 (passage_retrieval_en's interpolation coverage 0.897); longbench.md,
"Pre-registered test of re-gated slope draws" (with how it would be landed).
The confirmation (rgslope1_20 on the v1 dense matrices, 200 models per seed, below): NOT
confirmed, clause 2 fails on MMLU's interpolation (1.61 -> 1.86, every seed; 102 items, budget
50), with summed 30.14 -> 29.90 and coverage 0.930-0.944; longbench.md, "Confirmation of
rgslope1_20 on the v1 matrices".

Decision rule (fixed before measuring): a variant wins only if, with ``--replays 20``, (1) its
summed MAE over the 16 rows is below the shipped predictor's, (2) qmsum's or
passage_retrieval_en's interpolation moves to within its bound against the best peer's
expected MAE (peers_draws.csv: 0.53 PCA, 1.50 lasso) or lcc's interpolation does (2.16)
without another row crossing out of its bound, (3) no row worsens by more than 0.05 points
(2% where the row is below 2.5), (4) every row's coverage stays in 0.90-0.99.

    OPENBLAS_NUM_THREADS=1 nice .venv/bin/python benchmarks/study_longbench_interp.py \
        --variant base --variant fixed10 --replays 20 [--tasks qmsum] [--splits interpolation]
Pre-registration (2026-11-29, committed before any of its rows was measured). The rule,
verbatim as given:

    RULE (fixed now). Data A: LongBench, the 8 tasks x 2 splits, seeds 0-4, 20 replays on FRESH
    draws `--draw-offset 60` (never used before), variants base, slope0.5, pcr. Data B: the
    shared binary BenchPred matrices that benchmarks/bench_benchpred.py runs by default
    (IFEval, MuSR, ARC, HELM MMLU, MedQA or whatever its defaults are), both splits
    (interpolation, extrapolation), seeds 0-2, 12 replays each through the library path (as
    bench_benchpred's `--set ... --replays K` path or the study script extended to these
    matrices: same bank per seed for all variants, same draws), variants base, slope0.5, pcr.
    A variant WINS iff all hold: (1) its summed MAE is below base's on A and not above base's
    on B; (2) no row of A or B is worse than base's by more than 2% (0.05 points on rows below
    2.5); (3) every row's 95% coverage is in 0.90-0.99 (where base's is outside, not further
    outside); (4) no LongBench row within its bound (the peers' expected MAE,
    longbench/peers_draws.csv as the study script reads it; interpolation 1.0x, extrapolation
    1.1x) leaves it. If both win, the one with the lower summed A+B MAE.

How it is applied (fixed with the rule, before measuring):

- A: ``--draw-offset 60 --replays 20`` (draws k = 60..79 from ``[seed + 1000, k]``), the
  cached banks of bench_longbench.cached_bank, ``fit(rng=seed)``; MAE per row the mean of the
  five seeds' MAEs, coverage the pooled hits / targets (as every table of longbench.md).
- B: ``--benchpred v2_ifeval,v2_musr,v2_arc_challenge,helm_mmlu,helm_med_qa`` (bench_benchpred's
  NAMES), seeds 0-2, bench_benchpred's split_models, the bank ``Calibrator()``'s on the source
  (bench_benchpred.run_library's; cached on disk once per dataset, split and seed and shared by
  the variants), ``chance = CHANCE[dataset]``, ``fit(rng=seed)`` and bench_benchpred.replays_of
  with 12 replays (the first draw ``seed=seed + 1000``, each target its own Generator, the
  others ``rng=[seed + 1000, k]``, k = 1..11): the draws of its ``--set ... --replays 12``.
- pcr on B: every matrix there has 41-336 source models, where the shipped model part is the
  stacked G = alpha + beta M + gamma R (least squares on the replays, from 40 models); pcr is
  the third member of that rule: G = alpha + beta M + gamma R + delta P by least squares on the
  same replays (P each source model's leave-one-out PCR prediction, as R's). Below 40 source
  models (all of A) the mean of the three calibrated predictions, as measured before.
- slope0.5 on B: the draws' uncertainty part a_j^0.5 sqrt(f (1 - f)) (phi = 1 for 0/1 answers).
- Clause (2): a row fails where variant - base > 0.05 points if base's MAE is below 2.5, else
  > 0.02 x base's MAE; unrounded values. Clause (3): the distance of the coverage from
  [0.90, 0.99] must be 0, or at most base's where base's is positive. Clause (4): the bound is
  min over peer methods of the mean of peers_draws.csv's mae_points over seeds and draws
  (x 1.0 interpolation, x 1.1 extrapolation); a row with base's MAE <= bound fails if the
  variant's MAE > bound.
- Rows: results/longbench/study_interp_prereg.csv (A) and
  results/longbench/study_interp_prereg_binary.csv (B).

    OPENBLAS_NUM_THREADS=1 nice .venv/bin/python benchmarks/study_longbench_interp.py \
        --variant base --variant slope0.5 --variant pcr --replays 20 --draw-offset 60 \
        --out benchmarks/results/longbench/study_interp_prereg.csv
    OPENBLAS_NUM_THREADS=1 nice .venv/bin/python benchmarks/study_longbench_interp.py \
        --variant base --variant slope0.5 --variant pcr --benchpred default --seeds 3 \
        --replays 12 --out benchmarks/results/longbench/study_interp_prereg_binary.csv

Second pre-registration (2026-11-29, committed before any of its rows was measured): the
variant ``gslope<g>_<k0>``, the shipped design for the first k0 draws; then, if the
predictor's own outside test at k0 (as the gated variant computes it) says the target is like
the source models (inside), the remaining draws use the slope-leaning probabilities with power
g (``slope<g>``'s); otherwise the shipped probabilities. Des Raj's terms stay equally weighted
(each t_k is conditionally unbiased whatever q was chosen from the past; no reweighting), SE as
shipped. Variants: base, gslope0.5_20, gslope1_20. The rule, verbatim as given:

    RULE. Data A: LongBench, 8 tasks x 2 splits, seeds 0-4, 20 replays on fresh draws
    `--draw-offset 80`. Data B: the five default binary BenchPred matrices, both splits, seeds
    0-2, 12 replays on fresh draws (offset 12: draws 12-23; add the offset to the --benchpred
    mode if needed), same bank per seed for all variants. A variant WINS iff: (1) its summed
    MAE is below base's on A and on B; (2) no row of A or B worse than base's by more than 2%
    (0.05 points on rows below 2.5); (3) every row's coverage in 0.90-0.99 (where base's is
    outside, not further outside); (4) no LongBench row within its bound (peers_draws.csv;
    interp 1.0x, extrap 1.1x) leaves it. If both win, the lower summed A+B.

How it is applied (fixed with the rule, before measuring):

- gslope<g>_<k0>: draws 0..k0-1 by est.sequential_design's shipped q (phi_j); at draw k0 the
  gate of ``gated<k>_<k0>``: a BenchmarkPredictor fitted at budget k0 on the same bank and
  source models (the predictor's own settings, so ``chance`` on B; ``rng=seed``), its
  ``_estimate`` of the k0 draws' arrays and ``_combine`` of them (no small-sample SE, as the
  gated variant), inside = not outside. From draw k0 on an inside row draws by
  draw_probabilities with dispersion phi_j a_j^(2g) (slope<g>'s), an outside row by the
  shipped q. D and its SE: the shipped ``_estimate`` (est.des_raj, equal weights). The fit's
  replays of the source models draw alike (gate included, the ridge part left out per model as
  shipped), so the calibration lines and tau^2 are those of the variant's draws.
- A: ``--draw-offset 80 --replays 20`` (draws k = 80..99 from ``[seed + 1000, k]``), cached
  banks, MAE per row the mean of the five seeds', coverage pooled hits / targets.
- B: ``--benchpred default --seeds 3 --replays 12 --draw-offset 12``: draws k = 12..23, each
  from ``[seed + 1000, k]`` (one Generator for all targets, as replays_of's k >= 1), the
  banks of the first pre-registration's cache (Calibrator() on the source, once per dataset,
  split and seed, shared by the variants).
- Clause (1): strictly below base's sum on A and strictly below on B (unrounded). Clauses
  (2)-(4) computed as in the first pre-registration (``verdict``, ``--rule gslope``).
- The gate's share of inside targets per row (column ``inside``: targets called inside / all
  targets, pooled over seeds and draws), reported per split.
- Rows: results/longbench/study_interp_gslope.csv (A) and
  results/longbench/study_interp_gslope_binary.csv (B).

    OPENBLAS_NUM_THREADS=1 nice .venv/bin/python benchmarks/study_longbench_interp.py \
        --variant base --variant gslope0.5_20 --variant gslope1_20 --replays 20 \
        --draw-offset 80 --out benchmarks/results/longbench/study_interp_gslope.csv
    OPENBLAS_NUM_THREADS=1 nice .venv/bin/python benchmarks/study_longbench_interp.py \
        --variant base --variant gslope0.5_20 --variant gslope1_20 --benchpred default \
        --seeds 3 --replays 12 --draw-offset 12 \
        --out benchmarks/results/longbench/study_interp_gslope_binary.csv
    .venv/bin/python benchmarks/study_longbench_interp.py --rule gslope --verdict \
        benchmarks/results/longbench/study_interp_gslope.csv \
        benchmarks/results/longbench/study_interp_gslope_binary.csv

Third pre-registration (2026-11-29, committed before any of its rows was measured; the third
test on these banks and seeds, with fresh draws): two variants of gslope1_20, whose test
above failed clause 2 on HELM MMLU's extrapolation (9.6% of its strong targets passed the
gate at 20 draws, 96.8% ended predicted by D, whose variance the slope draws widened).

- ``rgslope<g>_<k0>`` (here rgslope1_20): as gslope<g>_<k0>, but the gate is checked again
  every 10 draws after k0 while below the budget (rgslope1_20: after 20, 30 and 40 draws).
  Gate predictors fitted at budgets 20, 30, 40 on the same bank and source models (gslope's
  gate settings: the shipped BenchmarkPredictor with this one's settings, ``chance`` on B,
  ``rng=seed``; ``_estimate`` of the draws so far and ``_combine``, no small-sample SE). A
  target the gate calls outside at any check draws the rest with the shipped probabilities
  (once out, it stays out); a target inside at every check so far draws with the
  slope-leaning probabilities (dispersion phi_j a_j^(2g)) until the next check.
- ``gslope1_30``: gslope<g>_<k0> with g = 1, the single gate at 30 draws.

D's terms equally weighted as before (valid: q depends on the past only); SE, M, R and the fit's
source replays as gslope's (the source replays draw alike, gates included). The rule, verbatim
as given:

    RULE: Data A: LongBench, 8 tasks x 2 splits, seeds 0-4, 20 replays on fresh draws
    `--draw-offset 100`. Data B: the five default binary BenchPred matrices, both splits,
    seeds 0-2, 12 replays on fresh draws (offset 24: draws 24-35), same banks. Variants base,
    rgslope1_20, gslope1_30. A variant WINS iff: (1) summed MAE below base's on A and on B;
    (2) no row of A or B worse than base's by more than 2% (0.05 points on rows below 2.5);
    (3) every row's coverage in 0.90-0.99 (where base's is outside, not further outside); (4)
    no LongBench row within its bound leaves it. If both win, the lower summed A+B. (This is
    the third test on these banks and seeds, with fresh draws; say so in the record.)

How it is applied (fixed with the rule, before measuring):

- A: ``--draw-offset 100 --replays 20`` (draws k = 100..119 from ``[seed + 1000, k]``), the
  cached banks, MAE per row the mean of the five seeds', coverage pooled hits / targets.
- B: ``--benchpred default --seeds 3 --replays 12 --draw-offset 24`` (draws k = 24..35 from
  ``[seed + 1000, k]``), the banks of the earlier tests' cache.
- Clauses as the gslope test's (``--verdict --rule gslope``: clause 1 strictly below base's
  sum on A and on B, unrounded; clause 2 tolerance 0.05 where base's MAE < 2.5, else 2% of
  it; clause 3 distance from [0.90, 0.99] zero or at most base's; clause 4 the bound of
  peers_draws.csv, interpolation 1.0x, extrapolation 1.1x).
- Reported: the share of targets inside after each check (columns ``inside_<k>``, pooled over
  seeds and draws; ``inside`` the share after the last check), the fit's seconds per row
  (``fit_seconds``: the gate predictors' fits included) and each row's seconds.
- Rows: results/longbench/study_interp_rgslope.csv (A) and
  results/longbench/study_interp_rgslope_binary.csv (B).

    OPENBLAS_NUM_THREADS=1 nice .venv/bin/python benchmarks/study_longbench_interp.py \
        --variant base --variant rgslope1_20 --variant gslope1_30 --replays 20 \
        --draw-offset 100 --out benchmarks/results/longbench/study_interp_rgslope.csv
    OPENBLAS_NUM_THREADS=1 nice .venv/bin/python benchmarks/study_longbench_interp.py \
        --variant base --variant rgslope1_20 --variant gslope1_30 --benchpred default \
        --seeds 3 --replays 12 --draw-offset 24 \
        --out benchmarks/results/longbench/study_interp_rgslope_binary.csv
    .venv/bin/python benchmarks/study_longbench_interp.py --rule gslope --verdict \
        benchmarks/results/longbench/study_interp_rgslope.csv \
        benchmarks/results/longbench/study_interp_rgslope_binary.csv

Confirmation (2026-11-29, committed before any of its rows was measured): rgslope1_20 won the
third test, but on the same banks and seeds as the two before, and it was designed after the
second test's failing row; before it is landed it is tested once on data none of these tests
used, the six dense v1 matrices of the Open LLM Leaderboard (item-level 0/1). The rule,
verbatim as given:

    RULE (confirmation). Data C: each of the six dense matrices; per seed 0-2, a seeded random
    subset of 200 models (np.random.default_rng([seed, 2026]) without replacement), then
    BenchPred's splits as the --benchpred mode makes them on that subset (interpolation: 25%
    targets; extrapolation: weakest 50% source, strongest 30% targets), chance as the v1
    benchmarks' (ARC 0.25, HellaSwag 0.25, MMLU 0.25, TruthfulQA as the repo's CHANCE tables
    say or none, WinoGrande 0.5, GSM8K 0: use what the repo's catalogue/bench code uses for
    these banks and say which), budget 50, 12 replays, variants base and rgslope1_20, same bank
    per seed for both. rgslope1_20 is CONFIRMED iff (1) its summed MAE over the 12 rows is below
    base's; (2) no row worse than base's by more than 2% (0.05 points on rows below 2.5); (3)
    every row's coverage in 0.90-0.99 (where base's is outside, not further outside).

How it is applied (fixed with the rule, before measuring):

- Data: ``openllm/dense_{arc,gsm8k,hellaswag,truthfulqa,winogrande,mmlu}.csv.gz`` read as
  bench_benchpred.read_matrix reads BenchPred's (models scoring 0 on every item dropped, as
  BenchPred's get_scores); per seed the 200 rows
  ``np.sort(np.random.default_rng([seed, 2026]).choice(n, 200, replace=False))`` (kept in the
  file's order), then bench_benchpred.split_models(subset, split, seed) on them.
- chance: ``atlascat.scorelink.settings.ANSWER_CHANCE`` (the chance of a bank's 0/1 answer,
  the one the predictor's ``chance`` means: the score is the mean of the 0/1 items): ARC,
  HellaSwag, MMLU 0.25, WinoGrande 0.50, GSM8K 0.0, TruthfulQA 0.23 (mc1, the matrices' metric;
  ``CHANCE``'s 0.46 is the published mc2 score's, not these items').
- The bank: Calibrator() on the source models (cached_binary_bank, once per dataset, split and
  seed, key ``v1dense_<name>_n200``), shared by both variants; ``fit(rng=seed)``, budget 50.
- Draws: the --benchpred mode's (bench_benchpred.replays_of, 12 replays: the first with
  ``seed=seed + 1000``, each target its own Generator, the others ``rng=[seed + 1000, k]``,
  k = 1..11); no draw offset (this data was never used).
- Clause (1): strictly below base's sum over the 12 rows (unrounded). Clause (2): a row fails
  where variant - base > 0.05 points if base's MAE < 2.5, else > 0.02 x base's MAE. Clause (3):
  the distance of the coverage (pooled hits / targets over seeds and draws) from [0.90, 0.99]
  must be 0, or at most base's where base's is positive (``--verdict CSV --rule confirm``).
- Reported: the gate's share inside after each check (``inside_20/30/40``), fit and row
  seconds. Rows: results/longbench/study_interp_rgslope_confirm.csv.

    OPENBLAS_NUM_THREADS=1 nice .venv/bin/python benchmarks/study_longbench_interp.py \
        --variant base --variant rgslope1_20 --dense default --seeds 3 --replays 12 \
        --out benchmarks/results/longbench/study_interp_rgslope_confirm.csv
    .venv/bin/python benchmarks/study_longbench_interp.py --rule confirm --verdict \
        benchmarks/results/longbench/study_interp_rgslope_confirm.csv
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_benchpred as bp  # noqa: E402
from bench_benchpred import _metrics, replays_of, split_models  # noqa: E402
from bench_longbench import SPLITS, TASKS, cached_bank, load  # noqa: E402

from atlascat.predict import BenchmarkPredictor  # noqa: E402
from atlascat.predict import estimators as est  # noqa: E402
from atlascat.predict import regression  # noqa: E402
from atlascat.predict.predictor import RIDGE_FIT_MIN_MODELS  # noqa: E402
from atlascat.responses import ResponseMatrix  # noqa: E402

STATS = []
STATS_K = {}      # check k -> the shares of rows inside after it (rgslope / gslope, target replays)
PEERS = Path(__file__).resolve().parent / "results" / "longbench" / "peers_draws.csv"


def press_ridge(X, s):
    """Min over regression.PENALTIES of the ridge fit's mean squared leave-one-out residual,
    per batch: X (B, S, n) answers, s (S) scores."""
    n_src = X.shape[1]
    Xc = X - X.mean(1, keepdims=True)
    sc = s - s.mean()
    U, d, _ = np.linalg.svd(Xc, full_matrices=False)
    Uy = np.einsum("bsk,s->bk", U, sc)
    d2 = d ** 2
    shrink = d2[:, None, :] / (d2[:, None, :] + regression.PENALTIES[None, :, None])
    fit = np.einsum("bsk,blk->bls", U, shrink * Uy[:, None, :])
    hat = np.einsum("bsk,blk->bls", U ** 2, shrink) + 1.0 / n_src
    resid = (sc[None, None, :] - fit) / np.maximum(1.0 - hat, 1e-9)
    return np.mean(resid ** 2, axis=2).min(axis=1)


def pcr_scores(answers, scores, item, valid, target_answers=None, loo_rows=None, r_max=10):
    """Principal-component regression of the score on a row's asked items among the source
    models (the top r components of the centred answers, r in 1..r_max chosen per row by
    leave-one-out error), as regression.ridge_scores with a truncation for the shrinkage."""
    answers, scores = np.asarray(answers, float), np.asarray(scores, float)
    out = np.empty(item.shape[0])
    for lo in range(0, item.shape[0], 64):
        sl = slice(lo, lo + 64)
        it, va = item[sl], valid[sl]
        n_src = answers.shape[0]
        X = answers[:, it].transpose(1, 0, 2) * va[:, None, :]
        mx = X.mean(1, keepdims=True)
        sc = scores - scores.mean()
        U, d, Vt = np.linalg.svd(X - mx, full_matrices=False)
        Uy = np.einsum("bsk,s->bk", U, sc)
        ks = np.arange(U.shape[2])
        shrink = (ks[None, None, :] < np.arange(1, r_max + 1)[None, :, None]) & (
            d[:, None, :] > 1e-9)                                          # (B, L, n)
        fit = np.einsum("bsk,blk->bls", U, shrink * Uy[:, None, :])
        hat = np.einsum("bsk,blk->bls", U ** 2, shrink.astype(float)) + 1.0 / n_src
        resid = (sc[None, None, :] - fit) / np.maximum(1.0 - hat, 1e-9)
        best = np.argmin(np.mean(resid ** 2, axis=2), axis=1)
        rows = np.arange(it.shape[0])
        if loo_rows is not None:
            out[sl] = scores[loo_rows[sl]] - resid[rows, best, loo_rows[sl]]
            continue
        m = shrink[rows, best].astype(float)
        coef = np.einsum("bkn,bk->bn", Vt, np.where(m > 0, 1.0 / np.maximum(d, 1e-12), 0.0)
                         * Uy)
        x = np.where(va, target_answers[sl], 0.0) - mx[:, 0, :]
        out[sl] = scores.mean() + np.einsum("bn,bn->b", x, coef)
    return out


def greedy_items(y, s, k):
    """k items by forward selection on the source models' answers y (S x N) and scores s."""
    y = np.where(np.isfinite(y), y, np.nanmean(y, axis=0)[None, :])
    chosen = []
    cand = np.flatnonzero(y.std(0) > 0)
    for _ in range(int(k)):
        rest = np.setdiff1d(cand, chosen)
        X = np.stack([y[:, chosen + [j]] for j in rest])          # (B, S, n)
        chosen.append(int(rest[np.argmin(press_ridge(X, s))]))
    return np.asarray(chosen, int)


def design_fixed(y, tables, log_prior, fixed, budget, mix, rng, level, share, dispersion):
    """est.sequential_design after the ``fixed`` items are asked (posterior, level model and
    the 'asked before' sums start from them; they are never drawn)."""
    p, log_p, log_q = tables
    n_rows = y.shape[0]
    yv = np.nan_to_num(y)
    rows = np.arange(n_rows)
    fx = np.broadcast_to(fixed[None, :], (n_rows, len(fixed)))
    fvalid = np.isfinite(y[:, fixed])
    lp = np.tile(log_prior, (n_rows, 1))
    yf = yv[:, fixed]
    lp += np.where(fvalid, yf, 0.0) @ log_p[:, fixed].T + np.where(fvalid, 1 - yf, 0.0) @ \
        log_q[:, fixed].T
    remaining = np.isfinite(y)
    remaining[:, fixed] = False
    n = int(min(budget - len(fixed), remaining.sum(1).max()))
    out = {k: np.zeros((n_rows, n)) for k in ("q", "f", "f_rest", "g", "g_rest")}
    out["item"] = np.zeros((n_rows, n), dtype=int)
    out["valid"] = np.zeros((n_rows, n), dtype=bool)
    for k in range(n):
        live = remaining.any(1)
        f = est.posterior(lp) @ p
        g = f
        if level is not None:
            done = np.concatenate([fx, out["item"][:, :k]], axis=1)
            ok = np.concatenate([fvalid, out["valid"][:, :k]], axis=1)
            g = est.level_prediction(level, done, yv[rows[:, None], done], ok)
        q = est.draw_probabilities(f, remaining, mix, None if level is None else g, share,
                                   dispersion)
        j = est.draw_items(q, remaining, rng)
        out["item"][:, k] = j
        out["q"][:, k] = np.where(live, q[rows, j], 1.0)
        for name, pred in (("f", f), ("g", g)):
            out[name][:, k] = np.where(live, pred[rows, j], 0.0)
            out[name + "_rest"][:, k] = np.where(remaining, pred, 0.0).sum(1)
        out["valid"][:, k] = live
        remaining[rows, j] = False
        yj = yv[rows, j][:, None]
        lp += np.where(live[:, None], yj * log_p[:, j].T + (1.0 - yj) * log_q[:, j].T, 0.0)
    out["log_post"] = lp
    return out


def design_boost(y, tables, log_prior, nodes, sel, budget, mix, rng, level, share, dispersion,
                 k0, beta, theta_lo, theta_hi):
    """est.sequential_design where, from draw k0 on, a row whose theta (EAP after k0 answers)
    lies within [theta_lo, theta_hi] draws with q = (1 - beta) q_design + beta * uniform over
    its remaining ``sel`` items (while any remains): every q known and positive, so Des Raj's
    estimator and its variance stay valid."""
    p, log_p, log_q = tables
    n_rows, n_items = y.shape
    avail = np.isfinite(y)
    n = int(min(budget, avail.sum(1).max()))
    yv = np.nan_to_num(y)
    rows = np.arange(n_rows)
    lp = np.tile(log_prior, (n_rows, 1))
    remaining = avail.copy()
    in_sel = np.zeros(n_items, dtype=bool)
    in_sel[sel] = True
    inside = np.zeros(n_rows, dtype=bool)
    out = {k: np.zeros((n_rows, n)) for k in ("q", "f", "f_rest", "g", "g_rest")}
    out["item"] = np.zeros((n_rows, n), dtype=int)
    out["valid"] = np.zeros((n_rows, n), dtype=bool)
    for k in range(n):
        live = remaining.any(1)
        post = est.posterior(lp)
        f = post @ p
        if k == k0:
            th = post @ nodes
            inside = (th >= theta_lo) & (th <= theta_hi)
            STATS.append(inside.mean())
        g = f
        if level is not None:
            done = out["item"][:, :k]
            g = est.level_prediction(level, done, yv[rows[:, None], done], out["valid"][:, :k])
        q = est.draw_probabilities(f, remaining, mix, None if level is None else g, share,
                                   dispersion)
        rs = remaining & in_sel[None, :]
        boost = inside & rs.any(1)
        if boost.any():
            u = rs / np.maximum(rs.sum(1, keepdims=True), 1)
            q = np.where(boost[:, None], (1 - beta) * q + beta * u, q)
        j = est.draw_items(q, remaining, rng)
        out["item"][:, k] = j
        out["q"][:, k] = np.where(live, q[rows, j], 1.0)
        for name, pred in (("f", f), ("g", g)):
            out[name][:, k] = np.where(live, pred[rows, j], 0.0)
            out[name + "_rest"][:, k] = np.where(remaining, pred, 0.0).sum(1)
        out["valid"][:, k] = live
        remaining[rows, j] = False
        yj = yv[rows, j][:, None]
        lp += np.where(live[:, None], yj * log_p[:, j].T + (1.0 - yj) * log_q[:, j].T, 0.0)
    out["log_post"] = lp
    return out


def design_gated(y, tables, log_prior, sel, budget, mix, rng, level, share, dispersion, k0,
                 gate):
    """The shipped sequential design for k0 draws; then ``gate(k0 draws' arrays)`` (True =
    the target looks like the source models) sends a row to a certainty stratum: its ``sel``
    items not asked yet are asked at once (no draw, no Des Raj term), the rest of the budget
    drawn from the other items as before. Des Raj's terms t_k stay conditionally unbiased
    (the sums 'asked before k' include the stratum's answers), and D weights the first k0
    terms k0 / budget in all and the later ones 1 - k0 / budget (fixed in advance, so D is
    unbiased whatever the gate); Var^(D) = n / (n - 1) sum_k w_k^2 (t_k - D)^2."""
    p, log_p, log_q = tables
    n_rows, n_items = y.shape
    avail = np.isfinite(y)
    n = int(min(budget, avail.sum(1).max()))
    yv = np.nan_to_num(y)
    rows = np.arange(n_rows)
    lp = np.tile(log_prior, (n_rows, 1))
    remaining = avail.copy()
    asked = np.zeros((n_rows, n_items), dtype=bool)
    cols = {k: np.zeros((n_rows, n)) for k in ("q", "f", "f_rest", "g", "g_rest", "before")}
    item = np.zeros((n_rows, n), dtype=int)
    valid = np.zeros((n_rows, n), dtype=bool)
    fixed = np.zeros((n_rows, n_items), dtype=bool)    # asked as the stratum
    left = np.full(n_rows, n)                           # random draws still to make
    inside = np.zeros(n_rows, dtype=bool)
    for k in range(n):
        if k == k0 and k0 < n:
            inside = gate(item[:, :k], cols, valid[:, :k], lp)
            add = inside[:, None] & remaining & np.isin(np.arange(n_items), sel)[None, :]
            fixed |= add
            asked |= add
            remaining &= ~add
            left = np.where(inside, n - k - add.sum(1), n - k)
            ya = np.where(add, yv, 0.0)
            lp += ya @ log_p.T + np.where(add, 1.0 - yv, 0.0) @ log_q.T
        live = remaining.any(1) & (left > 0)
        f = est.posterior(lp) @ p
        g = f
        if level is not None:
            done = np.concatenate([item[:, :k], np.where(fixed, np.arange(n_items), 0)], 1)
            ok = np.concatenate([valid[:, :k], fixed], 1)
            g = est.level_prediction(level, done, yv[rows[:, None], done], ok)
        q = est.draw_probabilities(f, remaining, mix, None if level is None else g, share,
                                   dispersion)
        j = est.draw_items(q, remaining, rng)
        item[:, k] = j
        cols["q"][:, k] = np.where(live, q[rows, j], 1.0)
        cols["before"][:, k] = np.where(asked, yv, 0.0).sum(1)
        for name, pred in (("f", f), ("g", g)):
            cols[name][:, k] = np.where(live, pred[rows, j], 0.0)
            cols[name + "_rest"][:, k] = np.where(remaining, pred, 0.0).sum(1)
        valid[:, k] = live
        left = left - live
        remaining[rows[live], j[live]] = False
        asked[rows[live], j[live]] = True
        yj = yv[rows, j][:, None]
        lp += np.where(live[:, None], yj * log_p[:, j].T + (1.0 - yj) * log_q[:, j].T, 0.0)
    return dict(item=item, valid=valid, fixed=fixed, asked=asked, log_post=lp,
                inside=inside, **cols)


def design_gslope(y, tables, log_prior, budget, mix, rng, level, share, dispersion, k0,
                  slope_phi, gate):
    """est.sequential_design for k0 draws; then ``gate(k0 draws' arrays)`` (True = inside the
    source models) switches a row's later draws to the slope-leaning probabilities (dispersion
    ``slope_phi`` = phi_j a_j^(2g)); outside rows keep the shipped q. Every q is known and
    positive when drawn, so each Des Raj term stays conditionally unbiased: D, its SE, M and R
    come from the shipped estimate of these arrays (equal weights). ``gate`` may be a dict
    {k: gate after k draws} (rgslope): inside after a check = inside before it and the gate's
    inside (once out, out); ``checks`` in the result: k -> the share inside after it."""
    p, log_p, log_q = tables
    n_rows = y.shape[0]
    avail = np.isfinite(y)
    n = int(min(budget, avail.sum(1).max()))
    yv = np.nan_to_num(y)
    rows = np.arange(n_rows)
    lp = np.tile(log_prior, (n_rows, 1))
    remaining = avail.copy()
    out = {k: np.zeros((n_rows, n)) for k in ("q", "f", "f_rest", "g", "g_rest")}
    out["item"] = np.zeros((n_rows, n), dtype=int)
    out["valid"] = np.zeros((n_rows, n), dtype=bool)
    inside = np.zeros(n_rows, dtype=bool)
    gates = gate if isinstance(gate, dict) else {k0: gate}
    checks = {}
    for k in range(n):
        if k in gates:
            g_in = np.asarray(gates[k](out["item"][:, :k], out, out["valid"][:, :k], lp), bool)
            inside = g_in if k == min(gates) else inside & g_in
            checks[k] = float(inside.mean())
        live = remaining.any(1)
        f = est.posterior(lp) @ p
        g = f
        if level is not None:
            done = out["item"][:, :k]
            g = est.level_prediction(level, done, yv[rows[:, None], done], out["valid"][:, :k])
        gl = None if level is None else g
        q = est.draw_probabilities(f, remaining, mix, gl, share, dispersion)
        if inside.any():
            q = np.where(inside[:, None], est.draw_probabilities(f, remaining, mix, gl, share,
                                                                 slope_phi), q)
        j = est.draw_items(q, remaining, rng)
        out["item"][:, k] = j
        out["q"][:, k] = np.where(live, q[rows, j], 1.0)
        for name, pred in (("f", f), ("g", g)):
            out[name][:, k] = np.where(live, pred[rows, j], 0.0)
            out[name + "_rest"][:, k] = np.where(remaining, pred, 0.0).sum(1)
        out["valid"][:, k] = live
        remaining[rows, j] = False
        yj = yv[rows, j][:, None]
        lp += np.where(live[:, None], yj * log_p[:, j].T + (1.0 - yj) * log_q[:, j].T, 0.0)
    out["log_post"] = lp
    out["inside"] = inside
    out["checks"] = checks
    return out


def gated_design_estimate(d, yv, k0, budget, level):
    """(total, SE) of the gated design's weighted Des Raj estimate."""
    item, valid = d["item"], d["valid"]
    y_drawn = np.take_along_axis(yv, item, axis=1)
    qv = np.where(valid, d["q"], 1.0)

    def terms(f, rest):
        return np.where(valid, d["before"] + rest + (y_drawn - f) / qv, 0.0)

    t = terms(d["f"], d["f_rest"])
    if level is not None:
        t2 = terms(d["g"], d["g_rest"])
        w = est.predictable_weights(t, t2, valid)
        t = np.where(valid, w * t + (1.0 - w) * t2, 0.0)
    n = valid.sum(1)
    early = np.arange(item.shape[1])[None, :] < k0
    n_late = np.maximum((valid & ~early).sum(1), 1)
    wk = np.where(early, 1.0 / budget, (1.0 - k0 / budget) / n_late[:, None])
    wk = np.where(valid, wk, 0.0)
    wk = wk / wk.sum(1, keepdims=True)
    total = (wk * t).sum(1)
    var = n / np.maximum(n - 1, 1) * (wk ** 2 * np.where(valid, (t - total[:, None]) ** 2,
                                                          0.0)).sum(1)
    return total, np.sqrt(var)


class Study(BenchmarkPredictor):
    """The shipped predictor with a certainty stratum (n_fixed) and / or the cvw weight."""

    n_fixed = 0
    cvw = False
    boost = None           # (k, beta, k0, theta margin)
    gated = None           # (k, k0)
    gslope = None          # (power g, k0)
    rgslope = False        # gslope's gate checked again every 10 draws after k0
    slope_power = 0.0      # draws by a_j ** power * sqrt(phi f (1 - f))
    pcr = False            # G = the mean of the calibrated M, R and PCR predictions

    def _calibrated(self, arr):
        if self.pcr and "pcr" in arr and getattr(self, "pcr_stack_", None) is not None:
            c = self.pcr_stack_     # from 40 source models: alpha + beta M + gamma R + delta P
            return c[0] + c[1] * arr["model"] + c[2] * arr["ridge"] + c[3] * arr["pcr"]
        if self.pcr and "pcr" in arr:
            return np.mean([a + b * arr[k] for (a, b), k in
                            zip(self.lines_, ("model", "ridge", "pcr"))], axis=0)
        return super()._calibrated(arr)

    def _slope_arrays(self, y, rng, budget=None, loo_rows=None):
        budget = int(self.budget if budget is None else budget)
        tables, nodes, log_prior = self._grid()
        phi = getattr(self, "dispersion_", None)
        phi = (1.0 if phi is None else phi) * np.abs(self.a_) ** (2 * self.slope_power)
        d = est.sequential_design(y, tables, log_prior, budget, float(self.mix), rng,
                                  level=self._level(), share=float(self.share), dispersion=phi)
        rows = np.broadcast_to(np.arange(y.shape[0])[:, None], d["item"].shape)
        asked = np.zeros(y.shape, dtype=bool)
        asked[rows[d["valid"]], d["item"][d["valid"]]] = True
        out = self._estimate(y, np.isfinite(y), asked, d["item"], d["q"], d["f"], d["f_rest"],
                             d["log_post"], d["valid"], d["g"], d["g_rest"], loo_rows)
        out["item"], out["valid"] = d["item"], d["valid"]
        return out

    def gate_checks(self):
        """The draws after which the gate is checked: k0 (gslope), or k0, k0 + 10, ... below
        the budget (rgslope)."""
        k0 = int(self.gslope[1])
        return list(range(k0, int(self.budget), 10)) if self.rgslope else [k0]

    def _gate_predictor(self, k0, bank, source, rng):
        """The shipped predictor at budget k0 (this one's settings), whose outside test is
        the gate of gated<k>_<k0> and gslope<g>_<k0>."""
        return BenchmarkPredictor(**{**self.get_params(), "budget": int(k0)}).fit(
            bank, source, rng=rng)

    def fit(self, bank, source, scores=None, *, rng=None):
        y = source.values
        truth = np.nanmean(y, axis=1)
        self.fixed_ = greedy_items(y, truth, self.n_fixed) if self.n_fixed else None
        self.sel_ = None
        if self.gated is not None:
            self.gsel_ = greedy_items(y, truth, int(self.gated[0]))
            self.gate_pred_ = self._gate_predictor(int(self.gated[1]), bank, source, rng)
        if self.gslope is not None:
            self.gate_pred_ = self._gate_predictor(int(self.gslope[1]), bank, source, rng)
            self.gate_preds_ = {int(self.gslope[1]): self.gate_pred_}
            if self.rgslope:
                for k in self.gate_checks():
                    if k not in self.gate_preds_:
                        self.gate_preds_[k] = self._gate_predictor(k, bank, source, rng)
        if self.boost is not None:
            self.sel_ = greedy_items(y, truth, int(self.boost[0]))
            self.fixed_ = None
        self._bank, self._source = bank, source
        super().fit(bank, source, scores, rng=rng)
        return self

    def _replay_arrays(self, y, rng, budget=None, loo_rows=None):
        if self.pcr:
            from atlascat.predict.predictor import _line

            out = super()._replay_arrays(y, rng, budget, loo_rows)
            yv = np.nan_to_num(y)
            y_items = np.take_along_axis(yv, out["item"], axis=1)
            out["pcr"] = pcr_scores(self._ridge_design(), self.ridge_scores_, out["item"],
                                    out["valid"], None if loo_rows is not None else y_items,
                                    None if loo_rows is None else np.asarray(loo_rows))
            if loo_rows is not None:
                t = self.ridge_scores_[np.asarray(loo_rows)]
                self.lines_ = [_line(out[k], t) for k in ("model", "ridge", "pcr")]
                self.pcr_stack_ = None
                if len(self.ridge_scores_) >= RIDGE_FIT_MIN_MODELS:   # the shipped rule's
                    X = np.column_stack([np.ones_like(t)] + [out[k] for k in       # stacking
                                                             ("model", "ridge", "pcr")])
                    self.pcr_stack_ = np.linalg.lstsq(X, t, rcond=None)[0]
            return out
        if self.slope_power:
            return self._slope_arrays(y, rng, budget, loo_rows)
        if self.gated is not None:
            return self._gated_arrays(y, rng, budget, loo_rows)
        if self.gslope is not None:
            return self._gslope_arrays(y, rng, budget, loo_rows)
        if getattr(self, "sel_", None) is not None:
            if not hasattr(self, "src_theta_"):
                tables, nodes, log_prior = self._grid()
                yy = self._source.values
                d0 = est.sequential_design(yy, tables, log_prior, int(self.boost[2]),
                                           float(self.mix), np.random.default_rng(12345),
                                           level=self._level(), share=float(self.share),
                                           dispersion=getattr(self, "dispersion_", None))
                th = est.posterior(d0["log_post"]) @ nodes
                self.src_theta_ = (th.min() - self.boost[3], th.max() + self.boost[3])
            budget = int(self.budget if budget is None else budget)
            tables, nodes, log_prior = self._grid()
            k, beta, k0, _ = self.boost
            d = design_boost(y, tables, log_prior, nodes, self.sel_, budget, float(self.mix),
                             rng, self._level(), float(self.share),
                             getattr(self, "dispersion_", None), int(k0), float(beta),
                             *self.src_theta_)
            rows = np.broadcast_to(np.arange(y.shape[0])[:, None], d["item"].shape)
            asked = np.zeros(y.shape, dtype=bool)
            asked[rows[d["valid"]], d["item"][d["valid"]]] = True
            out = self._estimate(y, np.isfinite(y), asked, d["item"], d["q"], d["f"],
                                 d["f_rest"], d["log_post"], d["valid"], d["g"], d["g_rest"],
                                 loo_rows)
            out["item"], out["valid"] = d["item"], d["valid"]
            return out
        if self.fixed_ is None:
            return super()._replay_arrays(y, rng, budget, loo_rows)
        budget = int(self.budget if budget is None else budget)
        fixed = self.fixed_
        tables, nodes, log_prior = self._grid()
        level = self._level()
        d = design_fixed(y, tables, log_prior, fixed, budget, float(self.mix), rng, level,
                         float(self.share), getattr(self, "dispersion_", None))
        n_rows = y.shape[0]
        rows = np.broadcast_to(np.arange(n_rows)[:, None], d["item"].shape)
        avail = np.isfinite(y)
        asked = np.zeros(y.shape, dtype=bool)
        asked[rows[d["valid"]], d["item"][d["valid"]]] = True
        fvalid = avail[:, fixed]
        asked[:, fixed] = fvalid
        yv = np.nan_to_num(y)
        y_drawn = np.take_along_axis(yv, d["item"], axis=1)
        g = g_rest = None
        if level is not None:
            g, g_rest = d["g"], d["g_rest"]
        total_b, se_total = est.des_raj(y_drawn, d["q"], d["f"], d["f_rest"], d["valid"], g,
                                        g_rest)
        total = total_b + np.where(fvalid, yv[:, fixed], 0.0).sum(1)
        n_avail = np.maximum(avail.sum(1), 1)
        model, theta = est.model_prediction(y, asked, avail, tables, nodes, d["log_post"])
        design, se = total / n_avail, np.minimum(se_total / n_avail, 1.0)
        items = np.concatenate([np.broadcast_to(fixed[None, :], (n_rows, len(fixed))),
                                d["item"]], axis=1)
        valid = np.concatenate([fvalid, d["valid"]], axis=1)
        out = dict(model=model, design=design, se=se, theta=theta, n=asked.sum(1),
                   item=items, valid=valid)
        if self.ridge_answers_ is not None:
            y_items = np.take_along_axis(yv, items, axis=1)
            out["ridge"] = regression.ridge_scores(
                self._ridge_design(), self.ridge_scores_, items, valid,
                None if loo_rows is not None else y_items, loo_rows)
        return out


def _gated_arrays(self, y, rng, budget=None, loo_rows=None):
    budget = int(self.budget if budget is None else budget)
    k0 = int(self.gated[1])
    tables, nodes, log_prior = self._grid()
    yv = np.nan_to_num(y)
    gate = outside_gate(self.gate_pred_, y, k0, loo_rows)
    d = design_gated(y, tables, log_prior, self.gsel_, budget, float(self.mix), rng,
                     self._level(), float(self.share), getattr(self, "dispersion_", None), k0,
                     gate)
    STATS.append(d["inside"].mean())
    avail = np.isfinite(y)
    n_avail = np.maximum(avail.sum(1), 1)
    total, se_total = gated_design_estimate(d, yv, k0, budget, self._level())
    model, theta = est.model_prediction(y, d["asked"], avail, tables, nodes, d["log_post"])
    design, se = total / n_avail, np.minimum(se_total / n_avail, 1.0)
    # the stratum's items as extra columns for the ridge part and replay's bookkeeping
    nf = int(d["fixed"].sum(1).max()) if d["fixed"].any() else 0
    fi = np.zeros((y.shape[0], nf), dtype=int)
    fv = np.zeros((y.shape[0], nf), dtype=bool)
    for r in np.flatnonzero(d["fixed"].any(1)):
        idx = np.flatnonzero(d["fixed"][r])
        fi[r, :len(idx)], fv[r, :len(idx)] = idx, True
    items = np.concatenate([d["item"], fi], 1)
    valid = np.concatenate([d["valid"], fv], 1)
    out = dict(model=model, design=design, se=se, theta=theta, n=d["asked"].sum(1),
               item=items, valid=valid)
    if self.ridge_answers_ is not None:
        y_items = np.take_along_axis(yv, items, axis=1)
        out["ridge"] = regression.ridge_scores(
            self._ridge_design(), self.ridge_scores_, items, valid,
            None if loo_rows is not None else y_items, loo_rows)
    return out


Study._gated_arrays = _gated_arrays


def outside_gate(gp, y, k0, loo_rows):
    """gate(item, cols, valid, log_post) after k0 draws: True where the predictor ``gp``
    (fitted at budget k0) does not call the row outside the source models (its ``_combine``
    without the answers, i.e. no small-sample SE)."""
    def gate(item, cols, valid, lp):
        asked = np.zeros(y.shape, dtype=bool)
        r = np.broadcast_to(np.arange(y.shape[0])[:, None], item.shape)
        asked[r[valid], item[valid]] = True
        c = {k: v[:, :k0] for k, v in cols.items()}
        arr = gp._estimate(y, np.isfinite(y), asked, item, c["q"], c["f"], c["f_rest"], lp,
                           valid, c["g"], c["g_rest"], loo_rows)
        arr["item"] = item
        _, _, _, _, outside, _ = gp._combine(arr)
        return ~outside
    return gate


def _gslope_arrays(self, y, rng, budget=None, loo_rows=None):
    budget = int(self.budget if budget is None else budget)
    power, k0 = float(self.gslope[0]), int(self.gslope[1])
    tables, nodes, log_prior = self._grid()
    phi = getattr(self, "dispersion_", None)
    slope_phi = (1.0 if phi is None else phi) * np.abs(self.a_) ** (2 * power)
    gates = {k: outside_gate(self.gate_preds_[k], y, k, loo_rows) for k in self.gate_checks()
             if k < budget}
    d = design_gslope(y, tables, log_prior, budget, float(self.mix), rng, self._level(),
                      float(self.share), phi, k0, slope_phi, gates)
    if loo_rows is None:
        STATS.append(d["inside"].mean())
        for k, share in d["checks"].items():
            STATS_K.setdefault(k, []).append(share)
    rows = np.broadcast_to(np.arange(y.shape[0])[:, None], d["item"].shape)
    asked = np.zeros(y.shape, dtype=bool)
    asked[rows[d["valid"]], d["item"][d["valid"]]] = True
    out = self._estimate(y, np.isfinite(y), asked, d["item"], d["q"], d["f"], d["f_rest"],
                         d["log_post"], d["valid"], d["g"], d["g_rest"], loo_rows)
    out["item"], out["valid"] = d["item"], d["valid"]
    return out


Study._gslope_arrays = _gslope_arrays


def honest_model(pred, bank_fit, source, rng, folds=5):
    """Each source model's replayed M from a bank calibrated without it (cross-fitting)."""
    import warnings

    from atlascat.irt.calibrate import Calibrator

    y = source.values
    n = y.shape[0]
    fold = np.arange(n) % folds
    out = {}
    for f in range(folds):
        keep = fold != f
        sub = ResponseMatrix(y[keep], list(np.asarray(source.subject_ids)[keep]),
                             list(source.item_ids))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bank = Calibrator(dispersion="auto").fit(sub).bank_
        p = pred.__class__(pred.budget, ridge=False)
        p.n_fixed, p.cvw = pred.n_fixed, False
        p.fixed_ = pred.fixed_
        p.item_ids_ = pred.item_ids_
        from atlascat.predict.predictor import _full_params

        p.a_, p.b_, p.c_, p.u_ = _full_params(bank, list(pred.item_ids_), np.nanmean(y, 0))
        p.dispersion_ = pred.dispersion_
        p.level_x_, p.level_c0_ = pred.level_x_, pred.level_c0_
        p.score_map_ = None
        p.ridge_answers_ = None
        rows = np.repeat(np.flatnonzero(~keep), int(pred.n_replays))
        arr = p._replay_arrays(y[rows], rng)
        ridge = regression.ridge_scores(pred._ridge_design(), pred.ridge_scores_, arr["item"],
                                        arr["valid"], None, rows)
        out[f] = (rows, arr["model"], ridge)
    return tuple(np.concatenate([v[i] for v in out.values()]) for i in range(3))


def make(variant, budget, seed, bank, source, **settings):
    p = Study(budget, **settings)
    p.pcr = variant == "pcr"
    if variant.startswith("slope"):      # slope<power>
        p.slope_power = float(variant[5:])
    if variant.startswith("gslope"):     # gslope<power>_<k0>
        g, k0 = variant[6:].split("_")
        p.gslope = (float(g), int(k0))
    if variant.startswith("rgslope"):    # rgslope<power>_<k0>: checks at k0, k0 + 10, ...
        g, k0 = variant[7:].split("_")
        p.gslope, p.rgslope = (float(g), int(k0)), True
    if variant.startswith("gated"):      # gated<k>_<k0>
        p.gated = tuple(int(v) for v in variant[5:].split("_"))
    if variant.startswith("boost"):      # boost<k>_<beta>_<k0>_<margin>
        p.boost = tuple(float(v) for v in variant[5:].split("_"))
    p.n_fixed = int(variant.split("+")[0][5:]) if variant.startswith("fixed") else 0
    p.cvw = variant.endswith("cvw")
    t0 = time.time()
    p.fit(bank, source, rng=seed)
    p.fit_seconds_ = time.time() - t0
    if p.cvw:
        from atlascat.predict.predictor import _line

        truth = np.nanmean(source.values, axis=1)
        rng = np.random.default_rng([seed, 7])
        rows, m_h, r_h = honest_model(p, bank, source, rng)
        t_h = truth[rows]
        reps = np.repeat(np.arange(source.n_subjects), int(p.n_replays))
        arr = p._replay_arrays(source.values[reps], np.random.default_rng([seed, 8]),
                               loo_rows=reps)
        a_m, b_m = _line(m_h, t_h)
        a_r, b_r = _line(r_h, t_h)
        gm, gr = a_m + b_m * m_h, a_r + b_r * r_h
        ws = np.linspace(0, 1, 5)
        err = [np.mean((w * gm + (1 - w) * gr - t_h) ** 2) for w in ws]
        w = float(ws[int(np.argmin(err))])
        # keep the shipped lines (in-sample M) but the chosen weight
        (am0, bm0), (ar0, br0) = _line(arr["model"], truth[reps]), _line(arr["ridge"],
                                                                           truth[reps])
        p.alpha_ = w * am0 + (1 - w) * ar0
        p.beta_, p.gamma_ = w * bm0, (1 - w) * br0
        g = p.alpha_ + p.beta_ * arr["model"] + p.gamma_ * arr["ridge"]
        p.tau2_ = float(max(np.mean((truth[reps] - g) ** 2), p.min_tau ** 2))
        p.cvw_w_ = w
    return p


def bounds():
    """(task, split) -> the bound on LongBench: the best peer's expected MAE (the mean of
    peers_draws.csv's mae_points over seeds and draws, min over methods), x 1.0 on
    interpolation, x 1.1 on extrapolation."""
    d = pd.read_csv(PEERS)
    best = d.groupby(["task", "split", "method"]).mae_points.mean().groupby(
        level=[0, 1]).min()
    return {k: v * (1.0 if k[1] == "interpolation" else 1.1) for k, v in best.items()}


def _cov_gap(c):
    return max(0.90 - c, c - 0.99, 0.0)


def verdict(path_a, path_b, strict_b=False):
    """The pre-registered rule on the rows of A and B: per variant the summed MAE on each,
    the failed clauses (with the rows that fail them) and the winner (or None). Clause (1)
    on B: not above base's sum (the first rule) or, with ``strict_b``, below it (gslope's)."""
    a, b = pd.read_csv(path_a), pd.read_csv(path_b)
    bnd = bounds()
    out, wins = {}, {}
    for v in sorted(set(a.variant) - {"base"}):
        fails = {1: [], 2: [], 3: [], 4: []}
        sums = {}
        for tag, d in (("A", a), ("B", b)):
            base = d[d.variant == "base"].set_index(["task", "split"])
            var = d[d.variant == v].set_index(["task", "split"]).reindex(base.index)
            sums[tag] = (base.mae.sum(), var.mae.sum())
            for key in base.index:
                bm, vm = base.mae[key], var.mae[key]
                tol = 0.05 if bm < 2.5 else 0.02 * bm
                if vm - bm > tol:
                    fails[2].append(f"{tag} {key[0]} {key[1]} {bm:.3f} -> {vm:.3f}")
                gb, gv = _cov_gap(base.coverage[key]), _cov_gap(var.coverage[key])
                if gv > 0 and gv > gb:
                    fails[3].append(f"{tag} {key[0]} {key[1]} coverage {var.coverage[key]:.3f}")
                if tag == "A" and bm <= bnd[key] < vm:
                    fails[4].append(f"A {key[0]} {key[1]} {vm:.3f} > bound {bnd[key]:.3f}")
        if not sums["A"][1] < sums["A"][0]:
            fails[1].append(f"A summed {sums['A'][0]:.3f} -> {sums['A'][1]:.3f}")
        if sums["B"][1] > sums["B"][0] or (strict_b and not sums["B"][1] < sums["B"][0]):
            fails[1].append(f"B summed {sums['B'][0]:.3f} -> {sums['B'][1]:.3f}")
        out[v] = dict(sums=sums, fails={k: f for k, f in fails.items() if f})
        if not out[v]["fails"]:
            wins[v] = sums["A"][1] + sums["B"][1]
    winner = min(wins, key=wins.get) if wins else None
    return out, winner


def verdict_confirm(path, variant="rgslope1_20"):
    """The confirmation's rule on the rows of C: summed MAE of base and ``variant``, the failed
    clauses (with their rows), and per clause the rows nearest its limit (clause 2: the largest
    share of the tolerance used; clause 3: the coverages nearest 0.90 or 0.99)."""
    d = pd.read_csv(path)
    base = d[d.variant == "base"].set_index(["task", "split"])
    var = d[d.variant == variant].set_index(["task", "split"]).reindex(base.index)
    fails, near2, near3 = {1: [], 2: [], 3: []}, [], []
    for key in base.index:
        bm, vm = base.mae[key], var.mae[key]
        tol = 0.05 if bm < 2.5 else 0.02 * bm
        near2.append(((vm - bm) / tol, f"{key[0]} {key[1]} {bm:.3f} -> {vm:.3f} "
                      f"({vm - bm:+.3f} of {tol:.3f})"))
        if vm - bm > tol:
            fails[2].append(near2[-1][1])
        c = var.coverage[key]
        gb, gv = _cov_gap(base.coverage[key]), _cov_gap(c)
        near3.append((min(c - 0.90, 0.99 - c), f"{key[0]} {key[1]} coverage "
                      f"{base.coverage[key]:.3f} -> {c:.3f}"))
        if gv > 0 and gv > gb:
            fails[3].append(near3[-1][1])
    sums = (base.mae.sum(), var.mae.sum())
    if not sums[1] < sums[0]:
        fails[1].append(f"summed {sums[0]:.3f} -> {sums[1]:.3f}")
    fails = {k: f for k, f in fails.items() if f}
    return dict(sums=sums, fails=fails, confirmed=not fails,
                near2=[t for _, t in sorted(near2, reverse=True)[:3]],
                near3=[t for _, t in sorted(near3)[:3]])


BP_CACHE = Path(tempfile.gettempdir()) / "atlas_benchpred_cache"


def cached_binary_bank(name, df, split, seed):
    """Calibrator()'s bank on the source models of a BenchPred matrix (dataset, split, seed),
    as bench_benchpred.run_library fits it, cached on disk."""
    import pickle
    import warnings

    from atlascat.irt.calibrate import Calibrator

    BP_CACHE.mkdir(parents=True, exist_ok=True)
    path = BP_CACHE / f"{name}_{split}_{seed}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    full = df.to_numpy(float)
    src, _ = split_models(full, split, seed, df.index)
    source = ResponseMatrix(full[src], [f"m{i}" for i in src], [str(c) for c in df.columns])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bank = Calibrator().fit(source).bank_
    path.write_bytes(pickle.dumps(bank))
    return bank


def offset_replays(pred, targets, seed, replays, offset):
    """Draws k = offset .. offset + replays - 1 of the fitted predictor, each from
    ``[seed + 1000, k]`` (one Generator for all targets)."""
    p = pd.concat([pred.replay(targets, rng=[seed + 1000, k]) for k in
                   range(offset, offset + replays)], ignore_index=True)
    p["subject_id"] = p.subject_id.astype(str)
    return p


V1_DENSE = ("arc", "gsm8k", "hellaswag", "truthfulqa", "winogrande", "mmlu")
DENSE_MODELS = 200


def dense_subset(name, seed, n=DENSE_MODELS):
    """Data C of the confirmation: ``openllm/dense_<name>.csv.gz`` (bench_benchpred.read_matrix:
    all-zero models dropped), the ``n`` rows of ``default_rng([seed, 2026])`` without
    replacement, in the file's order."""
    df = bp.read_matrix(bp.DATA.parent / "openllm" / f"dense_{name}.csv.gz")
    rows = np.sort(np.random.default_rng([seed, 2026]).choice(len(df), n, replace=False))
    return df.iloc[rows]


def _frame(name, seed, dense):
    """(bank cache key, matrix, chance) of a dataset for a seed: BenchPred's matrix (the same
    for every seed) or, with ``dense``, the seed's subset of a v1 dense matrix."""
    if dense:
        from atlascat.scorelink.settings import ANSWER_CHANCE

        return f"v1dense_{name}_n{DENSE_MODELS}", dense_subset(name, seed), ANSWER_CHANCE[name]
    return name, bp.load(name), bp.CHANCE[name]


def run_benchpred(names, variants, seeds, replays, offset=0, dense=False):
    """Data B of the pre-registration: bench_benchpred's library path (``--set ... --replays
    K``: its split, Calibrator()'s bank, chance, fit(rng=seed), replays_of) per variant, the
    bank and draws shared by the variants; with ``offset``, draws offset .. offset + K - 1
    (:func:`offset_replays`). With ``dense``, data C of the confirmation (:func:`_frame`)."""
    rows = []
    for name in names:
        for split in bp.SPLITS:
            for v in variants:
                t0, parts, inside, checks, fit_s = time.time(), [], [], {}, []
                for seed in range(seeds):
                    key, df, chance = _frame(name, seed, dense)
                    full = df.to_numpy(float)
                    ids = [str(c) for c in df.columns]
                    src, tgt = split_models(full, split, seed, df.index)
                    source = ResponseMatrix(full[src], [f"m{i}" for i in src], ids)
                    targets = ResponseMatrix(full[tgt], [f"m{i}" for i in tgt], ids)
                    bank = cached_binary_bank(key, df, split, seed)
                    pred = make(v, 50, seed, bank, source, chance=chance)
                    fit_s.append(pred.fit_seconds_)
                    truth = pd.Series(full[tgt].mean(axis=1), index=[f"m{i}" for i in tgt])
                    STATS.clear()
                    STATS_K.clear()
                    if offset:
                        p = offset_replays(pred, targets, seed, replays, offset)
                    else:
                        _, p = replays_of(pred, targets, seed, replays)
                    parts.append(_metrics(p, truth))
                    inside.append(np.mean(STATS) if STATS else np.nan)
                    for k, sh in STATS_K.items():
                        checks.setdefault(k, []).append(np.mean(sh))
                d = pd.DataFrame(parts)
                r = {"task": f"dense_{name}" if dense else name, "split": split, "variant": v, "mae": d.mae.mean(),
                     "coverage": d.n_hits.sum() / d.n_targets.sum(), "width": d.width.mean(),
                     "design_mae": d.design_mae.mean(), "model_mae": d.model_mae.mean(),
                     "outside": d.outside.mean(), "n_source": len(src),
                     "inside": np.mean(inside), "seconds": time.time() - t0,
                     "fit_seconds": np.mean(fit_s),
                     **{f"inside_{k}": np.mean(c) for k, c in sorted(checks.items())}}
                rows.append(r)
                print(f"{name:21s} {split:13s} {v:12s} MAE {r['mae']:5.2f} cov "
                      f"{r['coverage']:.3f} D {r['design_mae']:5.2f} M {r['model_mae']:5.2f}"
                      f" ({r['seconds']:.0f}s)", flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--draw-offset", type=int, default=0,
                    help="other draws of the same rows (the noise of --replays K)")
    ap.add_argument("--out", default=None, help="CSV of the rows (task, split, variant)")
    ap.add_argument("--benchpred", default=None, metavar="DATASETS",
                    help="the binary BenchPred matrices instead (comma-separated, or 'default': "
                         "bench_benchpred's NAMES), bench_benchpred's library path")
    ap.add_argument("--dense", default=None, metavar="DATASETS",
                    help="data C of the confirmation: the v1 dense matrices (comma-separated "
                         "of arc,gsm8k,hellaswag,truthfulqa,winogrande,mmlu, or 'default': "
                         "all six), 200 models per seed, the --benchpred mode's path")
    ap.add_argument("--verdict", nargs="+", metavar="CSV", default=None,
                    help="apply the pre-registered rule to the rows of A and B (or, with "
                         "--rule confirm, of C); nothing run")
    ap.add_argument("--rule", choices=("prereg", "gslope", "confirm"), default="prereg",
                    help="which pre-registered rule --verdict applies (clause 1 on B: not "
                         "above base's sum, or below it; confirm: the confirmation's on C)")
    a = ap.parse_args(argv)
    if a.verdict and a.rule == "confirm":
        r = verdict_confirm(a.verdict[0])
        print(f"rgslope1_20: summed {r['sums'][0]:.3f} -> {r['sums'][1]:.3f}; failed clauses "
              f"{sorted(r['fails']) or 'none'}; confirmed: {r['confirmed']}")
        for k, f in r["fails"].items():
            for line in f:
                print(f"  ({k}) {line}")
        print("nearest clause 2: " + "; ".join(r["near2"]))
        print("nearest clause 3: " + "; ".join(r["near3"]))
        return
    if a.verdict:
        if len(a.verdict) != 2:
            ap.error("--verdict needs CSV_A and CSV_B")
        res, winner = verdict(*a.verdict, strict_b=a.rule == "gslope")
        for v, r in res.items():
            (a0, a1), (b0, b1) = r["sums"]["A"], r["sums"]["B"]
            print(f"{v}: A {a0:.3f} -> {a1:.3f}, B {b0:.3f} -> {b1:.3f}; failed clauses "
                  f"{sorted(r['fails']) or 'none'}")
            for k, f in r["fails"].items():
                for line in f:
                    print(f"  ({k}) {line}")
        print(f"winner: {winner}")
        return
    variants = a.variant or ["base"]
    rows = []
    t_all = time.time()
    if a.benchpred:
        names = bp.NAMES if a.benchpred == "default" else a.benchpred.split(",")
        rows = run_benchpred(names, variants, a.seeds, a.replays, a.draw_offset)
    if a.dense:
        names = V1_DENSE if a.dense == "default" else a.dense.split(",")
        rows = run_benchpred(names, variants, a.seeds, a.replays, a.draw_offset, dense=True)
    for task in ([] if a.benchpred or a.dense else a.tasks.split(",")):
        df = load(task)
        full = df.to_numpy(float)
        ids = [str(c) for c in df.columns]
        for split in a.splits.split(","):
            for v in variants:
                t0, parts, extra, inside, checks, fit_s = time.time(), [], [], [], {}, []
                for seed in range(a.seeds):
                    src, tgt = split_models(full, split, seed)
                    source = ResponseMatrix(full[src], [f"m{i}" for i in src], ids)
                    targets = ResponseMatrix(full[tgt], [f"m{i}" for i in tgt], ids)
                    bank = cached_bank(task, df, split, seed)
                    pred = make(v, 50, seed, bank, source)
                    fit_s.append(pred.fit_seconds_)
                    truth = pd.Series(full[tgt].mean(axis=1), index=[f"m{i}" for i in tgt])
                    STATS.clear()
                    STATS_K.clear()
                    if a.draw_offset:       # draws k = offset .. offset + replays - 1
                        p = offset_replays(pred, targets, seed, a.replays, a.draw_offset)
                    else:
                        _, p = replays_of(pred, targets, seed, a.replays)
                    if STATS:
                        print(f"  seed {seed} share the gate calls inside {np.mean(STATS):.2f}")
                    parts.append(_metrics(p, truth))
                    extra.append(getattr(pred, "cvw_w_", np.nan))
                    inside.append(np.mean(STATS) if STATS else np.nan)
                    for k, sh in STATS_K.items():
                        checks.setdefault(k, []).append(np.mean(sh))
                d = pd.DataFrame(parts)
                r = {"task": task, "split": split, "variant": v, "mae": d.mae.mean(),
                     "coverage": d.n_hits.sum() / d.n_targets.sum(), "width": d.width.mean(),
                     "design_mae": d.design_mae.mean(), "model_mae": d.model_mae.mean(),
                     "outside": d.outside.mean(), "w": np.nanmean(extra) if v.endswith(
                         "cvw") else np.nan, "inside": np.mean(inside),
                     "seconds": time.time() - t0, "fit_seconds": np.mean(fit_s),
                     **{f"inside_{k}": np.mean(c) for k, c in sorted(checks.items())}}
                rows.append(r)
                print(f"{task:21s} {split:13s} {v:12s} MAE {r['mae']:5.2f} cov "
                      f"{r['coverage']:.3f} D {r['design_mae']:5.2f} M {r['model_mae']:5.2f}"
                      f" w {r['w']:.2f} ({time.time() - t0:.0f}s)", flush=True)
    res = pd.DataFrame(rows)
    if a.out:
        res.round(4).to_csv(a.out, index=False)
    print(res.pivot_table(index=["task", "split"], columns="variant", values="mae",
                          sort=False).round(2).to_string())
    print(res.groupby("variant").mae.sum().round(2).to_string())
    print(f"total {time.time() - t_all:.0f}s")


if __name__ == "__main__":
    main()
