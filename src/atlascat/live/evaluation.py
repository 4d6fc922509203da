"""The live evaluation service: which bank a run asks, starting or resuming runs, driving them,
and the one predicted score every reader shows.

``atlas evaluate`` parses options and displays; everything it does is here, as is what
``atlas runs``, ``atlas compare-models`` and the run pages read, so one number is the same
everywhere:

- :class:`BankRef`: a bank's identity, parsed once (``shipped:arc``, ``suite:openllm-v1``, a
  bank file); it prints as it is stored, loads its bank and knows its score link.
- :class:`Evaluation`: runs of one bank (or resumed runs) driven to their end, concurrently
  when several models are asked; ``results()`` gives each run's row (``results.json``).
- :func:`predict_run`: the predicted score of a stored run, from its own answers
  and stop reason (a suite run's: its average).

Example::

    from atlascat.live.evaluation import BankRef, Evaluation
    from atlascat.live.subjects import SimulatedSubject

    ref = BankRef.from_option("arc")
    ev = Evaluation.start("runs.sqlite", ref, [SimulatedSubject(ref.load(), 0.5)])
    ev.run()
    rows = ev.results()     # theta, SE, the predicted score, ...
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import AtlasError, ConfigError
from .bankref import BankRef
from .runner import RunResult, continue_run, start_run
from .store import RunStore

__all__ = ["BankRef", "Evaluation", "predict_score", "predict_run", "run_predictions",
           "run_folder", "choose_design", "check_design", "design_bank", "predictor_prediction",
           "DESIGNS"]

# ------------------------------------------------------------------ the predicted score
def _named(ref: BankRef, pred: dict) -> dict:
    """``pred`` with what it is a prediction of: ``benchmark`` and ``population`` (the source
    models of a bank folder, or the leaderboard of a shipped bank: live/report.py's words)."""
    from .report import LEADERBOARD, SOURCE

    if pred.get("score") is None or "population" in pred:
        return pred
    if ref.kind != "dir":
        return {**pred, "benchmark": ref.bench, "population": LEADERBOARD}
    m = ref.folder().manifest
    metric = (m.get("source") or {}).get("metric")
    return {**pred, "benchmark": m.get("benchmark") or ref.bench, "population": SOURCE,
            "metric": (f"{metric}: " if metric else "")
            + (m.get("score") or "each model's mean over the items")}


def predict_score(ref: BankRef, theta, se, answers=None, stop_reason: str | None = None) -> dict:
    """{score, lo, hi, percentile, flag, warning, benchmark, population} (0-1) of theta +- SE
    and the answers (item -> 0/1) through the bank's score link, or {note} when there is no
    estimate or no link (the run's theta +- SE then stands on its own)."""
    return _named(ref, _link_prediction(ref, theta, se, answers, stop_reason))


def _link_prediction(ref: BankRef, theta, se, answers, stop_reason) -> dict:
    if theta is None or se is None:
        return {"note": "no estimate"}
    if ref.kind == "dir":
        return _folder_prediction(ref.folder(), theta, se, answers, stop_reason)
    try:
        link = ref.score_link()
    except Exception as exc:  # noqa: BLE001 - a broken installation's link: never fail a run
        return {"note": f"no score link for {ref.bench!r} ({type(exc).__name__}: {exc})"}
    if link is None:
        return {"note": "no score link: the bank's benchmark has none (use a shipped bank such "
                        "as arc, a bank with a 'benchmark' column naming one, or atlas "
                        "build-bank)"}
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
    """The predicted score of a finished stored run (``run``: its id or its
    :meth:`~atlascat.live.store.RunStore.list_runs` row), computed as ``atlas evaluate`` does:
    the run's own answers and stop reason; a suite run's is its predicted average. {} for a run
    that is not done."""
    from .suite_run import is_suite_run, suite_result

    row = store.get_run(run) if isinstance(run, str) else run
    if row.get("state", row.get("status")) != "done":
        return {}
    if is_suite_run(row):
        return suite_result(store, row["run_id"])["prediction"]
    if not row.get("bank_ref"):
        return {"note": "the run's bank was not stored"}
    ref = BankRef.parse(row["bank_ref"])
    if ref.kind == "dir":  # a bank folder's run may be its predictor's (the snapshot says)
        from .predictor_session import is_predictor_state

        state = row["session"] if "session" in row else store.get_run(row["run_id"])["session"]
        if is_predictor_state(state):
            return _named(ref, predictor_prediction(ref, state))
    steps = store.steps(row["run_id"])
    done = steps[(steps["status"] == "answered") & steps["score"].notna()]
    answers = dict(zip(done["item_id"].astype(str), done["score"].astype(float)))
    return predict_score(ref, row["theta"], row["se"], answers,
                         stop_reason=row.get("stop_reason"))


def run_predictions(store: RunStore, run_id: str, runs=None) -> dict:
    """{benchmark: prediction (score, lo, hi, ... 0-1)} of a finished run (a suite run: each
    of its benchmarks and ``average``); ``runs``: the store's ``list_runs()`` when read."""
    from .suite_run import is_suite_run, suite_result

    runs = store.list_runs() if runs is None else runs
    match = runs[runs["run_id"] == run_id]
    if match.empty:
        raise ConfigError(f"no run {run_id!r} in the store; list them with `atlas runs`")
    run = match.iloc[0].to_dict()
    if run.get("state") != "done":
        raise ConfigError(f"run {run_id} is {run.get('state')}: finish it first "
                          f"(atlas evaluate --resume {run_id})")
    if is_suite_run(run):
        res = suite_result(store, run_id)
        out = {b["name"]: b for b in res["benchmarks"] if b.get("score") is not None}
        if res.get("average") and res["average"].get("score") is not None:
            out["average"] = res["average"]
        return out
    ref = BankRef.parse(run.get("bank_ref") or "")
    pred = predict_run(store, run)
    if pred.get("score") is None:
        raise ConfigError(f"run {run_id} has no predicted score (bank {ref}: "
                          "only banks with a score link have one)")
    return {ref.bench or str(ref): pred}


def run_folder(folder, db=None) -> tuple[Path, str]:
    """(run store, run id) of the folder ``atlas evaluate -o FOLDER`` wrote: its
    ``results.json`` names the run; its ``runs.sqlite`` holds it, or ``db`` does."""
    import json

    folder = Path(folder)
    results, store = folder / "results.json", folder / "runs.sqlite"
    if not results.exists():
        raise ConfigError(f"{str(folder)!r} holds no results.json: give a finished run's folder "
                          "(atlas evaluate -o FOLDER) or its run id")
    try:
        rows = json.loads(results.read_text())
        run_id = str((rows[0] if isinstance(rows, list) else rows)["run_id"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ConfigError(f"{str(results)!r} is not an atlas evaluate results file ({exc})") \
            from None
    if not store.exists():
        if db is None or not Path(db).exists():
            raise ConfigError(f"run {run_id} of {str(folder)!r} is stored elsewhere (its folder "
                              "has no runs.sqlite): give the run store with --db")
        store = Path(db)
    return store, run_id


# ------------------------------------------------------------------ the service
@dataclass
class Job:
    """One run of an evaluation: its id, bank and subject (who answers); ``design``
    "adaptive" (the CAT on the bank) or "predictor" (the bank folder's benchmark predictor,
    which asks the predictor's items)."""

    run_id: str
    ref: BankRef
    subject: object
    design: str = "adaptive"

    @property
    def bank(self):
        return design_bank(self.ref, self.design)


DESIGNS = ("auto", "adaptive", "predictor")


def check_design(design: str) -> str:
    """``design`` if it is one of :data:`DESIGNS`, else one clear error."""
    if design not in DESIGNS:
        raise ConfigError(f"--design must be one of {', '.join(DESIGNS)}, got {design!r}")
    return design


def design_bank(ref: BankRef, design: str):
    """The bank a run of ``design`` ("adaptive" or "predictor") asks: the predictor's items
    (with their logged requests) or the bank itself."""
    return ref.predictor()[1] if design == "predictor" else ref.load()


def choose_design(ref: BankRef, design: str = "auto") -> str:
    """"predictor" or "adaptive": ``auto`` takes a bank folder's benchmark predictor when it
    has one (its items asked by their logged requests, or by item id from a folder built from
    a matrix), else the adaptive test."""
    if check_design(design) == "adaptive":
        return design
    if ref.predictor() is not None:
        return "predictor"
    if design == "predictor":
        raise ConfigError(f"bank {ref} has no benchmark predictor: build a folder (atlas "
                          "build-bank RESULTS -o DIR) from results with more items than "
                          "--budget, or use --design adaptive")
    return "adaptive"


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
        return session.predicted(folder.link if folder is not None else None)
    except AtlasError as exc:
        return {"note": f"the predictor's prediction failed ({exc})"}


@dataclass
class Evaluation:
    """Single-bank live runs driven to their end (several models asked concurrently).

    :meth:`start` creates the runs (nothing is asked yet), :meth:`resume` takes stored ones,
    :meth:`run` asks until every run stops (``on_step`` per answered item, for a display), and
    :meth:`results` gives each run's row: the run's fields, ``bench``, ``bank``, the protocol
    label and ``prediction`` (:func:`predict_score`). Suite runs are
    :mod:`atlascat.live.suite_run`'s."""

    store: RunStore
    jobs: list[Job]
    outcomes: list[RunResult] = field(default_factory=list)

    @classmethod
    def start(cls, store, ref: BankRef, subjects, *, config=None, prompt=None, seed: int = 0,
              batch_size: int = 1, design: str = "auto", budget: int | None = None
              ) -> "Evaluation":
        """New runs of ``ref`` for ``subjects``. ``design`` (:func:`choose_design`): the
        adaptive test with ``config``, or a bank folder's benchmark predictor asking ``budget``
        items (default the predictor's; seeded by ``seed``)."""
        store = store if isinstance(store, RunStore) else RunStore(store)
        use = choose_design(ref, design)
        sessions = [None] * len(subjects)       # None: the CAT of ``config``
        if use == "predictor":
            from ..cat.config import CATConfig
            from .predictor_session import PredictorLiveSession

            predictor = ref.predictor()[0]
            from ..predict.session import subject_generator

            # each model's own stream, as `atlas simulate` replays it (replay_predictor)
            sessions = [PredictorLiveSession(predictor, budget=budget,
                                             rng=subject_generator(seed, s.name))
                        for s in subjects]
            k = sessions[0].budget if sessions else predictor.budget
            config = CATConfig(min_items=min(k, 30), max_items=k, se_stop=None)  # stored plan
        bank = design_bank(ref, use)
        jobs = [Job(start_run(store, bank, s, config=config, seed=seed, prompt=prompt,
                              bank_ref=str(ref), batch_size=batch_size, session=session),
                    ref, s, use)
                for s, session in zip(subjects, sessions)]
        return cls(store, jobs)

    @classmethod
    def resume(cls, store, run_ids, subject_for: Callable, ref: BankRef | None = None
               ) -> "Evaluation":
        """Stored runs to continue; ``subject_for(description, bank)`` rebuilds each run's
        subject; ``ref`` replaces the stored bank reference (a bank file that moved)."""
        store = store if isinstance(store, RunStore) else RunStore(store)
        jobs = []
        for rid in run_ids:
            info = store.get_run(rid)
            r = ref if ref is not None else BankRef.parse(info["bank_ref"])
            from .predictor_session import is_predictor_state

            job = Job(rid, r, None, "predictor" if is_predictor_state(info.get("session"))
                      else "adaptive")
            if job.design == "predictor" and r.predictor() is None:
                raise ConfigError(f"run {rid} asks the benchmark predictor of {r}, which has "
                                  "none now; pass the folder it was started on with --bank")
            job.subject = subject_for(info["subject"], job.bank)
            jobs.append(job)
        return cls(store, jobs)

    def run(self, *, cache: bool = True, on_step: Callable | None = None) -> list[RunResult]:
        """Ask every run to its end (one thread per run when there are several); a run that
        fails keeps its answers and ends with status ``error``."""
        from concurrent.futures import ThreadPoolExecutor

        def one(job: Job) -> RunResult:
            try:
                return continue_run(self.store, job.run_id, job.bank, job.subject, cache=cache,
                                    on_step=on_step)
            except AtlasError as exc:
                res = RunResult.from_store(self.store, job.run_id)
                res.status, res.error = "error", str(exc)
                return res

        if len(self.jobs) == 1:
            self.outcomes = [one(self.jobs[0])]
        else:
            with ThreadPoolExecutor(max_workers=len(self.jobs),
                                    thread_name_prefix="atlas-live") as pool:
                self.outcomes = list(pool.map(one, self.jobs))
        return self.outcomes

    def results(self) -> list[dict]:
        """Each run's row, in job order (after :meth:`run`)."""
        from .report import protocol_label

        rows = []
        for job, res in zip(self.jobs, self.outcomes):
            row = {**res.to_dict(), "bench": job.ref.bench, "bank": str(job.ref),
                   "protocol_label": protocol_label(res.protocol, job.bank,
                                                    folder=job.ref.kind == "dir")}
            if res.status == "done" and job.design == "predictor":
                row["design"] = "benchmark predictor"
                row["prediction"] = predict_run(self.store, job.run_id)
            elif res.status == "done":
                row["prediction"] = predict_score(job.ref, res.theta, res.se,
                                                   dict(zip(res.items, res.scores)),
                                                   stop_reason=res.stop_reason)
            rows.append(row)
        return rows

    def interrupt(self) -> str:
        """Mark every run interrupted (Ctrl-C); -> the line telling how to resume them."""
        counts = []
        for job in self.jobs:
            self.store.interrupt_run(job.run_id)
            got = self.store.get_run(job.run_id)
            counts.append(f"run {job.run_id} ({got['model']}): {got['n_items']} item(s) answered")
        return ("interrupted: " + "; ".join(counts) + ". Resume with: atlas evaluate "
                + " ".join(f"--resume {j.run_id}" for j in self.jobs) + f" --db {self.store.path}")

    def close(self) -> None:
        for job in self.jobs:
            if hasattr(job.subject, "close"):
                job.subject.close()
