"""``atlas evaluate``: live adaptive test of real models (log-likelihood or chat subjects).

Options and display only: the runs are :class:`atlascat.live.evaluation.Evaluation`'s (suite
runs :mod:`atlascat.live.suite_run`'s), the predicted score is
:func:`atlascat.live.evaluation.predict_score`'s, the configuration comes from
:mod:`atlascat.cli._options`.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import typer

from ._common import (console, err_console, min_items_note, one_bank, print_frame, quiet_option,
                      warn)
from ._live import (LiveDisplay, StopRequest, approximate_note, run_dirs, start_runs,
                    write_results)

SUBJECT_HELP = ("Who answers: completions:URL (OpenAI /v1/completions with echo + logprobs, "
                "e.g. vLLM: the leaderboard's log-likelihood protocol), hf:PATH_OR_NAME "
                "(transformers, in process), lmeval:MODEL,ARGS (an lm-evaluation-harness "
                "backend), replay:MATRIX.csv#MODEL (answers recorded in a response matrix), "
                "openai:URL (chat prompts: APPROXIMATE protocol), simulate:THETA[:SEED], or "
                "cmd:COMMAND (your program, started once, scores items by id: a JSON line "
                "{\"item_id\"} in, a line {\"item_id\", \"score\": 0/1} out; for a bank "
                "folder built from a matrix).")

#: help texts of the options (the command's signature stays readable)
HELP = {
    "bank": "Content bank: a bundled name (arc, ...), a bank file with item content or a bank "
            "folder (atlas build-bank; from a matrix: asked by item id, --subject cmd: or "
            "replay:) (once; several benchmarks: --suite).",
    "suite": "Ask every benchmark of a suite (openllm-v1, or a suite JSON file) in one run: "
             "each benchmark's predicted score and the average with its percentile.",
    "target_se": "--suite: stop once the average's SE (points, 0-100) is at or below this "
                 "(after --min-items). [default: none: the --max-items budget]",
    "llm": "Name of the model to ask (sent to the server; cmd: its name, put for {model} in "
           "the command); repeat to test several models concurrently.",
    "batch_size": "Items selected jointly and asked at once per round (all choices of a round "
                  "in one batch). [default: 1 = classic CAT; --suite: 6]",
    "se_stop": "A single bank: stop once theta's SE <= this (after --min-items); banks with a "
               "score link also stop once the predicted score cannot move (--bound-stop). "
               "[default: 0.1]",
    "min_items": "Fewest items asked. [default: 30, or the bundled bank's own minimum: arc, "
                 "truthfulqa, winogrande 45, gsm8k 55; at most --max-items]",
    "max_items": "Most items asked. [default: 500; --suite: 150; a bank folder's predictor: "
                 "its budget, 50]",
    "design": "A bank folder (atlas build-bank DIR): auto = its benchmark "
              "predictor (items drawn at random, weighted to the uncertain ones; right for "
              "models unlike the source models) when it has one, else the adaptive test; "
              "adaptive = the adaptive test; predictor = the predictor or an error.",
    "bound_stop": "Banks with a score link: stop once the model is surely at the floor "
                  "(chance) or the top of the link's curve.",
    "bound_margin": "Floor/top stop: how close (0-1 score units) to the curve's lowest/highest "
                    "value counts.",
    "fixed_length": "A fixed-length adaptive test: exactly N items, no SE stop (replaces "
                    "--se-stop, --min-items, --max-items).",
    "output": "Run directory: results.json, reports/ and (unless --db is given) runs.sqlite go "
              "there.",
    "db": "SQLite run store: OUTPUT/runs.sqlite with --output, else runs.sqlite in $ATLAS_HOME "
          "(default $XDG_DATA_HOME/atlascat, ~/.local/share/atlascat); never the current "
          "directory.",
    "resume": "Continue run RUN_ID (repeatable); bank, subject and settings come from --db.",
    "device": "hf: / lmeval: subjects: cpu or cuda (the backend chooses when not given).",
    "chat": "openai: subjects: /v1/chat/completions or /v1/completions text prompts (both "
            "approximate).",
    "max_concurrency": "HTTP requests in flight at once, over all models.",
    "api_key_env": "Environment variable holding the API key (never stored; redacted from "
                   "stored answers).",
    "timeout": "Seconds for one whole HTTP request: 60 unless given (a resumed run keeps its "
               "own); cmd: subjects, for one round of items (no limit unless given).",
    "max_retries": "Retries on 429/5xx/timeouts/bad or empty replies: 5 unless given.",
    "backoff": "First retry delay in seconds, doubled each retry: 1 unless given.",
    "prompt_style": "Chat subjects: zero-shot (lettered options) or few-shot (the "
                    "leaderboard's context).",
    "max_tokens": "Chat subjects: reply length: 16 for multiple choice, 512 for GSM8K unless "
                  "given.",
    "report_dir": "Where run pages go: OUTPUT/reports with --output, else <db stem>_reports "
                  "next to the run store (a resumed run keeps its own).",
}


def format_result(row: dict, held: str | None = None) -> str:
    """The human summary of one finished run (plain text, no markup): the predicted score
    first, then theta, the protocol, the accuracies and the report (its warning goes to stderr
    with the others: :func:`_print`)."""
    from ..live.report import describe_method, describe_prediction, score_name

    lb = row.get("prediction") or {}
    head = f"{row['model']} on {row.get('bench') or row.get('bank') or 'bank'}: "
    rounds = (f", rounds of {row['batch_size']}" if row.get("batch_size", 1) > 1 else "") + ")"
    if lb.get("design"):  # the benchmark predictor: the predicted score heads, theta follows
        lines = [head + f"{score_name(lb)} {describe_prediction(lb)} ({row['n_items']} items"
                 + rounds,
                 f"  IRT theta = {row['theta']:.3f} +- {row['se']:.3f} (the model part)"]
    else:
        lines = [head + f"theta = {row['theta']:.3f} +- {row['se']:.3f} ({row['n_items']} items"
                 + rounds, f"  {score_name(lb)}: {describe_prediction(lb)}"]
    if lb.get("metric"):  # a bank folder's benchmark: its metric and scale
        lines.insert(2, f"  metric: {lb['metric']}, in percent (0-100)")
    if held:  # the test was held to its minimum length (_common.min_items_note)
        lines.insert(1, f"  {held}")
    if lb.get("design"):
        lines.append(f"  design: {lb['design']}, items drawn at random ({describe_method(lb)})")
    proto = row.get("protocol") or "approximate"
    lines.append(f"  protocol: {row['protocol_label']}")
    obs, mod = row.get("observed_accuracy"), row.get("model_based_accuracy")
    acc = []
    if obs is not None:
        acc.append(f"observed {100 * obs:.1f}% ({row.get('n_correct')}/{row.get('n_items')} "
                   "of the items asked)")
    if mod is not None:
        acc.append(f"model-based {100 * mod:.1f}% (expected over the bank at theta)")
    if acc:
        lines.append("  accuracy: " + "; ".join(acc))
    if proto == "approximate":
        lines.append("  (answers were read from chat text, not from log-likelihoods as in the "
                     "bank's calibration: theta and score are approximate; use completions:URL, "
                     "hf: or lmeval: for the leaderboard's protocol)")
    if row.get("report"):
        lines.append(f"  report: {row['report']}")
    return "\n".join(lines)


@dataclass
class _Options:
    """The command's options, as typed (None: not given)."""

    bank: Optional[List[str]]
    suite: Optional[str]
    design: str
    target_se: Optional[float]
    subject: Optional[str]
    llm: Optional[List[str]]
    batch_size: Optional[int]
    se_stop: Optional[float]
    min_items: Optional[int]
    max_items: Optional[int]
    bound_stop: bool
    bound_margin: float
    fixed_length: Optional[int]
    output: Optional[Path]
    db: Optional[Path]
    resume: Optional[List[str]]
    seed: int
    device: Optional[str]
    chat: bool
    max_concurrency: int
    api_key_env: str
    timeout: Optional[float]
    max_retries: Optional[int]
    backoff: Optional[float]
    prompt_style: str
    max_tokens: Optional[int]
    temperature: float
    system: Optional[str]
    no_cache: bool
    report_dir: Optional[Path]
    as_json: bool
    quiet: bool

    @property
    def http(self) -> dict:
        return {k: v for k, v in dict(timeout=self.timeout, max_retries=self.max_retries,
                                      backoff=self.backoff).items() if v is not None}

    def prompt(self):
        from ..live.runner import PromptSettings
        from ._options import cli_names

        return cli_names(lambda: PromptSettings(style=self.prompt_style,
                                                max_tokens=self.max_tokens,
                                                temperature=self.temperature,
                                                system=self.system))


def register(app: typer.Typer) -> None:
    @app.command("evaluate")
    def evaluate(
        bank: Optional[List[str]] = typer.Option(None, "--bank", "-b", help=HELP["bank"]),
        suite: Optional[str] = typer.Option(None, "--suite", help=HELP["suite"]),
        design: str = typer.Option("auto", "--design", help=HELP["design"]),
        target_se: Optional[float] = typer.Option(None, "--target-se", help=HELP["target_se"]),
        subject: Optional[str] = typer.Option(None, "--subject", "-s", help=SUBJECT_HELP),
        llm: Optional[List[str]] = typer.Option(None, "--llm", help=HELP["llm"]),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help=HELP["batch_size"]),
        se_stop: Optional[float] = typer.Option(None, "--se-stop", help=HELP["se_stop"]),
        min_items: Optional[int] = typer.Option(None, "--min-items", help=HELP["min_items"]),
        max_items: Optional[int] = typer.Option(None, "--max-items", help=HELP["max_items"]),
        bound_stop: bool = typer.Option(True, "--bound-stop/--no-bound-stop",
                                        help=HELP["bound_stop"]),
        bound_margin: float = typer.Option(0.02, "--bound-margin", help=HELP["bound_margin"]),
        fixed_length: Optional[int] = typer.Option(None, "--fixed-length",
                                                   help=HELP["fixed_length"]),
        output: Optional[Path] = typer.Option(None, "--output", "-o", help=HELP["output"]),
        db: Optional[Path] = typer.Option(None, "--db", help=HELP["db"]),
        resume: Optional[List[str]] = typer.Option(None, "--resume", help=HELP["resume"]),
        seed: int = typer.Option(0, "--seed", help="Seed of the CAT's random choices."),
        device: Optional[str] = typer.Option(None, "--device", help=HELP["device"]),
        chat: bool = typer.Option(True, "--chat/--completion", help=HELP["chat"]),
        max_concurrency: int = typer.Option(4, "--max-concurrency",
                                            help=HELP["max_concurrency"]),
        api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env",
                                        help=HELP["api_key_env"]),
        timeout: Optional[float] = typer.Option(None, "--timeout", help=HELP["timeout"]),
        max_retries: Optional[int] = typer.Option(None, "--max-retries",
                                                  help=HELP["max_retries"]),
        backoff: Optional[float] = typer.Option(None, "--backoff", help=HELP["backoff"]),
        prompt_style: str = typer.Option("zero-shot", "--prompt-style",
                                         help=HELP["prompt_style"]),
        max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help=HELP["max_tokens"]),
        temperature: float = typer.Option(0.0, "--temperature",
                                          help="Chat subjects: sampling temperature."),
        system: Optional[str] = typer.Option(None, "--system",
                                             help="Chat subjects: system message."),
        no_cache: bool = typer.Option(False, "--no-cache",
                                      help="Always ask; do not reuse stored answers."),
        report_dir: Optional[Path] = typer.Option(None, "--report-dir", help=HELP["report_dir"]),
        as_json: bool = typer.Option(False, "--json", help="Print results as JSON."),
        quiet: bool = quiet_option(),
    ):
        """Measure models adaptively: the predicted score (and theta +- SE) from a few dozen
        items.

        With a log-likelihood subject (completions:, hf:, lmeval:, replay:) every item is asked
        as the Open LLM Leaderboard asked it, so the result is on the bank's scale. openai:
        (chat) subjects are asked prompts and labelled APPROXIMATE. Every step is saved in the
        run store before and after asking; a killed run continues with --resume RUN_ID without
        asking an answered item again. Ctrl-C (or SIGTERM) stops after the item in flight
        (press again to abandon it), marks the run interrupted, prints the --resume command
        and exits with status 130. API keys are read from the environment only.
        """
        run_evaluate(_Options(**locals()))


def run_evaluate(o: _Options) -> None:
    """Check the options against each other, then start (or resume) and drive the runs."""
    from ..errors import ConfigError, LiveRunError
    from ..live.store import default_store_path

    if o.batch_size is not None and o.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {o.batch_size}")
    o.bank = one_bank(o.bank, required=False)  # a second --bank points to --suite
    if o.suite is not None and (o.bank or o.resume):
        raise ConfigError("--suite asks the suite's own banks; drop "
                          + ("--bank" if o.bank else "--resume (a suite run resumes with "
                             "--resume RUN_ID alone)"))
    if o.suite is None and o.target_se is not None:
        raise ConfigError("--target-se is the average's stop of --suite; a single bank stops on "
                          "--se-stop")
    if o.output is not None and o.output.exists() and not o.output.is_dir():
        raise ConfigError(f"--output {str(o.output)!r} is a file; give a directory for the run")
    if o.db is None:
        o.db = (o.output / "runs.sqlite") if o.output is not None else default_store_path()
    limiter = threading.BoundedSemaphore(max(1, int(o.max_concurrency)))
    if o.resume:
        if o.subject or o.llm:
            raise ConfigError("--resume takes bank, subject and model from the database; drop "
                              "--subject/--llm")
        for opt, value in (("--batch-size", o.batch_size), ("--fixed-length", o.fixed_length)):
            if value is not None:
                raise ConfigError(f"--resume continues a run with its own settings; drop {opt}")
        if not o.db.exists():
            raise LiveRunError(f"run database {str(o.db)!r} does not exist; give the --db (or -o) "
                               "the run was started with")
        return _resume(o, limiter)
    if o.suite is not None:
        return _start_suite(o, limiter)
    if not o.bank or not o.subject:
        raise ConfigError("give --bank (or --suite) and --subject (or --resume RUN_ID)")
    return _drive(o, _start(o, limiter), resumed=False)


def _subject_kw(o: _Options, limiter) -> dict:
    return dict(api_key_env=o.api_key_env, limiter=limiter, chat=o.chat, device=o.device,
                max_concurrency=max(1, int(o.max_concurrency)), **o.http)


def _start(o: _Options, limiter):
    """New single-bank runs, one per --llm (everything is checked before the run store is
    created: a call that fails here leaves no file behind)."""
    from ..errors import ConfigError
    from ..live.evaluation import BankRef, Evaluation, choose_design, design_bank
    from ..live.runner import subject_protocol
    from ..live.subjects import subject_from_spec
    from ._common import predictor_only, with_link_stops
    from ._options import cat_config

    prompt = o.prompt()
    ref = BankRef.from_option(o.bank)
    design = choose_design(ref, o.design)
    if design == "predictor":
        predictor_only(o)
        config = None
    else:
        config = cat_config(se_stop=o.se_stop, min_items=o.min_items, max_items=o.max_items,
                            fixed_length=o.fixed_length)
        if o.bound_stop and o.fixed_length is None:
            config = with_link_stops(config, ref.stop_settings(o.bound_margin),
                                     o.min_items is not None)
    bank = design_bank(ref, design)
    names = list(o.llm or [])
    kind = o.subject.partition(":")[0].strip().lower()
    if len(names) > 1 and not (kind in ("openai", "completions")
                               or (kind == "cmd" and "{model}" in o.subject)):
        raise ConfigError(f"--subject {kind}: takes one model; give --llm once"
                          + (" (or put {model} in the command)" if kind == "cmd" else ""))
    subjects = [subject_from_spec(o.subject, model=n, bank=bank, **_subject_kw(o, limiter))
                for n in (names or [None])]
    if any(subject_protocol(s) == "approximate" for s in subjects):
        approximate_note(kind)
    made = []

    def start(store, ids):
        ev = Evaluation.start(store, ref, subjects, config=config, prompt=prompt, seed=o.seed,
                              batch_size=o.batch_size or 1, design=design,
                              budget=o.max_items if design == "predictor" else None)
        made.append(ev)
        ids.extend(j.run_id for j in ev.jobs)

    start_runs(o.db, o.output, o.report_dir, start)
    for job in made[0].jobs:
        err_console.print(f"run {job.run_id} started for {job.subject.name} (db {o.db})",
                          markup=False, highlight=False, soft_wrap=True)
    return made[0]


def _resume(o: _Options, limiter):
    """--resume: suite runs go to the suite driver, single-bank runs are driven here."""
    from ..errors import ConfigError
    from ..live.evaluation import BankRef, Evaluation
    from ..live.runner import subject_from_description
    from ..live.store import RunStore
    from ..live.suite_run import is_suite_run
    from ._suite_evaluate import resume_suite_runs

    store = RunStore(o.db)

    def rebuild(desc, bank):
        """The stored subject, with this call's HTTP settings and limiter."""
        return subject_from_description(desc, bank, limiter=limiter,
                                        max_concurrency=max(1, int(o.max_concurrency)),
                                        api_key_env=o.api_key_env, **o.http)

    infos = {rid: store.get_run(rid) for rid in o.resume}
    if any(is_suite_run(info) for info in infos.values()):
        if o.bank:
            raise ConfigError("a suite run asks the suite's own banks; drop --bank")
        return resume_suite_runs(store, infos, db=o.db, output=o.output,
                                 report_dir=o.report_dir, cache=not o.no_cache,
                                 as_json=o.as_json, quiet=o.quiet, subject_for=rebuild)
    ref = BankRef.from_option(o.bank) if o.bank else None
    return _drive(o, Evaluation.resume(store, o.resume, rebuild, ref), resumed=True)


def _start_suite(o: _Options, limiter) -> None:
    from ._options import suite_config
    from ._suite_evaluate import start_suite

    if not o.subject:
        from ..errors import ConfigError

        raise ConfigError("give --subject (who answers the suite)")
    config = suite_config(target_se=o.target_se, se_stop=o.se_stop, min_items=o.min_items,
                          max_items=o.max_items, fixed_length=o.fixed_length,
                          batch_size=o.batch_size, seed=o.seed)
    return start_suite(o.suite, o.subject, list(o.llm or []), db=o.db, output=o.output,
                       report_dir=o.report_dir, config=config, prompt=o.prompt(),
                       subject_kw=_subject_kw(o, limiter), cache=not o.no_cache,
                       as_json=o.as_json, quiet=o.quiet)


def _drive(o: _Options, ev, *, resumed: bool) -> None:
    """Ask until every run stops (per-item lines, a progress bar, Ctrl-C), then write each
    run's page and results.json and print the results."""
    from ..errors import LiveRunError
    from ..live.report import write_run_report

    plans = [ev.store.get_run(j.run_id).get("config") or {} for j in ev.jobs]
    plan = (int(plans[0].get("min_items", 0)), int(plans[0].get("max_items", 500)),
            plans[0].get("se_stop"))
    show = LiveDisplay([j.subject.name for j in ev.jobs],
                       [str(i) for j in ev.jobs for i in j.bank.item_ids], plan,
                       lines=not (o.quiet or o.as_json), bar=not o.as_json)
    stop = StopRequest()
    try:
        with stop.installed(), show:
            ev.run(cache=not o.no_cache, on_step=show.step_callback(stop))
    except KeyboardInterrupt:
        err_console.print(ev.interrupt(), markup=False, highlight=False, soft_wrap=True)
        ev.close()
        raise typer.Exit(130)
    ev.close()
    rows, by_dir = ev.results(), {}
    for job, row in zip(ev.jobs, rows):
        outdir, reports = run_dirs(ev.store, job.run_id, o.db, o.output, o.report_dir)
        row["report"] = str(write_run_report(ev.store, job.run_id, reports / f"{job.run_id}.html",
                                             bank=job.bank, leaderboard=row.get("prediction")))
        by_dir.setdefault(outdir, []).append(row)
    for outdir, group in by_dir.items():
        write_results(outdir / "results.json", group, merge=resumed)
    held = [min_items_note([r["n_items"]], [r["stop_reason"]], int(p.get("min_items", 0)),
                           o.min_items is not None) for r, p in zip(rows, plans)]
    _print(rows, o.as_json, held)
    failed = [r for r in rows if r["status"] != "done"]
    if failed:
        raise LiveRunError("; ".join(f"run {r['run_id']} ({r['model']}) stopped: {r['error']}"
                                     for r in failed))


def _print(rows: list[dict], as_json: bool, held: list | None = None) -> None:
    if as_json:
        typer.echo(json.dumps(rows, indent=1, default=str))
        return
    import pandas as pd

    from ..live.report import describe_prediction

    table = pd.DataFrame([{
        "run": r["run_id"], "model": r["model"], "status": r["status"],
        "protocol": r["protocol"] or "-", "theta": r["theta"], "SE": r["se"],
        "items": r["n_items"],
        "predicted": (describe_prediction(r["prediction"], short=True)
                      + (" (!)" if r["prediction"].get("warning") else "")
                      if "score" in (r.get("prediction") or {}) else "-"),
        "stop": r["stop_reason"] or "-",
    } for r in rows])
    print_frame(table, title="Live adaptive evaluation")
    for r, note in zip(rows, held or [None] * len(rows)):
        if r["status"] == "done":
            console.print(format_result(r, note), markup=False, highlight=False, soft_wrap=True)
            if (r.get("prediction") or {}).get("warning"):
                warn(r["prediction"]["warning"])
