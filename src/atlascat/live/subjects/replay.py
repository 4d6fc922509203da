"""Replay: a recorded response matrix answers the leaderboard's requests (one model's row), so
the whole live path (requests, subject call, scoring rule, CAT) runs on real answers."""
from __future__ import annotations

import threading
import weakref
from pathlib import Path

import numpy as np

from ...errors import BankError, ConfigError

__all__ = ["ReplaySubject", "recorded_answers", "recorded_ratings", "suite_recorded_answers",
           "replayed_matrix"]

#: the request index of a bank (shared by every replayed model), keyed weakly by the bank
_REPLAY_INDEX: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_CORRECT_LL, _WRONG_LL = -1e-3, -1e3   # acc_norm divides by lengths: a 1e6 ratio survives it


class ReplaySubject:
    """Answers the leaderboard's requests from a recorded response matrix (one model's row), so
    the whole live path (requests, subject call, scoring rule, CAT) runs on real answers.

    For every bank item it builds the item's requests (:func:`atlascat.content.requests.
    build_item_requests`), finds which choice the item's rule scores correct (by probing the rule
    with one-hot outputs), and answers each request with log-likelihoods (or a generation) that
    the rule scores as the recorded 0/1 (a recorded value >= 0.5 counts as correct); an mc2 item
    (TruthfulQA's continuous score y) is answered with log-likelihoods whose mc2 is the recorded
    y: log(y / t) for each of its t true options, log((1 - y) / f) for each of its f false ones.
    A bank folder's predictor asks only the items the model has answers for
    (:meth:`answered_items`) and an adaptive test skips the others as they come up, both as
    ``atlas simulate`` does.

    Parameters
    ----------
    matrix : a :class:`~atlascat.responses.ResponseMatrix`, a pandas DataFrame (the models as
        its index), a matrix file, or a bundled name
    model : the subject id (row) to replay
    bank : the content bank the runner asks from (needed to map requests back to items)
    members : a suite's member names (default: those of ``bank`` when it is a suite's composite
        bank, items ``<member>/<item_id>``): ``matrix`` is then read by
        :func:`suite_recorded_answers` (``"openllm-v1"``, ``"arc=A.csv,..."``)
    source : where the answers come from, as described and stored (default: ``matrix`` when
        it is a path or name); a matrix read from sample logs (:func:`replayed_matrix`) is named
        by the logs' path, so a resumed run reads them again
    """

    kind = "loglikelihood"
    protocol = "leaderboard"

    def __init__(self, matrix, model: str, *, bank=None, members=None, source=None):
        members = members or suite_members_of(bank)
        self.source, self._scores = (
            suite_recorded_answers(matrix, model, members, binary=False) if members
            else recorded_answers(matrix, model, binary=False, source=source))
        self._answers = {k: None if v is None else int(v >= 0.5) for k, v in self._scores.items()}
        self.model = self.name = str(model)
        self._bank = None
        self._keys: dict = {}
        self._first: dict = {}
        self._outputs: dict = {}
        self._used: set = set()
        self._lock = threading.Lock()
        if bank is not None:
            self.bind(bank)

    @property
    def cache_key(self) -> str:
        return f"{self.model}@replay:{self.source}"

    def describe(self) -> dict:
        return {"type": "replay", "model": self.model, "matrix": self.source,
                "kind": self.kind}

    def answer_of(self, item_id) -> int | None:
        return self._answers.get(str(item_id))

    def answered_items(self) -> set[str]:
        """The item ids the model has a recorded answer for."""
        return {k for k, v in self._answers.items() if v is not None}

    def bind(self, bank) -> "ReplaySubject":
        """Index the bank's requests (done once; ``loglikelihood`` calls it lazily)."""
        with self._lock:
            if self._bank is bank:
                return self
            index = _REPLAY_INDEX.get(bank)  # shared by every replayed model of the bank
            if index is None:
                from ...content.requests import build_item_requests

                keys, first, outputs = {}, {}, {}
                for item_id in map(str, bank.item_ids):
                    ir = build_item_requests(bank, item_id)
                    outputs[item_id] = _probe(ir)
                    keys[item_id] = tuple(_request_key(r) for r in ir.requests)
                    if keys[item_id]:
                        first.setdefault(keys[item_id][0], []).append(item_id)
                index = _REPLAY_INDEX[bank] = (keys, first, outputs)
            self._bank = bank
            self._keys, self._first, self._outputs = index
            self._used = set()
        return self

    def _answer(self, requests, what):
        """Outputs for ``requests``, which come item by item (all of an item's requests in a
        row, as the runner sends them): each run of requests is matched to the bank item with
        exactly those requests (among identical items, one not asked before)."""
        if self._bank is None:
            raise ConfigError("ReplaySubject needs the bank: ReplaySubject(..., bank=bank)")
        keys = [_request_key(r) for r in requests]
        out, i = [], 0
        while i < len(keys):
            cands = [it for it in self._first.get(keys[i], [])
                     if tuple(keys[i:i + len(self._keys[it])]) == self._keys[it]]
            if not cands:
                raise ConfigError(f"replay: {what} request {i} is not the start of a bank item's "
                                  "requests (requests must come item by item)")
            with self._lock:
                item_id = next((it for it in cands if it not in self._used), cands[0])
                self._used.add(item_id)
            ans = self._answers.get(item_id)
            if ans is None:
                raise ConfigError(f"replay: model {self.model!r} has no recorded answer for item "
                                  f"{item_id!r} in {self.source}; use a matrix without missing "
                                  "answers for this bank")
            made = self._outputs[item_id]
            out.extend(made(self._scores[item_id]) if callable(made) else made[ans])
            i += len(self._keys[item_id])
        return out

    def loglikelihood(self, requests) -> list[float]:
        return [float(v) for v in self._answer(list(requests), "log-likelihood")]

    def generate_until(self, requests) -> list[str]:
        return [str(v) for v in self._answer(list(requests), "generation")]


def recorded_answers(matrix, model, *, binary: bool = True,
                     score_range=None, source=None) -> tuple[str, dict]:
    """(where the answers come from, {item id: 0/1 or None}) of ``model``'s row of ``matrix``
    (a :class:`~atlascat.responses.ResponseMatrix`, a pandas DataFrame with the models as its
    index, a matrix file or a bundled name); a value
    >= 0.5 counts as correct, NaN as no recorded answer. ``binary=False``: each score as
    recorded, in [0, 1]; ``score_range`` (low, high): a matrix file on a metric's scale, read
    as (x - low) / (high - low) (a value outside it is refused); ``source``: the name of a
    matrix in memory (the sample logs it was read from, :func:`replayed_matrix`)."""
    import pandas as pd

    from ...bankdir.scaled import read_scaled_matrix
    from ...responses import ResponseMatrix

    if isinstance(matrix, pd.DataFrame):     # in memory, its labels kept (models: the index)
        matrix = (read_scaled_matrix(matrix, tuple(score_range), folder=True, normalize_ids=True,
                                     on_empty="keep") if score_range is not None else
                  ResponseMatrix.from_frame(matrix, normalize_ids=True, on_empty="keep"))
    named = source is not None and isinstance(matrix, ResponseMatrix)   # read from logs
    if source is None:
        source = "(in memory)" if isinstance(matrix, ResponseMatrix) else str(matrix)
    source = str(source)
    if score_range is not None and not isinstance(matrix, ResponseMatrix):
        matrix = read_scaled_matrix(str(matrix), tuple(score_range), folder=True,
                                    normalize_ids=True, on_empty="keep")
    if not isinstance(matrix, ResponseMatrix):
        matrix = _read_matrix(matrix)
    ids = [str(s) for s in matrix.subject_ids]
    if str(model) not in ids:
        said = str(model).lower().replace("__", "/")   # a harness folder's name: org__model
        near = [s for s in ids if said in s.lower()][:5]
        held = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise ConfigError(f"model {model!r} is not a subject of {source} ({len(ids)} subjects)"
                          + (f"; did you mean {', '.join(near)}?" if near else
                             f"; use one of the models its logs hold ({held})" if named else
                             "; use a subject id from the matrix's first column"))
    row = np.asarray(matrix.values[ids.index(str(model))], dtype=float)
    if not binary:
        return source, {str(i): (None if np.isnan(v) else float(v))
                        for i, v in zip(matrix.item_ids, row)}
    return source, {str(i): (None if np.isnan(v) else int(v >= 0.5))
                    for i, v in zip(matrix.item_ids, row)}


def replayed_matrix(matrix, folder=None):
    """What ``replay:MATRIX#MODEL`` reads its answers from: ``matrix`` itself (a matrix file or
    a bundled name), or, when it names lm-evaluation-harness sample logs (a folder, one model
    per folder as the harness writes them, or ``.jsonl[.gz]`` files), the models' answers read
    against the bank folder ``folder`` exactly as ``atlas simulate --bank DIR LOGS`` reads them
    (its task, metric, filter and scale: :func:`atlascat.bankdir.predict.logged_targets`), a
    ResponseMatrix on 0-1. Sample logs without a bank folder, or on one built from a response
    matrix, are refused with one line."""
    from ...bankdir.predict import is_sample_logs, logged_targets

    if not is_sample_logs(matrix):
        return matrix
    if folder is None:
        raise ConfigError(f"replay: {str(matrix)!r} names sample logs (a folder, a "
                          ".jsonl[.gz] file), which are read with the task, metric and filter "
                          "of the bank folder built from such logs: give that folder with "
                          "--bank DIR (in Python, as the bank: SubjectSpec.build(DIR), or "
                          "folder=DIR), or a response matrix file")
    return logged_targets(folder, matrix)


def suite_recorded_answers(spec, model, members, *, binary: bool = True) -> tuple[str, dict]:
    """(``spec``, {``<member>/<item_id>``: score or None}) of ``model``'s recorded answers to a
    suite's items (``members``: its member names), as :func:`recorded_answers` reads one
    matrix. ``spec``: ``MEMBER=MATRIX`` pairs joined by commas (a file or a bundled name each,
    as ``atlas simulate --suite`` takes them); the suite's bundled name (each member's bundled
    matrix); else one matrix whose item ids are the suite's (``arc/1155``). A member whose
    matrix lacks the model, or that no pair names, has no answer: the test asks the others
    and the suite predicts it from them (as ``atlas simulate --suite``)."""
    from ...catalogue.suites import SEP, bundled_suites

    text, members = str(spec), [str(m) for m in members]
    if "=" not in text and (Path(text).exists() or text.lower() not in bundled_suites()):
        return recorded_answers(text, model, binary=binary)
    sources = _member_sources(text, members)
    out, ids = {}, []
    for member, src in sources.items():
        matrix = _read_matrix(src)
        subjects = {str(s) for s in matrix.subject_ids}
        ids.append(f"{member}={src} ({len(subjects)} subjects)")
        if str(model) in subjects:
            rows = recorded_answers(matrix, model, binary=binary)[1]
            out.update({f"{member}{SEP}{k}": v for k, v in rows.items()})
    if not out:
        raise ConfigError(f"model {model!r} is not a subject of any member's matrix "
                          f"({'; '.join(ids)}); use a subject id from their first column")
    return text, out


def suite_members_of(bank) -> list | None:
    """A suite's composite bank's member names (its items ``<member>/<item_id>``), else None."""
    meta = getattr(bank, "metadata", None)
    if meta is None or "member" not in meta.columns:
        return None
    return list(dict.fromkeys(str(m) for m in meta["member"]))


def _member_sources(text: str, members: list) -> dict:
    """{member: matrix spec} of ``MEMBER=MATRIX,...`` or of a bundled suite's name (each
    member's bundled matrix)."""
    from ...suite.simulate import member_matrices

    if "=" not in text:
        return {m: m for m in members}
    return member_matrices(text.split(","), members, label="MEMBER", where="replay ")


def recorded_ratings(matrix, model) -> tuple[str, dict]:
    """(where the ratings come from, {item id: rating or None}) of ``model``'s row of a
    ratings file (:func:`atlascat.irt.polycal.read_ratings`: the ratings as recorded, blank =
    none)."""
    from ...irt.polycal import read_ratings

    path = Path(str(matrix))
    if not path.is_file():
        raise ConfigError(f"replay ratings {str(matrix)!r} is not a file; give the ratings "
                          "matrix (subject ids in the first column, one column per item)")
    values, sids, iids, _ = read_ratings(path)
    ids = [str(s) for s in sids]
    if str(model) not in ids:
        raise ConfigError(f"model {model!r} is not a subject of {str(matrix)} ({len(ids)} "
                          "subjects); use a subject id from the file's first column")
    row = np.asarray(values[ids.index(str(model))], dtype=float)
    return str(matrix), {str(i): (None if np.isnan(v) else float(v)) for i, v in zip(iids, row)}


def _request_key(r) -> tuple:
    return (r.kind, r.context, r.continuation, tuple(r.until))


def _probe(ir) -> dict:
    """Outputs the item's rule scores 0 and 1: {0: outputs, 1: outputs} (one per request)."""

    n = len(ir.requests)
    if ir.rule == "mc2" and 0 < int(ir.mc2_true) < n:
        t = int(ir.mc2_true)
        return lambda y: mc2_outputs(float(y), t, n - t)
    if n and all(r.kind == "generate_until" for r in ir.requests):
        gold = _gold_text(ir)
        answer = str(gold if isinstance(gold, (str, int)) else gold[0])   # one of the targets
        bad = ["#### -987654321"]
        for good in ([f"The answer is {answer}.\n#### {answer}"], [answer]):
            if ir.score(good) == 1 and ir.score(bad) == 0:
                return {1: good, 0: bad}
        raise BankError(f"replay: cannot construct a correct generation for item {ir.item_id!r}")
    for gold in range(n):
        one = [_CORRECT_LL if i == gold else _WRONG_LL for i in range(n)]
        if ir.score(one) == 1:
            wrong_j = (gold + 1) % n
            other = [_CORRECT_LL if i == wrong_j else _WRONG_LL for i in range(n)]
            if n > 1 and ir.score(other) == 0:
                return {1: one, 0: other}
    raise BankError(f"replay: no choice of item {ir.item_id!r} is scored correct by its rule "
                    f"{ir.rule!r}")


def mc2_outputs(y: float, n_true: int, n_false: int) -> list[float]:
    """Log-likelihoods whose mc2 (``sum_true exp(ll) / sum_all exp(ll)``) is ``y`` in [0, 1]:
    log(y / n_true) for each true option, log((1 - y) / n_false) for each false one (a
    probability of 0 as a log-likelihood of -1000, exp of which is 0 in double precision)."""
    def ll(p: float) -> float:
        return float(np.log(p)) if p > 0 else _WRONG_LL

    return [ll(y / n_true)] * n_true + [ll((1.0 - y) / n_false)] * n_false


def _gold_text(ir):
    gold = getattr(ir, "gold", None)
    if gold is None:
        raise AttributeError("no gold")
    return gold


def _read_matrix(spec):
    from ...catalogue.matrices import resolve_responses

    return resolve_responses(spec, option="replay matrix", normalize_ids=True, on_empty="keep")
