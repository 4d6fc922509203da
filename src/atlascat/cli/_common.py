"""Shared CLI helpers: consoles, progress bars, tables, option conventions.

Conventions every command follows (see ``docs/cli.md``):

- ``-o/--output`` is the output path (a file or the run directory); nothing is written into the
  current directory unless the user names it.
- ``--model`` is the IRT model only; responses are the positional argument; ``--bank`` takes a
  file, a bank folder or a bundled name (:class:`atlascat.catalogue.BankRef`).
- Prose wraps only on a terminal; tables never cut a number or an id (piped or redirected
  output is plain text at full width).
"""
from __future__ import annotations

from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.text import Text

# emoji=False: ":abc:" in a user's text must never become an emoji; highlight=False: no
# colouring of numbers inside data. Prose wraps only on a terminal (soft_wrap otherwise).
console = Console(emoji=False, highlight=False)
console.soft_wrap = not console.is_terminal
err_console = Console(stderr=True, emoji=False, highlight=False, soft_wrap=True)

__all__ = ["console", "err_console", "escape", "progress_bar", "print_frame", "print_error",
           "quiet_option", "is_quiet",
           "warn", "bank_option_help", "one_bank", "output_file", "output_dir",
           "load_responses", "json_safe", "predicted_summary"]


#: what ``-q/--quiet`` means in every command that takes it (:func:`quiet_option`)
QUIET_HELP = ("Only the essentials: the result lines and the files written; no tables, "
              "per-item lines or progress bars. Warnings and errors still go to stderr.")
_quiet = [False]


def _set_quiet(value: bool) -> bool:
    _quiet[0] = bool(value)
    return value


def quiet_option():
    """The ``-q/--quiet`` option, one definition for every command: while it is on,
    :func:`print_frame` prints no table and :func:`progress_bar` draws no bar."""
    import typer

    return typer.Option(False, "--quiet", "-q", help=QUIET_HELP, callback=_set_quiet)


def is_quiet() -> bool:
    """Whether this command runs with ``-q/--quiet``."""
    return _quiet[0]


def reset_quiet() -> None:
    """Back to the default (each ``atlas`` call starts loud)."""
    _quiet[0] = False


#: stop reasons that end a test whatever its minimum length (the others wait for --min-items)
LENGTH_STOPS = frozenset({"", "max_items", "budget", "fixed_length", "no_items", "error"})


def min_items_note(n_items, stop_reasons, min_items: int, given: bool, *,
                   bank_own: bool = True) -> str | None:
    """What to say when tests stopped at their minimum length: a precision rule (--se-stop, the
    score link's) fires only once ``min_items`` are asked, so a test that ends there with such a
    reason was held to the minimum, and a smaller --se-stop looks inert. ``n_items`` and
    ``stop_reasons``: one entry per test; ``given``: --min-items was on the command line (else
    the bank's own minimum, or with ``bank_own`` False the default one: a bank file without a
    score link has none). None when no test stopped so."""
    rules = [str(r or "") for n, r in zip(n_items, stop_reasons)
             if int(n) == int(min_items) and str(r or "") not in LENGTH_STOPS]
    if not rules:
        return None
    whose = ("the minimum" if given else "the bank's minimum" if bank_own
             else "the default minimum")
    held = len(rules)
    who = "stopped" if len(n_items) == 1 else f"{held} of {len(n_items)} tests stopped"
    met = "; ".join(STOP_WORDS.get(r, r) for r in sorted(set(rules), key=rules.index))
    return (f"{who} at {whose} of {int(min_items)} items (the stop rule was met by then: "
            f"{met}); --min-items to change")


#: what each stop rule that can hold a test to its minimum says (atlascat.cat.stopping)
STOP_WORDS = {"se": "SE at or below --se-stop",
              "min_information": "no item left informative enough",
              "score_precision": "the predicted score precise enough",
              "floor": "surely at the floor", "ceiling": "surely at the top",
              "reliability": "reliability reached", "cost": "the next item not worth its cost",
              "budget": "the budget spent"}


def subjects_text(n_rows: int, weights=None) -> str:
    """How many subjects rows stand for: ``"32 subjects"``, or with pattern frequencies
    (``--freq-column``) ``"1000 subjects (32 response patterns)"``."""
    if weights is None:
        return f"{n_rows} subjects"
    import numpy as np

    total = float(np.sum(weights))
    people = f"{int(total)}" if total == int(total) else f"{total:g}"
    return f"{people} subjects ({n_rows} response patterns)"


def se_line(se, weights=None) -> str:
    """``"1000 subjects (32 response patterns), median SE 0.741"``: the count and median over
    the subjects the rows stand for (pattern frequencies weight them), and how many of them
    have no finite SE (ML at +-inf, or no items)."""
    import numpy as np

    from ..filtering import weighted_percentile

    se = np.asarray(se, float)
    w = np.ones(se.size) if weights is None else np.asarray(weights, float)
    finite = np.isfinite(se)
    med = (f"{weighted_percentile(se[finite], 50, None if weights is None else w[finite]):.4f}"
           if finite.any() else "n/a")
    bad = float(w[~finite].sum())
    return (f"{subjects_text(se.size, weights)}, median SE {med}"
            + (f", {bad:g} non-finite (ML, or no items)" if bad else ""))


def json_safe(obj):
    """Strict-JSON copy (non-finite floats -> null); see :func:`atlascat.validation.json_safe`."""
    from ..validation import json_safe as _safe

    return _safe(obj)


def cli_advice(exc) -> str:
    """What the command line adds to a library error: the command or option that fixes it
    ("" when none). The library says what is wrong; the commands are named here."""
    import re

    from ..errors import (BankError, BankFolderError, BankKindError, MovedBankError,
                          ResponseDataError, RunFolderError, UnfinishedRunError)

    store = _live_run_store(getattr(exc, "path", None))
    if store is not None:   # the folder `atlas evaluate -o` wrote: say where its run is read
        return (f"it holds live runs (atlas evaluate -o): list them with atlas runs --db "
                f"{store}, a run's steps and page with atlas runs --run RUN_ID --db {store} "
                "-o page.html")
    if isinstance(exc, BankFolderError):
        return "build the bank folder with atlas build-bank RESULTS -o DIR, or give a bank file"
    if isinstance(exc, BankKindError):
        return ("ask a suite with --suite (atlas evaluate, atlas simulate)" if exc.kind == "suite"
                else "give one bank with --bank")
    if isinstance(exc, RunFolderError):
        from pathlib import Path

        sim = exc.path is not None and (Path(exc.path) / "person_scores.csv").is_file()
        return (("it holds atlas simulate's output (person_scores.csv: each model's predicted "
                 "score and interval); atlas report draws the runs of atlas benchmark: "
                 if sim else "") + "create one with atlas benchmark RESPONSES -o RUN_DIR")
    if isinstance(exc, MovedBankError):
        return (f"point the run at it with atlas evaluate --resume {exc.run_id} --bank NEW_PLACE"
                + (f" --db {exc.store}" if exc.store else ""))
    if isinstance(exc, BankError) and str(exc).startswith("this is a multidimensional 2PL bank"):
        return ("atlas info (--rotate), atlas score (theta_1..theta_K) and atlas design read "
                "it")
    if isinstance(exc, ResponseDataError) and re.match(r"text cell .*, column 'group\w*';",
                                                         str(exc), re.IGNORECASE):
        return ("a group column belongs in a groups file, --groups FILE (subject id, group; "
                "atlas calibrate, atlas anova), not among the answers")
    if isinstance(exc, UnfinishedRunError):
        return (f"atlas evaluate --resume {exc.run_id}" + (f" --db {exc.store}" if exc.store
                                                          else "") + ", then compare")
    return ""


def dimension_advice(message: str, responses=None) -> str:
    """A dimensionality warning (:class:`atlascat.irt.dimensionality.DimensionalityWarning`)
    with, for a second trait, the commands that fit it and compare it with one (0/1 answers:
    the multidimensional 2PL); other messages as they are. ``responses``: the data's path as
    the user gave it (else RESPONSES)."""
    if not str(message).startswith("the items measure two things"):
        return str(message)
    data = responses or "RESPONSES"
    return (f"{message}; or fit the two traits, atlas calibrate {data} --dims 2 -o mbank.csv, "
            f"and test them against one, atlas anova {data} --model 2pl --dims 1 --dims 2")


def _live_run_store(path):
    """The run store (``runs.sqlite``) in ``path``, as ``atlas evaluate -o DIR`` writes it,
    else None."""
    if path is None:
        return None
    from pathlib import Path

    folder = Path(str(path))
    store = folder / "runs.sqlite"
    return store if folder.is_dir() and store.is_file() else None


#: the library's keywords a command-line error names by their option (:func:`option_names`)
KEYWORD_OPTIONS = {"quadpts": "--quadpts", "tol": "--tol", "max_iter": "--max-iter",
                   "partition_size": "--partition-size", "random_state": "--seed",
                   "value_range": "--rating-range", "prior_mean": "--prior-mean",
                   "prior_sd": "--prior-sd", "n_dims": "--dims"}
#: keywords named by their option only where the text sets them (``method='map'``)
SETTING_OPTIONS = {"method": "--method", "model": "--model", "estimated": "--estimated"}


def option_names(text: str) -> str:
    """A library error's text as the command line says it: ``quadpts (CLI --quadpts)``,
    ``on_empty='drop' (CLI: --drop-empty)`` -> the option alone; a keyword of
    :data:`KEYWORD_OPTIONS` -> its option (``max_iter=5`` -> ``--max-iter 5``). The library's
    messages keep the keywords, which the Python API's users type; what a message gives as
    the Python call (``Python: calibrate(ratings, model='graded')``, to the end of its
    parenthesis or clause) is kept as written."""
    import re

    kept: list[str] = []

    def keep(m) -> str:
        depth, end = 0, len(text)
        for k in range(m.end(), len(text)):
            ch = text[k]
            depth += (ch == "(") - (ch == ")")
            if depth < 0 or (depth == 0 and ch == ";"):
                end = k
                break
        kept.append(text[m.start():end])
        return f"\0{len(kept) - 1}\0" + text[end:]

    while (m := re.search(r"Python: ", text)) is not None:
        text = text[:m.start()] + keep(m)
    text = _named_options(text)
    return re.sub(r"\0(\d+)\0", lambda m: kept[int(m.group(1))], text)


def _named_options(text: str) -> str:
    """:func:`option_names` on text without a Python call in it."""
    import re

    def keyword(word: str) -> bool:
        return "_" in word or word in KEYWORD_OPTIONS

    text = re.sub(r"(?<![\w-])([A-Za-z]\w*)(=(?:'[^']*'|\"[^\"]*\"|[\w.+-]*))? \(CLI:? (--[^)]+)\)",
                  lambda m: m.group(3) if keyword(m.group(1)) or m.group(2) else m.group(0), text)
    for word, option in {**KEYWORD_OPTIONS, **SETTING_OPTIONS}.items():
        text = re.sub(rf"(?<![\w-]){word}=(['\"]?)([\w.+-]+)\1", rf"{option} \2", text)
        if word in KEYWORD_OPTIONS:
            text = re.sub(rf"(?<![\w\-/.\\'\"]){word}(?![\w=(\-/'\"]|\.\w)", option, text)
    return text


def print_error(message) -> None:
    """``error: <message>`` on stderr, one line, markup in the message printed literally; a
    library error gets the command line's advice (:func:`cli_advice`) and names the options,
    not the keywords (:func:`option_names`)."""
    from ..errors import AtlasError
    from ..validation import one_line

    advice = cli_advice(message) if isinstance(message, Exception) else ""
    text = f"{message}; {advice}" if advice else str(message)
    if isinstance(message, AtlasError):
        text = option_names(text)
    err_console.print(Text("error: ", style="bold red") + Text(one_line(text)))


def warn(message) -> None:
    """``warning: <message>`` on stderr (literal text)."""
    err_console.print(Text("warning: ", style="yellow") + Text(str(message)))


@contextmanager
def progress_bar(description: str, total: int | None):
    """A rich progress bar on stderr; yields ``advance(n=1, total=None)``.

    ``advance(0, total=k)`` resets the total, e.g. to the iteration an iterative fit stopped at
    (the bar then ends full at k instead of jumping to its cap); ``advance.stage(name, total)``
    ends the bar full where it stands and counts a next stage of the work on a new bar below it
    (a calibration's standard errors after its EM). Off a terminal (stderr piped or redirected)
    nothing is drawn: logs get no bar remnants, errors stay one line; nor with
    ``-q/--quiet``."""
    if not err_console.is_terminal or is_quiet():
        def silent(n=1, total=None):
            return None

        silent.stage = lambda name, total=None: None
        yield silent
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)  # lazy: a piped or quiet run draws no bar

    with Progress(TextColumn("[bold blue]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=False) as progress:
        tasks = [progress.add_task(description, total=total)]

        def advance(n: int = 1, total: int | None = None):
            if total is not None:
                progress.update(tasks[-1], total=total)
            progress.advance(tasks[-1], n)

        def stage(name: str, total: int | None = None):
            done = next(t.completed for t in progress.tasks if t.id == tasks[-1])
            progress.update(tasks[-1], total=max(done, 1), completed=max(done, 1))
            tasks.append(progress.add_task(name, total=total))

        advance.stage = stage
        yield advance


def bar_progress(advance):
    """``progress(done, total)`` for a library's long steps, drawn on a :func:`progress_bar`
    (whose ``advance`` counts increments)."""
    last = [0]

    def progress(done, total):
        advance(done - last[0], total=total)
        last[0] = done

    return progress


def next_stage(advance, name: str):
    """A ``callback(done, total)`` that counts a next stage of the work on its own bar
    (``advance.stage``, :func:`progress_bar`) from its first call: a calibration's standard
    errors after its EM, ``Calibrator.fit(se_callback=...)``. ``callback.started`` tells
    whether it was called."""
    def callback(done: int, total: int) -> None:
        if not callback.started:
            advance.stage(name, total=total)
            callback.started = True
        advance(done - callback.done)
        callback.done = done

    callback.started, callback.done = False, 0
    return callback


def _cell(value, float_format: str) -> str:
    if isinstance(value, float):
        text = float_format.format(value)
        # a small negative number rounded to zero ("-0.0") reads as zero
        return float_format.format(0.0) if text == "-" + float_format.format(0.0) else text
    return "-" if value is None else str(value)   # a value not recorded (tokens, latency)


def _narrowed(texts: dict, width: int, optional) -> list[str]:
    """Drop the ``optional`` columns of ``texts`` (in their order) while the table's natural
    width (each column's widest cell, padding and rules) passes ``width``; returns those
    dropped."""
    def natural() -> int:
        return 1 + sum(3 + max([len(str(c)), *map(len, v)]) for c, v in texts.items())

    dropped = []
    for col in optional:
        if natural() <= width:
            break
        if col in texts:
            del texts[col]
            dropped.append(str(col))
    return dropped


def print_frame(df, title: str | None = None, float_format: str = "{:.4g}", max_rows: int = 50,
                result: bool = False, optional=(), keep=()):
    """Print a DataFrame, or columns (a dict name -> values: no pandas needed). On a terminal:
    a rich table (cells fold, never cut; at most ``max_rows`` rows with a count of the rest).
    Piped or redirected: plain aligned text of every row at full width, so no number or id is
    ever truncated. With ``-q/--quiet`` only a table that is the command's result
    (``result=True``) is printed."""
    if is_quiet() and not result:
        return
    columns = df if isinstance(df, dict) else None
    n_rows = len(next(iter(columns.values()), ())) if columns is not None else len(df)
    if not console.is_terminal:
        if title:
            console.print(Text(title), soft_wrap=True)
        if n_rows == 0:
            console.print("(no rows)")
            return
        if columns is not None:
            from .._table import plain_text

            text = plain_text({str(c): [_cell(v, float_format) for v in values]
                               for c, values in columns.items()})
        else:
            import pandas as pd

            text = pd.DataFrame({str(c): [_cell(v, float_format) for v in df[c]]
                                 for c in df.columns}).to_string(index=False)
        console.print(Text(text), soft_wrap=True)
        return
    from rich.table import Table  # lazy: only a terminal gets a rich table

    names = list(columns if columns is not None else df.columns)
    rows = (zip(*columns.values()) if columns is not None
            else (row for _, row in df.iterrows()))
    rows = [tuple(row) for _, row in zip(range(max_rows), rows)]
    texts = {c: [_cell(r[j], float_format) for r in rows] for j, c in enumerate(names)}
    left_out = _narrowed(texts, console.width, optional)
    table = Table(title=Text(title) if title else None, show_lines=False)
    for col in texts:
        table.add_column(escape(str(col)), overflow="fold", no_wrap=col in keep,
                         min_width=max(map(len, texts[col]), default=0) if col in keep else None)
    for row in zip(*texts.values()):
        table.add_row(*[Text(v) for v in row])
    console.print(table)
    if left_out:
        console.print(f"(left out to fit {console.width} columns: {', '.join(left_out)}; "
                      "redirect the output to get them)", markup=False, highlight=False)
    if n_rows > max_rows:
        console.print(f"... {n_rows - max_rows} more rows (redirect the output to get all)")


def bank_option_help(extra: str = "") -> str:
    return ("Item bank: a file (ours item_id,a,b,c,u or mirt's X,a1,d,g,u; a graded/gpcm "
            "bank X|item_id,model,a1,d1..,levels; CSV/Parquet), a bank "
            "folder (atlas build-bank) or a bundled name (arc, hellaswag, mmlu, truthfulqa, winogrande, gsm8k = shipped content "
            "banks; paper-arc, ... = the paper's banks)." + (" " + extra if extra else ""))


RESPONSES_HELP = ("Response matrix: wide CSV/CSV.GZ/TSV/Parquet (subjects x items, first column "
                  "= subject id, blank = missing), long format (subject,item,score), or a bundled "
                  "name (arc, gsm8k, hellaswag, mmlu, truthfulqa, winogrande).")


def one_bank(banks, *, required: bool = True) -> str | None:
    """The one ``--bank`` value (``--bank`` is a list option so that a second one is caught):
    several are an error that points to ``--suite``; none is an error when ``required``."""
    from ..errors import ConfigError

    banks = list(banks or [])
    if len(banks) > 1:
        raise ConfigError(f"--bank was given {len(banks)} times ({', '.join(banks)}); one test "
                          "asks one bank. To ask several benchmarks as one test and get their "
                          "average, use --suite (e.g. --suite openllm-v1)")
    if not banks and required:
        raise ConfigError("give the item bank with --bank (a file or a bundled name), or "
                          "--suite to ask several benchmarks as one test")
    return banks[0] if banks else None


def number(value, spec: str) -> str:
    """``value`` formatted by ``spec``; "undefined" for a NaN or infinite one (an overlap of one
    examinee, a correlation of constant values), never "nan" where a number is promised."""
    import math

    return format(value, spec) if math.isfinite(value) else "undefined"


def check_seed(seed, option: str = "--seed") -> None:
    """A seed option: a whole number >= 0 (numpy's generators take no negative seed)."""
    from ..errors import ConfigError

    if seed is not None and seed < 0:
        raise ConfigError(f"{option} must be a whole number >= 0, got {seed}")


def output_file(path, option: str = "-o/--output", inputs=None, outputs=None):
    """Check an output file path before any work is done (directory, unwritable, one of the
    ``inputs`` files or of the other ``outputs`` -> error)."""
    from ..validation import check_output_file

    return None if path is None else check_output_file(path, option=option, inputs=inputs,
                                                       outputs=outputs)


def output_dir(path, option: str = "-o/--output", writes=(), marker=None):
    """Check an output folder before any work (:func:`atlascat.validation.check_output_dir`)."""
    from ..validation import check_output_dir

    return None if path is None else check_output_dir(path, option=option, writes=writes,
                                                      marker=marker)


def load_responses(spec, *, freq_column=None, normalize_ids: bool = False,
                   on_empty: str = "keep", option: str = "RESPONSES"):
    """A response matrix file or a bundled name."""
    from ..catalogue import resolve_responses

    return resolve_responses(spec, option=option, freq_column=freq_column,
                             normalize_ids=normalize_ids, on_empty=on_empty)


def align_items(rm, bank, extra_items: str, *, restrict_bank: bool = False, known=()):
    """Drop (with a note) or reject response items the bank lacks; optionally restrict the bank
    to the items the responses contain. ``known``: items the bank lacks that belong with it (a
    bank folder's items its build dropped), left out of theta silently. Returns ``(rm, bank)``."""
    from ..errors import ResponseDataError

    known = set(known or ())   # subsets keep the subjects the file had without answers
    if known:
        rm = rm.subset(items=[i for i in rm.item_ids if i in bank or str(i) not in known],
                       on_empty="keep")
    unknown = [i for i in rm.item_ids if i not in bank]
    if len(unknown) == rm.n_items:
        raise ResponseDataError(
            f"none of the {rm.n_items} response items is in the bank (responses: "
            f"{list(rm.item_ids[:3])}, bank: {list(bank.item_ids[:3])}); check that they belong "
            "together, or pass --normalize-ids for R-style 'X' ids")
    if unknown:
        if extra_items == "error":
            raise ResponseDataError(
                f"{len(unknown)} response item(s) are not in the bank, e.g. {unknown[:5]}; pass "
                "--extra-items ignore to leave them out, or --normalize-ids for R-style 'X' ids")
        err_console.print(f"note: {len(unknown)} response item(s) not in the bank were left out "
                          f"(e.g. {unknown[:3]})", markup=False)
        rm = rm.subset(items=[i for i in rm.item_ids if i in bank], on_empty="keep")
    if restrict_bank:
        present = set(rm.item_ids)
        keep = [i for i in bank.item_ids if i in present]
        if len(keep) < len(bank):
            bank = bank.subset(keep)
    return rm, bank


def group_keywords(groups, reference_group) -> dict:
    """--groups read (:func:`atlascat.irt.groups.read_groups`) with --reference-group, as
    ``calibrate``'s keywords; nothing without --groups (--reference-group alone refused)."""
    if groups is None:
        if reference_group is not None:
            from ..errors import ConfigError

            raise ConfigError("--reference-group needs --groups")
        return {}
    from ..irt.groups import read_groups

    return {"groups": read_groups(groups), "reference_group": reference_group}


def print_groups(res) -> None:
    """A multiple-group fit's groups, one line each: size, latent mean and SD (with their
    standard errors and the variance under --se); nothing for a one-group fit."""
    if res.groups is None:
        return
    for g in res.groups["groups"]:
        ref = " (reference)" if g["group"] == res.groups["reference"] else ""
        se = "" if g.get("mean_se") is None else \
            f" (SE {g['mean_se']:.3f}), SD {g['sd']:.3f} (SE {g['sd_se']:.3f}), variance " \
            f"{g['var']:.3f} (SE {g['var_se']:.3f})"
        console.print(f"group {g['group']}{ref}: {g['n_observations']:g} subjects, latent mean "
                      f"{g['mean']:.3f}" + (se or f", SD {g['sd']:.3f}"), markup=False,
                      highlight=False)


#: --groups and --summary of the commands that read a multiple-group bank (score, fit)
GROUPS_HELP = ("A bank from atlas calibrate --groups: each subject's group (a CSV of subject id "
               "and group, as there), with --summary.")
SUMMARY_HELP = ("With --groups: the JSON summary atlas calibrate --groups --summary wrote (each "
                "group's latent mean and SD on the bank's scale).")


def group_priors_option(groups, summary):
    """--groups and --summary read: {"groups": subject id -> group, "priors": group -> (mean,
    sd)} (:func:`atlascat.irt.groupscore.group_priors`), "pcm": whether the summary is a
    partial credit fit's; None without both; a one-line error where one comes without the
    other."""
    from ..errors import ConfigError

    if groups is None and summary is None:
        return None
    if groups is None or summary is None:
        raise ConfigError("--groups and --summary go together: each subject's group and the "
                          "groups' priors (the summary of atlas calibrate --groups --summary)")
    from ..irt.groups import read_groups
    from ..irt.groupscore import fitted_model, group_priors

    try:
        priors = group_priors(summary)
    except ConfigError as exc:
        raise ConfigError(f"--summary: {exc}; atlas calibrate --groups --summary writes it"
                          ) from None
    return {"groups": read_groups(groups), "priors": priors,
            "pcm": fitted_model(summary) == "pcm"}


def fit_grouping(groups, summary, group_delta) -> dict | None:
    """--groups and --summary read (:func:`group_priors_option`) with --group-delta
    (``group_delta``: True unless it is mirt), or None without them."""
    grouping = group_priors_option(groups, summary)
    if grouping is not None:
        grouping["group_delta"] = group_delta is None or group_delta.lower() != "mirt"
    return grouping


#: what a command without --groups (simulate, evaluate) says to do for a multiple-group bank
TEST_GROUPS_HINT = ("the adaptive test has one prior for all (atlas score --groups GROUPS.csv "
                    "--summary FIT.json scores each subject under its group's)")


def tested_under_one_prior(bank, config) -> None:
    """:func:`check_grouped_bank` of an adaptive test (simulate, evaluate) under ``config``'s
    prior: one warning line for a multiple-group fit's bank."""
    est = config.estimation
    check_grouped_bank(bank, None, "tested", (est.prior_mean, est.prior_sd),
                       hint=TEST_GROUPS_HINT)


def check_grouped_bank(bank, grouping, what: str = "scored", prior=(0.0, 1.0), *,
                       hint: str | None = None) -> None:
    """A bank of ``atlas calibrate --groups`` (the priors it records: :func:`atlascat.irt.
    groupscore.bank_group_priors`) without ``grouping`` (--groups and --summary read): a
    one-line warning naming them (``what`` the command does under the one ``prior``, mean
    and SD, for every subject without them; ``hint`` what to do instead, default --groups with
    --summary; the library's own :class:`~atlascat.irt.
    grouplabels.GroupPriorWarning` then silenced for the rest of the command: one line); with
    them, a one-line error where --summary's groups are not the bank's
    (:func:`atlascat.irt.groupscore.check_bank_priors`)."""
    import warnings

    from ..errors import ConfigError
    from ..irt.grouplabels import GroupPriorWarning, check_bank_priors, single_prior_note

    if grouping:
        try:
            check_bank_priors(bank, grouping["priors"])
        except ConfigError as exc:
            raise ConfigError(f"--summary: {exc}") from None
        return
    note = single_prior_note(bank, what, prior)
    if note is not None:
        warn(note + "; " + (hint or "--groups GROUPS.csv --summary FIT.json put each subject "
                                    "under its group's prior"))
        warnings.filterwarnings("ignore", category=GroupPriorWarning)   # said: once


def write_scores_csv(df, output, digits: int = 8) -> None:
    """A score table written whole or not at all (``digits`` significant digits), its folder
    made."""
    from ..validation import write_guard

    with write_guard(output):
        output.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(output, index=False, float_format=f"%.{digits}g")


def wrote_line(*paths) -> str:
    """"wrote A", "wrote A and B", "wrote A, B and C": the files a command wrote (None
    skipped), each named once."""
    names = [str(p) for p in paths if p is not None]
    return "wrote " + (names[0] if len(names) == 1 else
                       ", ".join(names[:-1]) + " and " + names[-1])


def print_text(text: str) -> None:
    """Print plain text as is: no markup, no highlighting, no wrapping at the terminal width."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


@contextmanager
def one_line_warnings():
    """Python warnings raised by the library (``atlascat.errors.warn_user``) print as
    ``warning: <message>``, one line, like the CLI's own (:func:`warn`), instead of Python's
    ``<file>:<line>: UserWarning: ...`` pointing into typer, the library's caller. The
    warning filters a command sets (:func:`check_grouped_bank`) end with it."""
    import warnings

    shown = warnings.showwarning
    with warnings.catch_warnings():
        warnings.showwarning = lambda message, *args, **kwargs: warn(message)
        try:
            yield
        finally:
            warnings.showwarning = shown


def binary_bank_only(bank, spec: str, command: str, why: str, instead: str) -> None:
    """Refuse an ordinal (graded / gpcm) bank in a command made for right/wrong items: one
    line saying why and what to run instead (exit 2)."""
    from ..errors import ConfigError
    from ..irt.polybank import PolyBank

    if isinstance(bank, PolyBank):
        raise ConfigError(f"{command} {why}; {spec!r} holds ordinal ({bank.model}) items: "
                          f"{instead}")


def safe_filename(name: str) -> str:
    """A file name for a subject id: runs of characters outside [A-Za-z0-9._-] become '_'."""
    import re

    out = re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).strip("._") or "subject"
    return out[:180]


def unique_filenames(ids) -> list[str]:
    """Sanitized, collision-free file stems for the subject ids (suffix _2, _3, ... on clashes)."""
    seen: dict[str, int] = {}
    out = []
    for sid in ids:
        base = safe_filename(sid)
        n = seen.get(base.lower(), 0) + 1
        seen[base.lower()] = n
        out.append(base if n == 1 else f"{base}_{n}")
    return out


def predicted_summary(words: dict, persons) -> tuple[dict, tuple[str, str]]:
    """The predicted scores in a simulation's summary: the library's figures (summary.json) and
    name (:func:`atlascat.scorelink.frames.prediction_summary`: a shipped link's "predicted
    leaderboard score", a bank folder's "predicted <benchmark> score", an ordinal bank's
    rating), and the table's row (percent on [0, 1], else the metric's units)."""
    from ..scorelink.frames import prediction_summary

    figures, name = prediction_summary(words, persons)
    unit = 100 if "scale" not in words else 1
    return figures, (name, mean_and_width(unit * figures["score_mean"],
                                          unit * figures["width_mean"], words.get("scale")))


def mean_and_width(mean: float, width: float, scale=None) -> str:
    """A summary's mean prediction and its intervals' mean width, in the score's points (of
    percent, the mean with its "%" as every other output writes a score in percent, or of a
    metric's own ``scale``: the one digits rule, ``score_digits``)."""
    from ..scorelink.prediction import score_text

    unit = "%" if scale is None else ""
    return (f"{score_text(mean, scale)}{unit} (95% intervals {score_text(width, scale)} points "
            "wide)")


def note_unseen_ratings(bank, ratings) -> None:
    """One note line when ratings on the scale fell on levels their items never had at
    calibration (scored as the category each falls in: :class:`~atlascat.irt.polybank.PolyBank`)."""
    note = bank.unseen_note(ratings)
    if note:
        err_console.print(f"note: {note}", markup=False)


def whole_ratings(responses, freq_column) -> bool:
    """Whether RESPONSES are whole-number ratings beyond 0/1 (a judge's 1-10, a rubric's 0-3)."""
    import numpy as np

    from ..errors import AtlasError
    from ..irt.polycal import read_ratings

    try:
        values = read_ratings(responses, freq_column=freq_column)[0]
    except (AtlasError, OSError, ValueError):
        return False
    v = values[~np.isnan(values)]
    return bool(v.size) and bool(np.all(v == np.round(v))) and bool(v.min() < 0 or v.max() > 1)
