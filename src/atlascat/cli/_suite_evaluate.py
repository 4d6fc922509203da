"""``atlas evaluate --suite``: every benchmark of a suite asked in ONE live run.

One run id, one resume, one ``results.json`` row and one HTML page; the table printed (each
benchmark's predicted score, 95% interval and items asked, then the average with its interval
and percentile) is :func:`atlascat.live.suite_run.suite_table_rows` of
:func:`~atlascat.live.suite_run.suite_result`, the numbers the page, ``results.json`` and
``atlas runs`` show.
"""
from __future__ import annotations

import json

import typer

from ._common import console, err_console, print_frame, warn
from ._live import (approximate_note, LiveDisplay, run_dirs, start_runs, StopRequest,
                    write_results)

__all__ = ["start_suite", "resume_suite_runs", "floor_note"]


def _say(text: str) -> None:
    err_console.print(text, markup=False, highlight=False, soft_wrap=True)


def floor_note(suite, config) -> str | None:
    """A one-line note when ``config.target_se`` cannot stop the test: it is at or below the
    average's SE floor (the score links' residual, which no item removes)."""
    from ..suite import SuiteSession

    if config.target_se is None:
        return None
    floor = float(SuiteSession(suite, config).floor_se()[0])
    if config.target_se > floor:
        return None
    return (f"note: --target-se {config.target_se:g} is at or below the average's SE floor "
            f"({floor:.2f} points: the score links' residual, which no item removes); the test "
            f"runs to --max-items ({config.max_items})")


def start_suite(suite: str, spec: str, names, *, db, output, report_dir, config, prompt,
                subject_kw: dict, cache: bool, as_json: bool, quiet: bool) -> None:
    """A new suite run of the subject ``spec`` (checked before the run store is created)."""
    from ..errors import ConfigError
    from ..live import runner
    from ..live.subjects import subject_from_spec
    from ..live.suite_run import start_suite_run
    from ..live.suite_session import composite_for, load_live_suite, suite_ref

    if len(names) > 1:
        raise ConfigError("--suite asks one model in one run; give --llm once")
    kind = spec.partition(":")[0].strip().lower()
    if kind == "replay":
        raise ConfigError("--suite with replay: subjects: replay the benchmarks' matrices with "
                          "atlas simulate --suite openllm-v1 BENCH=MATRIX ...")
    ref = suite_ref(suite)
    bank = composite_for(ref)
    subject = subject_from_spec(spec, model=names[0] if names else None, bank=bank, **subject_kw)
    if runner.subject_protocol(subject) == "approximate":
        approximate_note(kind, "the banks were")
    note = floor_note(load_live_suite(ref), config)
    if note:
        _say(note)
    store, (rid,) = start_runs(db, output, report_dir, lambda store, ids: ids.append(
        start_suite_run(store, ref, subject, config=config, prompt=prompt)))
    _say(f"run {rid} started for {subject.name} on suite {ref} (db {db})")
    _drive(store, rid, bank, subject, db=db, output=output, report_dir=report_dir, cache=cache,
           as_json=as_json, quiet=quiet, resumed=False)


def resume_suite_runs(store, infos: dict, *, db, output, report_dir, cache, as_json, quiet,
                      subject_for) -> None:
    """``--resume`` of suite runs (one after the other; ``infos``: run id -> stored run);
    ``subject_for(desc, bank)`` rebuilds a stored subject (with the command's HTTP settings)."""
    from ..errors import ConfigError
    from ..live.suite_run import is_suite_run, suite_of_run
    from ..live.suite_session import composite_for

    for rid, info in infos.items():
        if not is_suite_run(info):
            raise ConfigError(f"run {rid} is a single-bank run; resume suite runs and "
                              "single-bank runs in separate calls")
    for rid, info in infos.items():
        bank = composite_for(suite_of_run(info))
        _drive(store, rid, bank, subject_for(info["subject"], bank), db=db, output=output,
               report_dir=report_dir, cache=cache, as_json=as_json, quiet=quiet, resumed=True)


class _SuiteDisplay(LiveDisplay):
    """Per-item lines with the predicted average and its SE (points) instead of theta."""

    def estimate_text(self, info) -> str:
        return f"average {100 * info.theta:5.1f}  SE {100 * info.se:4.2f}"


def _drive(store, rid, bank, subject, *, db, output, report_dir, cache, as_json, quiet,
           resumed) -> None:
    """Run (or continue) one suite run to its end, then print, write results.json and the page."""
    from ..errors import AtlasError, LiveRunError
    from ..live import runner
    from ..live.suite_run import suite_result, write_suite_report

    cfg = store.get_run(rid).get("config") or {}
    plan = (int(cfg.get("min_items", 0)), int(cfg.get("max_items", 150)),
            float(cfg.get("target_se") or 0.0) / 100.0)
    show = _SuiteDisplay([subject.name], [str(i) for i in bank.item_ids], plan,
                         lines=not (quiet or as_json), bar=not as_json)
    stop = StopRequest()
    error = None
    try:
        with stop.installed(), show:
            runner.continue_run(store, rid, bank, subject, cache=cache,
                                on_step=show.step_callback(stop))
    except KeyboardInterrupt:
        store.interrupt_run(rid)
        got = store.get_run(rid)
        _say(f"interrupted: run {rid} ({got['model']}): {got['n_items']} item(s) answered. "
             f"Resume with: atlas evaluate --resume {rid} --db {db}")
        raise typer.Exit(130)
    except AtlasError as exc:
        error = str(exc)
    finally:
        if hasattr(subject, "close"):
            subject.close()
    row = suite_result(store, rid)
    if error is not None:
        row["status"], row["error"] = "error", error
    outdir, reports = run_dirs(store, rid, db, output, report_dir)
    row["report"] = str(write_suite_report(store, rid, reports / f"{rid}.html", row))
    write_results(outdir / "results.json", [row], merge=resumed)
    if as_json:
        typer.echo(json.dumps([row], indent=1, default=str))
    else:
        _print(row)
    if row["status"] != "done":
        raise LiveRunError(f"run {rid} ({row['model']}) stopped: {row['error']}")


def _print(row: dict) -> None:
    import pandas as pd

    from ..live.report import describe_prediction

    if row["table"]:
        print_frame(pd.DataFrame(row["table"]),
                    title=f"{row['model']} on {row['suite']}: predicted leaderboard scores (%)",
                    result=True)
    lines = [f"run {row['run_id']}: {row['n_items']} items"
             + (f", stop: {row['stop_reason']}" if row.get("stop_reason") else "")
             + f", status {row['status']}"]
    if row.get("average"):
        lines.append(f"  average: {describe_prediction(row['average'])}")
    lines.append(f"  protocol: {row['protocol_label']}")
    lines.append(f"  report: {row['report']}")
    console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
    for b in row.get("benchmarks") or []:  # warnings on stderr, as every other
        if b.get("warning"):
            warn(f"{b['name']}: {b['warning']}")
