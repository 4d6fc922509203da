"""A whole suite (the Open LLM Leaderboard's six benchmarks) asked live in ONE run.

The run is an ordinary live run of the run store (one run id, per-step persistence, resume,
the answer cache, Ctrl-C) of kind ``suite``: its bank is the suite's composite bank
(``bank_ref`` ``suite:<suite>``, items ``<member>/<item_id>``, each asked with its own
benchmark's protocol) and its session a :class:`~atlascat.live.suite_session.SuiteLiveSession`,
so the live-run service (:class:`atlascat.live.service.LiveRun`) starts, resumes and drives it
as any other run. The step log's ``theta`` / ``se``
are the predicted average (0-1) and its SE (0-1).

:func:`suite_result` is the one place a suite run's numbers come from (``atlas evaluate``'s
table, ``results.json``, the HTML page and ``atlas runs``): it replays the run's stored answers
into a fresh SuiteSession, so every reader gets the same numbers.

Example::

    from atlascat.catalogue import BankRef
    from atlascat.live.service import LiveRun
    from atlascat.live.subjects import SimulatedSubject

    suite = BankRef.from_option("openllm-v1", kinds=("suite",))
    with LiveRun.start("runs.sqlite", suite, [SimulatedSubject(suite.load(), 0.5)]) as live:
        live.run()
        res = live.results()[0]    # suite_result: res["average"], res["benchmarks"]
"""
from __future__ import annotations

import html
from dataclasses import asdict
from pathlib import Path

from ..errors import ConfigError
from ..catalogue.bankref import BankRef
from .report import protocol_label, render_run_report
from .runner import (PromptSettings, RunResult, answerable_items, bank_hash, check_content,
                     check_token_budget, subject_protocol, with_run_seed)
from .store import RunStore
from .subjects import is_item_scored
from .suite_cache import keep_prediction, kept_prediction, prediction_key
from .suite_session import SuiteLiveSession, composite_for, suite_ref

__all__ = ["start_suite_run", "suite_result", "suite_of_run", "suite_table_rows",
           "write_suite_report"]


def suite_of_run(info: dict) -> str:
    """The suite a suite run asks (its reference: a bundled name or a suite file)."""
    return BankRef.parse(info["bank_ref"]).name


def start_suite_run(store: RunStore, suite, subject, *, config=None,
                    prompt: PromptSettings | None = None, run_id: str | None = None,
                    token_budget: int | None = None) -> str:
    """Create a suite run in ``store`` (``suite``: a bundled name or a suite JSON file);
    returns its id. ``config``: :class:`~atlascat.suite.SuiteConfig` (stop on the average's SE
    in points, item limits, items per round); ``token_budget`` as
    :func:`~atlascat.live.runner.start_run`'s."""
    from ..suite import SuiteConfig

    ref = suite_ref(suite)
    bank = composite_for(ref)
    sends = getattr(subject, "item_requests", None)     # a command sent the requests
    if is_item_scored(subject) and (sends is None or sends(bank.item_ids[0]) is None):
        raise ConfigError("a suite run asks each benchmark's own requests; a subject that scores "
                          "items by id (replay: on a folder without requests) asks one "
                          "bank folder at a time (--bank DIR)")
    config = config if config is not None else SuiteConfig()
    with_run_seed(subject, config.seed)   # simulate:THETA: the model of the suite's seed
    members = list(bank.metadata["member"])
    check_content(bank, subject, [bank.item_ids[members.index(m)] for m in dict.fromkeys(members)])
    answerable_items(subject, bank)   # a replay with no answer to the suite's items: one line
    token_budget = check_token_budget(subject, token_budget)
    prompt = prompt or PromptSettings()
    session = SuiteLiveSession(ref, config, subject=subject.name)
    store.add_redactor(getattr(subject, "redact", None))
    return store.create_run(
        model=subject.name, subject=subject.describe(), cache_key=subject.cache_key,
        bank_ref=str(BankRef("suite", ref)), bank_hash=bank_hash(bank), n_bank_items=len(bank),
        config={"suite": ref, **config.to_dict()}, prompt=asdict(prompt), seed=config.seed,
        session=session.to_dict(), run_id=run_id, protocol=subject_protocol(subject),
        batch_size=int(config.batch_size), kind="suite", token_budget=token_budget)


def suite_result(store: RunStore, run_id: str) -> dict:
    """A suite run's result: the run's fields (:class:`RunResult`) plus ``suite``, ``average``
    {score, lo, hi, percentile} (also as ``prediction``), ``benchmarks`` [{name, weight, score,
    lo, hi, items, percentile[, warning]}] (0-1 scores), ``se_points``, ``nearest_models`` and
    ``table`` (the printed table, :func:`suite_table_rows`), from the stored answers. No
    ``theta`` / ``se``: a suite's estimate is its average."""
    info = store.get_run(run_id)
    if info["kind"] != "suite":
        raise ConfigError(f"run {run_id} is not a suite run")
    res = RunResult.from_store(store, run_id)
    # a suite has no theta: the run store's theta / se columns hold its average (the step
    # log's estimate), which the result names as what it is: ``average`` and ``se_points``
    row = {k: v for k, v in res.to_dict().items() if k not in _NOT_SUITE_FIELDS}
    row.update({"suite": None, "average": None, "benchmarks": [],
                "prediction": {"note": "no answered item yet"}})
    if res.n_items:
        key = prediction_key(info, suite_of_run(info))   # a finished run's: kept in the store
        pred = kept_prediction(store, run_id, key)
        if pred is None:
            session = SuiteLiveSession.from_dict(info["session"], subject=info["model"])
            pred = session.prediction(stop_reason=info.get("stop_reason"))
            keep_prediction(store, run_id, key, pred)
        row.update(pred, stop_reason=res.stop_reason, prediction=dict(pred["average"]))
    else:
        row["suite"] = suite_of_run(info)
    row["protocol_label"] = protocol_label(row.get("protocol"), composite_for(suite_of_run(info)))
    row["table"] = suite_table_rows(row)
    return row


#: RunResult fields a suite run does not have (a bank's theta and its model-based score)
_NOT_SUITE_FIELDS = frozenset({"theta", "se", "model_based_score"})


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _rank(pct) -> str:
    return "-" if pct is None else f"{pct:.0f}"


def suite_table_rows(row: dict) -> list[dict]:
    """The suite table as printed, written to the HTML page and kept in ``results.json``:
    one row per benchmark (predicted score, 95% interval, items asked), then the average with
    its interval and percentile (percent units, one decimal)."""
    out = []
    for b in row.get("benchmarks") or []:
        out.append({"benchmark": b["name"], "predicted": _pct(b["score"]),
                    "95% interval": f"{_pct(b['lo'])}-{_pct(b['hi'])}", "items": b["items"],
                    "percentile": _rank(b.get("percentile"))})
    avg = row.get("average")
    if avg:
        pct = avg.get("percentile")
        out.append({"benchmark": "average", "predicted": _pct(avg["score"]),
                    "95% interval": f"{_pct(avg['lo'])}-{_pct(avg['hi'])}",
                    "items": row.get("n_items"),
                    "percentile": _rank(pct)})
    return out


def _suite_html(row: dict) -> str:
    rows = suite_table_rows(row)
    cols = ["benchmark", "predicted", "95% interval", "items", "percentile"]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td class='{'num' if c != 'benchmark' else ''}' data-col='{c}'>"
                         f"{html.escape(str(r[c]))}</td>" for c in cols) + "</tr>"
        for r in rows)
    return (f"<h2>Suite {html.escape(str(row.get('suite')))}: predicted leaderboard scores</h2>"
            f"<table class='suite'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            + _nearest_html(row.get("nearest_models")) +
            "<p class='muted'>Scores in percent; each interval is the 95% interval of the "
            "predicted leaderboard score.</p>")


def _nearest_html(nearest) -> str:
    if not nearest:
        return ""
    models = ", ".join(f"{html.escape(str(n['model']))} ({100 * n['agreement']:.0f}%)"
                       for n in nearest)
    return (f"<p class='nearest'>Answered the asked items most like: {models} (share of the "
            "same answers; the neighbour correction reads these models' errors).</p>")


def write_suite_report(store: RunStore, run_id: str, path, row: dict | None = None) -> Path:
    """The run's HTML page with the suite table (the numbers of :func:`suite_result`)."""
    row = row if row is not None else suite_result(store, run_id)
    info = store.get_run(run_id)
    bank = composite_for(suite_of_run(info))
    page = render_run_report(store, run_id, bank=bank, suite=row, sections=_suite_html(row))
    from ..validation import check_page_output

    path = check_page_output(path, option=None, inputs={"run database": store.path})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
