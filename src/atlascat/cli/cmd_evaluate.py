"""``atlas evaluate``: live adaptive test of real models (log-likelihood or chat subjects).

Options and display only: the runs (single bank, benchmark predictor or suite; started or
resumed) are :class:`atlascat.live.service.LiveRun`'s, the subject is
:class:`atlascat.live.subjects.SubjectSpec`'s, the configuration comes from
:mod:`atlascat.cli._options`.
"""
from __future__ import annotations

import json
import threading
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import typer

from ..cat.config import Estimation, Selection, Stopping
from ..content.defaults import PROMPT_STYLE, TEMPERATURE
from ..suite.config import SuiteConfig
from ._common import (console, err_console, min_items_note, one_bank, output_dir, print_frame,
                      quiet_option, warn)
from ._live import (LiveDisplay, StopRequest, approximate_note, check_results_file, run_dirs,
                    start_runs, write_results)
from ._options import BOUND_MARGIN_HELP

SUBJECT_HELP = ("Who answers: completions:URL (OpenAI /v1/completions with echo + logprobs, "
                "e.g. vLLM: the leaderboard's log-likelihood protocol), hf:PATH_OR_NAME "
                "(transformers, in process), lmeval:MODEL,ARGS (an lm-evaluation-harness "
                "backend), replay:MATRIX.csv#MODEL (answers recorded in a response matrix "
                "or sample logs; "
                "--suite: replay:openllm-v1#MODEL or replay:arc=A.csv,...#MODEL), "
                "openai:URL (chat prompts: APPROXIMATE protocol), simulate:THETA[:SEED], or "
                "cmd:COMMAND (your program, started once: a JSON line per item in, its "
                "outputs or score out; docs/live.md).")

#: help texts of the options (the command's signature stays readable)
HELP = {
    "bank": "Content bank: a bundled name (arc, ...), a bank file with item content, a bank "
            "folder (atlas build-bank) or a graded / gpcm bank (atlas calibrate --model "
            "graded); one without requests is asked by item id (cmd:, replay:). Once; more: "
            "--suite.",
    "suite": "Ask every benchmark of a suite (openllm-v1, or a suite JSON file) in one run: "
             "each benchmark's predicted score and the average with its percentile.",
    "target_se": "--suite: stop once the average's SE (points, 0-100) is at or below this "
                 "(after --min-items). [default: none: the --max-items budget]",
    "llm": "Name of the model to ask (sent to the server; cmd: its name, put for {model} in "
           "the command); repeat to test several models concurrently.",
    "batch_size": "Items chosen and asked per round. [default: 1 = classic CAT; --suite: "
                  f"{SuiteConfig.batch_size}]",
    "se_stop": "A single bank: stop once theta's SE <= this (after --min-items); banks with a "
               "score link also stop once the predicted score cannot move (--bound-stop). "
               f"[default: {Stopping.se_stop:g}]",
    "min_items": f"Fewest items asked. [default: {Stopping.min_items}, or the bundled bank's own "
                 "minimum: arc, truthfulqa, winogrande 45, gsm8k 55; at most --max-items; "
                 f"--suite: {SuiteConfig.min_items}]",
    "max_items": "Most items scored (one the server refuses is not counted). "
                 f"[default: {Stopping.max_items}; --suite: {SuiteConfig.max_items}; a bank "
                 "folder's predictor: its budget]",
    "design": "A bank folder: auto = its benchmark predictor (right for models unlike the "
              "source models) when it has one, else the adaptive test; adaptive = the "
              "adaptive test; predictor = the predictor or an error.",
    "bound_stop": "Banks with a score link: stop once the model is surely at the floor "
                  "(chance) or the top of the link's curve. [default: on]",
    "bound_margin": BOUND_MARGIN_HELP,
    "selection": f"Next item by mfi, kl, astrat or random. [default: {Selection.criterion}]",
    "randomesque": f"Among the k best. [default: {Selection.randomesque}; --suite: "
                   f"{SuiteConfig.randomesque}]",
    "se_method": "information (catR's; default) or posterior.",
    "estimator": f"Theta: eap, map, ml or wle. [default: {Estimation.method}]",
    "fixed_length": "Exactly N items, no SE stop (replaces --se-stop, --min-items, "
                    "--max-items).",
    "token_budget": "Stop before the next round would likely pass N tokens "
                    "(completions:, openai:).",
    "output": "Run directory: results.json, reports/ and (unless --db is given) runs.sqlite go "
              "there.",
    "db": "SQLite run store: OUTPUT/runs.sqlite with --output, else runs.sqlite in $ATLAS_HOME "
          "(default $XDG_DATA_HOME/atlascat, ~/.local/share/atlascat); never the current "
          "directory.",
    "resume": "Continue run RUN_ID (repeatable), found in --db or the stores `atlas runs` "
              "lists.",
    "device": "hf: / lmeval: subjects: cpu or cuda (the backend chooses when not given).",
    "chat": "openai: subjects: /v1/chat/completions or /v1/completions text prompts (both "
            "approximate). [default: --chat]",
    "max_concurrency": "HTTP requests in flight at once, over all models.",
    "api_key_env": "Environment variable holding the API key (never stored; redacted from "
                   "stored answers).",
    "timeout": "Seconds for one whole HTTP request: 60 unless given (a resumed run keeps its "
               "own); cmd: subjects, for one round of items (no limit unless given).",
    "max_retries": "Retries on 429/5xx/timeouts/bad or empty replies: 5 unless given.",
    "backoff": "First retry delay in seconds, doubled each retry: 1 unless given.",
    "prompt_style": "Chat subjects: zero-shot (lettered options) or few-shot (the "
                    f"leaderboard's context). [default: {PROMPT_STYLE}]",
    "max_tokens": "Chat subjects: reply length: 16 for multiple choice, 512 for GSM8K unless "
                  "given.",
    "report_dir": "Where run pages go: OUTPUT/reports with --output, else <db stem>_reports "
                  "next to the run store (a resumed run keeps its own).",
}


def format_result(row: dict, held: str | None = None) -> str:
    """The human summary of one finished run (plain text, no markup): the predicted score
    first, then theta, the protocol, the accuracies and the report (its warning goes to stderr
    with the others: :func:`_print`)."""
    from ..live.report import (SOURCE, describe_method, describe_prediction, scale_words,
                               score_name)

    lb = row.get("prediction") or {}
    head = f"{row['model']} on {row.get('bench') or row.get('bank') or 'bank'}: "
    rounds = (f", rounds of {row['batch_size']}" if row.get("batch_size", 1) > 1 else "") + ")"
    theta = f"theta ({row['estimator'].upper()})" if row.get("estimator") else "theta"
    if lb.get("design"):  # the benchmark predictor: the predicted score heads, theta follows
        lines = [head + f"{score_name(lb)} {describe_prediction(lb)} ({_items_text(row)}"
                 + rounds,
                 f"  IRT {theta} = {row['theta']:.3f} +- {row['se']:.3f} (the model part)"]
    else:
        lines = [head + f"{theta} = {row['theta']:.3f} +- {row['se']:.3f} ({_items_text(row)}"
                 + rounds, f"  {score_name(lb)}: {describe_prediction(lb)}"]
    if lb.get("metric"):  # a bank folder's benchmark: its metric and scale
        lines.insert(2, f"  metric: {lb['metric']}, {scale_words(lb)}")
    if held:  # the test was held to its minimum length (_common.min_items_note)
        lines.insert(1, f"  {held}")
    if lb.get("design"):
        lines.append(f"  design: {lb['design']}, items drawn at random ({describe_method(lb)})")
    proto = row.get("protocol") or "approximate"
    lines.append(f"  protocol: {row['protocol_label']}")
    acc = _rating_line(row, lb.get("scale")) if row.get("ordinal") else \
        _accuracy_line(row, lb.get("scale"))
    if acc:
        lines.append(acc)
    if lb.get("unseen_note"):
        lines.append(f"  ({lb['unseen_note']})")
    if proto == "approximate":
        whose = "the source models'" if lb.get("population") == SOURCE else "the leaderboard's"
        lines.append("  (answers were read from chat text, not as the bank's calibration asked "
                     "its requests: theta and score are approximate; use completions:URL, "
                     f"hf: or lmeval: for {whose} protocol)")
    from ..live.refusals import refused_line

    refused = refused_line(row.get("n_refused"), row.get("refused"))
    if refused:
        lines.append(f"  {refused}")
    if row.get("report"):
        lines.append(f"  report: {row['report']}")
    return "\n".join(lines)


def _items_text(row: dict) -> str:
    """'N items', or 'N items scored, M asked' when some asked got no score (the server refused
    them, a judge rated none): left out, and not counted in the test's length (--max-items)."""
    n, asked = row["n_items"], row.get("n_asked") or row["n_items"]
    return f"{n} items" + (f" scored, {asked} asked" if asked != n else "")


def _rating_line(row: dict, scale) -> str | None:
    """An ordinal run's ratings: the observed mean rating (over the items asked) and the
    model-based one (expected over the bank at theta), on the rating ``scale`` (low, high) its
    items share, as the row gives them (``on_metric_scale``); else each rating as a share of
    its item's scale, (r - lowest) / (highest - lowest)."""
    from ..live.report import model_based_words

    obs, mod, n = row.get("observed_score"), row.get("model_based_score"), row.get("n_items")

    from ..scorelink.prediction import score_text

    def on(v):
        return score_text(v, scale) if scale is not None else f"{100 * v:.1f}%"

    parts = ([f"observed {on(obs)} (over the {n} items {_scored_word(row)})"]
             if obs is not None else []) + \
        ([f"model-based {on(mod)} ({model_based_words(False)})"] if mod is not None else [])
    if not parts:
        return None
    head = (f"mean rating ({scale[0]:g}-{scale[1]:g})" if scale is not None else
            "ratings as shares of each item's scale ((r - lowest) / (highest - lowest))")
    return f"  {head}: " + "; ".join(parts)


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
    se_method: Optional[str]
    estimator: Optional[str]
    selection: Optional[str]
    randomesque: Optional[int]
    min_items: Optional[int]
    max_items: Optional[int]
    bound_stop: Optional[bool]
    bound_margin: float | None
    fixed_length: Optional[int]
    token_budget: Optional[int]
    output: Optional[Path]
    db: Optional[Path]
    resume: Optional[List[str]]
    seed: Optional[int]
    device: Optional[str]
    chat: Optional[bool]
    max_concurrency: int
    api_key_env: str
    timeout: Optional[float]
    max_retries: Optional[int]
    backoff: Optional[float]
    prompt_style: Optional[str]
    max_tokens: Optional[int]
    temperature: Optional[float]
    system: Optional[str]
    no_cache: bool
    report_dir: Optional[Path]
    as_json: bool
    quiet: bool

    def settings(self, limiter, *, resumed: bool = False) -> dict:
        """The subject's settings (:meth:`SubjectSpec.build`; None: not given). A resumed run
        keeps its own endpoint kind (``chat``) and backend options (``device``)."""
        out = dict(api_key_env=self.api_key_env, limiter=limiter,
                   max_concurrency=max(1, int(self.max_concurrency)), timeout=self.timeout,
                   max_retries=self.max_retries, backoff=self.backoff)
        if not resumed:
            out.update(chat=self.chat is not False, device=self.device)
        return out

    def prompt(self):
        from ..live.runner import PromptSettings
        from ._options import cli_names

        given = {k: v for k, v in (("style", self.prompt_style),
                                   ("temperature", self.temperature)) if v is not None}
        return cli_names(lambda: PromptSettings(max_tokens=self.max_tokens, system=self.system,
                                                **given))


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
        se_method: Optional[str] = typer.Option(None, "--se-method", help=HELP["se_method"]),
        estimator: Optional[str] = typer.Option(None, "--estimator", help=HELP["estimator"]),
        selection: Optional[str] = typer.Option(None, "--selection", help=HELP["selection"]),
        randomesque: Optional[int] = typer.Option(None, "--randomesque",
                                                  help=HELP["randomesque"]),
        min_items: Optional[int] = typer.Option(None, "--min-items", help=HELP["min_items"]),
        max_items: Optional[int] = typer.Option(None, "--max-items", help=HELP["max_items"]),
        bound_stop: Optional[bool] = typer.Option(None, "--bound-stop/--no-bound-stop",
                                        help=HELP["bound_stop"]),
        bound_margin: Optional[float] = typer.Option(None, "--bound-margin",
                                                   help=HELP["bound_margin"]),
        fixed_length: Optional[int] = typer.Option(None, "--fixed-length",
                                                   help=HELP["fixed_length"]),
        token_budget: Optional[int] = typer.Option(None, "--token-budget",
                                                   help=HELP["token_budget"]),
        output: Optional[Path] = typer.Option(None, "--output", "-o", help=HELP["output"]),
        db: Optional[Path] = typer.Option(None, "--db", help=HELP["db"]),
        resume: Optional[List[str]] = typer.Option(None, "--resume", help=HELP["resume"]),
        seed: Optional[int] = typer.Option(None, "--seed",
                                           help="Seed of the random picks. [default: 0]"),
        device: Optional[str] = typer.Option(None, "--device", help=HELP["device"]),
        chat: Optional[bool] = typer.Option(None, "--chat/--completion", help=HELP["chat"]),
        max_concurrency: int = typer.Option(4, "--max-concurrency",
                                            help=HELP["max_concurrency"]),
        api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env",
                                        help=HELP["api_key_env"]),
        timeout: Optional[float] = typer.Option(None, "--timeout", help=HELP["timeout"]),
        max_retries: Optional[int] = typer.Option(None, "--max-retries",
                                                  help=HELP["max_retries"]),
        backoff: Optional[float] = typer.Option(None, "--backoff", help=HELP["backoff"]),
        prompt_style: Optional[str] = typer.Option(None, "--prompt-style",
                                         help=HELP["prompt_style"]),
        max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help=HELP["max_tokens"]),
        temperature: Optional[float] = typer.Option(
            None, "--temperature", help=f"Chat subjects: sampling temperature. [default: "
                                        f"{TEMPERATURE}]"),
        system: Optional[str] = typer.Option(None, "--system",
                                             help="Chat subjects: system message."),
        no_cache: bool = typer.Option(False, "--no-cache",
                                      help="Always ask; do not reuse stored answers."),
        report_dir: Optional[Path] = typer.Option(None, "--report-dir", help=HELP["report_dir"]),
        as_json: bool = typer.Option(False, "--json", help="Print results as JSON."),
        quiet: bool = quiet_option(),
    ):
        """Measure models: the predicted score (and theta +- SE) from a few dozen items, adaptive
        or drawn by a bank folder's benchmark predictor (--design).

        With a log-likelihood subject (completions:, hf:, lmeval:, replay:) every item is asked
        as the bank's models were (a shipped bank: the Open LLM Leaderboard's requests; a bank
        folder: its logged requests), so the result is on the bank's scale; a folder built
        from a matrix is asked by item id (cmd:, replay:). openai: (chat) subjects are asked
        prompts and labelled APPROXIMATE. Every step is saved in the
        run store before and after asking; a killed run continues with --resume RUN_ID without
        asking an answered item again. Ctrl-C (or SIGTERM) stops after the item in flight
        (press again to abandon it), marks the run interrupted, prints the --resume command
        and exits with status 130. API keys are read from the environment only.
        """
        run_evaluate(_Options(**locals()))


def run_evaluate(o: _Options) -> None:
    """Check the options against each other, then start (or resume) and drive the runs."""
    from ..errors import ConfigError, LiveRunError
    from ..live.store import default_store_path, find_run_store

    if o.batch_size is not None and o.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {o.batch_size}")
    if o.max_concurrency < 1:
        raise ConfigError(f"--max-concurrency must be >= 1, got {o.max_concurrency}")
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
    output_dir(o.report_dir, "--report-dir")   # checked before any item is asked
    check_results_file(o.output)
    if o.db is None and o.output is None and o.resume:   # the store `atlas runs` lists it in
        o.db = find_run_store(o.resume[0])
    if o.db is None:
        o.db = (o.output / "runs.sqlite") if o.output is not None else default_store_path()
    limiter = threading.BoundedSemaphore(max(1, int(o.max_concurrency)))
    if o.resume:
        if o.subject or o.llm:
            raise ConfigError("--resume takes bank, subject and model from the database; drop "
                              "--subject/--llm")
        _check_resume_options(o)
        if not o.db.exists():
            raise LiveRunError(f"run database {str(o.db)!r} does not exist; give the --db (or -o) "
                               "the run was started with")
        return _drive(o, _resume(o, limiter))
    if not (o.bank or o.suite) or not o.subject:
        raise ConfigError("give --bank (or --suite) and --subject (or --resume RUN_ID)")
    stop = StopRequest()
    with ExitStack() as held:   # Ctrl-C once the runs exist: saved as interrupted, one line
        return _drive(o, _start(o, limiter, lambda: held.enter_context(stop.installed())),
                      stop)


def _plan(o: _Options, ref):
    """(the bank's reference, the design, the run configuration) of the options."""
    from ..catalogue import BankRef
    from ..errors import ConfigError
    from ..live.designs import choose_design, run_config
    from ._options import cat_config, predictor_only, suite_config

    if o.se_method is not None and o.se_method not in ("information", "posterior"):
        raise ConfigError(f"--se-method must be information or posterior, got {o.se_method!r}")
    if o.suite is not None:
        for opt, value in (("--se-method", o.se_method), ("--selection", o.selection),
                           ("--estimator", o.estimator)):
            if value is not None:
                raise ConfigError(f"{opt} is a single bank's adaptive test's; a suite run "
                                  "chooses its items for the average's SE (--target-se)")
        ref = BankRef.from_option(o.suite, option="--suite", kinds=("suite",))
        return ref, "suite", run_config(ref, "suite", suite_config(
            target_se=o.target_se, se_stop=o.se_stop, min_items=o.min_items,
            max_items=o.max_items, fixed_length=o.fixed_length, batch_size=o.batch_size,
            randomesque=o.randomesque, seed=o.seed or 0))
    design = choose_design(ref, o.design)
    if design == "predictor":
        predictor_only(o, ((opt, value is not None) for opt, value in (   # None unless given
            ("--se-method", o.se_method), ("--selection", o.selection),
            ("--randomesque", o.randomesque), ("--estimator", o.estimator),
            ("--bound-stop / --no-bound-stop", o.bound_stop),
            ("--bound-margin", o.bound_margin))))
        return ref, design, run_config(ref, design)   # the predictor's own budget
    given = {k: v for k, v in (("se_method", o.se_method), ("selection", o.selection),
                               ("randomesque", o.randomesque), ("estimator", o.estimator))
             if v is not None}
    config = cat_config(se_stop=o.se_stop, min_items=o.min_items, max_items=o.max_items,
                        fixed_length=o.fixed_length, **given)
    # the link's stops and the bank's shortest test, as LiveRun.start's default test
    return ref, design, run_config(ref, design, config, min_items=o.min_items,
                                   bound_stop=o.bound_stop is not False
                                   and o.fixed_length is None, bound_margin=o.bound_margin)


def _start(o: _Options, limiter, hold=None):
    """New runs, one per --llm (everything is checked before the run store is created: a call
    that fails here leaves no file behind). ``hold()``: called just before the runs are
    created, it installs :func:`_drive`'s Ctrl-C handler and returns it."""
    from ..catalogue import BankRef
    from ..errors import ConfigError
    from ..live.designs import folder_settings
    from ..live.runner import subject_protocol
    from ..live.service import LiveRun, design_bank
    from ..live.subjects import SubjectSpec
    from ..live.suite_session import load_live_suite
    from ._suite_evaluate import floor_note

    names = list(o.llm or [])
    spec = SubjectSpec.parse(o.subject, names[0] if names else None)
    _check_subject_options(o, spec)
    ref, design, config = _plan(o, None if o.suite else BankRef.from_option(o.bank))
    if len(names) > 1 and design == "suite":
        raise ConfigError("--suite asks one model in one run; give --llm once")
    if len(names) > 1 and not spec.several_models:
        raise ConfigError(f"--subject {spec.kind}: takes one model; give --llm once"
                          + (" (or put {model} in the command)" if spec.kind == "cmd" else ""))
    bank = ref.load() if design == "suite" else design_bank(ref, design)
    if design == "adaptive":
        from ._common import tested_under_one_prior

        tested_under_one_prior(bank, config)
    settings = {**o.settings(limiter), **folder_settings(ref)}
    subjects = [spec.with_model(n).build(bank, **settings) for n in names or [None]]
    if any(subject_protocol(s) == "approximate" for s in subjects):
        approximate_note(spec.kind, "the banks were" if design == "suite" else "the bank was",
                         "the source models'" if ref.kind == "dir" else "the leaderboard's")
    note = floor_note(load_live_suite(ref.name), config) if design == "suite" else None
    if note:
        _say(note)
    made = []

    def start(store, ids):
        made.append(LiveRun.start(store, ref, subjects, config=config, prompt=o.prompt(),
                                  seed=o.seed or 0, batch_size=o.batch_size or 1, design=design,
                                  budget=o.max_items if design == "predictor" else None,
                                  token_budget=o.token_budget))
        ids.extend(j.run_id for j in made[0].jobs)

    stop = hold() if hold is not None else None
    start_runs(o.db, o.output, o.report_dir, start)
    if stop is not None and stop.event.is_set():   # Ctrl-C: _drive says it, in one line
        return made[0]
    where = f" on suite {ref.name}" if design == "suite" else ""
    for job in made[0].jobs:
        _say(f"run {job.run_id} started for {job.subject.name}{where} (db {o.db})")
        _twins_note(made[0].store, job.run_id, o.db)
    return made[0]


def _check_subject_options(o: _Options, spec) -> None:
    """An option the subject does not use (``--temperature`` with ``replay:``, ``--device``
    with ``cmd:``) is an error, not ignored."""
    from ..errors import ConfigError
    from ..live.subjects import SETTING_KINDS, SUBJECT_KINDS

    given = dict(device=o.device, chat=o.chat, prompt_style=o.prompt_style,
                 max_tokens=o.max_tokens, temperature=o.temperature, system=o.system,
                 max_retries=o.max_retries, backoff=o.backoff, timeout=o.timeout)
    for key in spec.unused_settings(**given):
        opt = "--chat / --completion" if key == "chat" else f"--{key.replace('_', '-')}"
        kinds = ", ".join(SUBJECT_KINDS[k] for k in SETTING_KINDS[key])
        raise ConfigError(f"{opt} is for {kinds} subjects; --subject {spec.kind}: does not "
                          "use it: drop it")


def _twins_note(store, run_id: str, db) -> None:
    """Name the stopped runs of the store that asked what this new run asks (the same command
    run again after a crash starts a new run): --resume continues one instead."""
    from ..live.service import unfinished_like

    for twin in unfinished_like(store, run_id)[:1]:
        n = twin["n_items"]
        _say(f"note: run {twin['run_id']} asked the same ({twin['state']} after {n} "
             f"item{'s' * (n != 1)}); `atlas evaluate --resume {twin['run_id']} --db {db}` "
             "continues it instead of this new run")


def _check_resume_options(o: _Options) -> None:
    """A resumed run keeps its own design, stops, seed, rounds, endpoint kind and prompts: an
    option that would change them is an error, not ignored."""
    from ..errors import ConfigError

    for opt, value in (("--batch-size", o.batch_size), ("--fixed-length", o.fixed_length),
                       ("--bound-stop / --no-bound-stop", o.bound_stop),
                       ("--bound-margin", o.bound_margin), ("--device", o.device),
                       ("--chat / --completion", o.chat), ("--prompt-style", o.prompt_style),
                       ("--max-tokens", o.max_tokens), ("--temperature", o.temperature),
                       ("--system", o.system),
                       ("--token-budget", o.token_budget),
                       ("--max-items", o.max_items), ("--min-items", o.min_items),
                       ("--se-stop", o.se_stop), ("--se-method", o.se_method),
                       ("--estimator", o.estimator),
                       ("--selection", o.selection), ("--randomesque", o.randomesque),
                       ("--target-se", o.target_se),
                       ("--design", None if o.design == "auto" else o.design),
                       ("--seed", o.seed)):
        if value is not None:
            raise ConfigError(f"--resume continues a run with its own settings; drop {opt}")


def _resume(o: _Options, limiter):
    """--resume: stored runs of any kind, their subjects rebuilt with this call's HTTP settings
    and limiter."""
    from ..catalogue import BankRef
    from ..errors import ConfigError
    from ..live.service import LiveRun
    from ..live.store import RunStore

    with RunStore.opened(o.db) as store:   # closed when no run resumes (an unknown id)
        if o.bank and any(store.get_run(rid)["kind"] == "suite" for rid in o.resume):
            raise ConfigError("a suite run asks the suite's own banks; drop --bank")
        return LiveRun.resume(store, o.resume,
                              bank=BankRef.from_option(o.bank) if o.bank else None,
                              **o.settings(limiter, resumed=True))


def _say(text: str) -> None:
    err_console.print(text, markup=False, highlight=False, soft_wrap=True)


def _display(o: _Options, live) -> LiveDisplay:
    """The per-item display of the runs (a suite run's lines show its average)."""
    job = live.jobs[0]
    cfg = live.store.get_run(job.run_id).get("config") or {}
    suite = job.kind == "suite"
    plan = (int(cfg.get("min_items", 0)),
            int(cfg.get("max_items", SuiteConfig.max_items if suite else Stopping.max_items)),
            float(cfg.get("target_se") or 0.0) / 100.0 if suite else cfg.get("se_stop"))
    return LiveDisplay(
        [j.subject.name for j in live.jobs], [str(i) for j in live.jobs for i in j.bank.item_ids],
        plan, lines=not (o.quiet or o.as_json), bar=not o.as_json,
        averages={j.run_id for j in live.jobs if j.kind == "suite"}, scales=_scales(live),
        continuous=_continuous(live))


def _scales(live) -> dict:
    """{run id: (low, high)} of the runs whose bank folder reads on a metric's own scale."""
    from ..bankdir.predict import metric_scale

    out = {}
    for job in live.jobs:
        folder = job.ref.folder() if job.ref is not None else None
        if folder is not None and metric_scale(folder) is not None:
            out[job.run_id] = metric_scale(folder)
    return out


def _continuous(live) -> set:
    """The runs whose bank folder scores its items on a continuum (their 0 and 1 are scores,
    not right / wrong)."""
    from ..bankdir.predict import continuous_scores

    return {job.run_id for job in live.jobs
            if job.ref is not None and job.ref.kind == "dir"
            and continuous_scores(job.ref.folder())}


def _resume_hint(o: _Options, run_ids) -> str:
    return ("atlas evaluate " + " ".join(f"--resume {rid}" for rid in run_ids)
            + f" --db {o.db}")


def _drive(o: _Options, live, stop=None) -> None:
    """:func:`_drive_runs`, the run store's connections and the subjects (HTTP clients,
    processes) closed after it, whatever the end."""
    try:
        _drive_runs(o, live, stop)
    finally:
        live.close()


def _drive_runs(o: _Options, live, stop=None) -> None:
    """Ask until every run stops (per-item lines, a progress bar, Ctrl-C), then write each
    run's page and results.json and print the results. ``stop``: the Ctrl-C handler the
    runs' start installed (a Ctrl-C already received: nothing is asked)."""
    from ..errors import LiveRunError, RunStoppedError

    show, stop = _display(o, live), stop or StopRequest()
    try:
        with stop.installed(), show:
            if stop.event.is_set():   # Ctrl-C while the runs were created
                raise KeyboardInterrupt
            stop.asking = True
            live.run(cache=not o.no_cache, on_step=show.step_callback(stop), stop=stop.event,
                     on_retry=show.say)
    except KeyboardInterrupt:
        runs = live.interrupt()
        _say("interrupted: " + "; ".join(f"run {r['run_id']} ({r['model']}): {r['n_items']} "
                                         "item(s) answered" for r in runs)
             + ". Resume with: " + _resume_hint(o, [r["run_id"] for r in runs]))
        live.close()
        raise typer.Exit(130)
    live.close()
    rows = live.results()
    _write(o, live, rows)
    _print(o, live, rows)
    failed = [r for r in rows if r["status"] != "done"]
    if failed:
        stopped = [r["run_id"] for r in failed
                   if isinstance(live.errors.get(r["run_id"]), RunStoppedError)]
        raise LiveRunError("; ".join(f"run {r['run_id']} ({r['model']}) stopped: {r['error']}"
                                     for r in failed)
                           + (f"; resume with: {_resume_hint(o, stopped)}" if stopped else ""))


def _write(o: _Options, live, rows: list[dict]) -> None:
    """Each run's HTML page (``row["report"]``) and its row in the results.json of its output
    folder (the folder's other runs keep theirs)."""
    from ..live.report import write_run_report
    from ..live.suite_run import write_suite_report

    by_dir = {}
    for job, row in zip(live.jobs, rows):
        outdir, reports = run_dirs(live.store, job.run_id, o.db, o.output, o.report_dir)
        page = reports / f"{job.run_id}.html"
        row["report"] = str(write_suite_report(live.store, job.run_id, page, row)
                            if job.kind == "suite" else
                            write_run_report(live.store, job.run_id, page, bank=job.bank,
                                             leaderboard=row.get("prediction")))
        by_dir.setdefault(outdir, []).append(row)
    for outdir, group in by_dir.items():
        write_results(outdir / "results.json", group)


def _print(o: _Options, live, rows: list[dict]) -> None:
    from ._suite_evaluate import print_suite

    for job, row in zip(live.jobs, rows):
        _cache_note(live.store, job.run_id, row)
    if o.as_json:
        typer.echo(json.dumps(rows, indent=1, default=str))
        return
    single = [(j, r) for j, r in zip(live.jobs, rows) if j.kind != "suite"]
    if single:
        plans = [live.store.get_run(j.run_id).get("config") or {} for j, _ in single]
        held = [min_items_note([r["n_items"]], [r["stop_reason"]], int(p.get("min_items", 0)),
                               o.min_items is not None) for (_, r), p in zip(single, plans)]
        _print_single([r for _, r in single], held)
    for job, row in zip(live.jobs, rows):
        if job.kind == "suite":
            print_suite(row)


def _cache_note(store, run_id: str, row: dict) -> None:
    """Say how many of a run's answers the answer cache gave (a new checkpoint served under
    the name an earlier run of this store used would get that run's answers)."""
    steps = store.steps(run_id)
    n = int((steps["cached"] == 1).sum())
    if n:
        _say(f"note: run {run_id} ({row['model']}): {n} of {len(steps)} answers came from the "
             f"answer cache ({row['model']!r} at this endpoint answered them in an earlier run "
             "of this store); a new checkpoint served under the same name needs --no-cache")


def _print_single(rows: list[dict], held: list) -> None:
    import pandas as pd

    from ..live.report import describe_prediction, protocol_name

    table = pd.DataFrame([{
        "run": r["run_id"], "model": r["model"], "status": r["status"],
        "protocol": protocol_name(r["protocol"], r.get("bank")) if r["protocol"] else "-",
        "theta": "-" if r["theta"] is None else f"{r['theta']:.3f}",   # as the lines below
        "SE": "-" if r["se"] is None else f"{r['se']:.3f}",
        "items": r["n_items"],
        "predicted": (describe_prediction(r["prediction"], short=True)
                      + (" (!)" if r["prediction"].get("warning") else "")
                      if "score" in (r.get("prediction") or {}) else "-"),
        "stop": r["stop_reason"] or "-",
    } for r in rows])
    print_frame(table, title="Live evaluation")
    for r, note in zip(rows, held):
        if r["status"] == "done":
            console.print(format_result(r, note), markup=False, highlight=False, soft_wrap=True)
            if (r.get("prediction") or {}).get("warning"):
                warn(r["prediction"]["warning"])
    from ..bankdir.predict import in_sample_line

    for bank in dict.fromkeys(r.get("bank") for r in rows if r.get("bank")):
        line = in_sample_line(bank, [r["model"] for r in rows if r.get("bank") == bank])
        if line:
            warn(line)


def _accuracy_line(row: dict, scale) -> str | None:
    """The observed and the model-based accuracy of a run: in percent (the mean score's, for
    scores between 0 and 1), or on the metric's own ``scale`` (low, high) for a bank folder
    built with --score-range (the row's means are on it: ``on_metric_scale``), where a mean is
    a mean score, not a share."""
    from ..live.report import model_based_words

    obs, mod = row.get("observed_score"), row.get("model_based_score")
    n = row.get("n_items")
    got = _scored_word(row)
    what = model_based_words(row.get("design") == "benchmark predictor")
    acc = []
    between = not row.get("ordinal") and (bool(row.get("continuous"))   # the folder's kind
                                          or any(0 < float(v) < 1 for v in row.get("scores") or ()))
    if scale is not None:
        from ..scorelink.prediction import score_text

        def on(v):
            return score_text(v, scale)

        if obs is not None:
            acc.append(f"observed {on(obs)} (the mean score over the {n} items {got})")
        if mod is not None:
            acc.append(f"model-based {on(mod)} ({what})")
        return ("  mean score, on the metric's own scale: " + "; ".join(acc)) if acc else None
    if obs is not None and row.get("ordinal"):  # ratings: each one's share of its scale
        acc.append(f"observed {100 * obs:.1f}% of the scale (each rating's (r - lowest) / "
                   f"(highest - lowest), over the {n} items {got})")
    elif obs is not None:
        acc.append(f"observed {100 * obs:.1f}% ({_count_text(row, between)})")
    if mod is not None:
        acc.append(f"model-based {100 * mod:.1f}% ({what})")
    label = "mean score" if between else "accuracy"   # a mean score is not a share right
    return (f"  {label}: " + "; ".join(acc)) if acc else None


def _scored_word(row) -> str:
    """What the observed score is over: the items "asked", or "scored" when some asked got
    no score (the headline's "31 items scored, 42 asked": 22/31 is not 22 of those asked)."""
    return "scored" if row.get("n_skipped") else "asked"


def _count_text(row, between: bool = False) -> str:
    """'k/n of the items asked' for right/wrong answers; a mean for scores in [0, 1] (some
    score ``between`` 0 and 1, or a sum of scores that is not a whole number); "scored" for
    "asked" when some asked got no score."""
    got, n, word = row.get("score_sum"), row.get("n_items"), _scored_word(row)
    if got is not None and float(got).is_integer() and not between:
        return f"{int(got)}/{n} of the items {word}"
    return f"the mean score over the {n} items {word}"
