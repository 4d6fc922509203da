"""``atlas runs``: list live runs in a run store and their state."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._common import console, err_console, print_frame


def register(app: typer.Typer) -> None:
    @app.command("runs")
    def runs(
        db: Optional[Path] = typer.Option(None, "--db",
                                          help="SQLite run store (default: runs.sqlite in "
                                               "$ATLAS_HOME, else $XDG_DATA_HOME/atlascat, else "
                                               "~/.local/share/atlascat)."),
        run_id: Optional[str] = typer.Option(None, "--run", help="Show the steps of one run."),
        output: Optional[Path] = typer.Option(None, "--output", "-o",
                                              help="With --run: (re)write the run's HTML page "
                                                   "to this file."),
        html: Optional[Path] = typer.Option(None, "--html", hidden=True,
                                            help="Deprecated alias of --output."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    ):
        """List live runs: state (running / interrupted / error / done), protocol, theta, SE, items.

        A suite run has no theta: its leaderboard column is the predicted average.

        'interrupted' is a run stopped by Ctrl-C / SIGTERM or whose process died (killed) before
        finishing; continue it with atlas evaluate --resume RUN_ID --db DB. Accuracy is shown
        twice: observed (right / asked, over the items asked) and model-based (the bank's
        expected proportion correct at theta).
        """
        import datetime as dt

        from ..errors import ConfigError, LiveRunError
        from ..live.store import RunStore, default_store_path

        db = db if db is not None else default_store_path()
        html = output or html
        if html is not None and run_id is None:
            raise ConfigError("-o/--output writes one run's page: give --run RUN_ID too")
        if html is not None and html.is_dir():
            raise ConfigError(f"-o/--output {str(html)!r} is a directory; give an .html file path")

        if not db.exists():
            raise LiveRunError(f"run database {str(db)!r} does not exist (give --db)")
        store = RunStore(db)
        if run_id is not None:
            info = store.get_run(run_id)
            steps = store.steps(run_id)
            from ..live.suite_run import is_suite_run, write_suite_report

            if html is not None and is_suite_run(info):
                err_console.print(f"wrote {write_suite_report(store, run_id, html)}",
                                  highlight=False)
            elif html is not None:
                from ..live.report import write_run_report
                from ..live.runner import load_bank_ref

                bank = None
                try:
                    bank = load_bank_ref(info["bank_ref"]) if info["bank_ref"] else None
                except Exception:  # noqa: BLE001 - the page is still useful without content
                    bank = None
                path = write_run_report(store, run_id, html, bank=bank)
                err_console.print(f"wrote {path}", highlight=False)
            cols = ["step", "item_id", "status", "score", "theta", "se", "latency_s",
                    "prompt_tokens", "completion_tokens", "attempts", "cached", "times_asked",
                    "answer_chars"]
            if as_json:
                typer.echo(json.dumps({"run": {k: v for k, v in info.items() if k != "session"},
                                       "steps": steps[cols].to_dict("records")}, default=str))
                return
            print_frame(steps[cols], title=f"run {run_id} ({info['model']}, {info['status']}, "
                                           f"protocol {info.get('protocol') or 'approximate'})",
                        max_rows=1000)
            return
        df = store.list_runs()
        from ..live.evaluation import predict_run

        predictions = [predict_run(store, r) for r in df.to_dict("records")]
        from ..live.suite_run import is_suite_run

        if not df.empty:
            # a suite run has no theta: its store columns hold the average, shown as such
            suite = [is_suite_run(r) for r in df.to_dict("records")]
            df.loc[suite, ["theta", "se", "model_based_accuracy"]] = None
        if as_json:
            records = json.loads(df.to_json(orient="records"))
            for rec, lb in zip(records, predictions):
                rec["leaderboard"] = lb
            typer.echo(json.dumps(records))
            return
        if df.empty:
            console.print(f"no runs in {db}")
            return
        df = df.assign(updated=[dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M")
                                for t in df["updated_at"]])
        df = df.rename(columns={"observed_accuracy": "observed", "model_based_accuracy":
                                "model-based"})
        from ..live.report import describe_prediction

        df["leaderboard"] = [describe_prediction(lb, short=True) + (" (!)" if lb.get("warning")
                                                                   else "")
                             if lb.get("score") is not None else "-" for lb in predictions]
        print_frame(df[["run_id", "state", "model", "protocol", "bank_ref", "n_items", "theta",
                        "se", "observed", "model-based", "leaderboard", "stop_reason", "pending",
                        "updated"]].astype(object).fillna("-"),
                    title=f"runs in {db}")
