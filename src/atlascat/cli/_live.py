"""What ``atlas evaluate``'s single-bank and suite runs share: the run directories, the
atomic ``results.json`` writer, the Ctrl-C handling and the per-item display."""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

from rich.markup import escape

from ._common import err_console, is_quiet


def _absolute(path):
    return None if path is None else Path(path).expanduser().resolve()


def remove_new(db: Path, new_db: bool, output, new_out: bool, store) -> None:
    """Remove what a failed start created (the store file, its journal and lock folder, the
    output folder), so a call that fails before asking anything leaves nothing behind."""
    import shutil

    if store is not None:
        store.close()
    if new_db:
        for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}-journal")):
            if p.exists():
                p.unlink()
        if Path(f"{db}.locks").is_dir():
            shutil.rmtree(Path(f"{db}.locks"), ignore_errors=True)
    if new_out and output is not None and output.is_dir():
        shutil.rmtree(output, ignore_errors=True)
    if new_db and db.parent.is_dir() and not any(db.parent.iterdir()) and db.parent != Path.cwd():
        try:
            db.parent.rmdir()
        except OSError:
            pass


def approximate_note(kind: str, banks: str = "the bank was", whose: str = "the leaderboard's"
                     ) -> None:
    """The warning that ``kind:`` subjects are asked by text prompts, not the calibration's
    requests (``whose``: "the source models'" for a bank folder)."""
    err_console.print(
        f"note: {kind}: subjects are asked chat/text prompts and their answers read from text; "
        f"{banks} calibrated on {whose} answers to its requests (log-likelihoods, "
        f"generations), so results are APPROXIMATE. "
        f"Use completions:URL (vLLM), hf: or lmeval: for {whose} protocol.",
        markup=False, highlight=False, soft_wrap=True)


def start_runs(db: Path, output, report_dir, start) -> tuple:
    """Create new runs: ``start(store, ids)`` appends each run id it starts. If none started,
    whatever the attempt created is removed (:func:`remove_new`). Each run records its output
    and report folders (``report_dir``, else ``output/reports``, else ``<db stem>_reports``).
    Returns ``(store, ids)``."""
    from ..live.store import RunStore

    new_db = not db.exists()
    new_out = output is not None and not output.exists()
    ids: list = []
    store = None
    try:
        store = RunStore(db)
        start(store, ids)
    except BaseException:
        if not ids:  # nothing was started: leave nothing behind
            remove_new(db, new_db, output, new_out, store)
        raise
    reports = report_dir or ((output / "reports") if output is not None
                             else db.parent / f"{db.stem}_reports")
    for rid in ids:
        store.set_run_output(rid, output_dir=_absolute(output or reports),
                             report_dir=_absolute(reports))
    return store, ids


def run_dirs(store, rid: str, db: Path, output, report_dir) -> tuple:
    """``(output_dir, report_dir)`` of a run: the options when given, else the run's own (recorded
    when it started), else (runs of older versions) ``<db stem>_reports`` next to the store."""
    recorded = store.run_output(rid)
    if output is not None:
        return output, (report_dir or output / "reports")
    if report_dir is not None:
        return (recorded[0] if recorded and recorded[0] else report_dir), report_dir
    if recorded is not None and recorded[1] is not None:
        return (recorded[0] or recorded[1]), recorded[1]
    legacy = db.parent / f"{db.stem}_reports"
    return legacy, legacy


def check_results_file(output) -> None:
    """-o DIR of ``atlas evaluate``: a results.json already there must be an earlier run's (a
    list of run rows, kept and extended); any other file of that name would be replaced."""
    from ..errors import ConfigError

    path = None if output is None else Path(output) / "results.json"
    if path is None or not path.is_file():
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = None
    if not (isinstance(old, list) and all(isinstance(r, dict) and "run_id" in r for r in old)):
        raise ConfigError(f"-o/--output {str(output)!r} holds a results.json that is no atlas "
                          "evaluate run's (a list of runs), which the run would replace; give "
                          "a new folder")


def write_results(path: Path, rows: list) -> None:
    """results.json of a run's output folder (:func:`atlascat.live.results_file.write_results`)."""
    from ..live.results_file import write_results as write

    write(path, rows)


class StopRequest:
    """SIGINT / SIGTERM during a live run: the first signal asks the runs to stop after the
    item in flight (it is scored and saved); a second one abandons it (it stays pending and is
    asked again on resume). Handlers are installed only in the main thread, and restored."""

    def __init__(self):
        import threading

        self.event = threading.Event()
        self.count = 0
        #: the runs are being asked (set by ``atlas evaluate`` once they are); before that
        #: (their creation) a signal only asks for the stop, which comes before any item
        self.asking = False

    def _handler(self, signum, frame):
        self.event.set()
        if not self.asking:
            return
        self.count += 1
        if self.count == 1:
            err_console.print("stopping after the item in flight (press Ctrl-C again to abandon "
                              "it; it is asked again on resume)", markup=False, highlight=False,
                              soft_wrap=True)
            return
        raise KeyboardInterrupt

    @contextmanager
    def installed(self):
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        for sig in old:
            signal.signal(sig, self._handler)
        try:
            yield self
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)


class Stopped(KeyboardInterrupt):
    """Raised from the step callback once a stop was requested (after the round was saved)."""


class LiveDisplay:
    """What a live run shows on stderr: aligned per-item lines (unless --quiet / --json) and, on a
    terminal, a progress bar per run with items asked, the estimate the lines give
    (:meth:`estimate_text`: theta and SE, a predictor's predicted score, a suite's average) and
    the time left. Piped, there is no bar (the per-item lines are the progress)."""

    def __init__(self, models, item_ids, plan, *, lines: bool, bar: bool, averages=(),
                 scales=None, continuous=()):
        import threading

        self.averages = frozenset(averages)  # suite runs: their estimate is the average
        self.scales = dict(scales or {})     # run id -> (low, high): a metric's own scale
        # runs scored on a continuum: their folder's (``continuous``), or that answered a score
        # strictly in (0, 1)
        self.continuous: set = set(continuous)
        self.lines = lines
        self.bar = bar and err_console.is_terminal and not is_quiet()
        self.w_model = max([len(m) for m in models] + [1])
        self.w_item = min(max([len(i) for i in item_ids] + [4]), 40)
        self.min_items, self.max_items, self.se_stop = plan
        self.lock = threading.Lock()
        self.progress = None
        self.tasks: dict = {}
        self.models = list(models)

    def __enter__(self):
        if self.bar:
            from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self.progress = Progress(
                TextColumn("{task.description}"), BarColumn(),
                TextColumn("{task.completed:>4.0f} items"), TextColumn("{task.fields[est]}"),
                TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
                console=err_console, transient=False)
            self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.__exit__(*exc)
        return False

    def expected_total(self, n: int, se: float) -> int:
        """Items the run will likely ask: SE shrinks about as 1 / sqrt(items), so reaching
        --se-stop takes about n (se / se_stop)^2 items, within [--min-items, --max-items]."""
        if not self.se_stop or not se or se != se:
            return self.max_items
        guess = int(round(n * (se / self.se_stop) ** 2)) if n else self.max_items
        return int(min(self.max_items, max(self.min_items, n, guess)))

    def estimate_text(self, info) -> str:
        """What a step's line says of the current estimate: theta, a suite run's predicted
        average and its SE (points), or a benchmark predictor's predicted score and its 95%
        interval."""
        if info.run_id in self.averages:
            return f"average {100 * info.theta:5.1f}  SE {100 * info.se:4.2f}"
        if getattr(info, "predicted", None) is not None:
            from ..scorelink.prediction import score_text

            scale = self.scales.get(info.run_id)
            if scale is None:  # 0-1, in percent
                s, lo, hi = (score_text(100 * v) for v in info.predicted)
                return f"predicted {s}% ({lo}-{hi})"
            s, lo, hi = (score_text(scale[0] + (scale[1] - scale[0]) * v, scale)
                         for v in info.predicted)
            return f"predicted {s} ({lo}-{hi})"
        return f"theta {info.theta:+.3f}  SE {info.se:.3f}"

    def score_text(self, info) -> str | None:
        """A step's score when it is not right / wrong: on the metric's own scale (a bank
        folder built with --score-range, "score 37.2"), or a score in [0, 1] ("score 0.62";
        a run's later 0 and 1 as "score 0.00" / "score 1.00" once it answered one between);
        None for right / wrong."""
        score = float(info.score)
        scale = self.scales.get(info.run_id)
        if scale is not None:
            from ..scorelink.prediction import level

            return f"score {level(score, scale)}"
        if 0 < score < 1:
            self.continuous.add(info.run_id)
        return f"score {score:.2f}" if info.run_id in self.continuous else None

    def score_width(self, info) -> int:
        """The width of a step's "score ..." column: the widest score of the run's scale
        ("score 100.0" on 0-100, "score -100.0" on -100 to 100), at least 10."""
        scale = self.scales.get(info.run_id)
        if scale is None:
            return 10
        from ..scorelink.prediction import level

        return max(10, 6 + max(len(level(v, scale)) for v in (0.0, 1.0)))

    def line(self, info) -> "Text":
        from rich.text import Text

        text = Text(f"{info.model:<{self.w_model}}  step {info.step + 1:>4}  item ")
        item = str(info.item_id)
        text.append(f"{item:<{self.w_item}}" if len(item) <= self.w_item else item)
        text.append("  ")
        scored = None if getattr(info, "rated", False) or info.score is None \
            else self.score_text(info)
        if info.score is None:             # no score (a judge's null): left out
            text.append("no score", style="yellow")
        elif getattr(info, "rated", False):  # an ordinal item's rating on its own scale
            text.append(f"rated {info.score:<5g}", style="cyan")
        elif scored is not None:           # a continuous score, or on the metric's scale
            text.append(f"{scored:<{self.score_width(info)}}", style="cyan")
        else:
            text.append("correct" if info.score else "wrong  ",
                        style="green" if info.score else "red")
        text.append(f"  {self.estimate_text(info)}" + ("  (cached)" if info.cached else ""))
        return text

    def say(self, text: str) -> None:
        """One line on stderr, above the progress bars (a retry: the run is not stuck)."""
        with self.lock:
            target = self.progress.console if self.progress is not None else err_console
            target.print(text, markup=False, highlight=False, emoji=False, soft_wrap=True)

    def step_callback(self, stop: "StopRequest"):
        def on_step(info):
            with self.lock:
                if self.lines:
                    target = self.progress.console if self.progress is not None else err_console
                    target.print(self.line(info), highlight=False, emoji=False, soft_wrap=True)
                if self.progress is not None:
                    task = self.tasks.get(info.run_id)
                    if task is None:
                        task = self.tasks[info.run_id] = self.progress.add_task(
                            escape(info.model), total=self.max_items, est="")
                    self.progress.update(task, completed=info.step + 1,
                                         total=self.expected_total(info.step + 1, info.se),
                                         est=self.estimate_text(info))
            if stop.event.is_set():
                raise Stopped()

        return on_step
