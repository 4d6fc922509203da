"""``atlas benchmark RESPONSES``: the real-data comparison of ATLAS CAT against static subsets."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import typer

from ..studies.config import BenchmarkConfig

from ._common import (RESPONSES_HELP, check_seed, console, err_console, escape, load_responses,
                      output_dir, output_file, print_text, is_quiet, quiet_option)


def parse_floats(text: str, what: str) -> tuple[float, ...]:
    from ..errors import ConfigError

    try:
        values = tuple(float(v) for v in str(text).split(",") if v.strip())
    except ValueError:
        raise ConfigError(f"{what} must be comma-separated numbers like 0.1,0.2,0.3; got {text!r}") from None
    return values


@contextmanager
def stage_progress(stages: list[str], title: str = "benchmark"):
    """A rich progress bar over named stages; yields ``done(stage)`` for ``run_benchmark``."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)

    if not err_console.is_terminal or is_quiet():  # no bar remnants in logs, nor with -q
        yield lambda stage: None
        return

    with Progress(TextColumn("[bold blue]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=False) as progress:
        task = progress.add_task(f"{title}: {stages[0]}", total=len(stages))

        def done(stage: str):
            i = stages.index(stage) if stage in stages else 0
            nxt = stages[i + 1] if i + 1 < len(stages) else "done"
            progress.update(task, advance=1, description=f"{title}: {nxt}")

        yield done


def print_tables(summary, title: str | None = None, continuous: bool = False) -> None:
    """Tables 2, 3 and 6 as aligned Markdown (readable in a terminal, pasteable in a README);
    ``continuous``: continuous scores, whose mean is a mean score, not an accuracy."""
    from ..studies.tables import (TABLES, format_table, make_table, table_title, to_markdown,
                                   table_notes)

    if title:
        console.rule(f"[bold]{title}")
    for name in TABLES:
        print_text(to_markdown(format_table(make_table(summary, name), continuous),
                               title=table_title(name, continuous)))
    note = table_notes(summary, continuous)
    if note:
        print_text(note)


#: the study's defaults, read from its configuration class (never restated)
_B = BenchmarkConfig()


def _outputs(output, report, responses) -> Path:
    """-o (a new folder, or an earlier run's) and --report (an HTML page, never a file of the
    run or the data), checked before any work; returns the run folder."""
    from ..errors import ConfigError
    from ..studies.protocol import WRITTEN_FILES

    if output is None:
        raise ConfigError("give the run directory with -o/--output, e.g. -o runs/arc (nothing "
                          "is written to the current directory unless you name it)")
    out = output_dir(output, writes=WRITTEN_FILES, marker="run.json")
    output_file(report, "--report", inputs={"RESPONSES": responses})
    if report is not None and Path(report).suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"--report {str(report)!r} is the run's HTML page: give an .html "
                          "path (e.g. report.html), never a file of the run or your data")
    return out


def benchmark_command(
    responses: str = typer.Argument(..., metavar="RESPONSES", help=RESPONSES_HELP),
    output: Path = typer.Option(None, "-o", "--output", show_default=False,
                                help="Run directory to write (required; created if missing)."),
    seed: int = typer.Option(0, "--seed", help="Master seed (split, baselines, CAT)."),
    taus: str = typer.Option(",".join(f"{t:g}" for t in _B.taus), "--taus", help="CAT SE thresholds, comma-separated."),
    random_k: int = typer.Option(_B.random_k, "--random-k", help="Random-k size (0: off)."),
    replicates: int = typer.Option(_B.random_replicates, "--replicates", help="Random-k replicate draws."),
    anchor_k: int = typer.Option(_B.anchor_k, "--anchor-k", help="Anchor points (0: off)."),
    info_k: int = typer.Option(_B.info_k, "--info-k", help="Information-subset size (0: off)."),
    optimal_k: int = typer.Option(_B.optimal_k, "--optimal-k", help="D/A/E-optimal form size (0: off)."),
    criteria: str = typer.Option(",".join(_B.optimal_criteria), "--criteria",
                                 help="Optimal-form criteria, comma-separated (D, A, E)."),
    exchange: bool = typer.Option(_B.optimal_exchange, "--exchange/--no-exchange",
                                  help="Exchange pass after the greedy optimal-form phase."),
    test_size: float = typer.Option(_B.test_size, "--test-size", help="Share of test models, in (0, 1)."),
    no_filter: bool = typer.Option(False, "--no-filter", help="Skip the item filter."),
    drop_empty: bool = typer.Option(False, "--drop-empty",
                                    help="Drop all-missing subjects/items instead of failing."),
    no_fit: bool = typer.Option(False, "--no-fit", help="Skip the M2 model-fit summary."),
    model: str = typer.Option(_B.model, "--model",
                              help="IRT model: bic (2PL or 3PL by BIC on the train models), "
                                   "auto (calibrate's default for the data's size), 2pl, "
                                   "3pl, ..."),
    no_se_calibration: bool = typer.Option(
        False, "--no-se-calibration",
        help="Skip the CAT SE factor estimated on a validation split of the train models "
             "(the 'Cov. (val.-calibrated SE)' column)."),
    prior_a: str = typer.Option(None, "--prior-a", help="Calibration prior on a, e.g. lognorm(0,0.5)."),
    prior_c: str = typer.Option(None, "--prior-c", help="Calibration prior on c, e.g. beta(5,17)."),
    se_method: str = typer.Option(None, "--se-method",
                                  help="CAT stopping SE: information (paper) or posterior "
                                       "[default: information]."),
    name: str = typer.Option(None, "--name", help="Run name [default: the file stem]."),
    report: Path = typer.Option(None, "--report", help="Also write the HTML report to this file."),
    quiet: bool = quiet_option(),
):
    """Split, calibrate on the train models, run ATLAS CAT and the baselines on the test
    models' real answers, and write per-model results, tables and run.json to RUN_DIR."""
    from ..errors import ConfigError, ResponseDataError
    from ..studies.protocol import plan_stages, run_benchmark
    from ._options import BENCHMARK_OPTIONS, benchmark_config, cli_names

    check_seed(seed)
    tau_values = parse_floats(taus, "--taus")
    if model.lower() in ("graded", "gpcm"):
        raise ConfigError(_RATINGS_HINT.format(what=f"--model {model.lower()}"))
    out = _outputs(output, report, responses)   # before any work
    name = name or Path(responses).name.split(".")[0]
    config = benchmark_config(
        seed=seed, test_size=test_size, filter=not no_filter, model=model, model_fit=not no_fit,
        se_calibration=not no_se_calibration, prior_a=prior_a, prior_c=prior_c,
        taus=tau_values, se_method=se_method, random_k=random_k,
        random_replicates=replicates, anchor_k=anchor_k, info_k=info_k, optimal_k=optimal_k,
        optimal_criteria=tuple(c.strip() for c in criteria.split(",") if c.strip()),
        optimal_exchange=exchange)
    try:
        rm = load_responses(responses, normalize_ids=True,
                            on_empty="drop" if drop_empty else "error")
    except ResponseDataError:
        if _holds_ratings(responses):   # a judge's 1-10: the ordinal commands' data
            raise ConfigError(_RATINGS_HINT.format(what=f"{responses} holds ratings")) from None
        raise
    with stage_progress(plan_stages(config), name) as done:
        run = cli_names(lambda: run_benchmark(rm, config, name=name, progress=done),
                        BENCHMARK_OPTIONS)
    run.info["source"] = str(responses)
    run.write(out)
    _show(run, name, out, quiet)
    if report:
        from ..studies.report import write_report

        console.print(f"report written to [bold]{write_report([out], report)}[/]")


def register(app: typer.Typer) -> None:
    app.command("benchmark")(benchmark_command)


_RATINGS_HINT = ("atlas benchmark compares adaptive tests with static subsets on right/wrong "
                 "(or [0, 1]) scores, not ratings ({what}); calibrate a bank on your train "
                 "models (atlas calibrate TRAIN.csv --model graded -o bank.csv) and replay the "
                 "held-out models' ratings (atlas simulate HELD_OUT.csv --bank bank.csv -o DIR)")


def _holds_ratings(responses) -> bool:
    """Whether ``responses`` is a file of whole-number ratings beyond 0/1 (a judge's 1-10)."""
    import numpy as np

    from ..errors import AtlasError
    from ..irt.polycal import read_ratings

    if not Path(str(responses)).is_file():
        return False
    try:
        values = read_ratings(responses)[0]
    except AtlasError:
        return False
    seen = values[~np.isnan(values)]
    return bool(seen.size and np.all(seen == np.round(seen)) and seen.max() > 1)


def _show(run, name: str, out: Path, quiet: bool) -> None:
    """The tables (unless quiet), the model chosen by BIC, the CAT's SE factors and where the
    run went."""
    if not quiet:
        print_tables(run.summary, f"{name}: {run.info['n_test']} test models, "
                                  f"{run.info['n_bank_items']} bank items", run.continuous)
    sel = run.info.get("calibration", {}).get("model_selection")
    if sel:
        bics = ", ".join(f"{r['model']} {r['bic']:.0f}" for r in sel["candidates"])
        console.print(f"model: [bold]{run.info['calibration']['model']}[/] (BIC {bics})")
    se_cal = run.info.get("se_calibration", {})
    factors = se_cal.get("factors", {})
    if factors:
        console.print("CAT SE factor on validation train models: " + ", ".join(
            f"tau={float(t):g}: {k:.2f}" for t, k in factors.items()))
    if se_cal.get("note"):   # the table's "Cov. (val.-calibrated SE)" cells left empty: why
        console.print(f"CAT SE factor: {se_cal['note']}")
    if "skipped" in (run.info.get("fit") or {}):
        console.print(f"model fit (M2): not computed, {run.info['fit']['skipped']}")
    console.print(f"run written to [bold]{escape(str(out))}[/]")
