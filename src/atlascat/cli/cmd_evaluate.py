"""``atlas evaluate``: live adaptive test of real models through OpenAI-compatible endpoints."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ._common import console, err_console, print_frame


def _parse_subject(spec: str):
    """``openai:URL`` -> ("openai", URL); ``simulate:THETA[:SEED]`` -> ("simulate", ...)."""
    from ..errors import ConfigError

    kind, _, rest = spec.partition(":")
    kind = kind.lower()
    if kind == "openai" and rest:
        return "openai", rest
    if kind in ("simulate", "sim") and rest:
        return "simulate", rest
    raise ConfigError(f"--subject {spec!r}: use openai:URL (an OpenAI-compatible server, e.g. "
                      "openai:http://127.0.0.1:8000/v1) or simulate:THETA[:SEED]")


def _load_bank(spec: str):
    """``arc`` (a shipped content bank) or a bank file with content columns -> (bank, ref)."""
    from ..errors import BankError
    from ..live.items import SHIPPED_BANKS, _normalize_loaded, load_content_bank

    if spec.lower() in SHIPPED_BANKS and not Path(spec).exists():
        return load_content_bank(spec.lower()), f"shipped:{spec.lower()}"
    path = Path(spec)
    if not path.exists():
        raise BankError(f"--bank {spec!r} is neither a shipped content bank "
                        f"({', '.join(SHIPPED_BANKS)}) nor an existing file")
    from ..irt.bank import ItemBank

    return _normalize_loaded(ItemBank.read(path, normalize_ids=True)), str(path.resolve())


def register(app: typer.Typer) -> None:
    @app.command("evaluate")
    def evaluate(
        bank: Optional[str] = typer.Option(None, "--bank", "-b",
                                           help="Content bank: 'arc' (shipped) or a bank file "
                                                "with question/choices/answer/scorer columns."),
        subject: Optional[str] = typer.Option(None, "--subject", "-s",
                                              help="openai:URL (OpenAI-compatible server, e.g. "
                                                   "openai:http://127.0.0.1:8000/v1) or "
                                                   "simulate:THETA[:SEED]."),
        model: Optional[List[str]] = typer.Option(None, "--model", "-m",
                                                  help="Model name; repeat to test several "
                                                       "models concurrently."),
        se_stop: float = typer.Option(0.1, "--se-stop", help="Stop once SE <= this (after --min-items)."),
        min_items: Optional[int] = typer.Option(None, "--min-items", help="Default 30."),
        max_items: Optional[int] = typer.Option(None, "--max-items", help="Default 500."),
        db: Path = typer.Option(Path("atlas_runs.sqlite"), "--db", help="SQLite run store."),
        resume: Optional[List[str]] = typer.Option(None, "--resume",
                                                   help="Continue run RUN_ID (repeatable); bank, "
                                                        "subject and settings come from --db."),
        seed: int = typer.Option(0, "--seed", help="Seed of the CAT's random choices."),
        chat: bool = typer.Option(True, "--chat/--completion",
                                  help="/v1/chat/completions or /v1/completions."),
        max_concurrency: int = typer.Option(4, "--max-concurrency",
                                            help="Requests in flight at once, over all models."),
        api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env",
                                        help="Environment variable holding the API key (never "
                                             "stored)."),
        timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds per request (default 60)."),
        max_retries: Optional[int] = typer.Option(None, "--max-retries",
                                                  help="Retries on 429/5xx/timeouts/bad JSON (default 5)."),
        backoff: Optional[float] = typer.Option(None, "--backoff",
                                                help="First retry delay in seconds, doubled each "
                                                     "retry (default 1)."),
        prompt_style: str = typer.Option("zero-shot", "--prompt-style",
                                         help="zero-shot (lettered options) or few-shot "
                                              "(the leaderboard's context)."),
        max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Default: 16 MC, 512 GSM8K."),
        temperature: float = typer.Option(0.0, "--temperature"),
        system: Optional[str] = typer.Option(None, "--system", help="System message (chat)."),
        no_cache: bool = typer.Option(False, "--no-cache",
                                      help="Always ask; do not reuse stored answers."),
        report_dir: Optional[Path] = typer.Option(None, "--report-dir",
                                                  help="Where run pages go (default: "
                                                       "<db stem>_reports next to --db)."),
        as_json: bool = typer.Option(False, "--json", help="Print results as JSON."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No per-item lines."),
    ):
        """Measure models adaptively: theta +- SE from a few dozen real questions.

        Every step is saved in --db before and after asking; a killed run continues with
        --resume RUN_ID without asking an answered item again. API keys are read from the
        environment only.
        """
        import threading

        from ..cat.config import CATConfig
        from ..errors import ConfigError, LiveRunError
        from ..live import runner
        from ..live.report import write_run_report
        from ..live.store import RunStore
        from ..live.subjects import OpenAICompatible, SimulatedSubject

        store = RunStore(db)
        limiter = threading.BoundedSemaphore(max(1, int(max_concurrency)))
        http_opts = {k: v for k, v in dict(timeout=timeout, max_retries=max_retries,
                                            backoff=backoff).items() if v is not None}

        def on_step(info):
            if quiet or as_json:
                return
            mark = "[green]correct[/]" if info.score else "[red]wrong[/]"
            err_console.print(f"[dim]{info.model}[/] step {info.step + 1:>3} item {info.item_id:>6} "
                              f"{mark:<20} theta {info.theta:+.3f}  SE {info.se:.3f}"
                              + ("  (cached)" if info.cached else ""), highlight=False)

        if resume:
            if subject or model:
                raise ConfigError("--resume takes bank, subject and model from the database; "
                                  "drop --subject/--model")
            banks, subjects = [], []
            for rid in resume:
                info = store.get_run(rid)
                bk = _load_bank(bank)[0] if bank else runner.load_bank_ref(info["bank_ref"])
                desc = info["subject"]
                if desc.get("type") == "openai":
                    subj = OpenAICompatible(desc["base_url"], desc["model"],
                                            api_key_env=desc.get("api_key_env") or api_key_env,
                                            chat=desc.get("kind") == "chat", limiter=limiter,
                                            **{**{k: desc[k] for k in ("timeout", "max_retries",
                                                                        "backoff", "max_backoff")
                                                  if k in desc}, **http_opts})
                else:
                    subj = runner.subject_from_description(desc, bk)
                banks.append(bk)
                subjects.append(subj)
            jobs = list(zip(resume, banks, subjects))
        else:
            if not bank or not subject:
                raise ConfigError("give --bank and --subject (or --resume RUN_ID)")
            bk, ref = _load_bank(bank)
            kind, target = _parse_subject(subject)
            if kind == "openai":
                if not model:
                    raise ConfigError("give the model name with --model (repeat for several)")
                subjects = [OpenAICompatible(target, m, api_key_env=api_key_env, chat=chat,
                                             limiter=limiter, **http_opts) for m in model]
            else:
                theta_s, _, sseed = target.partition(":")
                try:
                    theta_v, sseed_v = float(theta_s), int(sseed or 0)
                except ValueError:
                    raise ConfigError(f"--subject simulate:{target}: THETA must be a number and "
                                      "SEED an integer") from None
                names = model or [f"simulated(theta={theta_v:g})"]
                subjects = [SimulatedSubject(bk, theta_v, seed=sseed_v, name=n,
                                             kind="chat" if chat else "completion") for n in names]
            overrides = {k: v for k, v in dict(min_items=min_items, max_items=max_items).items()
                         if v is not None}
            config = CATConfig(se_stop=se_stop, **overrides)
            prompt = runner.PromptSettings(style=prompt_style, max_tokens=max_tokens,
                                           temperature=temperature, system=system)
            ids = [runner.start_run(store, bk, s, config=config, seed=seed, prompt=prompt,
                                    bank_ref=ref) for s in subjects]
            for rid, s in zip(ids, subjects):
                err_console.print(f"run [bold]{rid}[/] started for {s.name} (db {db})",
                                  highlight=False)
            jobs = [(rid, bk, s) for rid, s in zip(ids, subjects)]

        results = _run_all(store, jobs, cache=not no_cache, on_step=on_step)
        reports = report_dir or db.parent / f"{db.stem}_reports"
        rows = []
        for (rid, bk, _), res in zip(jobs, results):
            path = write_run_report(store, rid, reports / f"{rid}.html", bank=bk)
            rows.append({**res.to_dict(), "report": str(path)})
        for _, _, s in jobs:
            if hasattr(s, "close"):
                s.close()
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
        else:
            import pandas as pd

            table = pd.DataFrame([{
                "run": r["run_id"], "model": r["model"], "status": r["status"],
                "theta": r["theta"], "SE": r["se"], "items": r["n_items"],
                "accuracy": r["accuracy"], "stop": r["stop_reason"] or "-",
                "tokens": r["prompt_tokens"] + r["completion_tokens"],
            } for r in rows])
            print_frame(table, title="Live adaptive evaluation")
            for r in rows:
                if r["status"] == "done":
                    console.print(f"{r['model']}: theta = {r['theta']:.3f} +- {r['se']:.3f} "
                                  f"({r['n_items']} items, reconstructed accuracy "
                                  f"{r['accuracy']:.1%}); report {r['report']}", highlight=False)
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
