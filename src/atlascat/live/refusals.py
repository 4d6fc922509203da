"""Items the server refuses: an HTTP 400 / 413 / 422 on one item's request.

A server answers a request it will not take with a client error about *that* request: a prompt
longer than the model's context, a content filter, a payload too large. Asking the same item
again gets the same answer, so stopping the run on it (as on a wrong URL or key) would leave the
run stuck on it for every ``--resume``. Such an item is left out of the adaptive test, as an
item that got no score (a judge's null): its step is ``skipped`` and keeps the server's message
as its answer (``refused: HTTP 400 ...``), never cached. A run stops (saved, resumable) when
:data:`REFUSED_IN_A_ROW` items in a row are refused (every request is: wrong settings or model
name, not the items), when more than :data:`REFUSED_SHARE` of the items it asked (and more than
:data:`REFUSED_IN_A_ROW`) were refused, counted from its start or ``--resume`` (a server that
refuses every other item would otherwise have it ask the whole bank, and the test it gives
leaves out a large, unchosen part of it), or on a bank folder's benchmark predictor, whose prediction needs the score
of every item it draws. 401 / 403 / 404 and the other 4xx still stop the run at once.
"""
from __future__ import annotations

from dataclasses import dataclass

from .subjects import Answer, SubjectError

__all__ = ["REFUSED_STATUS", "REFUSED_IN_A_ROW", "REFUSED_SHARE",
           "REFUSED_PREFIX", "RefusalCount", "refusal", "refused_answer",
           "is_refused", "ask_each", "check_refusals", "refused_summary", "refused_line"]

#: HTTP statuses that refuse one item's request (left out), not the run
REFUSED_STATUS = frozenset({400, 413, 422})

#: a run stops (saved, resumable) once this many items in a row were refused
REFUSED_IN_A_ROW = 5

#: a run stops (saved, resumable) once more than this share of the items it asked were refused
#: (and more than :data:`REFUSED_IN_A_ROW`)
REFUSED_SHARE = 0.2

#: how a refused item's stored answer starts
REFUSED_PREFIX = "refused: "


def refusal(exc) -> str | None:
    """The message a refused item keeps (``HTTP 400: <the server's own words>``, from the
    error's ``status`` and ``said``) when ``exc`` refuses one item's request
    (:data:`REFUSED_STATUS`), else None."""
    status = getattr(exc, "status", None)
    if not isinstance(exc, SubjectError) or status not in REFUSED_STATUS:
        return None
    said = getattr(exc, "said", None)
    if said is None:      # raised without the reply (not by the HTTP subjects): its own text
        return str(exc)
    return f"HTTP {status}: {said}" if said else f"HTTP {status} (empty reply)"


def refused_answer(message: str) -> Answer:
    """The stored answer of a refused item: the server's message."""
    return Answer(text=REFUSED_PREFIX + message, latency_s=0.0, attempts=1)


def is_refused(answer) -> bool:
    text = getattr(answer, "text", answer)
    return isinstance(text, str) and text.startswith(REFUSED_PREFIX)


def ask_each(ask, todo: list) -> list:
    """``ask(ns) -> [result per n]`` for a round's items ``todo``; when the server refuses the
    round's request, each item is asked alone, so only the item it refuses is left out.
    -> one result per item of ``todo``: ``ask``'s, or ``refused_answer(message)``."""
    def asked(ns: list) -> list:
        try:
            return list(ask(ns))
        except SubjectError as exc:
            message = refusal(exc)
            if message is None:
                raise
            return [refused_answer(message)] if len(ns) == 1 else None

    whole = asked(todo)
    return whole if whole is not None else [asked([n])[0] for n in todo]


@dataclass
class RefusalCount:
    """The items a run refused in a row, refused in all and asked in all, since its start or
    ``--resume`` (:func:`check_refusals`)."""
    in_a_row: int = 0
    refused: int = 0
    asked: int = 0


def check_refusals(session, items: list, answers: list, count: RefusalCount) -> RefusalCount:
    """``count`` after this round; one line (:class:`SubjectError`: the run is saved and
    resumable, this round asked again) when a session cannot leave an item out (a benchmark
    predictor), :data:`REFUSED_IN_A_ROW` were refused in a row, or more than
    :data:`REFUSED_SHARE` of the items asked (and more than :data:`REFUSED_IN_A_ROW`)."""
    refused = [(i, a.text[len(REFUSED_PREFIX):]) for i, a in zip(items, answers)
               if is_refused(a)]
    if refused and not hasattr(session, "skip"):
        item, why = refused[0]
        raise SubjectError(f"the server refused item {item!r} ({why}); a bank folder's benchmark "
                           "predictor needs the score of every item it draws, so this run "
                           "cannot finish without it (--design adaptive leaves a refused item "
                           "out)")
    in_a_row = count.in_a_row
    for a in answers:
        in_a_row = in_a_row + 1 if is_refused(a) else 0
    if in_a_row >= REFUSED_IN_A_ROW:
        raise SubjectError(f"the server refused the last {in_a_row} items asked; last: "
                           f"{refused[-1][1]}. Every request is refused, not one item's: check "
                           "the model name and request settings")
    count = RefusalCount(in_a_row, count.refused + len(refused), count.asked + len(answers))
    if count.refused > max(REFUSED_IN_A_ROW, REFUSED_SHARE * count.asked):
        raise SubjectError(f"the server refused {count.refused} of the {count.asked} items "
                           f"asked (more than {REFUSED_SHARE:.0%}); last: {refused[-1][1]}. A "
                           "test that leaves out so many items is not the one asked for: check "
                           "the model's context length and the request settings")
    return count


#: the answer kept for an item a recorded subject has no answer to (a blank of its matrix),
#: skipped by the adaptive test: a skipped step, counted in ``n_skipped`` as ``atlas
#: simulate`` counts it
NO_RECORDED_ANSWER = "no recorded answer (a blank of the matrix): skipped"


def refused_summary(steps) -> tuple[int, str | None]:
    """(items refused, the first refusal's message) among a run's ``steps`` (a table with
    ``status`` and ``answer``)."""
    if steps is None or len(steps) == 0 or "answer" not in steps:
        return 0, None
    skipped = steps[steps["status"] == "skipped"]["answer"]
    refused = [str(a)[len(REFUSED_PREFIX):] for a in skipped if is_refused(str(a))]
    return len(refused), (refused[0] if refused else None)


def refused_line(n: int, message: str | None) -> str | None:
    """What a run's summary says of its refused items (None: none was)."""
    if not n:
        return None
    first = "" if not message else f" ({'first: ' if n > 1 else ''}{message[:300]})"
    return (f"left out: {n} item{'s' if n != 1 else ''} the server refused{first}, not scored "
            "and not counted in the test's length (its maximum counts scored items)")
