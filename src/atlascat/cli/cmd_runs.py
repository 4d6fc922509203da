"""``atlas runs``: list live runs in a run store and their state."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._common import console, err_console, print_frame


def runs_command(
    db: Optional[Path] = typer.Option(None, "--db",
                                      help="SQLite run store (default: runs.sqlite in "
                                           "$ATLAS_HOME, else $XDG_DATA_HOME/atlascat, else "
                                           "~/.local/share/atlascat, and every store a run "
                                           "wrote elsewhere with -o/--db)."),
    run_id: Optional[str] = typer.Option(None, "--run", help="Show the steps of one run."),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="With --run: (re)write the run's HTML page "
                                               "to this file."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    model: Optional[str] = typer.Option(None, "--model",
                                        help="Only the runs of models whose name holds this "
                                             "(case-insensitive; or a pattern: 'org/ckpt-*')."),
    state: Optional[str] = typer.Option(None, "--state",
                                        help="Only the runs in this state: running, "
                                             "interrupted, error or done."),
    sort: str = typer.Option("created", "--sort",
                             help="Order: created (newest first), model (by name, ckpt-9 "
                                  "before ckpt-10) or predicted (highest first)."),
):
    """List live runs: state (running / interrupted / error / done), protocol, theta, SE, items.

    A suite run has no theta: its predicted column is the predicted average.

    'interrupted' is a run stopped by Ctrl-C / SIGTERM or whose process died (killed) before
    finishing; continue it with atlas evaluate --resume RUN_ID (--db DB). A run not done
    shows the prediction from its answers so far and how far it got ("interrupted after 31
    items"). The score is shown
    twice: observed (the mean score over the items asked: right / asked for right-or-wrong
    answers) and model-based (the bank's expected score at theta); on a bank folder built
    with --score-range both are mean scores on the metric's own scale; on a graded / gpcm
    bank both are mean ratings (on the rating scale the items share, else as shares of each
    item's scale). --run RUN_ID shows the run's steps and its predicted score. Without --db it lists the default store and
    every store a run asked items into elsewhere (-o DIR, --db FILE; remembered in
    $ATLAS_HOME/stores.txt), a killed run's too.
    """
    from ..errors import ConfigError

    html = output
    if html is not None and run_id is None:
        raise ConfigError("-o/--output writes one run's page: give --run RUN_ID too")
    if html is not None and html.is_dir():
        raise ConfigError(f"-o/--output {str(html)!r} is a directory; give an .html file path")
    if html is not None:   # before any store is opened: never the store itself, nor data
        from ..validation import check_page_output

        check_page_output(html, inputs={"--db": db})
    from contextlib import ExitStack

    with ExitStack() as opened:   # every store read is closed, not left to the collector
        stores = [opened.enter_context(st) for st in _stores(db)]
        if run_id is not None:
            return _show_run(stores, run_id, html, as_json)
        return _list_runs(stores, as_json, model=model, state=state, sort=sort)


def register(app: typer.Typer) -> None:
    app.command("runs")(runs_command)


def _stores(db):
    """The run stores to read: ``--db``, else the default one and every store a run wrote
    elsewhere."""
    from ..errors import LiveRunError
    from ..live.store import RunStore, default_store_path, known_stores

    paths = [db] if db is not None else known_stores()
    if db is not None and not db.exists():
        raise LiveRunError(f"run database {str(db)!r} does not exist (give --db)")
    if db is not None and db.is_file() and db.stat().st_size == 0:   # listing never writes
        raise LiveRunError(f"--db {str(db)!r} is an empty file, not a run store; give "
                           "the --db your runs were stored in")
    if not paths:
        raise LiveRunError(f"run database {str(default_store_path())!r} does not exist and "
                           "no run was written elsewhere (give --db)")
    if db is not None:
        return [RunStore(db, read_only="auto")]
    stores = []
    for path in paths:   # a remembered store that is no longer one does not hide the others
        try:
            stores.append(RunStore(path, read_only="auto"))
        except LiveRunError as exc:
            err_console.print(f"warning: skipped: {exc}", markup=False, highlight=False)
    if not stores:
        raise LiveRunError("no readable run store (give --db)")
    return stores


def _show_run(stores, run_id: str, html, as_json: bool) -> None:
    """One run's steps (and its HTML page with -o)."""
    from ..live.store import find_run_store

    store = next((st for st in stores if st.has_run(run_id)), None)
    if store is None and len(stores) > 1:   # the error names every store searched
        find_run_store(run_id, [st.path for st in stores])
    store = store or stores[0]              # one store: get_run names it and its recent runs
    info = store.get_run(run_id)
    steps = store.steps(run_id)
    steps["step"] = steps["step"] + 1  # users count steps from 1, as the progress lines
    from ..live.suite_run import write_suite_report

    if html is not None and info["kind"] == "suite":
        err_console.print(f"wrote {write_suite_report(store, run_id, html)}",
                          highlight=False)
    elif html is not None:
        from ..live.report import write_run_report
        from ..catalogue import BankRef

        bank = None
        try:
            bank = BankRef.parse(info["bank_ref"]).load() if info["bank_ref"] else None
        except Exception:  # noqa: BLE001 - the page is still useful without content
            bank = None
        from ..live.service import predict_run

        path = write_run_report(store, run_id, html, bank=bank,   # the page evaluate wrote
                                leaderboard=predict_run(store, run_id) or None)
        err_console.print(f"wrote {path}", highlight=False)
    cols = ["step", "item_id", "status", "score", "theta", "se", "latency_s",
            "prompt_tokens", "completion_tokens", "attempts", "cached", "times_asked",
            "answer_chars"]
    from ..live.report import (describe_prediction, on_metric_scale, protocol_name,
                               protocol_value, score_name)
    from ..live.scale import stored_scale
    from ..live.service import predict_run

    lb = predict_run(store, run_id)   # the number evaluate, `atlas runs` and the page show
    scale = stored_scale(info["bank_ref"])   # a metric's own scale: every score on it
    records = [on_metric_scale(r, scale, steps=True) for r in steps[cols].to_dict("records")]
    if as_json:
        run = on_metric_scale({k: v for k, v in info.items() if k != "session"}, scale)
        run["protocol"] = protocol_value(info.get("protocol"), info.get("bank_ref"))
        typer.echo(json.dumps({"run": run, "prediction": lb, "steps": records}, default=str))
        return
    if scale is not None:
        import pandas as pd

        steps = pd.DataFrame(records, columns=cols)

    proto = protocol_name(info.get("protocol"), info.get("bank_ref"))
    shown = _estimates(steps[cols].astype(object), info["kind"] == "suite")
    if not lb.get("ratings"):
        shown["score"] = _scores(shown["score"], scale)
    if lb.get("ratings"):         # an ordinal bank's steps: each one's rating
        shown = shown.rename(columns={"score": "rating"})
    shown = _predicted(shown, info, store.steps(run_id), lb.get("scale"))
    print_frame(shown.fillna("-"), title=f"run {run_id} ({info['model']}, {info['state']}, "
                             f"protocol {proto})", max_rows=1000)
    if info.get("error") and info["status"] != "done":   # why it stopped (the page says it too)
        console.print(f"last error: {info['error']}", markup=False, highlight=False)
    if lb.get("score") is not None:
        name = "predicted average" if info["kind"] == "suite" else score_name(lb)
        console.print(f"{name}: {describe_prediction(lb)}", markup=False, highlight=False)
    return None


def _predicted(shown, info, steps, scale):
    """A benchmark predictor run's steps with the predicted score and its 95% interval after
    each, beside theta, as its page prints them."""
    from ..live.report import predicted_steps

    said = predicted_steps(info, steps, scale)
    if said is None:
        return shown
    at = shown.columns.get_loc("se") + 1
    for j, col in enumerate(("predicted" if scale is not None else "predicted %",
                             "95% interval")):
        shown.insert(at + j, col, [said.get(int(k) - 1, (None, None))[j]
                                   for k in shown["step"]])
    return shown


def _scores(scores, scale):
    """The steps' scores as evaluate's lines and the HTML page print them: on a metric's own
    ``scale`` by the one digits rule (BLEU 98.9, not 98.95), a score in [0, 1] to 2 decimals
    once one lies between 0 and 1, right / wrong as 1 / 0."""
    from ..scorelink.prediction import score_text

    vals = [None if v is None or v != v else float(v) for v in scores]
    between = any(v is not None and 0 < v < 1 for v in vals)
    return [v if v is None else score_text(v, scale) if scale is not None else
            f"{v:.2f}" if between else f"{v:g}" for v in vals]


def _estimates(shown, suite: bool):
    """The steps' theta and SE as evaluate's lines and the HTML page print them; a suite
    run's are the predicted average and its SE, in percent."""
    def fmt(v, k, spec):
        return v if v is None or v != v else format(k * float(v), spec)

    k, spec = (100.0, ".1f") if suite else (1.0, ".3f")
    for col in ("theta", "se"):   # a suite's SE in points to 2 decimals, as its step lines
        shown[col] = [fmt(v, k, ".2f" if suite and col == "se" else spec) for v in shown[col]]
    return shown.rename(columns={"theta": "average %", "se": "SE (points)"}) if suite else shown


def _list_runs(stores, as_json: bool, *, model=None, state=None, sort="created") -> None:
    """Every run of the stores (those of ``model`` / in ``state``), one row each, with its
    predicted score."""
    import datetime as dt

    import pandas as pd
    from ..live.service import predict_run, select_runs, sort_runs

    frames = [st.list_runs().assign(db=str(st.path)) for st in stores]
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    df = select_runs(df, model=model, state=state).reset_index(drop=True)
    by_path = {str(st.path): st for st in stores}
    predictions = [predict_run(by_path[r["db"]], r) for r in df.to_dict("records")]
    df, predictions = sort_runs(df, predictions, sort)
    from ..live.scale import run_scales

    scales = run_scales(predictions, df["bank_ref"])   # a run not done: its bank's scale
    if as_json:
        from ..live.report import on_metric_scale, protocol_value

        # every number as stored (results.json and --run --json give them so; to_json would
        # round them to 10 significant digits)
        records = df.astype(object).where(df.notna(), None).to_dict("records")
        records = [on_metric_scale(rec, sc) for rec, sc in zip(records, scales)]
        for rec, lb in zip(records, predictions):
            rec["prediction"] = lb
            rec["protocol"] = protocol_value(rec.get("protocol"), rec.get("bank_ref"))
        typer.echo(json.dumps(records))
        return
    where = str(stores[0].path) if len(stores) == 1 else f"{len(stores)} run stores"
    if df.empty:
        which = " ".join(f"{k} {v!r}" for k, v in (("of model", model), ("in state", state)) if v)
        console.print(f"no runs {which + ' ' if which else ''}in {where}")
        return
    df = df.assign(updated=[dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M")
                            for t in df["updated_at"]])
    df = df.rename(columns={"observed_score": "observed", "model_based_score": "model-based"})
    for col in ("observed", "model-based"):  # as the predicted score beside them: percent,
        # or the metric's own scale
        df[col] = [_as_score(v, sc) for v, sc in zip(df[col], scales)]
    from ..live.report import benchmark_of, describe_prediction, protocol_name

    df["protocol"] = [protocol_name(p, ref) if isinstance(p, str) else p
                      for p, ref in zip(df["protocol"], df["bank_ref"])]
    df["benchmark"] = [benchmark_of(lb, ref) for lb, ref in zip(predictions, df["bank_ref"])]
    df["predicted"] = [describe_prediction(lb, short=True) + (" (!)" if lb.get("warning")
                                                             else "")
                       if lb.get("score") is not None or lb.get("partial") else "-"
                       for lb in predictions]
    cols = ["run_id", "state", "model", "benchmark", "protocol", "bank_ref", "n_items", "theta",
            "se", "observed", "model-based", "predicted", "stop_reason", "pending", "updated"]
    if (df["n_skipped"] > 0).any():   # items that got no score (a judge's null)
        cols.insert(cols.index("n_items") + 1, "n_skipped")
    # a terminal too narrow for every column: these go first (the run id is never folded)
    optional = ["bank_ref", "pending", "model-based", "se", "theta", "protocol", "db",
                "updated", "observed", "stop_reason"]
    print_frame(df[cols + (["db"] if len(stores) > 1 else [])].astype(object).fillna("-"),
                title=f"runs in {where}", float_format="{:.3f}", optional=optional,
                keep=("run_id",))


def _as_score(value, scale) -> str | None:
    """A 0-1 mean score in percent, or on a bank folder's metric ``scale`` (low, high)."""
    import math

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    from ..scorelink.prediction import level, score_text

    if scale is None:
        return f"{score_text(100 * value)}%"
    return level(value, scale)
