"""Two finished runs compared: the difference of their predicted scores with a 95% interval,
per benchmark (and on a suite run's average), what ``atlas compare-models`` prints.

:func:`compare_runs` takes two run ids or run folders (``atlas evaluate -o``) and returns the
rows the command shows and its ``--json`` writes, each named in the benchmark's own words (a
shipped bank's "predicted leaderboard score", a bank folder's "predicted <benchmark> score"),
with the unit of the difference. The interval is :func:`atlascat.studies.paired.paired_difference`'s.

Example::

    from atlascat.live.compare import compare_runs

    out = compare_runs("runs/tuned", "runs/base", rho=0.5)   # checkpoints: correlated errors
    for row in out["rows"]:
        print(row["benchmark"], row["difference"], row["lo"], row["hi"], row["told_apart"])
    comparison_frame(out)    # the same rows as a DataFrame, the runs and models beside
"""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from ..errors import AtlasError, ConfigError, LiveRunError

__all__ = ["compare_runs", "comparison_frame", "SIGN"]

#: the sign convention of every difference compared here
SIGN = "first minus second"


def compare_runs(run_a, run_b, *, db=None, rho: float = 0.0) -> dict:
    """First minus second, per benchmark both runs predict (0-100 points, or the metric's own
    scale for a bank folder built with ``--score-range``), with its 95% interval.

    ``run_a`` / ``run_b``: run ids (looked up in ``db``, else in the stores ``atlas runs``
    knows) or run folders. ``rho``: the correlation of the two predictions' errors (0 for
    unrelated models, larger for near-duplicates such as checkpoints). Returns ``first``,
    ``second`` (run ids), ``sign`` (:data:`SIGN`, "first minus second": a positive
    difference says the first run's model scores higher), ``models``, ``rho``, ``score``
    (what the rows compare: "predicted leaderboard score", "predicted <benchmark> score"),
    ``unit``, ``warning`` (None, or a line
    when one run was asked approximately and the other not, and with the runs' own prediction
    warnings, which the difference inherits) and ``rows``: ``benchmark``, ``first``,
    ``second``, ``difference``, ``lo``, ``hi``, ``told_apart`` ("yes" / "no": the interval
    excludes 0), ``first_lo``, ``first_hi``, ``second_lo``, ``second_hi`` (each run's own 95%
    interval, as the run gives it), ``score``, ``population``, ``unit``, ``warnings`` (the
    runs' on that row).
    Two runs that are one run, that predict no common score, or whose scores of one name are
    not one score (two banks, or one bank folder rebuilt between the runs) raise
    :class:`~atlascat.errors.ConfigError`."""
    if not -1.0 <= float(rho) <= 1.0:           # before any run is looked up (NaN too)
        raise ConfigError(f"rho must lie in [-1, 1], got {rho}")
    for name, run in (("RUN_A", run_a), ("RUN_B", run_b)):
        text = str(run)
        if not text.strip():           # not the current folder: an empty value is a slip
            raise ConfigError(f"{name} is empty; give a run id or a live run's output folder")
        if ("/" in text or "\\" in text) and not Path(text).exists():   # a path, not an id
            raise ConfigError(f"{name} {text!r} does not exist; give a run id or a live run's "
                              "output folder")
    with ExitStack() as opened:   # every store it reads is closed when done
        resolve = _resolver(None if db is None else Path(db), opened)
        first, second = resolve(str(run_a)), resolve(str(run_b))
        if first[2] == second[2]:
            raise ConfigError("give two different runs (RUN_A RUN_B)")
        rows = _rows(first, second, rho)
        names = {r["score"] for r in rows}
        units = {r["unit"] for r in rows}
        return {"first": first[2], "second": second[2], "sign": SIGN,
                "models": [_model_of(runs, r) for (_, runs, r) in (first, second)],
                "rho": float(rho),
                "score": names.pop() if len(names) == 1 else "predicted score",
                "unit": units.pop() if len(units) == 1 else "points",
                "warning": "; ".join(w for w in [_mixed_protocols(first, second),
                                                 *_cached_answers(first, second),
                                                 *(x for r in rows for x in r["warnings"])]
                                     if w) or None,
                "rows": rows}


def comparison_frame(compared: dict):
    """:func:`compare_runs`'s result as a table: one row per benchmark, its ``rows``' columns
    (``benchmark``, ``first``, ``second``, ``difference``, ``lo``, ``hi``, ``told_apart``,
    ``score``, ``population``, ``unit``: the numbers ``atlas compare-models --json`` prints),
    then the comparison's ``first_run``, ``second_run`` (run ids), ``first_model``,
    ``second_model``, ``rho`` and ``warning`` ("" when none) on every row, so that the
    tables of several comparisons concatenate into one."""
    import pandas as pd

    models = list(compared.get("models") or (None, None))
    runs = {"first_run": compared["first"], "second_run": compared["second"],
            "first_model": models[0], "second_model": models[1], "rho": compared["rho"],
            "warning": compared.get("warning") or ""}
    return pd.DataFrame([{**row, **runs} for row in compared["rows"]])


def _resolver(db, opened: ExitStack):
    """``resolve(run)``: (store, its runs, run id) of a run id or of a run folder; a run id is
    looked up in ``db``, else in the first of the stores `atlas runs` lists (the default one
    and every one a run wrote elsewhere) that holds it. Each store opened is closed by
    ``opened``."""
    from .service import run_folder
    from .store import RunStore, find_run_store

    stores: dict[Path, tuple] = {}

    def store_of(run_id: str) -> Path:
        if db is not None:
            if not db.exists():
                raise LiveRunError(f"run database {str(db)!r} does not exist (give --db, "
                                   "or the run's folder instead of its id)")
            if db.is_file() and db.stat().st_size == 0:   # comparing never writes a store
                raise LiveRunError(f"--db {str(db)!r} is an empty file, not a run store; "
                                   "give the --db your runs were stored in")
            return db
        return find_run_store(run_id)

    def resolve(run: str) -> tuple:
        folder = Path(run)
        if folder.is_dir():
            path, run_id = run_folder(folder, db)
        else:
            path, run_id = store_of(run), run
        path = path.resolve()
        if path not in stores:
            store = opened.enter_context(RunStore(path, read_only="auto"))
            stores[path] = (store, store.list_runs())
        return (*stores[path], run_id)

    return resolve


def _rows(first, second, rho: float) -> list[dict]:
    """Per benchmark both runs predict: first, second, their difference and its 95% interval
    (points: of percent, or of the metric's own scale for a bank folder built with
    --score-range), and whether it tells the two apart."""
    from ..scorelink.prediction import score_digits
    from ..studies.paired import paired_difference
    from .report import LEADERBOARD, score_name
    from .service import run_predictions

    run_a, run_b = first[2], second[2]
    preds = [run_predictions(store, r, runs) for store, runs, r in (first, second)]
    common = [k for k in preds[0] if k in preds[1]]
    refs = [_field(runs, r, "bank_ref") for _, runs, r in (first, second)]
    if not common:
        _gone_folder((run_a, run_b), refs,
                     {r: str(store.path) for store, _, r in (first, second)})
        raise ConfigError(f"runs {run_a} ({', '.join(preds[0]) or 'no prediction'}) and "
                          f"{run_b} ({', '.join(preds[1]) or 'no prediction'}) share no "
                          "benchmark with a predicted score")
    hashes = [store.get_run(r).get("bank_hash") for store, _, r in (first, second)]
    kinds = [_field(runs, r, "kind") for _, runs, r in (first, second)]
    if set(kinds) == {"adaptive", "predictor"} and refs[0] == refs[1]:
        hashes = _as_of_now(refs[0], kinds, hashes)
    suite = "suite" in kinds
    rows = []
    for bench in common:
        a, b = preds[0][bench], preds[1][bench]
        _same_score(bench, [a, b], refs, (run_a, run_b), hashes)
        population = a.get("population", LEADERBOARD)
        d = paired_difference(a, b, benchmark=_pair_scale_of(bench, population, suite),
                              rho=rho)
        k = 1.0 if a.get("scale") else 100.0   # a metric's own scale, or 0-1
        rows.append({"benchmark": bench, "first": k * a["score"], "second": k * b["score"],
                     "difference": k * d["diff"], "lo": k * d["lo"], "hi": k * d["hi"],
                     # each run's own 95% interval, as its run shows it
                     "first_lo": k * a["lo"], "first_hi": k * a["hi"],
                     "second_lo": k * b["lo"], "second_hi": k * b["hi"],
                     "told_apart": "yes" if d["told_apart"] else "no",
                     # a bank folder's score is its own benchmark's, not a leaderboard's
                     "score": score_name({"benchmark": bench, "population": population} | a),
                     "population": population, "unit": _unit(a),
                     # the decimals every output shows these with (the one digits rule)
                     "digits": score_digits(a.get("scale") or None),
                     "warnings": [*_prediction_warnings(bench, (a, b), (run_a, run_b)),
                                  *_rho_warning(bench, (a, b), rho)]})
    return rows


def _rho_warning(bench: str, preds, rho: float) -> list[str]:
    """A line when ``rho`` is not 0 and a prediction is the benchmark predictor's: its error is
    mostly the sampling error of its own random draw of items, independent between two runs
    whatever the models, so a correlation narrows the interval below 95% (measured:
    benchmarks/bench_paired_folder.py)."""
    if not rho or not any(p.get("design") == "benchmark predictor" for p in preds):
        return []
    return [f"rho {rho:g} on {bench}: the benchmark predictor's error is mostly its own random "
            "draw of items, independent between two runs whatever the models; at rho 0.5 the "
            "interval covered 88-98% of held-out pairs on bank folders (rho 0: 96-99%, "
            "benchmarks/results/paired.md): compare with rho 0"]


def _prediction_warnings(bench: str, preds, ids) -> list[str]:
    """Each run's own prediction warning on ``bench`` (an interval that may be short, a model
    unlike the source models), once when both runs carry the same: what the difference's
    interval, made of theirs, inherits."""
    said = [p.get("warning") or "" for p in preds]
    if said[0] and said[0] == said[1]:
        return [f"both runs on {bench}: {said[0]}"]
    return [f"run {i} on {bench}: {w}" for i, w in zip(ids, said) if w]


def _as_of_now(ref: str, kinds, hashes) -> list:
    """Two runs of different designs on one bank folder (the adaptive test asks the bank's
    items, the benchmark predictor all the results' items) store the hashes of different item
    sets, equal or not whether the folder changed: each one as "now" when it is the hash of
    what that design asks of the folder as it is now (so two runs of an unchanged folder
    compare), else as stored (a folder rebuilt between them differs); None where the folder
    cannot be read (as a run that stored no hash)."""
    from ..catalogue.bankref import BankRef
    from .runner import bank_hash
    from .service import design_bank

    out = []
    for kind, stored in zip(kinds, hashes):
        try:
            now = bank_hash(design_bank(BankRef.parse(ref), kind))
        except (AtlasError, OSError, TypeError, ValueError):
            return [None, None]
        out.append("now" if now == stored else stored)
    return out


def _gone_folder(ids, refs, stores: dict) -> None:
    """Two runs that share no benchmark because one's bank (a folder, a file) has moved (its
    benchmark is then known only by the folder's old name): say so, and how to point the run
    at its new place."""
    from ..catalogue.bankref import BankRef
    from ..errors import MovedBankError

    for run_id, ref in zip(ids, refs):
        try:
            bank = BankRef.parse(ref) if ref else None
        except AtlasError:
            continue
        # a path no longer there parses as a file: a folder or a file of one's own, moved
        if bank is not None and bank.kind in ("dir", "file") and not Path(bank.name).exists():
            raise MovedBankError(f"run {run_id} was asked on the bank {bank.name}, which no "
                                 "longer exists: move it back, or resume the run with the "
                                 "bank's new place", run_id, stores.get(run_id))


def _pair_scale_of(bench: str, population, suite: bool) -> str | None:
    """The benchmark whose pair scale (:data:`~atlascat.studies.paired.PAIR_SCALE`) a row
    gets, or None for the plain combination (1.0). A benchmark's scale was fitted on two
    single-bank adaptive tests, whose intervals cover 97% of single models: it applies to two
    runs of a shipped bank only. A bank of one's own gets none; nor does a suite run's
    member benchmark (its intervals cover about 95%, not 97%: benchmarks/results/paired.md),
    whose average has its own scale."""
    from .report import LEADERBOARD

    if population != LEADERBOARD:
        return None
    if suite and bench != "average":
        return None
    return bench


def _field(runs, run_id: str, name: str) -> str:
    """A run's ``name`` column in its store's run list, as text ("" when it has none)."""
    row = runs[runs["run_id"] == run_id]
    return str(row[name].iloc[0]) if len(row) and name in row else ""


def _cached_answers(first, second) -> list[str]:
    """A line per run answered (in part) from the answer cache: answers an earlier run of a
    model of that name gave at that endpoint, so a new checkpoint served under the old name
    was not asked (its difference from the old one reads 0)."""
    out = []
    for store, runs, run_id in (first, second):
        try:
            cached = store.steps(run_id)["cached"]
        except (AtlasError, KeyError, TypeError, ValueError):
            continue
        n = int((cached.fillna(0).astype(int) == 1).sum())
        if n:
            out.append(f"run {run_id} ({_model_of(runs, run_id)}): {n} of {len(cached)} answers "
                       "came from the answer cache (an earlier run of a model of that name "
                       "answered them): a new checkpoint served under the same name was not "
                       "asked them; run it again with --no-cache")
    return out


def _mixed_protocols(first, second) -> str | None:
    """A line when one run was asked by chat or text prompts (APPROXIMATE) and the other by
    the bank's own requests: their difference then mixes two ways of asking."""
    protos = [_field(runs, run_id, "protocol") for _, runs, run_id in (first, second)]
    if (protos[0] == "approximate") == (protos[1] == "approximate"):
        return None
    k = 0 if protos[0] == "approximate" else 1
    ids = (first[2], second[2])
    return (f"run {ids[k]} was asked by chat or text prompts (APPROXIMATE), run {ids[1 - k]} "
            f"was not (protocol {protos[1 - k]}): the difference mixes two ways of asking")


def _same_score(bench: str, preds, refs, ids, hashes=(None, None)) -> None:
    """Two predictions of one name are one score only when both are the leaderboard's, or
    both come from the same bank (a bank folder's score is its own source models' mean over
    its items, not the leaderboard's of the same name), as it was for both runs: a folder
    rebuilt between them (its items' parameters or content changed: the runs' ``bank_hash``
    differ) may measure another metric or population under the same path."""
    from .report import LEADERBOARD

    pops = [p.get("population", LEADERBOARD) for p in preds]
    if pops[0] == pops[1] == LEADERBOARD:
        return
    if pops[0] == pops[1] and refs[0] == refs[1]:
        if hashes[0] == hashes[1] or None in hashes:
            return
        raise ConfigError(f"runs {ids[0]} and {ids[1]} were asked on bank {refs[0]} as it was "
                          "at two times, and it changed in between (rebuilt: its items differ)"
                          ": their scores are not one score; compare two runs on the same bank")

    def what(pop, ref):
        return ("the leaderboard's published score" if pop == LEADERBOARD else
                f"the score of bank {ref}" + (", among its source models" if pop else ""))

    raise ConfigError(f"runs {ids[0]} and {ids[1]} both predict {bench!r}, but not one score "
                      f"(the first: {what(pops[0], refs[0])}; the second: "
                      f"{what(pops[1], refs[1])}); compare two runs on the same bank")


def _unit(pred: dict) -> str:
    """What a difference of two predictions is in: points of a mean rating on the rating
    scale (or of percent of each item's scale); a shipped bank's, leaderboard points; a
    metric on its own scale, points of it; else points (of percent)."""
    from .report import LEADERBOARD

    scale = pred.get("scale")
    if pred.get("ratings"):
        return (f"mean rating points, rating scale {scale[0]:g}-{scale[1]:g}" if scale else
                "mean rating, points of percent of each item's scale")
    if scale:
        return f"points of the metric's own scale, {scale[0]:g}-{scale[1]:g}"
    return ("leaderboard points" if pred.get("population", LEADERBOARD) == LEADERBOARD
            else "points")


def _model_of(runs, run_id: str) -> str:
    """The model a run measured, from its store's run list (the run id where it has none)."""
    row = runs[runs["run_id"] == run_id]
    model = row["model"].iloc[0] if len(row) and "model" in row else None
    return str(model) if model else run_id
