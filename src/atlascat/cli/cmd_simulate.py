"""``atlas simulate``: run the adaptive test for many examinees at once and write the results."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import List, Optional

import typer

from ._common import (bank_option_help, console, deprecated_alias, err_console, escape,
                      json_safe, load_bank, load_responses, one_bank, output_dir, print_frame,
                      progress_bar)

_THETA_ID_COLUMNS = ("subject_id", "Model_Name", "model", "subject", "model_name")
_THETA_COLUMNS = ("theta", "Theta_WLE", "Theta", "theta_wle", "F1")


def safe_filename(name: str) -> str:
    """A file name for a subject id: runs of characters outside [A-Za-z0-9._-] become '_'."""
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


THETA_LIMIT = 10.0  # ability estimates live in [-10, 10] (the WLE/ML search bounds)


def read_thetas(path: Path, option: str = "--thetas"):
    """(subject_ids, thetas) from a CSV with subject_id/theta or the paper's Model_Name/Theta_WLE.

    Every theta must be a finite number in [-10, 10] (the range ability estimates can take)."""
    import numpy as np
    import pandas as pd

    from ..errors import ResponseDataError
    from ..validation import read_frame

    df = read_frame(path, what="theta file", option=option)
    id_col = next((c for c in _THETA_ID_COLUMNS if c in df.columns), None)
    th_col = next((c for c in _THETA_COLUMNS if c in df.columns), None)
    if th_col is None:
        raise ResponseDataError(
            f"{option} {str(path)!r} has no theta column; expected one of {list(_THETA_COLUMNS)} "
            f"(columns: {[str(c) for c in df.columns[:10]]})"
        )
    if len(df) == 0:
        raise ResponseDataError(f"{option} {str(path)!r} has a header but no rows")
    thetas = pd.to_numeric(df[th_col], errors="coerce")
    if thetas.isna().any():
        row = int(thetas.isna().to_numpy().nonzero()[0][0])
        raise ResponseDataError(f"theta in row {row + 2} of {str(path)!r} is missing or not a "
                                f"number ({df[th_col].iloc[row]!r})")
    values = thetas.to_numpy(float)
    bad = np.flatnonzero(~(np.abs(values) <= THETA_LIMIT))
    if bad.size:
        r = int(bad[0])
        raise ResponseDataError(
            f"theta {values[r]:g} in row {r + 2} of {str(path)!r} is outside [-{THETA_LIMIT:g}, "
            f"{THETA_LIMIT:g}] ({bad.size} such row(s)); thetas are on the bank's logit scale")
    ids = df[id_col].astype(str).tolist() if id_col else [str(i) for i in range(len(df))]
    dup = pd.Index(ids).duplicated()
    if dup.any():
        raise ResponseDataError(f"subject id {ids[int(np.flatnonzero(dup)[0])]!r} appears twice "
                                f"in {str(path)!r}; each subject once")
    return ids, values


def simulate_command(
    responses: Optional[List[str]] = typer.Argument(
        None, metavar="RESPONSES",
        help="Response matrix to replay (real answers; file or bundled name). Without it, "
             "answers are drawn from the bank's model at --thetas. With --suite: one "
             "BENCH=MATRIX pair per member (bundled names allowed; BENCH alone = its bundled "
             "matrix)."),
    bank: Optional[List[str]] = typer.Option(None, "--bank", "-b", help=bank_option_help()),
    suite: Optional[str] = typer.Option(
        None, "--suite",
        help="Replay a suite (bundled name such as openllm-v1, or a suite JSON file) as one "
             "adaptive test aimed at its average; writes suite_scores.csv."),
    scores: Optional[Path] = typer.Option(
        None, "--scores",
        help="--suite: published scores (a model column and one column per member, percent "
             "or 0-1; e.g. the leaderboard's score file) to report the error of the predicted "
             "average against."),
    target_se: Optional[float] = typer.Option(
        None, "--target-se",
        help="--suite: stop once the average's SE (points, 0-100) is at or below this. "
             "[default: none: the --max-items budget]"),
    thetas: Optional[Path] = typer.Option(
        None, "--thetas", "-t",
        help="CSV of true thetas (subject_id,theta or Model_Name,Theta_WLE): answers drawn from "
             "the bank's model. With RESPONSES: reference thetas for the error columns."),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Run directory to write (created if missing)."),
    responses_old: Optional[str] = typer.Option(None, "--responses", "-r", hidden=True,
                                                help="Deprecated: give RESPONSES positionally."),
    out_old: Optional[Path] = typer.Option(None, "--out", hidden=True,
                                           help="Deprecated spelling of --output."),
    se_stop: Optional[float] = typer.Option(0.1, "--se-stop", help="Stop once SE <= this value."),
    min_items: int | None = typer.Option(
        None, "--min-items", help="Never stop before this many items. [default: 30, or the "
        "bundled bank's own minimum: arc, truthfulqa, winogrande 45, gsm8k 55; at most "
        "--max-items]"),
    max_items: int | None = typer.Option(
        None, "--max-items", help="Stop after this many items. [default: 500; --suite: 150 "
        "in all]"),
    fixed_length: Optional[int] = typer.Option(None, "--fixed-length",
                                               help="Fixed-length test of N items (no SE stop)."),
    randomesque: int | None = typer.Option(
        None, "--randomesque", help="Pick among the k best items. [default: 5; --suite: 2]"),
    selection: str = typer.Option("mfi", "--selection",
                                  help="Item selection: mfi, kl, astrat or random."),
    se_method: str = typer.Option("information", "--se-method",
                                  help="Stopping SE: information (catR) or posterior (SD)."),
    reference: bool = typer.Option(False, "--reference",
                                   help="catR's grid: 33 trapezoidal nodes on [-4, 4]."),
    theta0: float = typer.Option(0.0, "--theta0", help="Starting theta."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, help="Items per adaptive round, chosen jointly (1: classic "
        "CAT). [default: 1; --suite: 6, mixing benchmarks]"),
    selected: bool = typer.Option(True, "--selected/--no-selected",
                                  help="Write selected_items/<subject>.csv files."),
    bound_stop: bool = typer.Option(True, "--bound-stop/--no-bound-stop",
                                    help="Bundled banks with a score link: stop once the "
                                         "examinee is surely at the floor (chance) or the top "
                                         "of the link's curve."),
    bound_margin: float = typer.Option(0.02, "--bound-margin",
                                       help="Floor/top stop: how close (0-1 score units) to "
                                            "the curve's lowest/highest value counts as there."),
) -> None:
    """Simulate adaptive tests (replayed or model-drawn answers); write scores and diagnostics."""
    import numpy as np
    import pandas as pd

    from ..cat.config import CATConfig
    from ..cat.engine import simulate_cat
    from ..errors import ConfigError

    from ..validation import check_finite

    out = deprecated_alias(output, out_old, "--out", "--output")
    if out is None:
        raise ConfigError("give the run directory with -o/--output (nothing is written to the "
                          "current directory unless you name it)")
    if suite is not None:
        if bank:
            raise ConfigError("--suite runs the suite's own banks; drop --bank")
        return simulate_suite_command(suite, list(responses or []), output_dir(out),
                                      target_se=target_se, max_items=max_items,
                                      min_items=min_items, batch_size=batch_size,
                                      randomesque=randomesque, seed=seed, scores=scores)
    if scores is not None:
        raise ConfigError("--scores goes with --suite (a single bank's published scores are "
                          "its score link's)")
    if target_se is not None:
        raise ConfigError("--target-se is the average's stop of --suite; a single bank stops "
                          "on --se-stop")
    bank = one_bank(bank)
    if responses and len(responses) > 1:
        raise ConfigError(f"give one RESPONSES matrix (got {len(responses)}); to replay several "
                          "benchmarks as one test use --suite openllm-v1 BENCH=MATRIX ...")
    responses = deprecated_alias(responses[0] if responses else None, responses_old,
                                 "--responses", "RESPONSES (positional)")
    max_items = 500 if max_items is None else max_items
    randomesque = 5 if randomesque is None else randomesque
    batch_size = 1 if batch_size is None else batch_size
    if responses is None and thetas is None:
        raise ConfigError("give RESPONSES (a matrix to replay; formerly --responses) or --thetas "
                          "(answers drawn from the model)")
    check_finite(theta0, "--theta0")
    if se_stop is not None:
        check_finite(se_stop, "--se-stop")
    out = output_dir(out)
    from ..bankdir import is_bank_dir, load_bank_dir
    from ..catalogue import bundled_link

    folder = load_bank_dir(bank) if is_bank_dir(bank) else None  # atlas build-bank's folder
    # a bundled content bank name (arc, hellaswag, ...) or a bank folder: with a score link
    link = folder.link if folder is not None else bundled_link(bank)
    item_bank = folder.bank if folder is not None else load_bank(bank, normalize_ids=True)
    base = dict(se_stop=se_stop,
                min_items=min(30, max_items) if min_items is None else min_items,
                max_items=max_items,
                randomesque=randomesque, selection=selection, se_method=se_method, theta0=theta0)
    if fixed_length is not None:
        base.update(min_items=fixed_length, max_items=fixed_length, se_stop=None)
    config = CATConfig.reference(**base) if reference else CATConfig(**base)
    if link is not None and bound_stop and fixed_length is None:
        from ._common import with_link_stops

        config = with_link_stops(config, link.stop_settings(check_finite(bound_margin,
                                                                         "--bound-margin")),
                                 min_items is not None)

    kwargs = {}
    if responses is not None:
        rm = load_responses(responses, normalize_ids=True, on_empty="keep")
        kwargs["responses"] = rm
        n_total = rm.n_subjects
        if thetas is not None:
            ids, values = read_thetas(thetas)
            ref = pd.Series(values, index=ids)
            ref = ref[~ref.index.duplicated()]
            kwargs["theta_ref"] = ref.reindex(rm.subject_ids.astype(str)).to_numpy(float)
    else:
        ids, values = read_thetas(thetas)
        kwargs.update(thetas=values, subject_ids=ids)
        n_total = len(ids)

    rng = np.random.default_rng(seed)
    with progress_bar("simulating", n_total) as advance:
        state = {"done": 0}

        def progress(done, total):
            advance(done - state["done"])
            state["done"] = done

        result = simulate_cat(item_bank, config, rng=rng, progress=progress,
                              batch_size=batch_size, **kwargs)

    out.mkdir(parents=True, exist_ok=True)
    persons = result.persons
    if folder is not None:  # the built bank's predicted score (0-1) with its 95% interval
        from ..bankdir import predict_scores

        persons = pd.concat([persons.reset_index(drop=True),
                             predict_scores(folder, persons, result.administered)], axis=1)
    elif link is not None:  # predicted published leaderboard score (0-1) with its 95% interval
        from ..link import predict_frame

        persons = pd.concat([persons.reset_index(drop=True),
                             predict_frame(link, persons, result.administered)], axis=1)
    persons.to_csv(out / "person_scores.csv", index=False)
    if selected:
        sel_dir = out / "selected_items"
        sel_dir.mkdir(exist_ok=True)
        stems = unique_filenames(persons["subject_id"])
        groups = dict(tuple(result.administered.groupby("subject_id", sort=False)))
        empty = result.administered.iloc[:0]
        for sid, stem in zip(persons["subject_id"], stems):
            frame = groups.get(sid, empty).drop(columns="subject_id")
            frame.to_csv(sel_dir / f"{stem}.csv", index=False)
    exposure = result.item_exposure()
    exposure["a"], exposure["b"] = item_bank.a, item_bank.b
    exposure.to_csv(out / "item_exposure.csv", index=False)
    result.item_positions().to_csv(out / "item_positions.csv", index=False)
    summary = result.summary()
    summary["inputs"] = {"bank": str(bank), "responses": None if responses is None else str(responses),
                         "thetas": None if thetas is None else str(thetas), "seed": seed}
    (out / "summary.json").write_text(json.dumps(json_safe(summary), indent=2, allow_nan=False))

    rows = [("examinees", summary["n_examinees"]),
            ("items mean (sd)", f"{summary['items_mean']:.2f} ({summary['items_sd']:.2f})"),
            ("SE mean", f"{summary['se_mean']:.4f}")]
    if "mae" in summary:
        rows.append(("MAE vs reference", f"{summary['mae']:.4f}"))
    rows += [("max exposure", f"{summary['exposure']['max']:.3f}"),
             ("overlap (formula / pairwise)",
              f"{summary['overlap']['formula']:.4f} / {summary['overlap']['pairwise']:.4f}"),
             ("skipped (no answer)", summary["n_skipped"]),
             ("time per examinee", f"{summary['time_per_examinee_seconds'] * 1000:.2f} ms")]
    if "leaderboard_warning" in persons.columns:
        warned = int((persons["leaderboard_warning"].fillna("") != "").sum())
        rows.append(("leaderboard warnings", f"{warned} of {len(persons)} (see "
                                             "person_scores.csv leaderboard_warning)"))
    print_frame(pd.DataFrame(rows, columns=["figure", "value"]), title="atlas simulate")
    console.print(f"wrote {escape(str(out))}/ (person_scores.csv, "
                  f"{'selected_items/, ' if selected else ''}item_exposure.csv, "
                  "item_positions.csv, summary.json)")



def parse_pairs(pairs, names) -> dict:
    """``BENCH=MATRIX`` (or a bare bundled ``BENCH``) arguments as {member: matrix spec}."""
    from ..errors import ConfigError

    out = {}
    for p in pairs:
        name, sep, spec = str(p).partition("=")
        name = name.strip().lower()
        spec = spec.strip() if sep else name
        if name not in names:
            raise ConfigError(f"{p!r}: {name!r} is not a member of the suite "
                              f"({', '.join(names)}); give BENCH=MATRIX pairs")
        if name in out:
            raise ConfigError(f"{name!r} is given twice")
        out[name] = spec
    if not out:
        raise ConfigError("give the answers to replay: one BENCH=MATRIX pair per member "
                          f"({', '.join(names)}; bundled names allowed, e.g. arc=arc)")
    return out


def simulate_suite_command(suite_arg, pairs, out, *, target_se, max_items, min_items,
                           batch_size, randomesque, seed, scores=None) -> None:
    """``atlas simulate --suite``: replay recorded answers through the suite test."""
    import pandas as pd

    from ..suite import load_suite, published_averages, replay_summary, simulate_suite
    from ..validation import read_frame
    from ._suite_evaluate import floor_note, suite_config_from_options

    suite = load_suite(suite_arg)
    specs = parse_pairs(pairs, suite.names)
    matrices = {n: load_responses(spec, normalize_ids=True, on_empty="keep",
                                  option=f"{n}=MATRIX") for n, spec in specs.items()}
    published = None
    if scores is not None:
        published = published_averages(
            read_frame(scores, what="published scores", option="--scores"), suite)
    cfg = suite_config_from_options(target_se=target_se, min_items=min_items,
                                    max_items=max_items, batch_size=batch_size,
                                    randomesque=randomesque, seed=seed)
    note = floor_note(suite, cfg)
    if note:
        err_console.print(note, highlight=False)
    with progress_bar("asking, then predicting", cfg.max_items + 1) as advance:
        done = [0]

        def step(phase, k, total):  # one bar: items asked, then blocks of predictions
            at = k if phase == "asking" else cfg.max_items + k
            if phase == "predicting" and k == 1:
                advance(0, total=cfg.max_items + total)
            advance(max(0, at - done[0]))
            done[0] = max(done[0], at)

        result = simulate_suite(suite, matrices, cfg, on_progress=step)
    table = result.scores
    out.mkdir(parents=True, exist_ok=True)
    cols = ["subject_id", "n_items", "average", "average_lo", "average_hi"]
    for n in suite.names:
        cols += [n, f"{n}_lo", f"{n}_hi", f"{n}_items"]
    if published is not None:
        table = table.assign(published_average=published.reindex(
            table["subject_id"].astype(str)).to_numpy())
        cols.append("published_average")
    table[cols].to_csv(out / "suite_scores.csv", index=False)
    facts = replay_summary(result, published)
    summary = {"suite": suite.name, "members": suite.names, "weights": suite.weights.tolist(),
               "inputs": specs, "config": cfg.to_dict(), **facts}
    (out / "summary.json").write_text(json.dumps(json_safe(summary), indent=2, allow_nan=False))
    rows = [("examinees", facts["n_subjects"]),
            ("with answers on all members", facts["n_all_members"]),
            ("no item to ask (no_items)", facts["n_no_items"]),
            ("items mean", f"{facts['items_mean']:.1f}"),
            ("average mean (95% width)", f"{100 * table['average'].mean():.1f} "
             f"({facts['width_mean_points']:.1f} points)")]
    for key, label in (("error", "published"), ("error_all_members", "published, all members")):
        if key in facts:
            e = facts[key]
            rows.append((f"MAE vs {label} average (n={e['n']})",
                         f"{e['mae_points']:.2f} points, 95% coverage {100 * e['coverage_95']:.0f}%"))
    rows += [(f"{n} items mean", f"{table[f'{n}_items'].mean():.1f}") for n in suite.names]
    if facts["n_all_members"] < facts["n_subjects"]:
        err_console.print(f"note: {facts['n_subjects'] - facts['n_all_members']} of "
                          f"{facts['n_subjects']} examinees lack answers on some member; they are "
                          "predicted from the members they have, with wider intervals",
                          highlight=False)
    print_frame(pd.DataFrame(rows, columns=["figure", "value"]),
                title=f"atlas simulate --suite {suite.name}")
    console.print(f"wrote {escape(str(out))}/ (suite_scores.csv, summary.json)")
    return None


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_command)
