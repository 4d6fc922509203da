"""Item-scored subjects: the subject scores each item itself, asked by item id only.

A bank folder built from a response matrix (``atlas build-bank RESULTS.csv``) has item ids and
parameters but no requests: ATLAS cannot ask a model its items. Whoever made the matrix can: an
item-scored subject (``kind = "item"``) is given the ids the design picks and returns a 0/1
score for each, from the user's own harness (:class:`CommandSubject`, ``cmd:COMMAND``) or from
recorded answers (:class:`RecordedAnswers`, ``replay:MATRIX#MODEL`` on a bank without
requests). The run is then the same live run as any other: the adaptive test or the folder's
benchmark predictor, every answer stored, resumable, one predicted score in every reader.

The score means what the calibration models' scores meant only if the command scores an item
as their results were scored (same prompt, same metric): the run's protocol label says who
scored it.

On a bank that holds its items' requests (a folder built from sample logs), a command is
sent each item's requests instead and answers the model's outputs, which atlas scores by the
item's rule (:mod:`.cmdrequests`); what follows is the protocol by item id.

The command's protocol: ATLAS starts it once per run (so a harness loads its model once) and
writes one JSON object a line to its standard input, ``{"item_id": "..."}``; for every line it
must print one line, ``{"item_id": "...", "score": 0 or 1}`` (a score in [0, 1] for a
continuous metric; on a bank folder built with ``--score-range LO HI``: the score on the
metric's scale, LO..HI, read as (x - LO) / (HI - LO); on a graded / gpcm bank: the item's
rating, one of its levels; ``null``: no score, the item is left out unscored, as a gap in a
response matrix; other keys are kept with the answer), and flush (a Python program
runs unbuffered: ``PYTHONUNBUFFERED=1``). A round of k
items writes k lines, then reads k replies (any order). Its standard error is kept (the last
line names a failure). The command exiting early, or a round taking longer than ``timeout``,
fails the round: the run is saved, the process stopped, and ``--resume`` starts it again.
"""
from __future__ import annotations

import collections
import json
import math
import os
import queue
import shlex
import shutil
import subprocess
import threading
import time
from pathlib import Path

from ...errors import ConfigError, LiveRunError
from .base import SubjectError, reply_records
from .cmdrequests import asks_requests, build_item_requests, parse_outputs, request_line
from .replay import recorded_answers, recorded_ratings

__all__ = ["CommandSubject", "RecordedAnswers", "parse_scores"]


def parse_scores(item_ids, text: str, who: str, *, ratings: bool = False,
                 score_range=None) -> list[tuple[int, str]]:
    """(score, reply line) per item of ``item_ids`` from the JSON lines ``text`` (module
    docstring); one clear error for a line that is not such an object, a score that is not
    0/1 (``ratings``: not a finite number; the runner checks it against the item's levels;
    JSON true / false stand for 1 / 0 only on a 0/1 bank, not as a rating or on a scale),
    an item missing, repeated or not asked. ``score_range`` (lo, hi): a score is on the
    metric's scale, returned as (x - lo) / (hi - lo); one outside [lo, hi] is a
    :class:`SubjectError` (the run stops, saved, to be resumed once the program is fixed).
    A ``null`` score is None: no score (a judge that could not rate the item), which the run
    records as skipped."""
    want = [str(i) for i in item_ids]
    got: dict = {}
    for n, line, rec in reply_records(text, who, ("item_id", "score"), "item_id and score"):
        item, score = str(rec["item_id"]), rec["score"]
        if item not in want:
            raise LiveRunError(f"{who}: reply line {n} scores item {item!r}, which was not asked")
        if item in got:
            raise LiveRunError(f"{who}: item {item!r} is scored twice")
        if isinstance(score, bool):
            if ratings or score_range is not None:   # true is no rating, nor a point on a scale
                raise SubjectError(f"{who}: item {item!r} scored {json.dumps(score)} (as "
                                   "printed), not a number; print the "
                                   + ("item's rating, one of its levels" if ratings else
                                      "score on the metric's scale "
                                      f"[{float(score_range[0]):g}, {float(score_range[1]):g}]"))
            score = int(score)
        if score is None:
            got[item] = (None, line.strip())
            continue
        if ratings:
            if not isinstance(score, (int, float)) or not math.isfinite(score):
                raise LiveRunError(f"{who}: item {item!r} rated {json.dumps(score)} (as "
                                   "printed); a rating is a number on the item's scale")
        elif score_range is not None:
            score = _on_scale(score, score_range, f"{who}: item {item!r}")
        elif not isinstance(score, (int, float)) or not 0 <= score <= 1:
            pct = (" (a percent? print it / 100, or build the folder with --score-range "
                   "0 100)" if isinstance(score, (int, float)) and 1 < score <= 100 else "")
            raise SubjectError(f"{who}: item {item!r} scored {score!r}; a score is 0 or 1, "
                               f"or in [0, 1] for a continuous metric{pct}")
        got[item] = (score if ratings or 0 < score < 1 else int(score), line.strip())
    missing = [i for i in want if i not in got]
    if missing:
        raise LiveRunError(f"{who}: no score for {len(missing)} of the {len(want)} item(s) asked "
                           f"(e.g. {missing[0]!r}); print one line per item_id read")
    return [got[i] for i in want]


def _on_scale(score, score_range, where: str) -> float:
    """A score on the metric's scale (lo, hi) -> (x - lo) / (hi - lo) in [0, 1]."""
    lo, hi = (float(v) for v in score_range)
    if not isinstance(score, (int, float)) or not math.isfinite(score):
        raise SubjectError(f"{where} scored {json.dumps(score)} (as printed), not a number; "
                           f"print each score on the metric's scale [{lo:g}, {hi:g}]")
    if not lo <= score <= hi:
        raise SubjectError(f"{where} scored {score!r}, outside the bank folder's score range "
                           f"[{lo:g}, {hi:g}] (--score-range); print each score on the "
                           "metric's scale")
    return (float(score) - lo) / (hi - lo)


class CommandSubject:
    """A program of the user's that scores items by id (``cmd:COMMAND``; module docstring).

    Parameters
    ----------
    command : the program and its arguments (a string, split as a shell would, but run without
        one; or a list)
    name : the model's name in the run store (default: the command)
    timeout : seconds one round may take (default: no limit)
    ratings : the items are ordinal (a graded / gpcm bank): ``score`` is a rating on the item's
        own scale (one of its levels, checked by the runner), not 0/1
    score_range : (low, high), a bank folder's metric scale (built with ``--score-range``):
        ``score`` is on it, read as (x - low) / (high - low) (:func:`parse_scores`)
    bank : the bank asked; when it holds its items' requests (a folder built from sample
        logs), each line the command reads carries them and the command answers the model's
        outputs, scored by the item's rule (:mod:`.cmdrequests`); else it reads item ids
    """

    kind = "item"

    def __init__(self, command, name: str | None = None, *, timeout: float | None = None,
                 ratings: bool = False, score_range=None, bank=None):
        try:
            argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
        except ValueError as exc:
            raise ConfigError(f"--subject cmd:{command}: cannot split the command "
                              f"({exc})") from None
        if not argv:
            raise ConfigError("--subject cmd:COMMAND needs a command, e.g. cmd:'python score.py'")
        if shutil.which(argv[0]) is None and not Path(argv[0]).is_file():
            raise ConfigError(f"--subject cmd: program {argv[0]!r} not found (give its path, or a "
                              "program on PATH)")
        self.argv = argv
        self.command = shlex.join(argv)
        self.model = self.name = str(name) if name else self.command
        self.timeout = None if timeout is None else float(timeout)
        self.ratings = bool(ratings)
        self.score_range = None if score_range is None else [float(v) for v in score_range]
        self._bank = bank if bank is not None and not ratings and asks_requests(bank) else None
        if self._bank is not None:
            self._requests(self._bank.item_ids[0])   # a bank whose requests are broken: now
        self.protocol = "request command" if self._bank is not None else "item command"
        self._proc = None
        #: the write end of the pipe whose end tells the command's guard atlas is gone
        self._guard_fd = None
        self._lines: queue.Queue = queue.Queue()
        self._stderr: collections.deque = collections.deque(maxlen=20)
        self._lock = threading.Lock()
        self._pumps: list = []

    @property
    def cache_key(self) -> str:
        scale = "" if self.score_range is None else "#scale:{:g}-{:g}".format(*self.score_range)
        return (f"{self.name}@cmd:{self.command}" + ("#ratings" if self.ratings else "") + scale
                + ("#requests" if self._bank is not None else ""))

    def item_requests(self, item):
        """The requests the command is sent for ``item`` (None: it is sent the item id)."""
        return None if self._bank is None else self._requests(item)

    def _requests(self, item):
        return build_item_requests(self._bank, item, opaque=True)

    def describe(self) -> dict:
        out = {"type": "cmd", "model": self.name, "command": self.command,
               "kind": self.kind, "timeout": self.timeout}
        if self._bank is not None:
            out["sends"] = "requests"
        if self.score_range is not None:
            out["score_range"] = self.score_range
        return out

    def score_of(self, reply: str):
        """The score of one stored reply line (a cached answer), read as it was when asked."""
        try:
            item = json.loads(reply)["item_id"]
        except (ValueError, KeyError, TypeError):
            raise LiveRunError(f"a stored reply {reply[:80]!r} holds no item_id") from None
        return self._parse([str(item)], reply, whole_round=False)[0][0]

    def _parse(self, ids: list, text: str, whole_round: bool = True) -> list:
        who = f"the command {self.command!r}"
        if self._bank is None:
            return parse_scores(ids, text, who, ratings=self.ratings,
                                score_range=self.score_range)
        return parse_outputs([self._requests(i) for i in ids], text, who,
                             score_item=lambda item, line: parse_scores(
                                 [item], line, who, score_range=self.score_range)[0][0],
                             whole_round=whole_round)

    def _sent(self, ids: list) -> str:
        if self._bank is None:
            return "".join(json.dumps({"item_id": i}) + "\n" for i in ids)
        return "".join(json.dumps(request_line(self._requests(i))) + "\n" for i in ids)

    # ------------------------------------------------------------ the process
    def _start(self):
        from .cmdguard import start_guarded

        if self._guard_fd is not None:   # the last process ended by itself
            os.close(self._guard_fd)
            self._guard_fd = None
        try:
            # its own session: a terminal's Ctrl-C reaches ATLAS, which stops after the item
            # in flight and then ends the process (close), not the command mid-item; on POSIX
            # through a guard that ends it when atlas is gone, even killed (cmdguard)
            proc, self._guard_fd = start_guarded(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, bufsize=1,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        except OSError as exc:
            raise SubjectError(f"the command {self.command!r} could not start ({exc})") from None
        self._lines, self._stderr = queue.Queue(), collections.deque(maxlen=20)

        def pump(stream, put, end: bool):
            with stream:                       # closed at its end (was left to the collector)
                for line in stream:
                    put(line)
            if end:
                put(None)                      # standard output closed: the process ended

        self._pumps = [threading.Thread(target=pump, args=args, daemon=True, name="atlas-cmd-io")
                       for args in ((proc.stdout, self._lines.put, True),
                                    (proc.stderr, self._stderr.append, False))]
        for t in self._pumps:
            t.start()
        self._proc = proc
        return proc

    def _failed(self, why: str) -> SubjectError:
        """Stop the process (a later round starts a new one) and say why, with the last line
        it wrote to standard error."""
        self.close(wait=1.0)
        for t in self._pumps:                  # the pipes close with the process
            t.join(timeout=5.0)
        tail = [ln.strip() for ln in self._stderr if ln.strip()][-1:]
        return SubjectError(f"the command {self.command!r} {why}"
                            + (f": {tail[0][:200]}" if tail else ""))

    def score_items(self, item_ids) -> list[tuple[int, str]]:
        ids = [str(i) for i in item_ids]
        with self._lock:
            proc = self._proc if self._proc is not None and self._proc.poll() is None \
                else self._start()
            try:
                proc.stdin.write(self._sent(ids))
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                raise self._failed(f"exited with status {_status(proc)} before reading the "
                                   "items") from None
            deadline = None if self.timeout is None else time.monotonic() + self.timeout
            replies = []
            while len(replies) < len(ids):
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    line = self._lines.get(timeout=left)
                except queue.Empty:
                    raise self._failed(f"did not score {len(ids)} item(s) within "
                                       f"{self.timeout:g} s (--timeout)") from None
                if line is None:
                    raise self._failed(f"exited with status {_status(proc)} after scoring "
                                       f"{len(replies)} of the {len(ids)} item(s) just sent "
                                       "to it")
                if line.strip():
                    replies.append(line)
            try:
                return self._parse(ids, "".join(replies))
            except SubjectError:
                raise
            except LiveRunError as exc:
                # the program said something else than the round's scores: its replies are
                # out of step with the items, so it is stopped (the next round starts it
                # again) and the run, saved, resumes once the program is fixed
                self.close(wait=1.0)
                raise SubjectError(str(exc)) from None

    def close(self, wait: float = 5.0) -> None:
        """End the process: its standard input closed (a harness reading lines then exits),
        killed if it has not ended within ``wait`` seconds."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            from .cmdguard import end_group

            end_group(proc)   # the command and anything it started
            proc.wait()
        fd, self._guard_fd = self._guard_fd, None
        if fd is not None:
            os.close(fd)


def _status(proc) -> str:
    """The exit status of a process that closed its output (``?`` if it has not ended)."""
    try:
        return str(proc.wait(timeout=5))
    except subprocess.TimeoutExpired:
        return "?"


class RecordedAnswers:
    """A model's recorded scores, asked by item id (``replay:MATRIX#MODEL`` on a bank without
    requests, such as a folder built from a response matrix): the whole live path on real
    answers, each score as recorded (0/1, or a continuous score in [0, 1], as ``atlas
    simulate`` reads the same matrix). A bank folder's predictor asks only the items the model
    has answers for (:meth:`answered_items`) and an adaptive test skips the others as they
    come up, both as ``atlas simulate`` does. ``ratings``: the items are ordinal (a graded / gpcm bank) and the matrix
    holds ratings on their own scales, replayed as recorded. ``score_range`` (low, high): the
    matrix holds a metric on that scale (a bank folder built with ``--score-range``), read as
    (x - low) / (high - low); each reply shows the score as recorded, on that scale.
    ``source``: the name of a matrix given in memory (the sample logs it was read from:
    :func:`~atlascat.live.subjects.replay.replayed_matrix`), as described and stored."""

    kind = "item"
    protocol = "recorded"

    def __init__(self, matrix, model: str, *, ratings: bool = False, score_range=None,
                 source=None):
        self.ratings = bool(ratings)
        self.score_range = None if score_range is None else [float(v) for v in score_range]
        if ratings:
            self.source, self._answers = recorded_ratings(matrix, model)
        else:
            self.source, self._answers = recorded_answers(matrix, model, binary=False,
                                                          score_range=self.score_range,
                                                          source=source)
        self.model = self.name = str(model)

    @property
    def cache_key(self) -> str:
        scale = ("" if self.score_range is None
                 else "@{:g}-{:g}".format(*self.score_range))   # its replies' scale
        return (f"{self.model}@replay:{self.source}#" + ("ratings" if self.ratings else "item")
                + scale)

    def score_of(self, reply: str):
        """The score of one stored reply line (a cached answer), read as it was written: on
        the metric's scale under ``score_range``."""
        try:
            item = json.loads(reply)["item_id"]
        except (ValueError, KeyError, TypeError):
            raise LiveRunError(f"a stored reply {reply[:80]!r} holds no item_id") from None
        return parse_scores([item], reply, f"replay {self.source}", ratings=self.ratings,
                            score_range=self.score_range)[0][0]

    def describe(self) -> dict:
        out = {"type": "replay", "model": self.model, "matrix": self.source, "kind": self.kind}
        if self.score_range is not None:
            out["score_range"] = self.score_range
        return out

    def answered_items(self) -> set[str]:
        """The item ids the model has a recorded score for."""
        return {k for k, v in self._answers.items() if v is not None}

    def score_items(self, item_ids) -> list[tuple[int, str]]:
        out = []
        for item in map(str, item_ids):
            ans = self._answers.get(item)
            if ans is None:
                raise ConfigError(f"replay: model {self.model!r} has no recorded answer for item "
                                  f"{item!r} in {self.source}")
            score = ans if self.ratings or 0 < ans < 1 else int(ans)
            shown = score                      # the answer as recorded: on the metric's scale
            if self.score_range is not None:
                lo, hi = self.score_range
                shown = float(f"{lo + (hi - lo) * score:.10g}")
            out.append((score, json.dumps({"item_id": item, "score": shown})))
        return out
