"""The live-run service: starting, resuming and driving live runs of every kind, and the one
predicted score every reader shows.

``atlas evaluate`` parses options and displays; everything it does is here, as is what
``atlas runs``, ``atlas compare-models`` and the run pages read, so one number is the same
everywhere:

- :class:`LiveRun`: live runs driven to their end, concurrently when several models are asked:
  the adaptive test on one bank, a bank folder's benchmark predictor, or a whole suite in one
  run (the run's kind, :data:`~atlascat.live.store.RUN_KINDS`, is stored when it is created);
  started (:meth:`LiveRun.start`) or resumed from the run store (:meth:`LiveRun.resume`);
  :meth:`LiveRun.results` gives each run's row (``results.json``).
- :func:`evaluate` / :func:`resume`: one run of one subject, started or resumed and driven to
  its end (its error raised).
- :func:`predict_run`: the predicted score of a stored run, from its own answers
  and stop reason (a suite run's: its average).

Example::

    from atlascat.catalogue import BankRef
    from atlascat.live.service import LiveRun
    from atlascat.live.subjects import SimulatedSubject

    ref = BankRef.from_option("arc")
    with LiveRun.start("runs.sqlite", ref, [SimulatedSubject(ref.load(), 0.5)]) as live:
        live.run()                # `with`: the store (and subjects) closed at its end
        rows = live.results()     # theta, SE, the predicted score, ...
        table = live.to_frame()   # one row per run: theta, se, score, score_lo, score_hi, ...
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import AtlasError, BankError, ConfigError, LiveRunError, RunBusyError
from ..catalogue.bankref import BankRef
from .designs import DESIGNS, check_design, choose_design, design_bank, run_config
from .runner import RunResult, bank_hash, continue_run, start_run
from .store import RunStore
from .subjects import is_ordinal

__all__ = ["LiveRun", "Job", "evaluate", "resume", "predict_score", "predict_run",
           "unfinished_like",
           "run_predictions", "run_folder", "choose_design", "check_design", "design_bank",
           "predictor_prediction", "ordinal_prediction", "DESIGNS", "score_title", "select_runs",
           "RUN_STATES", "sort_runs", "RUN_ORDERS"]

#: how :func:`sort_runs` orders runs
RUN_ORDERS = ("created", "model", "predicted")

#: the states :meth:`RunStore.list_runs` gives a run
RUN_STATES = ("running", "interrupted", "error", "done")


# ------------------------------------------------------------------ the predicted score
def _named(ref: BankRef, pred: dict) -> dict:
    """``pred`` with what it is a prediction of (:meth:`BankRef.prediction_words`: the
    benchmark, ``population`` the source models of a bank folder or the leaderboard of a
    shipped link, a folder's metric and scale), unless it says so itself."""
    if "population" in pred:
        return pred
    return {**pred, **ref.prediction_words()}


def score_title(ref: BankRef) -> str:
    """What a prediction through ``ref``'s score link is called in every output: "predicted
    leaderboard score" for a shipped bank, "predicted <benchmark> score" for a bank folder built
    from the user's source models (or a bank file of the user's own)."""
    from ..scorelink.words import score_name

    return score_name(ref.prediction_words())


def _continuous(ref: BankRef | None) -> bool:
    """Whether a bank folder scores its items on a continuum (F1, ROUGE, a metric's scale)."""
    if ref is None or ref.kind != "dir":
        return False
    from ..bankdir.predict import continuous_scores

    return bool(continuous_scores(ref.folder()))


def _answered(subject, item_ids):
    """The items a recorded subject (``replay:``) has answers for, when it lacks some of
    ``item_ids`` (then it is asked only those, as ``atlas simulate`` replays it); else None."""
    answered = getattr(subject, "answered_items", None)
    if answered is None:
        return None
    have = answered()
    return None if all(str(i) in have for i in item_ids) else sorted(have)


def predict_score(ref: BankRef, theta, se, answers=None, stop_reason: str | None = None) -> dict:
    """{score, lo, hi, percentile, flag, warning, benchmark, population} (0-1) of theta +- SE
    and the answers (item -> 0/1) through the bank's score link, or {note} when there is no
    estimate or no link (the run's theta +- SE then stands on its own)."""
    return _named(ref, _link_prediction(ref, theta, se, answers, stop_reason))


def ordinal_prediction(bank, theta: float, se: float, answers=None) -> dict:
    """{score, lo, hi, metric, scale, unseen_ratings, unseen_note} of an ordinal bank: the mean
    rating over all its items predicted from the run's ``answers`` (item -> rating;
    :func:`~atlascat.irt.polyscore.predict_mean_rating`, what ``atlas simulate`` writes), or
    without them at theta +- SE (:meth:`~atlascat.irt.polybank.PolyBank.mean_rating_interval`);
    on the items' rating scale when they share one (``scale``), else as a share of each
    item's own (0-1); ``ratings`` (True) names it a mean rating wherever it is shown."""
    unseen, note, ratings = 0, None, None
    if answers:
        from ..irt.polyscore import aligned_ratings, predict_mean_rating

        from ..responses import one_subject_frame

        ratings = aligned_ratings(one_subject_frame(answers), bank)[0]
        score, lo, hi = (float(v[0]) for v in predict_mean_rating(ratings, bank))
        unseen, note = int(bank.unseen(ratings).sum()), bank.unseen_note(ratings)
    else:
        score, lo, hi = bank.mean_rating_interval(theta, se)
    scale = bank.rating_scale()
    out = {"score": float(score), "lo": float(lo), "hi": float(hi),
           "metric": bank.rating_metric(), "ratings": True}
    if unseen:   # ratings on the scale their item never had (PolyBank.encode's collapse)
        out["unseen_ratings"], out["unseen_note"] = unseen, note   # how many; the words
    if scale:
        out["scale"] = list(scale)
    few = bank.few_sources_warning(ratings)   # the interval omits the calibration's error
    if few:
        out["warning"] = few
    return out


def _link_prediction(ref: BankRef, theta, se, answers, stop_reason) -> dict:
    if theta is None or se is None:
        return {"note": "no estimate"}
    if ref.kind == "dir":
        return _folder_prediction(ref.folder(), theta, se, answers, stop_reason)
    if ref.kind == "file" and is_ordinal(bank := ref.load()):
        return {**ordinal_prediction(bank, theta, se, answers), "benchmark": ref.title,
                "population": None}
    try:
        link = ref.score_link()
    except Exception as exc:  # noqa: BLE001 - a broken installation's link: never fail a run
        return {"note": f"no score link for {ref.bench!r} ({type(exc).__name__}: {exc})"}
    if link is None:
        return {"note": "no score link: the bank's benchmark has none (use a shipped bank such "
                        "as arc, a bank with a 'benchmark' column naming one, or a bank "
                        "folder built from your results)"}
    try:
        pred = link.predict(theta, se, responses=answers, stop_reason=stop_reason)
    except AtlasError as exc:  # a finished run keeps its theta +- SE; the note says why
        return {"note": f"score link for {ref.bench!r} failed ({exc})"}
    return {"score": pred.score, "lo": pred.lo, "hi": pred.hi, "flag": pred.flag,
            "warning": pred.warning, "percentile": pred.percentile}


def _folder_prediction(folder, theta, se, answers, stop_reason) -> dict:
    """A bank folder's prediction for one run: :func:`atlascat.bankdir.predict_scores`, the
    one place every command reads a built bank's predicted score from."""
    import pandas as pd

    from ..bankdir import predict_scores

    answers = dict(answers or {})
    persons = pd.DataFrame({"subject_id": ["model"], "theta": [float(theta)], "se": [float(se)],
                            "stop_reason": [stop_reason]})
    administered = pd.DataFrame({"subject_id": "model", "item_id": list(answers),
                                 "score": [float(v) for v in answers.values()]})
    row = predict_scores(folder, persons, administered).iloc[0]
    return {"score": float(row["score"]), "lo": float(row["score_lo"]),
            "hi": float(row["score_hi"]), "percentile": float(row["percentile"]),
            "flag": str(row["score_flag"] or ""),
            "warning": str(row["score_warning"] or "")}


def predict_run(store: RunStore, run) -> dict:
    """The predicted score of a stored run (``run``: its id or its
    :meth:`~atlascat.live.store.RunStore.list_runs` row), computed as ``atlas evaluate`` does:
    the run's own answers and stop reason; a suite run's is its predicted average. A run that
    is not done (running, interrupted, stopped by an error) is predicted from the answers it
    recorded so far and marked ``partial`` (True) with its ``state`` and ``answered`` (items),
    which :func:`~atlascat.live.report.describe_prediction` writes ("interrupted after 31
    items")."""
    row = store.get_run(run) if isinstance(run, str) else run
    state = row.get("state", row.get("status"))
    if state == "done":
        return _stored_prediction(store, row)
    try:
        pred = _stored_prediction(store, row)
    except AtlasError as exc:  # a run cut short mid-write: its list row still stands
        pred = {"note": f"no prediction from its answers so far ({exc})"}
    return {**pred, "partial": True, "state": state, "answered": int(row.get("n_items") or 0)}


def select_runs(runs, *, model: str | None = None, state: str | None = None):
    """The rows of :meth:`RunStore.list_runs` whose model matches ``model`` (case-insensitive:
    a shell pattern with ``*``, ``?`` or ``[``, else any part of the name: ``ckpt`` finds
    ``org/ckpt-100``) and whose state is ``state`` (:data:`RUN_STATES`)."""
    import fnmatch

    if state is not None and state not in RUN_STATES:
        raise ConfigError(f"state {state!r} is not a run state ({', '.join(RUN_STATES)})")
    keep = [True] * len(runs)
    if model:
        pat = str(model).lower()
        pat = pat if any(ch in pat for ch in "*?[") else f"*{pat}*"
        keep = [fnmatch.fnmatchcase(str(m).lower(), pat) for m in runs["model"]]
    out = runs[keep]
    return out if state is None else out[out["state"] == state]


def sort_runs(runs, predictions, by: str = "created"):
    """``runs`` (:meth:`RunStore.list_runs` rows) and their ``predictions``
    (:func:`predict_run`, in row order) in the order ``by``: ``created`` newest first (the
    store's order), ``model`` by name (numbers in a name in their order: ckpt-9 before
    ckpt-10), ``predicted`` highest predicted score first (runs without one last)."""
    import re

    if by not in RUN_ORDERS:
        raise ConfigError(f"cannot sort runs by {by!r}; give one of {', '.join(RUN_ORDERS)}")
    n = len(runs)
    if by == "created":
        order = sorted(range(n), key=lambda i: -float(runs["created_at"].iloc[i]))
    elif by == "model":
        def natural(name):
            return [(0, int(t), "") if t.isdigit() else (1, 0, t.lower())
                    for t in re.split(r"(\d+)", str(name)) if t]

        order = sorted(range(n), key=lambda i: natural(runs["model"].iloc[i]))
    else:
        def score(i):
            v = predictions[i].get("score")
            return (v is None, -(v if v is not None else 0.0))

        order = sorted(range(n), key=score)
    return runs.iloc[order].reset_index(drop=True), [predictions[i] for i in order]


def _stored_prediction(store: RunStore, row: dict) -> dict:
    """:func:`predict_run`'s prediction of the run ``row`` from its stored answers."""
    from .suite_run import suite_result

    if row["kind"] == "suite":
        return suite_result(store, row["run_id"])["prediction"]
    if not row.get("bank_ref"):
        return {"note": "the run's bank was not stored"}
    ref = BankRef.parse(row["bank_ref"])
    if ref.kind == "file" and not Path(ref.name).exists() and row["kind"] == "adaptive":
        return {"note": f"bank {ref.name} no longer exists: move it back to predict"}
    try:
        if row["kind"] == "predictor":
            state = (row["session"] if "session" in row
                     else store.get_run(row["run_id"])["session"])
            return _named(ref, predictor_prediction(ref, state))
        steps = store.steps(row["run_id"])
        done = steps[(steps["status"] == "answered") & steps["score"].notna()]
        answers = dict(zip(done["item_id"].astype(str), done["score"].astype(float)))
        return predict_score(ref, row["theta"], row["se"], answers,
                             stop_reason=row.get("stop_reason"))
    except AtlasError as exc:   # the bank changed since the run: the run keeps its theta +- SE
        return {"note": f"bank {ref.name} can no longer be read ({exc}); restore it to predict"}


def run_predictions(store: RunStore, run_id: str, runs=None) -> dict:
    """{benchmark: prediction (score, lo, hi, ... 0-1)} of a finished run (a suite run: each
    of its benchmarks and ``average``); ``runs``: the store's ``list_runs()`` when read."""
    from .suite_run import suite_result

    runs = store.list_runs() if runs is None else runs
    match = runs[runs["run_id"] == run_id]
    if match.empty:
        raise ConfigError(f"no run {run_id!r} in the run store {str(store.path)!r}")
    run = match.iloc[0].to_dict()
    if run.get("state") != "done":
        from ..errors import UnfinishedRunError

        raise UnfinishedRunError(f"run {run_id} has not finished ({run.get('state')}): resume "
                                 "it to its end first", run_id, store.path)
    if run["kind"] == "suite":
        res = suite_result(store, run_id)
        out = {b["name"]: b for b in res["benchmarks"] if b.get("score") is not None}
        if res.get("average") and res["average"].get("score") is not None:
            out["average"] = res["average"]
        return out
    ref = BankRef.parse(run.get("bank_ref") or "")
    pred = predict_run(store, run)
    if pred.get("score") is None:
        raise ConfigError(f"run {run_id} has no predicted score: " + (pred.get("note") or (
            f"bank {ref} has no score link (only banks with one have it)")))
    return {ref.title: pred}


def run_folder(folder, db=None) -> tuple[Path, str]:
    """(run store, run id) of a live run's output folder (``atlas evaluate -o FOLDER``): its
    ``results.json`` names the run, or before the run finished the one run of its
    ``runs.sqlite`` (a folder of several runs, one per ``--llm``, is refused: its run ids are
    given instead); its ``runs.sqlite`` holds it, or ``db`` does, or a remembered store."""
    import json

    folder = Path(folder)
    results, store = folder / "results.json", folder / "runs.sqlite"
    if not results.exists() and store.is_file():   # a run that has not finished (killed,
        with RunStore(store) as runs:                    # stopped, failed)
            ids = runs.list_runs()["run_id"].astype(str).tolist()
        if len(ids) == 1:
            return store, ids[0]
    if not results.exists():
        raise ConfigError(f"{str(folder)!r} holds no results.json: give a finished live run's "
                          "output folder or its run id")
    try:
        rows = json.loads(results.read_text())
        ids = [str(r["run_id"]) for r in (rows if isinstance(rows, list) else [rows])]
        run_id = ids[0]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ConfigError(f"{str(results)!r} is not a live run's results file ({exc})") \
            from None
    if not store.exists() and db is not None and Path(db).exists():
        store = Path(db)
    elif not store.exists():
        from .store import find_run_store

        try:   # the store it was run with (--db), remembered where runs are
            store = find_run_store(run_id)
        except LiveRunError:
            raise ConfigError(f"run {run_id} of {str(folder)!r} is stored elsewhere (its "
                              "folder has no runs.sqlite): give the run store with --db") from None
    if len(set(ids)) > 1:
        raise ConfigError(f"{str(folder)!r} holds {len(set(ids))} runs ({', '.join(ids)}): give "
                          f"one of their ids with --db {str(store)!r}")
    return store, run_id


# ------------------------------------------------------------------ the service
def unfinished_like(store: RunStore, run_id: str) -> list[dict]:
    """The runs of ``store`` that stopped before their end (``interrupted``: Ctrl-C or a killed
    process; ``error``) and ask what run ``run_id`` asks: the same kind, model at the same
    endpoint, bank, settings, prompts, rounds and seed; ``atlas evaluate --resume`` continues
    one where a new run starts over. -> ``[{"run_id", "state", "n_items"}]``, newest first."""
    same = ("kind", "cache_key", "bank_hash", "config", "prompt", "seed", "batch_size")
    me = store.get_run(run_id)
    runs = store.list_runs()
    out = []
    for rid, state in zip(runs["run_id"], runs["state"]):
        if rid != run_id and state in ("interrupted", "error"):
            other = store.get_run(rid)
            if all(other.get(k) == me.get(k) for k in same):
                out.append({"run_id": rid, "state": state, "n_items": int(other["n_items"])})
    return out


def predictor_prediction(ref: BankRef, state: dict) -> dict:
    """The prediction of a predictor run's stored session snapshot (see
    :mod:`atlascat.live.predictor_session`), with the percentile among the folder's source
    models when the folder is still there."""
    from .predictor_session import PredictorLiveSession

    try:
        session = PredictorLiveSession.from_dict(state)
        if session.n_items == 0:
            return {"note": "no answered item yet"}
        folder = ref.folder() if ref.kind == "dir" and Path(ref.name).is_dir() else None
        out = session.predicted(folder.link if folder is not None else None)
        from ..bankdir.predict import metric_scale

        scale = None if folder is None else metric_scale(folder)
        if scale is not None:             # the metric's own scale (BLEU 0-100, a 1-10 rating)
            for key in ("score", "lo", "hi", "model_score", "model_part", "design_score"):
                out[key] = scale[0] + (scale[1] - scale[0]) * float(out[key])
            out["se"] = (scale[1] - scale[0]) * float(out["se"])   # an SE has no offset
        return out
    except AtlasError as exc:
        return {"note": f"the predictor's prediction failed ({exc})"}


@dataclass
class Job:
    """One run of a :class:`LiveRun`: its id, kind (:data:`~atlascat.live.store.RUN_KINDS`),
    the bank it asks, who answers, and the bank's reference (None for a bank passed as an
    object)."""

    run_id: str
    kind: str
    bank: object
    subject: object
    ref: BankRef | None = None


def _job_bank(kind: str, ref: BankRef):
    """The bank a run of ``kind`` on ``ref`` asks (a suite's: its composite bank)."""
    if kind == "suite":
        from .suite_session import composite_for

        return composite_for(ref.name)
    return design_bank(ref, kind)


def _in_threads(fn, jobs, stop) -> list:
    """``[fn(job) for job in jobs]``, one thread each; the first exception any raised is raised
    once all have ended. The threads are daemons and the caller waits for them in short
    joins, so a KeyboardInterrupt in the caller (a second Ctrl-C) leaves at once, ``stop`` set
    (each run ends after its round); a process that exits then does not wait for the replies
    in flight (their items stay pending, as with one run)."""
    import threading

    out, raised = [None] * len(jobs), [None] * len(jobs)

    def work(n, job):
        try:
            out[n] = fn(job)
        except BaseException as exc:  # noqa: BLE001 - raised in the caller below
            raised[n] = exc

    threads = [threading.Thread(target=work, args=(n, job), daemon=True,
                                name=f"atlas-live-{n}") for n, job in enumerate(jobs)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except BaseException:
        stop.set()
        raise
    for exc in raised:
        if exc is not None:
            raise exc
    return out


def _check_same_bank(run_id: str, info: dict, items, *, given=None) -> None:
    """A resume on another bank than the run's (one given, or the stored one changed since)
    is refused here, before anything is asked or any page or results.json row is written (a
    run's answers read through another bank's items would be another run's results).
    ``given``: the bank the resume names (a BankRef, or another bank object), None when
    none."""
    if bank_hash(items) == info["bank_hash"]:
        return
    if given is not None:
        named = given if isinstance(given, BankRef) else "the bank given"
        raise BankError(f"run {run_id} was started on a different bank than {named} (items, "
                        f"parameters or content differ); resume it with the bank it was "
                        f"started on ({info['bank_ref'] or 'the stored one'}), or drop --bank")
    raise BankError(f"run {run_id}'s bank {info['bank_ref']} changed since the run started "
                    "(items, parameters or content differ); restore it, or pass the bank the "
                    "run was started on with --bank")


@dataclass
class LiveRun:
    """Live runs driven to their end (several models asked concurrently, one thread each).

    :meth:`start` creates the runs (nothing is asked yet), :meth:`resume` takes stored ones of
    any kind, :meth:`run` asks until every run stops (``on_step`` per answered item, for a
    display), :meth:`results` gives each run's row: for one bank the run's fields, ``bench``,
    ``bank``, the protocol label and ``prediction`` (:func:`predict_score`), and ``ordinal``
    (True) for a graded / gpcm bank (scores are ratings on the items' scales); for a suite
    :func:`~atlascat.live.suite_run.suite_result`."""

    store: RunStore
    jobs: list[Job]
    outcomes: list[RunResult] = field(default_factory=list)
    errors: dict = field(default_factory=dict)

    @classmethod
    def start(cls, store, bank, subjects, *, config=None, prompt=None, seed: int = 0,
              batch_size: int = 1, design: str = "auto", budget: int | None = None,
              bank_ref: str | None = None, run_ids=None,
              token_budget: int | None = None) -> "LiveRun":
        """New runs of ``bank`` for ``subjects`` (every run is created before any is asked).

        ``bank``: a :class:`~atlascat.catalogue.BankRef` (a suite's asks the whole suite in
        one run per subject, ``config`` a :class:`~atlascat.suite.SuiteConfig`) or an ItemBank
        (the adaptive test; ``bank_ref`` how to find it again on resume). ``design``
        (:func:`choose_design`): the adaptive test with ``config`` (a CATConfig), or a bank
        folder's benchmark predictor asking ``budget`` items (default the predictor's; seeded by
        ``seed``). No ``config``: ``atlas evaluate``'s test with no option
        (:func:`~atlascat.live.designs.run_config`: a bank with a score link adds its floor /
        top stops and its shortest test, ARC 45 items; a suite's seed is ``seed``); an ItemBank
        given as such: CATConfig(). A ``config`` given is the test as it is. ``batch_size``: items asked per round (a suite's comes from its config).
        ``token_budget``: each run stops before a round would take it past this many tokens
        (:func:`~atlascat.live.runner.start_run`).
        A bank given as a string is read as ``--bank`` reads it (:meth:`BankRef.from_option`)."""
        import numbers

        if isinstance(bank, (str, Path)):
            bank = BankRef.from_option(str(bank))
        elif not isinstance(bank, BankRef) and not hasattr(bank, "item_ids"):
            raise ConfigError(f"bank must be a BankRef, an ItemBank or PolyBank, or a name or "
                              f"path as --bank takes, not a {type(bank).__name__}")
        subjects = list(subjects)
        if not subjects:
            raise ConfigError("no subjects: pass at least one subject to ask")
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not \
                0 <= seed < 2 ** 63:   # the run store keeps it as a 64-bit integer
            raise ConfigError(f"seed must be a whole number in [0, 2**63), got {seed!r}")
        with RunStore.opened(store) as store:   # one opened here: closed if no run starts
            return cls._start(store, bank, subjects, config=config, prompt=prompt, seed=seed,
                              batch_size=batch_size, design=design, budget=budget,
                              bank_ref=bank_ref, run_ids=run_ids, token_budget=token_budget)

    @classmethod
    def _start(cls, store, bank, subjects, *, config, prompt, seed, batch_size, design, budget,
               bank_ref, run_ids, token_budget) -> "LiveRun":
        ids = list(run_ids) if run_ids is not None else [None] * len(subjects)
        if isinstance(bank, BankRef) and bank.kind == "suite":
            from .suite_run import start_suite_run

            config = run_config(bank, "suite", config, seed=seed)   # None: the suite's seed
            made = [start_suite_run(store, bank.name, s, config=config, prompt=prompt, run_id=r,
                                    token_budget=token_budget)
                    for s, r in zip(subjects, ids)]
            return cls(store, [Job(r, "suite", _job_bank("suite", bank), s, bank)
                               for r, s in zip(made, subjects)])
        ref = bank if isinstance(bank, BankRef) else None
        kind = choose_design(ref, design) if ref is not None else "adaptive"
        sessions = [None] * len(subjects)   # None: the CAT of ``config``, on the model's stream
        if kind == "predictor":
            from ..cat.config import CATConfig
            from .predictor_session import PredictorLiveSession

            predictor = ref.predictor()[0]
            from ..predict.session import subject_generator

            # each model's own stream, as `atlas simulate` replays it (replay_predictor)
            sessions = [PredictorLiveSession(predictor, budget=budget,
                                             rng=subject_generator(seed, s.name),
                                             available=_answered(s, predictor.item_ids_))
                        for s in subjects]
            k = sessions[0].budget if sessions else predictor.budget
            config = CATConfig(min_items=min(k, 30), max_items=k, se_stop=None)  # stored plan
        elif ref is not None and config is None:   # atlas evaluate's test of the bank
            config = run_config(ref, kind)
        items = _job_bank(kind, ref) if ref is not None else bank
        stored_ref = str(ref) if ref is not None else bank_ref
        jobs = [Job(start_run(store, items, s, config=config, seed=seed, prompt=prompt,
                              bank_ref=stored_ref, batch_size=batch_size, session=session,
                              run_id=r, kind=kind, token_budget=token_budget), kind, items, s,
                    ref)
                for s, session, r in zip(subjects, sessions, ids)]
        return cls(store, jobs)

    @classmethod
    def resume(cls, store, run_ids, *, bank=None, subject_for: Callable | None = None,
               **settings) -> "LiveRun":
        """Stored runs to continue (any kinds). Each run's subject is rebuilt from its stored
        description with ``settings`` (HTTP settings, a ``limiter`` shared by the runs, ...:
        :meth:`~atlascat.live.subjects.SubjectSpec.rebuild`), or by ``subject_for(description,
        bank)``. ``bank``: a BankRef that replaces the stored one (a bank file that moved), or
        the ItemBank itself."""
        twice = sorted({r for r in run_ids if list(run_ids).count(r) > 1})
        if twice:   # two threads would drive one run
            raise ConfigError(f"run(s) {', '.join(twice)} given more than once; resume each "
                              "run once (CLI: one --resume RUN_ID per run)")
        jobs: list = []   # their subjects closed, and a store opened here, if one cannot resume
        with RunStore.opened(store, jobs) as store:
            for rid in run_ids:   # one run busy elsewhere: refused before anything is built
                store.get_run(rid)
                store.check_free(rid)
            for rid in run_ids:
                jobs.append(cls._resumed(store, rid, bank, subject_for, settings))
            return cls(store, jobs)

    @staticmethod
    def _resumed(store, rid: str, bank, subject_for, settings) -> Job:
        """The job of stored run ``rid`` (its bank checked, its subject rebuilt)."""
        from .subjects import SubjectSpec

        info = store.get_run(rid)
        kind = info["kind"]
        ref = bank if isinstance(bank, BankRef) else (
            BankRef.parse(info["bank_ref"]) if info["bank_ref"] else None)
        if bank is not None and not isinstance(bank, BankRef):
            items = bank
        elif ref is None:
            raise ConfigError(f"run {rid} has no bank reference; pass its bank")
        elif kind == "predictor" and not Path(ref.name).exists():
            raise ConfigError(f"run {rid} asks the benchmark predictor of {ref}, which no "
                              "longer exists; pass the folder where it is now (--bank)")
        elif kind == "predictor" and ref.predictor() is None:
            raise ConfigError(f"run {rid} asks the benchmark predictor of {ref}, which has "
                              "none now; pass the folder it was started on")
        else:
            items = _job_bank(kind, ref)
        _check_same_bank(rid, info, items, given=bank)
        if isinstance(bank, BankRef) and str(bank) != info["bank_ref"]:   # the same bank,
            store.move_bank(rid, str(bank))                                # moved
        folder = (ref.folder() if ref is not None and ref.kind == "dir"   # replay: of logs,
                  and info["subject"].get("type") in ("replay", "simulate")  # simulate:'s
                  else None)                                             # dispersions
        subject = (subject_for(info["subject"], items) if subject_for is not None
                   else SubjectSpec.rebuild(info["subject"], items,
                                            **{"folder": folder, **settings}))
        return Job(rid, kind, items, subject, ref)

    def run(self, *, cache: bool = True, on_step: Callable | None = None,
            raise_errors: bool = False, stop=None, on_retry=None) -> list[RunResult]:
        """Ask every run to its end (one thread per run when there are several). A run that
        fails keeps its answers and ends with status ``error`` (its exception in
        :attr:`errors`, by run id); ``raise_errors``: raise the first failure instead. A
        KeyboardInterrupt (Ctrl-C) while several runs are asked is raised at once, and each
        run stops after its round in flight, saved and marked ``interrupted``. ``stop``: a
        ``threading.Event`` the caller sets to ask for a stop (the first Ctrl-C); an HTTP
        subject waiting to retry a failed request then gives up (the item stays pending) and
        its run ends ``interrupted`` (``errors.StopRequestedError``, a KeyboardInterrupt).
        ``on_retry(line)``: told before an HTTP subject waits to retry (what failed, how long
        it waits), so a failing server is not a silent pause."""
        import threading

        for job in self.jobs:
            if stop is not None and hasattr(job.subject, "stop_event"):
                job.subject.stop_event = stop
            if on_retry is not None and hasattr(job.subject, "on_retry"):
                job.subject.on_retry = on_retry
        stop = threading.Event()

        def step(info) -> None:
            if on_step is not None:
                on_step(info)
            if stop.is_set():
                raise KeyboardInterrupt

        def one(job: Job) -> RunResult:
            try:
                return continue_run(self.store, job.run_id, job.bank, job.subject, cache=cache,
                                    on_step=step if len(self.jobs) > 1 else on_step)
            except AtlasError as exc:
                if raise_errors or isinstance(exc, RunBusyError):   # not this call's run:
                    raise                    # no result, no page, no results.json row
                self.errors[job.run_id] = exc
                res = RunResult.from_store(self.store, job.run_id)
                res.status, res.error = "error", str(exc)
                return res

        def threaded(job: Job) -> RunResult:
            try:
                return one(job)
            finally:   # the thread ends: its connection too (it stayed open until close())
                self.store.close_thread()

        if len(self.jobs) == 1:
            self.outcomes = [one(self.jobs[0])]
        else:
            self.outcomes = _in_threads(threaded, self.jobs, stop)
        return self.outcomes

    def __repr__(self) -> str:
        runs = ", ".join(f"{j.run_id} ({j.kind})" for j in self.jobs)
        return (f"LiveRun(store={str(self.store.path)!r}, runs=[{runs}], "
                f"finished={len(self.outcomes)}, errors={len(self.errors)})")

    def results(self) -> list[dict]:
        """Each run's row, in job order (after :meth:`run`; before it a ConfigError)."""
        if self.jobs and not self.outcomes:
            raise ConfigError("no results yet: call run() first (it asks every run to its end; "
                              "a finished run returns at once)")
        from .report import protocol_label, protocol_value
        from .scale import on_metric_scale, stored_scale
        from .suite_run import suite_result

        rows = []
        for job, res in zip(self.jobs, self.outcomes):
            if job.kind == "suite":
                row = suite_result(self.store, job.run_id)
                row["status"], row["error"] = res.status, res.error
                rows.append(row)
                continue
            scale = stored_scale(job.ref)   # a --score-range folder's or a rating scale
            row = {**res.to_dict(), "bench": job.ref.title if job.ref else None,
                   "bank": str(job.ref) if job.ref else None,
                   "protocol_label": protocol_label(res.protocol, job.bank,
                                                    folder=job.ref is not None
                                                    and job.ref.kind == "dir",
                                                    scale=scale),
                   "protocol": protocol_value(res.protocol, str(job.ref) if job.ref else None)}
            est = (self.store.get_run(job.run_id).get("config") or {}).get("estimator")
            if est and est != "eap":   # theta is not the posterior mean: outputs name it
                row["estimator"] = est
            if is_ordinal(job.bank):  # scores are ratings; accuracies are shares of the scale
                row["ordinal"] = True
            elif _continuous(job.ref):  # scores on a continuum: a 0 or a 1 is not right / wrong
                row["continuous"] = True
            if res.status == "done" and job.kind == "predictor":
                row["design"] = "benchmark predictor"
                row["prediction"] = predict_run(self.store, job.run_id)
            elif res.status == "done" and job.ref is not None:
                unit = res if res.scale is None else RunResult.from_store(  # the link's 0-1
                    self.store, job.run_id, unit=True)
                row["prediction"] = predict_score(job.ref, res.theta, res.se,
                                                   dict(zip(unit.items, unit.scores)),
                                                   stop_reason=res.stop_reason)
            elif job.ref is not None and res.n_items:   # not done: from its answers so far,
                row["prediction"] = predict_run(self.store, job.run_id)   # as `atlas runs`
                if job.kind == "predictor":
                    row["design"] = "benchmark predictor"
            if res.scale is None:  # a folder found again elsewhere (resume --bank): its scale
                row = on_metric_scale(row, scale)
            rows.append(row)
        return rows

    def to_frame(self):
        """:meth:`results` as a table, one row per run in job order: the run's figures (the
        per-item ``items`` and ``scores`` lists left out) and its predicted score flattened
        into the columns of ``atlas simulate``'s ``person_scores.csv``: ``benchmark``,
        ``score``, ``score_lo``, ``score_hi`` (the 95% interval), ``percentile``,
        ``score_flag``, ``score_warning`` (NaN / "" for a run without a prediction); a suite run's
        row has its predicted average ("<suite> average")."""
        import pandas as pd

        keys = {"benchmark": "benchmark", "score": "score", "lo": "score_lo",
                "hi": "score_hi", "percentile": "percentile", "flag": "score_flag",
                "warning": "score_warning"}
        blank = {"score_flag": "", "score_warning": ""}
        out = []
        for row in self.results():
            pred = row.get("prediction") or {}
            flat = {k: v for k, v in row.items()
                    if k not in ("items", "scores", "prediction") and not isinstance(v, (dict, list))}
            if row.get("suite") and not pred.get("benchmark"):   # a suite run: its average
                pred = {**pred, "benchmark": f"{row['suite']} average"}
            for key, col in keys.items():   # no prediction: NaN, and "" for the flag / warning
                value = pred.get(key)
                flat[col] = blank.get(col) if value is None else value
            out.append(flat)
        return pd.DataFrame(out)

    def interrupt(self) -> list[dict]:
        """Mark every run interrupted (Ctrl-C); -> each run's ``run_id``, ``model`` and
        ``n_items`` (answered so far)."""
        out = []
        for job in self.jobs:
            self.store.interrupt_run(job.run_id)
            got = self.store.get_run(job.run_id)
            out.append({"run_id": job.run_id, "model": got["model"],
                        "n_items": int(got["n_items"])})
        return out

    def close(self) -> None:
        """Close the subjects (HTTP clients, processes) and the run store's connections (every
        thread's; reading a result later opens one again: close once more when done). ``with
        LiveRun.start(...) as live:`` closes them at its end."""
        for job in self.jobs:
            if hasattr(job.subject, "close"):
                job.subject.close()
        self.store.close()

    def __enter__(self) -> "LiveRun":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def evaluate(bank, subject, *, store, config=None, seed: int = 0, prompt=None,
             cache: bool = True, bank_ref: str | None = None, run_id: str | None = None,
             on_step: Callable | None = None, batch_size: int = 1,
             token_budget: int | None = None) -> RunResult:
    """One adaptive test of ``subject`` on ``bank``, persisted in ``store`` (path or RunStore),
    driven to its end; raises what stopped it (a :class:`~atlascat.errors.RunStoppedError`
    can be resumed with :func:`resume`).

    Parameters
    ----------
    bank : an ItemBank with content metadata (:func:`atlascat.catalogue.load_content_bank`),
        or a :class:`~atlascat.catalogue.BankRef`
    subject : a :class:`~atlascat.live.subjects.Subject`
    store : the run store, a path (created if missing) or a :class:`~atlascat.live.store.RunStore`
    config : CATConfig (default: a BankRef's test of ``atlas evaluate`` with no option, as
        :meth:`LiveRun.start`'s; an ItemBank's the paper's settings, SE stop 0.1)
    seed : seeds the CAT's generator (first item and randomesque picks)
    prompt : PromptSettings (style, max_tokens, temperature, system message)
    cache : reuse stored answers of the same model to the same prompt
    bank_ref : how to find an ItemBank again on resume (``shipped:arc`` or a file path)
    run_id : the run's id (default a new random one)
    on_step : called with a :class:`~atlascat.live.runner.StepInfo` after every answered item
    batch_size : items selected jointly and asked at once per round (1 = the classic CAT)
    token_budget : stop once the next round is expected to pass this many tokens (a subject
        that reports them: :func:`~atlascat.live.runner.token_budget_stop`)
    """
    with LiveRun.start(store, bank, [subject], config=config, seed=seed, prompt=prompt,
                       batch_size=batch_size, design="adaptive", bank_ref=bank_ref,
                       run_ids=[run_id], token_budget=token_budget) as live:
        # closed at the end: the store's connections, the subject's client or process (a
        # later use opens them again); they were left to the garbage collector
        return live.run(cache=cache, on_step=on_step, raise_errors=True)[0]


def resume(store, run_id: str, *, bank=None, subject=None, cache: bool = True,
           on_step: Callable | None = None, **settings) -> RunResult:
    """Continue a run that was killed or failed, to its end; bank and subject default to the
    stored ones (``settings`` as in :meth:`LiveRun.resume`). Raises what stopped it."""
    with LiveRun.resume(store, [run_id], bank=bank,
                        subject_for=None if subject is None else (lambda desc, b: subject),
                        **settings) as live:   # closed: the subject it built, the store
        return live.run(cache=cache, on_step=on_step, raise_errors=True)[0]
