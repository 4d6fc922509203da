"""``atlas evaluate``: live adaptive test of real models (log-likelihood or chat subjects)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ._common import console, err_console, one_bank, print_frame
from ._live import (_approximate_note, _LiveDisplay, _run_dirs, _start_runs,  # noqa: F401
                    _StopRequest, _write_results, protocol_label)

SUBJECT_HELP = ("Who answers: completions:URL (OpenAI /v1/completions with echo + logprobs, "
                "e.g. vLLM: the leaderboard's log-likelihood protocol), hf:PATH_OR_NAME "
                "(transformers, in process), lmeval:MODEL,ARGS (an lm-evaluation-harness "
                "backend), replay:MATRIX.csv#MODEL (answers recorded in a response matrix), "
                "openai:URL (chat prompts: APPROXIMATE protocol) or simulate:THETA[:SEED].")


def _load_bank(spec: str):
    """``arc`` (a shipped content bank) or a bank file with content columns -> (bank, ref)."""
    from ..catalogue import bank_names, is_bundled_name
    from ..content.items import normalize_loaded
    from ..errors import BankError
    from ..live.runner import bundled_content_bank

    names = bank_names()
    low = spec.lower()
    if not Path(spec).exists() and is_bundled_name(low):
        return bundled_content_bank(low), f"shipped:{low}"
    path = Path(spec)
    if not path.exists():
        raise BankError(f"--bank {spec!r} is neither a bundled bank ({', '.join(names)}) nor an "
                        "existing file")
    if path.is_dir():
        from ..bankdir import load_bank_dir

        return load_bank_dir(path).bank, str(path.resolve())  # atlas build-bank's folder
    from ..irt.bank import ItemBank

    return normalize_loaded(ItemBank.read(path, normalize_ids=True)), str(path.resolve())


def bench_of(bank, ref: str | None) -> str | None:
    """The benchmark a bank measures: from ``shipped:<bench>`` or a unique ``benchmark`` column;
    for a bank folder (``atlas build-bank``) the folder itself, which carries its link."""
    if ref and ref.startswith("shipped:"):
        return ref.split(":", 1)[1]
    from ..bankdir import is_bank_dir

    if ref and is_bank_dir(ref):
        return ref
    meta = getattr(bank, "metadata", None)
    if meta is not None and "benchmark" in meta.columns:
        values = {str(v) for v in meta["benchmark"].dropna()}
        if len(values) == 1:
            return values.pop()
    return None


def _get(obj, *names):
    for name in names:
        if isinstance(obj, dict) and name in obj:
            return obj[name]
        if hasattr(obj, name):
            return getattr(obj, name)
    return None


def leaderboard_prediction(bench: str | None, theta, se, responses=None,
                           stop_reason: str | None = None) -> dict:
    """{score, lo, hi, percentile, flag, warning} on the 0-1 scale from the bank's score link,
    or {note}. ``warning`` is one line ("" when none): outside the link's data, answers not
    fitting the IRT model, stopped at or near chance / the top (``stop_reason``).

    Never raises: a bank without a link gives a note saying so, and the run's theta +- SE
    stands on its own."""
    if theta is None or se is None:
        return {"note": "no estimate"}
    if bench is None:
        return {"note": "no score link: the bank's benchmark is unknown (use a shipped bank "
                        "such as arc, or a bank with a 'benchmark' column)"}
    from ..bankdir import is_bank_dir
    from ..catalogue import load_score_link

    if is_bank_dir(bench):
        return folder_prediction(bench, theta, se, responses, stop_reason)
    try:
        link = load_score_link(bench)
    except Exception as exc:  # noqa: BLE001 - degrade to a note, never fail a finished run
        return {"note": f"no score link for {bench!r} ({type(exc).__name__}: {exc})"}
    try:
        try:
            pred = link.predict(theta, se, responses=responses, stop_reason=stop_reason)
        except TypeError:   # a link without stop notes (or without answers)
            try:
                pred = link.predict(theta, se, responses=responses)
            except TypeError:
                pred = link.predict(theta, se)
        score = _get(pred, "score", "mean", "estimate")
        lo = _get(pred, "lo", "lower", "low")
        hi = _get(pred, "hi", "upper", "high")
        out = {"score": float(score), "lo": None if lo is None else float(lo),
               "hi": None if hi is None else float(hi)}
        out["flag"] = str(_get(pred, "flag") or "")
        out["warning"] = str(_get(pred, "warning") or "")
        pct = _get(pred, "percentile")
        try:
            out["percentile"] = float(pct if pct is not None else link.percentile(out["score"]))
        except Exception:  # noqa: BLE001
            out["percentile"] = None
        return out
    except Exception as exc:  # noqa: BLE001
        return {"note": f"score link for {bench!r} failed ({type(exc).__name__}: {exc})"}


def folder_prediction(path, theta, se, responses=None, stop_reason: str | None = None) -> dict:
    """{score, lo, hi, percentile, flag, warning} of a bank folder's test, from the folder's
    prediction (:func:`atlascat.bankdir.predict_scores`); {note} when it fails."""
    import pandas as pd

    from ..bankdir import load_bank_dir, predict_scores

    try:
        folder = load_bank_dir(path)
        answers = dict(responses or {})
        persons = pd.DataFrame({"subject_id": ["model"], "theta": [float(theta)],
                                "se": [float(se)], "stop_reason": [stop_reason]})
        administered = pd.DataFrame({"subject_id": "model", "item_id": list(answers),
                                     "score": [float(v) for v in answers.values()]})
        row = predict_scores(folder, persons, administered).iloc[0]
    except Exception as exc:  # noqa: BLE001 - degrade to a note, never fail a finished run
        return {"note": f"bank folder {str(path)!r}: no prediction ({type(exc).__name__}: {exc})"}
    return {"score": float(row["leaderboard_accuracy"]), "lo": float(row["leaderboard_lo"]),
            "hi": float(row["leaderboard_hi"]), "percentile": float(row["leaderboard_percentile"]),
            "flag": str(row["leaderboard_flag"] or ""),
            "warning": str(row["leaderboard_warning"] or "")}


def _stop_settings(bench: str | None, margin: float) -> dict:
    """CATConfig fields of the floor / ceiling stop from the bank's score link ({} without)."""
    from ..validation import check_finite

    check_finite(margin, "--bound-margin")
    if bench is None:
        return {}
    try:
        from ..bankdir import is_bank_dir, load_bank_dir
        from ..catalogue import load_score_link

        link = load_bank_dir(bench).link if is_bank_dir(bench) else load_score_link(bench)
        return dict(link.stop_settings(margin))
    except Exception:  # noqa: BLE001 - no (usable) link: no floor/ceiling stop
        return {}


def format_result(row: dict) -> str:
    """The human summary of one finished run (plain text, no markup)."""
    from ..live.runner import PROTOCOL_LABELS

    lines = [f"{row['model']} on {row.get('bench') or row.get('bank') or 'bank'}: "
             f"theta = {row['theta']:.3f} +- {row['se']:.3f} ({row['n_items']} items"
             + (f", rounds of {row['batch_size']}" if row.get("batch_size", 1) > 1 else "") + ")"]
    lb = row.get("leaderboard") or {}
    from ..live.report import describe_prediction

    lines.append(f"  predicted leaderboard score: {describe_prediction(lb)}")
    if lb.get("warning"):
        lines.append(f"  warning: {lb['warning']}")
    proto = row.get("protocol") or "approximate"
    lines.append(f"  protocol: {row.get('protocol_label') or PROTOCOL_LABELS.get(proto, proto)}")
    obs, mod = row.get("observed_accuracy"), row.get("model_based_accuracy")
    if obs is not None or mod is not None:
        acc = []
        if obs is not None:
            acc.append(f"observed {100 * obs:.1f}% ({row.get('n_correct')}/{row.get('n_items')} "
                       "of the items asked)")
        if mod is not None:
            acc.append(f"model-based {100 * mod:.1f}% (expected over the bank at theta)")
        lines.append("  accuracy: " + "; ".join(acc))
    if proto == "approximate":
        lines.append("  (answers were read from chat text, not from log-likelihoods as in the "
                     "bank's calibration: theta and score are approximate; use completions:URL, "
                     "hf: or lmeval: for the leaderboard's protocol)")
    if row.get("report"):
        lines.append(f"  report: {row['report']}")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command("evaluate")
    def evaluate(
        bank: Optional[List[str]] = typer.Option(None, "--bank", "-b",
                                                 help="Content bank: a bundled name (arc, ...) "
                                                      "or a bank file with item content (once; "
                                                      "several benchmarks: --suite)."),
        suite: Optional[str] = typer.Option(None, "--suite",
                                            help="Ask every benchmark of a suite (openllm-v1, "
                                                 "or a suite JSON file) in one run: each "
                                                 "benchmark's predicted score and the average "
                                                 "with its percentile."),
        target_se: Optional[float] = typer.Option(None, "--target-se",
                                                  help="--suite: stop once the average's SE "
                                                       "(points, 0-100) is at or below this "
                                                       "(after --min-items). [default: none: "
                                                       "the --max-items budget]"),
        subject: Optional[str] = typer.Option(None, "--subject", "-s", help=SUBJECT_HELP),
        llm: Optional[List[str]] = typer.Option(None, "--llm",
                                                help="Name of the model to ask (sent to the "
                                                     "server); repeat to test several models "
                                                     "concurrently."),
        model_alias: Optional[List[str]] = typer.Option(None, "--model", "-m", hidden=True,
                                                        help="Deprecated alias of --llm (kept "
                                                             "for one release)."),
        batch_size: Optional[int] = typer.Option(
            None, "--batch-size", help="Items selected jointly and asked at once per round (all "
            "choices of a round in one batch). [default: 1 = classic CAT; --suite: 6]"),
        se_stop: float = typer.Option(0.1, "--se-stop", help="Stop once SE <= this (after --min-items)."),
        min_items: int | None = typer.Option(
            None, "--min-items", help="Fewest items asked. [default: 30, or the bundled bank's "
            "own minimum: arc, truthfulqa, winogrande 45, gsm8k 55; at most --max-items]"),
        max_items: Optional[int] = typer.Option(None, "--max-items",
                                                help="Most items asked. [default: 500; "
                                                     "--suite: 150]"),
        bound_stop: bool = typer.Option(True, "--bound-stop/--no-bound-stop",
                                        help="Banks with a score link: stop once the model is "
                                             "surely at the floor (chance) or the top of the "
                                             "link's curve."),
        bound_margin: float = typer.Option(0.02, "--bound-margin",
                                           help="Floor/top stop: how close (0-1 score units) "
                                                "to the curve's lowest/highest value counts."),
        fixed_length: Optional[int] = typer.Option(None, "--fixed-length",
                                                   help="A fixed-length adaptive test: exactly N "
                                                        "items, no SE stop (replaces --se-stop, "
                                                        "--min-items, --max-items)."),
        output: Optional[Path] = typer.Option(None, "--output", "-o",
                                              help="Run directory: results.json, reports/ and "
                                                   "(unless --db is given) runs.sqlite go there."),
        db: Optional[Path] = typer.Option(None, "--db",
                                          help="SQLite run store: OUTPUT/runs.sqlite with "
                                               "--output, else runs.sqlite in $ATLAS_HOME "
                                               "(default $XDG_DATA_HOME/atlascat, "
                                               "~/.local/share/atlascat); never the current "
                                               "directory."),
        resume: Optional[List[str]] = typer.Option(None, "--resume",
                                                   help="Continue run RUN_ID (repeatable); bank, "
                                                        "subject and settings come from --db."),
        seed: int = typer.Option(0, "--seed", help="Seed of the CAT's random choices."),
        device: Optional[str] = typer.Option(None, "--device",
                                             help="hf: / lmeval: subjects: cpu or cuda (the "
                                                  "backend chooses when not given)."),
        chat: bool = typer.Option(True, "--chat/--completion",
                                  help="openai: subjects: /v1/chat/completions or /v1/completions "
                                       "text prompts (both approximate)."),
        max_concurrency: int = typer.Option(4, "--max-concurrency",
                                            help="HTTP requests in flight at once, over all models."),
        api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env",
                                        help="Environment variable holding the API key (never "
                                             "stored; redacted from stored answers)."),
        timeout: Optional[float] = typer.Option(None, "--timeout",
                                                help="Seconds for one whole HTTP request: 60 "
                                                     "unless given (a resumed run keeps its "
                                                     "own)."),
        max_retries: Optional[int] = typer.Option(None, "--max-retries",
                                                  help="Retries on 429/5xx/timeouts/bad or empty "
                                                       "replies: 5 unless given."),
        backoff: Optional[float] = typer.Option(None, "--backoff",
                                                help="First retry delay in seconds, doubled each "
                                                     "retry: 1 unless given."),
        prompt_style: str = typer.Option("zero-shot", "--prompt-style",
                                         help="Chat subjects: zero-shot (lettered options) or "
                                              "few-shot (the leaderboard's context)."),
        max_tokens: Optional[int] = typer.Option(None, "--max-tokens",
                                                 help="Chat subjects: reply length: 16 for "
                                                      "multiple choice, 512 for GSM8K unless "
                                                      "given."),
        temperature: float = typer.Option(0.0, "--temperature", help="Chat subjects: sampling temperature."),
        system: Optional[str] = typer.Option(None, "--system", help="Chat subjects: system message."),
        no_cache: bool = typer.Option(False, "--no-cache",
                                      help="Always ask; do not reuse stored answers."),
        report_dir: Optional[Path] = typer.Option(None, "--report-dir",
                                                  help="Where run pages go: OUTPUT/reports with "
                                                       "--output, else <db stem>_reports next "
                                                       "to the run store (a resumed run keeps "
                                                       "its own)."),
        as_json: bool = typer.Option(False, "--json", help="Print results as JSON."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No per-item lines."),
    ):
        """Measure models adaptively: theta +- SE and the predicted leaderboard score from a
        few dozen items.

        With a log-likelihood subject (completions:, hf:, lmeval:, replay:) every item is asked
        as the Open LLM Leaderboard asked it, so the result is on the bank's scale. openai:
        (chat) subjects are asked prompts and labelled APPROXIMATE. Every step is saved in the
        run store before and after asking; a killed run continues with --resume RUN_ID without
        asking an answered item again. Ctrl-C (or SIGTERM) stops after the item in flight
        (press again to abandon it), marks the run interrupted, prints the --resume command
        and exits with status 130. API keys are read from the environment only.
        """
        import threading

        from ..errors import ConfigError, LiveRunError
        from ..live import runner
        from ..live.report import write_run_report
        from ..live.store import RunStore, default_store_path
        from ..live.subjects import (OpenAICompatible, OpenAICompletionsSubject,
                                     subject_from_spec)

        if batch_size is not None and batch_size < 1:
            raise ConfigError(f"--batch-size must be >= 1, got {batch_size}")
        bank = one_bank(bank, required=False)  # a second --bank points to --suite
        if suite is not None and (bank or resume):
            raise ConfigError("--suite asks the suite's own banks; drop "
                              + ("--bank" if bank else "--resume (a suite run resumes with "
                                 "--resume RUN_ID alone)"))
        if suite is None and target_se is not None:
            raise ConfigError("--target-se is the average's stop of --suite; a single bank "
                              "stops on --se-stop")
        if model_alias:
            err_console.print("warning: --model NAME is deprecated in atlas evaluate (--model is "
                              "the IRT model elsewhere); use --llm NAME", markup=False,
                              highlight=False, soft_wrap=True)
        names = list(llm or []) + list(model_alias or [])
        if output is not None and output.exists() and not output.is_dir():
            raise ConfigError(f"--output {str(output)!r} is a file; give a directory for the run")
        if db is None:
            db = (output / "runs.sqlite") if output is not None else default_store_path()
        http_opts = {k: v for k, v in dict(timeout=timeout, max_retries=max_retries,
                                            backoff=backoff).items() if v is not None}
        limiter = threading.BoundedSemaphore(max(1, int(max_concurrency)))

        if resume:
            if subject or names:
                raise ConfigError("--resume takes bank, subject and model from the database; "
                                  "drop --subject/--llm")
            if batch_size is not None:
                raise ConfigError("--resume continues a run with its own batch size; drop "
                                  "--batch-size")
            if fixed_length is not None:
                raise ConfigError("--resume continues a run with its own stopping rule; drop "
                                  "--fixed-length")
            if not db.exists():
                raise LiveRunError(f"run database {str(db)!r} does not exist; give the --db (or "
                                   "-o) the run was started with")
            store = RunStore(db)

            def rebuild(desc, bk):
                """The stored subject, with this call's HTTP settings and limiter."""
                stored = {k: desc[k] for k in ("timeout", "max_retries", "backoff", "max_backoff")
                          if k in desc}
                key_env = desc.get("api_key_env") or api_key_env
                if desc.get("type") == "openai":
                    subj = OpenAICompatible(desc["base_url"], desc["model"], api_key_env=key_env,
                                            chat=desc.get("kind") == "chat", limiter=limiter,
                                            **{**stored, **http_opts})
                elif desc.get("type") == "completions":
                    subj = OpenAICompletionsSubject(desc["base_url"], desc["model"],
                                                    api_key_env=key_env, limiter=limiter,
                                                    max_concurrency=max(1, int(max_concurrency)),
                                                    batch_prompts=desc.get("batch_prompts", 16),
                                                    **{**stored, **http_opts})
                else:
                    subj = runner.subject_from_description(desc, bk)
                return subj

            from ..live.suite_run import is_suite_run
            from ._suite_evaluate import resume_suite_runs

            infos = {rid: store.get_run(rid) for rid in resume}
            if any(is_suite_run(info) for info in infos.values()):
                if bank:
                    raise ConfigError("a suite run asks the suite's own banks; drop --bank")
                return resume_suite_runs(store, infos, db=db, output=output,
                                         report_dir=report_dir, cache=not no_cache,
                                         as_json=as_json, quiet=quiet, subject_for=rebuild)
            jobs = []
            given = _load_bank(bank)[0] if bank else None
            for rid, info in infos.items():
                bk = given if given is not None else runner.load_bank_ref(info["bank_ref"])
                jobs.append((rid, bk, info["bank_ref"], rebuild(info["subject"], bk)))
                cfg = info.get("config") or {}
                plan = (int(cfg.get("min_items", 0)), int(cfg.get("max_items", 500)),
                        cfg.get("se_stop"))
        elif suite is not None:
            if not subject:
                raise ConfigError("give --subject (who answers the suite)")
            from ._suite_evaluate import start_suite, suite_config

            config = suite_config(target_se=target_se, se_stop=se_stop, min_items=min_items,
                                  max_items=max_items, fixed_length=fixed_length,
                                  batch_size=batch_size, seed=seed)
            prompt = _cli_names(lambda: runner.PromptSettings(
                style=prompt_style, max_tokens=max_tokens, temperature=temperature,
                system=system))
            return start_suite(suite, subject, names, db=db, output=output,
                               report_dir=report_dir, config=config, prompt=prompt,
                               subject_kw=dict(api_key_env=api_key_env, limiter=limiter,
                                               chat=chat, device=device,
                                               max_concurrency=max(1, int(max_concurrency)),
                                               **http_opts),
                               cache=not no_cache, as_json=as_json, quiet=quiet)
        else:
            if not bank or not subject:
                raise ConfigError("give --bank (or --suite) and --subject (or --resume RUN_ID)")
            # everything is checked before the run store is created: a call that fails here
            # leaves no file behind
            config = _cat_config(se_stop, min_items, max_items, fixed_length)
            prompt = _cli_names(lambda: runner.PromptSettings(
                style=prompt_style, max_tokens=max_tokens, temperature=temperature,
                system=system))
            bk, ref = _load_bank(bank)
            if bound_stop and fixed_length is None:
                from ._common import with_link_stops

                config = with_link_stops(config, _stop_settings(bench_of(bk, ref), bound_margin),
                                         min_items is not None)
            plan = (config.min_items, config.max_items, config.se_stop)
            kind = subject.partition(":")[0].strip().lower()
            common = dict(bank=bk, api_key_env=api_key_env, limiter=limiter, chat=chat,
                          max_concurrency=max(1, int(max_concurrency)), device=device,
                          **http_opts)
            if kind in ("openai", "completions"):
                subjects = [subject_from_spec(subject, model=n, **common) for n in names or [None]]
            else:
                if len(names) > 1:
                    raise ConfigError(f"--subject {kind}: takes one model; give --llm once")
                subjects = [subject_from_spec(subject, model=names[0] if names else None,
                                              **common)]
            if any(runner.subject_protocol(s) == "approximate" for s in subjects):
                _approximate_note(subject.split(':')[0])

            def start(store, ids):
                for s in subjects:
                    ids.append(runner.start_run(store, bk, s, config=config, seed=seed,
                                                prompt=prompt, bank_ref=ref,
                                                batch_size=batch_size or 1))

            store, ids = _start_runs(db, output, report_dir, start)
            for rid, s in zip(ids, subjects):
                err_console.print(f"run {rid} started for {s.name} (db {db})", markup=False,
                                  highlight=False, soft_wrap=True)
            jobs = [(rid, bk, ref, s) for rid, s in zip(ids, subjects)]

        show = _LiveDisplay([s.name for _, _, _, s in jobs],
                            [str(i) for _, bk, _, _ in jobs for i in bk.item_ids], plan,
                            lines=not (quiet or as_json), bar=not as_json)
        stop = _StopRequest()
        try:
            with stop.installed(), show:
                results = _run_all(store, [(rid, bk, s) for rid, bk, _, s in jobs],
                                   cache=not no_cache, on_step=show.step_callback(stop))
        except KeyboardInterrupt:
            for rid, *_ in jobs:
                store.interrupt_run(rid)
            counts = []
            for rid, *_ in jobs:
                got = store.get_run(rid)
                counts.append(f"run {rid} ({got['model']}): {got['n_items']} item(s) answered")
            err_console.print("interrupted: " + "; ".join(counts) + ". Resume with: atlas "
                              "evaluate " + " ".join(f"--resume {rid}" for rid, *_ in jobs)
                              + f" --db {db}", markup=False, highlight=False, soft_wrap=True)
            for _, _, _, s in jobs:
                if hasattr(s, "close"):
                    s.close()
            raise typer.Exit(130)
        rows = []
        for (rid, bk, ref, _), res in zip(jobs, results):
            outdir, reports = _run_dirs(store, rid, db, output, report_dir)
            row = {**res.to_dict(), "bench": bench_of(bk, ref), "bank": ref}
            row["protocol_label"] = protocol_label(row["protocol"], bk)
            if res.status == "done":
                row["leaderboard"] = leaderboard_prediction(
                    row["bench"], res.theta, res.se, dict(zip(res.items, res.scores)),
                    stop_reason=res.stop_reason)
            path = write_run_report(store, rid, reports / f"{rid}.html", bank=bk,
                                    leaderboard=row.get("leaderboard"))
            row["report"] = str(path)
            row["_outdir"] = outdir
            rows.append(row)
        for _, _, _, s in jobs:
            if hasattr(s, "close"):
                s.close()
        by_dir: dict = {}
        for r in rows:
            by_dir.setdefault(r.pop("_outdir"), []).append(r)
        for outdir, group in by_dir.items():
            _write_results(outdir / "results.json", group, merge=bool(resume))
        if as_json:
            typer.echo(json.dumps(rows, indent=1, default=str))
        else:
            import pandas as pd

            table = pd.DataFrame([{
                "run": r["run_id"], "model": r["model"], "status": r["status"],
                "protocol": r["protocol"] or "-", "theta": r["theta"], "SE": r["se"],
                "items": r["n_items"],
                "leaderboard": (f"{100 * r['leaderboard']['score']:.1f}%"
                                + (" (!)" if r["leaderboard"].get("warning") else "")
                                if "score" in (r.get("leaderboard") or {}) else "-"),
                "stop": r["stop_reason"] or "-",
            } for r in rows])
            print_frame(table, title="Live adaptive evaluation")
            for r in rows:
                if r["status"] == "done":
                    console.print(format_result(r), markup=False, highlight=False, soft_wrap=True)
        failed = [r for r in rows if r["status"] != "done"]
        if failed:
            raise LiveRunError("; ".join(f"run {r['run_id']} ({r['model']}) stopped: {r['error']}"
                                         for r in failed))

    def _run_all(store, jobs, *, cache, on_step):
        from concurrent.futures import ThreadPoolExecutor

        from ..errors import AtlasError
        from ..live import runner

        def one(job):
            rid, bk, subj = job
            try:
                return runner.continue_run(store, rid, bk, subj, cache=cache, on_step=on_step)
            except AtlasError as exc:
                res = runner.RunResult.from_store(store, rid)
                res.status, res.error = "error", str(exc)
                return res

        if len(jobs) == 1:
            return [one(jobs[0])]
        with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="atlas-live") as pool:
            return list(pool.map(one, jobs))


# ------------------------------------------------------------------------------- helpers
#: CATConfig / PromptSettings field -> the atlas evaluate option that sets it
_OPTION_NAMES = {"min_items": "--min-items", "max_items": "--max-items", "se_stop": "--se-stop",
                 "max_tokens": "--max-tokens", "temperature": "--temperature",
                 "prompt style": "--prompt-style"}


def _cli_names(build):
    """``build()``, with the library's field names in a ConfigError replaced by the options."""
    import re

    from ..errors import ConfigError

    try:
        return build()
    except ConfigError as exc:
        msg = str(exc)
        for field, opt in _OPTION_NAMES.items():
            msg = re.sub(rf"(?<![-\w]){re.escape(field)}(?![\w])", opt, msg)
        raise ConfigError(msg) from exc


def _cat_config(se_stop: float, min_items: int | None, max_items: int,
                fixed_length: int | None):
    """The CAT's stopping rule from the options, with errors that name the options."""
    from ..cat.config import CATConfig
    from ..errors import ConfigError

    if fixed_length is not None:
        if fixed_length < 1:
            raise ConfigError(f"--fixed-length must be >= 1, got {fixed_length}")
        given = [opt for opt, v, d in (("--se-stop", se_stop, 0.1),
                                       ("--min-items", min_items, None),
                                       ("--max-items", max_items, None)) if v != d]
        if given:
            raise ConfigError(f"--fixed-length {fixed_length} sets the test length; drop "
                              f"{', '.join(given)}")
        return _cli_names(lambda: CATConfig.fixed_length(int(fixed_length)))
    max_items = 500 if max_items is None else max_items
    if max_items < 1:
        raise ConfigError(f"--max-items must be >= 1, got {max_items}")
    if min_items is None:  # the bundled bank's own minimum may raise it (stop_settings)
        min_items = min(30, max_items)
    if min_items < 0:
        raise ConfigError(f"--min-items must be >= 0, got {min_items}")
    if min_items > max_items:
        raise ConfigError(f"--min-items ({min_items}) must be <= --max-items ({max_items}); lower "
                          "--min-items (or use --fixed-length N for exactly N items)")
    if not 0 < se_stop < float("inf"):
        raise ConfigError(f"--se-stop must be a number > 0, got {se_stop}")
    return _cli_names(lambda: CATConfig(se_stop=se_stop, min_items=min_items,
                                        max_items=max_items))
