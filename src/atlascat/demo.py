"""``python -m atlascat.demo`` (``make demo``): the whole ATLAS pipeline on bundled real data.

On the Open LLM Leaderboard ARC matrix shipped with the package (2193 models x 317 items, fully
observed): split the models 90/10 by total score, filter items and calibrate a bank on the
train models (2PL or 3PL, chosen by BIC on the train answers: ARC's 4-choice items get a 3PL), summarize the fit, run ATLAS CAT (tau = 0.1, 0.2, 0.3) and the static baselines on
the held-out models' real answers, print the comparison tables, and write the run directory and a
self-contained HTML report (default under ``./out/demo``). No network, under a minute on two cores.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["main"]


def _fit_lines(run) -> list[str]:
    from .studies.report import calibration_words

    cal = run.info.get("calibration", {})
    flt = run.info.get("filter", {})
    lines = [
        f"  models: {run.info['n_models']} ({run.info['n_train']} train, {run.info['n_test']} test)",
        f"  items: {run.info['n_items_matrix']} in the matrix, {run.info['n_bank_items']} in the "
        f"bank after filtering ({flt.get('dropped_items_by_reason', {})})",
        f"  calibration: {calibration_words(cal)}",
    ]
    sel = cal.get("model_selection")
    if sel:
        lines.append("  model choice (BIC on the train models, smaller is better): " + ", ".join(
            f"{r['model']} {r['bic']:.0f}" for r in sel["candidates"]) + f" -> {cal.get('model')}")
    val = run.info.get("se_calibration", {})
    if val.get("factors"):
        lines.append(f"  CAT SE factor k on {val['n_validation']} validation train models "
                     "(reported as 'Cov. (val.-calibrated SE)' next to the raw coverage): "
                     + ", ".join(f"tau={float(t):g}: {k:.2f}" for t, k in val["factors"].items()))
    fit = run.info.get("fit")
    if fit:
        lines.append(f"  model fit (M2 over {fit.get('n_partitions', '?')} item partitions, mean): "
                     + ", ".join(f"{k} {fit[k]:.3f}" for k in ("RMSEA", "SRMSR", "CFI", "TLI")
                                 if k in fit))
    q = run.bank.summary()["quantiles"]
    lines.append(f"  bank: median a {q['a']['median']:.2f}, b in [{q['b']['q05']:.2f}, "
                 f"{q['b']['q95']:.2f}] (5-95%), median c {q['c']['median']:.3f}; "
                 f"{len(run.bank.nonpositive_items)} item(s) with a <= 0")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m atlascat.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default="arc", help="bundled dense matrix (default arc)")
    parser.add_argument("--out", default="out/demo", help="output folder (default out/demo)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", type=int, default=None,
                        help="use a random subset of this many models (faster; default all)")
    parser.add_argument("--fit-partition-size", type=int, default=100,
                        help="item partition size of the M2 fit summary (default 100, the paper's)")
    args = parser.parse_args(argv)

    import numpy as np

    from .cli._common import console
    from .cli.cmd_benchmark import print_tables, print_text, stage_progress
    from .catalogue import load_responses
    from .studies.protocol import BenchmarkConfig, plan_stages, run_benchmark
    from .studies.report import write_report

    start = time.perf_counter()
    out = Path(args.out)
    rm = load_responses(args.bench)
    if args.models is not None and args.models < rm.n_subjects:
        pick = np.sort(np.random.default_rng(args.seed).choice(rm.n_subjects, args.models,
                                                               replace=False))
        rm = rm.subset(subjects=pick)
    console.rule(f"[bold]ATLAS demo: {args.bench} ({rm.n_subjects} models x {rm.n_items} items, "
                 "Open LLM Leaderboard)")
    config = BenchmarkConfig(seed=args.seed, fit_partition_size=args.fit_partition_size)
    with stage_progress(plan_stages(config), args.bench) as done:
        run = run_benchmark(rm, config, name=f"{args.bench} (bundled dense matrix)", progress=done)
    run.info["source"] = f"atlascat.catalogue.load_responses({args.bench!r})"
    console.print("[bold]Calibration and fit[/]")
    for line in _fit_lines(run):
        print_text(line)
    run_dir = run.write(out / "run")
    print_tables(run.summary, f"{args.bench}: ATLAS CAT vs static subsets on "
                              f"{run.info['n_test']} held-out models")
    ref_name = run.info.get("reference_method")
    ref = run.summary[run.summary["method"] == ref_name]
    if len(ref):
        r = ref.iloc[0]
        for _, c in run.summary[run.summary["method"].str.startswith("ATLAS")].iterrows():
            print_text(f"{c['method']}: theta MAE {c['theta_mae']:.3f} with {c['items_mean']:.1f} "
                       f"items on average vs {ref_name} {r['theta_mae']:.3f} with "
                       f"{r['items_mean']:.0f}; IES {c['ies']:.2f} (lower is better, "
                       f"{ref_name} = 1); 95% coverage {c['coverage']:.1%}")
    report = write_report([run_dir], out / "report.html",
                          title=f"ATLAS demo: {args.bench} benchmark report")
    print_text(f"run directory: {run_dir}")
    print_text(f"report: {report.resolve()}")
    print_text(f"demo finished in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
